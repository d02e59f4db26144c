"""The sealed evaluator: at the start of a run, a private copy of everything the evaluator runs (the
suite's code, the task's harness and its compiled objects), hashed file by file with each file's
mode; every evaluation runs that copy with `python -I -S -B` (no user site, no environment variables
of Python's, no site folder processed, so no `.pth` file, `sitecustomize` or `usercustomize` runs;
no bytecode written) and an explicit import path recorded at sealing, inside the sandbox, from a
scratch folder of its own that is the only place it and the candidate may write. A Python process
the evaluator starts (the sweep's worker) runs through `bin/python` of the copy, which starts the
same interpreter the same way.

The interpreter's start-up state is recorded beside the copy: the listing of the interpreter's own
folders on that import path (its prefixes: the standard library, a virtual environment) and of the
site folders, and the content of every `.pth`, `sitecustomize` and `usercustomize` in them.
`check()` hashes every file of the copy again (nothing skipped: bytecode, objects and files added
since count too, and a change of mode) and compares the start-up state, and raises HarnessTampered
on any difference. The context calls it before and after every evaluation and
once more at the end of the run.

Where the agent's process runs as root, the copy is owned by an unprivileged user (OWNER_UID) and
left without write bits: a sandboxed process (root without capabilities) can then neither write a
file of it nor change its mode.
"""

from __future__ import annotations

import hashlib
import os
import pwd
import shlex
import shutil
import site
import stat
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config as suite_config
from ..provenance import git_sha
from . import gpu_rules, reaper
from . import policy as policy_mod
from . import sandbox as sandbox_mod
from .childenv import child_env
from .exceptions import HarnessTampered
from .procgroup import run_in_group

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the suite's code: kernelseek_suite/
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
MAX_OUTPUT_FILE = 64 << 20

# Runs the sealed copy as the interpreter would: python -I -S -B run.py [-m MODULE | -c CODE | SCRIPT]
# [ARGS...]. Isolated mode puts neither the current folder nor PYTHONPATH on sys.path, -S processes
# no site folder; the copy goes first, then the interpreter's own folders and the import paths of
# the agent's process (recorded at sealing: its site folders, and the folders its packages came
# from), and sys.executable becomes bin/python of the copy, so a process the evaluator starts (a
# worker) runs the same way.
BOOTSTRAP = """\
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
lib = os.path.join(here, "lib")
with open(os.path.join(here, "import-paths.txt")) as f:
    recorded = [p for p in f.read().splitlines() if p]
sys.path[:] = [lib, *dict.fromkeys(p for p in [*sys.path, *recorded] if p and p not in (here, lib))]
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
sys.executable = os.path.join(here, "bin", "python")
os.environ.update(PYTHONPATH=os.pathsep.join([lib, *recorded]), PYTHONSAFEPATH="1", PYTHONNOUSERSITE="1",
                  PYTHONDONTWRITEBYTECODE="1")
import kernelseek_suite
if not os.path.abspath(kernelseek_suite.__file__).startswith(lib + os.sep):
    sys.exit("sealed evaluator: kernelseek_suite was imported from " + kernelseek_suite.__file__)
args = sys.argv[1:]
while args and args[0].startswith("-") and args[0] not in ("-m", "-c", "-"):
    args = args[2:] if args[0] in ("-X", "-W") else args[1:]  # the interpreter's options: bin/python gave them
if not args:
    sys.exit("sealed evaluator: nothing to run")
if args[0] == "-m":
    sys.argv = [args[1], *args[2:]]
    runpy.run_module(args[1], run_name="__main__", alter_sys=True)
elif args[0] == "-c":
    sys.argv = ["-c", *args[2:]]
    exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
else:
    sys.argv = list(args)
    runpy.run_path(args[0], run_name="__main__")
"""

