"""The sealed evaluator: at the start of a run, a private copy of everything the evaluator runs (the
suite's code, the task's harness and its compiled objects), hashed file by file; every evaluation
runs that copy with `python -I -B` (no user site, no environment variables of Python's, no bytecode
written), inside the sandbox, from a scratch folder of its own that is the only place it and the
candidate may write.

`check()` hashes every file of the copy again (nothing skipped: bytecode, objects and files added
since count too) and raises HarnessTampered on any difference. The context calls it before and after
every evaluation and once more at the end of the run.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .. import config as suite_config
from ..provenance import git_sha
from . import policy as policy_mod
from . import sandbox as sandbox_mod
from .childenv import child_env
from .exceptions import HarnessTampered

PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the suite's code: kernelseek_suite/
COPY_IGNORE = shutil.ignore_patterns("__pycache__", "*.pyc", ".pytest_cache", ".mypy_cache")
MAX_OUTPUT_FILE = 64 << 20

# Runs a module of the sealed copy: python -I -B run.py MODULE [ARGS...]. Isolated mode puts neither
# the current folder nor PYTHONPATH on sys.path; the copy goes first, the import paths of the agent's
# process (recorded at sealing, outside the repository) after the interpreter's own, and a process the
# evaluator starts (a worker) inherits the same through its environment.
BOOTSTRAP = """\
import os, runpy, sys
here = os.path.dirname(os.path.abspath(__file__))
lib = os.path.join(here, "lib")
with open(os.path.join(here, "import-paths.txt")) as f:
    extra = [p for p in f.read().splitlines() if p and p not in sys.path]
sys.path[:0] = [lib]
sys.path.extend(extra)
sys.meta_path[:] = [f for f in sys.meta_path if not getattr(f, "__module__", "").startswith("__editable__")]
os.environ.update(PYTHONPATH=os.pathsep.join([lib, *extra]), PYTHONSAFEPATH="1", PYTHONNOUSERSITE="1",
                  PYTHONDONTWRITEBYTECODE="1")
import kernelseek_suite
if not os.path.abspath(kernelseek_suite.__file__).startswith(lib + os.sep):
    sys.exit("sealed evaluator: kernelseek_suite was imported from " + kernelseek_suite.__file__)
module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
runpy.run_module(module, run_name="__main__", alter_sys=True)
"""


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
    """relative path -> sha256 of every file under `root`; a symbolic link is named by its target, any
    other file that is not a regular one (a pipe, a socket, a device) by its kind, unread."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames + [d for d in dirnames if os.path.islink(os.path.join(dirpath, d))]):
            p = Path(dirpath) / name
            rel = str(p.relative_to(root))
            mode = p.lstat().st_mode
            if stat.S_ISLNK(mode):
                out[rel] = "link:" + os.readlink(p)
            elif not stat.S_ISREG(mode):
                out[rel] = f"special:{stat.S_IFMT(mode):o}"
            else:
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
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
        seal = cls(
            base, available and sandbox != "none", detail if sandbox != "none" else "disabled by configuration", deny
        )
        try:
            snap = seal.snapshot
            shutil.copytree(PACKAGE_DIR, snap / "lib" / "kernelseek_suite", ignore=COPY_IGNORE)
            (snap / "run.py").write_text(BOOTSTRAP)
            paths = policy_mod.import_paths([suite_config.REPO_ROOT, base])
            (snap / "import-paths.txt").write_text("".join(f"{p}\n" for p in paths))
            task.seal(snap / "task")
            _read_only(snap)
            seal.manifest = digest(snap)
        except BaseException:
            seal.close()
            raise
        return seal

    # ---- integrity ----
    def changes(self) -> list[str]:
        now = digest(self.snapshot) if self.snapshot.is_dir() else {}
        changed = [p for p in self.manifest if now.get(p) != self.manifest[p]]
        added = [p for p in now if p not in self.manifest]
        return sorted(changed + added)

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
        return [sys.executable, "-I", "-B", str(self.snapshot / "run.py"), module, *args]

    def new_scratch(self) -> Path:
        """A fresh folder for one evaluation: its working folder, HOME, TMPDIR and caches."""
        self._n += 1
        d = self.base / "scratch" / f"{self._n:04d}"
        for sub in ("home", "tmp", "cache"):
            (d / sub).mkdir(parents=True, exist_ok=True)
        return d

    def policy(self, scratch: Path, keep_caps: tuple[int, ...] = (), read: list[Path] = ()) -> sandbox_mod.Policy:
        return policy_mod.make_policy(
            [self.snapshot, scratch, *read], [scratch], deny_extra=self.deny, keep_caps=keep_caps
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
        full_env = child_env(
            {
                "HOME": str(scratch / "home"),
                "TMPDIR": str(scratch / "tmp"),
                "XDG_CACHE_HOME": str(scratch / "cache"),
                "KERNELSEEK_CACHE": str(scratch / "cache"),
                **({"KERNELSEEK_GIT_SHA": self.git_sha} if self.git_sha else {}),
                **(env or {}),
            }
        )
        if self.sandboxed:
            launcher = str(self.path("lib/kernelseek_suite/agents/sandbox.py"))
            argv = sandbox_mod.wrap(argv, self.policy(scratch, keep_caps, read), launcher=launcher)
        t0 = time.monotonic()
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            proc = subprocess.Popen(
                argv,
                cwd=scratch,
                env=full_env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
            )
            timed_out = False
            try:
                proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                timed_out = True
            finally:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
                proc.wait()
            out.seek(0)
            err.seek(0)
            stdout, stderr = out.read().decode("utf-8", "replace"), err.read().decode("utf-8", "replace")
        return Ran(None if timed_out else proc.returncode, stdout, stderr, time.monotonic() - t0)

    def describe(self) -> dict:
        return {
            "sealed": True,
            "files": len(self.manifest),
            "sha256": self.sha256(),
            "python": "-I -B",
            "verified": "before and after every evaluation, and at the end of the run",
            "sandbox": "landlock" if self.sandboxed else "none",
            "sandbox_detail": self.sandbox_detail,
        }

    def close(self) -> None:
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


def _read_only(root: Path) -> None:
    """No write bits in the copy: a stray write fails even where there is no sandbox (a process of the
    same user can put them back; the hashes are what is relied on)."""
    for dirpath, _dirnames, filenames in os.walk(root, topdown=False):
        for name in filenames:
            p = os.path.join(dirpath, name)
            if not os.path.islink(p):
                os.chmod(p, os.stat(p).st_mode & ~0o222)
        os.chmod(dirpath, os.stat(dirpath).st_mode & ~0o222)