# bin/python of the copy: the interpreter's own options go before run.py, the rest after it
SHIM = """\
#!/bin/sh
# the sealed evaluator's interpreter: {python} -I -S -B with the copy's bootstrap (seal.py)
opts=""
while [ $# -gt 0 ]; do
    case "$1" in
        -m|-c|-) break ;;
        -X|-W) opts="$opts $1 $2"; shift 2 ;;
        -*) opts="$opts $1"; shift ;;
        *) break ;;
    esac
done
exec {python} -I -S -B $opts {run} "$@"
"""

# the owner of the copy where the agent's process is root: no sandboxed process can change its modes
OWNER_UID = 65534  # nobody
STARTUP_FILES = ("sitecustomize", "usercustomize")


def user_env(uid: int | None) -> dict[str, str]:
    """USER and LOGNAME for a process run as `uid` (None: as this one, whose own are inherited): its name
    in the user database, or `kernelseek-<uid>` where it has none, as the sandbox's user usually has not.
    Without them getpass.getuser() fails for such a user, and torch calls it to name its caches: FA3's
    custom op then raised KeyError in every sandboxed evaluation on a GPU node, and FA3 was reported
    as not measured (2026-12-05, an H100)."""
    if uid is None:
        return {}
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"kernelseek-{uid}"
    return {"USER": name, "LOGNAME": name}


@dataclass
class Ran:
    returncode: int | None  # None: killed at the timeout
    stdout: str
    stderr: str
    wall_s: float

    @property
    def timed_out(self) -> bool:
        return self.returncode is None


def digest(root: Path) -> dict[str, str]:
    """relative path -> sha256 of every file under `root` and its mode (`<sha256> <mode>`); a symbolic
    link is named by its target, any other file that is not a regular one (a pipe, a socket, a device)
    by its kind, unread; a folder (`<path>/`) by its mode."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        d = Path(dirpath)
        if d != root:
            out[f"{d.relative_to(root)}/"] = f"dir {stat.S_IMODE(d.lstat().st_mode):o}"
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                out[rel] = "link:" + os.readlink(p)
            elif not stat.S_ISREG(mode):
                out[rel] = f"special:{stat.S_IFMT(mode):o}"
            else:
                out[rel] = f"{hashlib.sha256(p.read_bytes()).hexdigest()} {stat.S_IMODE(mode):o}"
    return out


def interpreter_paths(exclude: list[Path]) -> list[Path]:
    """This process's import path as the sealed evaluator takes it: every folder on sys.path but those
    in `exclude` (the repository, the copy), except that a folder of the interpreter's own prefix or a
    site folder (a virtual environment inside the repository) stays."""
    own = [Path(os.path.realpath(r)) for r in {sys.prefix, sys.exec_prefix}]
    # the current folder and the script's (what `python -m` or a script put first): the user's, not
    # the interpreter's; a folder of them the evaluator needs is reached through its own entry
    where = {Path(os.path.realpath(os.getcwd()))} | ({Path(os.path.realpath(sys.path[0]))} if sys.path[0] else set())
    out: list[Path] = []
    for entry in sys.path:
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        p = Path(os.path.realpath(entry))
        if p in where and not (
            p.name in ("site-packages", "dist-packages") or any(p == r or r in p.parents for r in own)
        ):
            continue
        inside = any(p == e or e in p.parents for e in exclude)
        packages = p.name in ("site-packages", "dist-packages") or any(p == r or r in p.parents for r in own)
        if inside and not packages:
            continue
        if p not in out:
            out.append(p)
    return out


def _interpreters(p: Path) -> bool:
    """A folder of the interpreter's own (its prefixes: the standard library, a virtual environment)
    or a site folder: what the start-up check watches. Folders a process adds while it runs (a Dask
    worker's own, whose files come and go) are not the interpreter's start-up."""
    prefixes = {sys.prefix, sys.exec_prefix, sys.base_prefix, sys.base_exec_prefix}
    own = [Path(os.path.realpath(r)) for r in prefixes]
    return p.name in ("site-packages", "dist-packages") or any(p == r or r in p.parents for r in own)


def site_folders() -> list[Path]:
    """The folders whose `.pth` files the interpreter runs at start-up (its site folders, the user's)."""
    found = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    found.append(site.getusersitepackages())
    return [Path(os.path.realpath(p)) for p in dict.fromkeys(found) if os.path.isdir(p)]


def startup_state(folders: list[Path]) -> dict[str, str]:
    """What the interpreter's start-up can be made to run, per folder: the listing of its entries
    (bytecode caches aside) and the sha256 of each `.pth`, `sitecustomize` and `usercustomize` in it."""
    out = {}
    for d in dict.fromkeys(folders):
        try:
            names = sorted(n for n in os.listdir(d) if n != "__pycache__")
        except OSError as e:
            out[f"{d}/"] = f"unreadable: {e.strerror}"
            continue
        out[f"{d}/"] = hashlib.sha256("\n".join(names).encode()).hexdigest()
        for n in names:
            if n.endswith(".pth") or n.split(".")[0] in STARTUP_FILES:
                p = d / n
                try:
                    out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "folder"
                except OSError as e:
                    out[str(p)] = f"unreadable: {e.strerror}"
    return out


class SealedEvaluator:
    def __init__(self, base: Path, sandboxed: bool, detail: str, deny: list[Path]):
        self.base = base
        self.snapshot = base / "snapshot"
        self.sandboxed = sandboxed
        self.sandbox_detail = detail
        self.deny = list(deny)
        self.git_sha = git_sha()
        self.manifest: dict[str, str] = {}
        self.startup_folders: list[Path] = []
        self.startup: dict[str, str] = {}
        self.owner: int | None = None  # the uid the copy was given (root only), None: ours
        self.gpu_rules = gpu_rules.load()  # the GPU tools' paths and environment (not yet verified on a GPU)
        self.gpu = gpu_rules.resolve(self.gpu_rules)
        # the user the sandboxed evaluations run as (policy.SANDBOX_UID from root, where it can run
        # this Python; None: this user)
        self.run_as: int | None = None
        self._n = 0

    @classmethod
    def create(cls, task, sandbox: str = "auto", deny: list[Path] = (), parent: Path | None = None) -> SealedEvaluator:
        """Copies the suite and the task's harness (task.seal) into a new private folder and hashes it.
        `deny`: folders the evaluator must not read beyond the usual (e.g. this run's trace)."""
        if sandbox not in ("auto", "landlock", "none"):
            raise ValueError(f"sandbox must be auto, landlock or none, not {sandbox!r}")
        available, detail = sandbox_mod.landlock_status()
        if sandbox == "landlock" and not available:
            raise RuntimeError(f"sandbox 'landlock' requested but unavailable: {detail}")
        base = Path(tempfile.mkdtemp(prefix="ks-seal-", dir=parent)).resolve()
        reaper.watch_dir(base)  # removed if the process dies before close()
        seal = cls(
            base, available and sandbox != "none", detail if sandbox != "none" else "disabled by configuration", deny
        )
        try:
            snap = seal.snapshot
            shutil.copytree(PACKAGE_DIR, snap / "lib" / "kernelseek_suite", ignore=COPY_IGNORE)
            (snap / "run.py").write_text(BOOTSTRAP)
            (snap / "bin").mkdir()
            shim = snap / "bin" / "python"
            shim.write_text(SHIM.format(python=shlex.quote(sys.executable), run=shlex.quote(str(snap / "run.py"))))
            shim.chmod(0o755)
            paths = interpreter_paths([suite_config.REPO_ROOT.resolve(), base])
            (snap / "import-paths.txt").write_text("".join(f"{p}\n" for p in paths))
            task.seal(snap / "task")
            seal.owner = _seal_modes(snap)
            # the sealed copy is reached through `base` (0700 until an evaluation hands it over, see
            # _hand_over): what the other user must reach from outside is the folder `base` is in
            seal.run_as = policy_mod.run_as([base.parent]) if seal.sandboxed else None
            seal.manifest = digest(snap)
            seal.startup_folders = list(dict.fromkeys([*filter(_interpreters, paths), *site_folders()]))
            seal.startup = startup_state(seal.startup_folders)
        except BaseException:
            seal.close()
            raise
        return seal

    # ---- integrity ----
    def changes(self) -> list[str]:
        """What differs from the sealing: files of the copy (relative paths), and the interpreter's
        start-up state (`interpreter: <path>`: a `.pth`, `sitecustomize` or `usercustomize` added,
        changed or removed, or a folder of the import path with other entries)."""
        now = digest(self.snapshot) if self.snapshot.is_dir() else {}
        changed = [p for p in self.manifest if now.get(p) != self.manifest[p]]
        added = [p for p in now if p not in self.manifest]
        state = startup_state(self.startup_folders)
        moved = [k for k in set(state) | set(self.startup) if state.get(k) != self.startup.get(k)]
        return sorted(changed + added) + [f"interpreter: {k}" for k in sorted(moved)]

    def check(self, when: str = "before an evaluation") -> None:
        changed = self.changes()
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            raise HarnessTampered(f"the sealed evaluator changed ({when}): {shown}", files=changed, when=when)

    def sha256(self) -> str:
        h = hashlib.sha256()
        for rel, d in sorted(self.manifest.items()):
            h.update(f"{rel}\0{d}\n".encode())
        return h.hexdigest()

    def path(self, rel: str) -> Path:
        """A file of the sealed copy, e.g. 'task/harness.o'."""
        return self.snapshot / rel

    # ---- running ----
    def command(self, module: str, args: list[str]) -> list[str]:
        """The command line that runs `module` of the sealed copy."""
        return [sys.executable, "-I", "-S", "-B", str(self.snapshot / "run.py"), "-m", module, *args]

    def new_scratch(self) -> Path:
        """A fresh folder for one evaluation: its working folder, HOME, TMPDIR and caches."""
        self._n += 1
        d = self.base / "scratch" / f"{self._n:04d}"
        for sub in ("home", "tmp", "cache"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        return d

    def policy(self, scratch: Path, keep_caps: tuple[int, ...] = (), read: list[Path] = ()) -> sandbox_mod.Policy:
        """An evaluation's sandbox: it runs as `run_as` (the profiler too, keeping `keep_caps`) and
        may initialize CUDA where it is not root (policy.PROC)."""
        gpu = [Path(p) for p in self.gpu.read]  # those of this machine: none without the driver
        return policy_mod.make_policy(
            [self.snapshot, scratch, *read, *gpu],
            [scratch],
            deny_extra=self.deny,
            keep_caps=keep_caps,
            uid=self.run_as,
            cuda=True,
        )

    def run(
        self,
        argv: list[str],
        scratch: Path,
        timeout_s: float,
        env: dict[str, str] | None = None,
        keep_caps: tuple[int, ...] = (),
        read: list[Path] = (),
    ) -> Ran:
        """Runs `argv` from `scratch`, in the sandbox where there is one, with an allow-listed
        environment; the whole process group is killed at the timeout and when it ends. `read`: more
        paths it may read (a tool's own folder), `keep_caps`: capabilities it keeps."""
        policy = self.policy(scratch, keep_caps, read) if self.sandboxed else None
        full_env = child_env(
            {
                "HOME": str(scratch / "home"),
                "TMPDIR": str(scratch / "tmp"),
                "XDG_CACHE_HOME": str(scratch / "cache"),
                "KERNELSEEK_CACHE": str(scratch / "cache"),
                # torch's compile caches (a baseline's custom op imports torch._dynamo, which names them)
                "TORCHINDUCTOR_CACHE_DIR": str(scratch / "cache" / "torchinductor"),
                **user_env(policy.uid if policy else None),
                **gpu_rules.env_for(scratch, self.gpu_rules),
                **({"KERNELSEEK_GIT_SHA": self.git_sha} if self.git_sha else {}),
                **(env or {}),
            }
        )
        if policy is not None:
            launcher = str(self.path("lib/kernelseek_suite/agents/sandbox.py"))
            if policy.uid is not None:
                self._hand_over(scratch, policy.uid)
            argv = sandbox_mod.wrap(argv, policy, launcher=launcher)
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            code = run_in_group(argv, scratch, full_env, out, err, timeout_s)
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        return Ran(code, stdout, stderr, time.monotonic() - t0)

    def _hand_over(self, scratch: Path, uid: int) -> None:
        """The scratch folder (and all the task put there) to the user the evaluation runs as; the
        folders above it searchable (not readable) by it."""
        for d in (self.base, self.base / "scratch"):
            os.chmod(d, 0o711)
        for dirpath, dirnames, filenames in os.walk(scratch):
            for name in [*dirnames, *filenames]:
                os.chown(os.path.join(dirpath, name), uid, uid, follow_symlinks=False)
        os.chown(scratch, uid, uid)

    def describe(self) -> dict:
        return {
            "sealed": True,
            "files": len(self.manifest),
            "sha256": self.sha256(),
            "python": "-I -S -B",
            "verified": "before and after every evaluation, and at the end of the run",
            "sandbox": "landlock" if self.sandboxed else "none",
            "sandbox_detail": self.sandbox_detail,
            "runs_as": f"uid {self.run_as} (not root, not the copy's owner)"
            if self.run_as is not None
            else "this user",
            "owner": f"an unprivileged user (uid {self.owner}), no write bits"
            if self.owner is not None
            else "this user, no write bits",
            "gpu_rules": {
                "verified_on_gpu": bool(self.gpu_rules.get("verified_on_gpu")),
                "reads_granted": len(self.gpu.read),
                "device_files_found": len(self.gpu.device),
            },
            "interpreter": {
                "folders": len(self.startup_folders),
                "startup_files": sorted(k for k in self.startup if not k.endswith("/")),
                "sha256": hashlib.sha256(
                    "".join(f"{k}\0{v}\n" for k, v in sorted(self.startup.items())).encode()
                ).hexdigest(),
            },
        }

    def close(self) -> None:
        reaper.release_dir(self.base)
        if self.base.exists():
            for dirpath, _dirnames, _ in os.walk(self.base):
                os.chmod(dirpath, stat.S_IRWXU)
            shutil.rmtree(self.base, ignore_errors=True)


def collect(scratch_out: Path, out_dir: Path, names: list[str] | None = None) -> list[str]:
    """Copies an evaluation's outputs (`names`, or every file) from its scratch folder to `out_dir`
    (the trace's folder); files over MAX_OUTPUT_FILE and links are left out. Returns what was left out."""
    out_dir.mkdir(parents=True, exist_ok=True)
    left = []
    files = (
        [scratch_out / n for n in names]
        if names is not None
        else sorted(p for p in scratch_out.rglob("*") if p.is_file() or p.is_symlink())
    )
    for src in files:
        rel = src.relative_to(scratch_out)
        if src.is_symlink() or not src.is_file():
            if src.is_symlink():
                left.append(f"{rel} (a link)")
            continue
        if src.stat().st_size > MAX_OUTPUT_FILE:
            left.append(f"{rel} (over {MAX_OUTPUT_FILE >> 20} MiB)")
            continue
        dst = out_dir / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    return left


def _seal_modes(root: Path) -> int | None:
    """No write bits in the copy, and everything readable (files 0444, or 0555 where executable;
    folders 0555), so a stray write fails even where there is no sandbox. Run as root, the copy is
    also given to OWNER_UID: a sandboxed process (root without CAP_FOWNER) can then not change a
    mode either; otherwise a process of the same user can put the bits back (the hashes, which hold
    the modes, are what is relied on). Returns the owner given, or None."""
    owner = OWNER_UID if os.geteuid() == 0 else None
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if os.path.islink(p):
                continue
            os.chmod(p, 0o555 if os.stat(p).st_mode & 0o111 else 0o444)
            if owner is not None:
                os.chown(p, owner, owner)
        os.chmod(dirpath, 0o555)
        if owner is not None:
            os.chown(dirpath, owner, owner)
    return owner
