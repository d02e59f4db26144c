"""The task's workspace: a private folder holding the files the agent works on, a scratch folder
(HOME, TMPDIR) beside it, and the only place the agent's tools may write.

Containment (docs/threat-model.md has the whole picture):
- view/edit resolve every path (symlinks included) and refuse anything outside the workspace;
- the shell runs with the workspace as its working directory, an environment built from an
  allow-list (childenv.py; HOME and TMPDIR in the scratch folder), in its own process group, killed
  after each command and when the agent's process dies, however it dies (reaper.py), and, where
  Landlock is available, under a ruleset (sandbox.py, policy.py): it writes only the workspace and
  its scratch folder (private to the run, removed with it), reads only those, system folders, the
  toolchain and the documents given to its arm, never /dev/shm or another shared writable place, and
  has no capabilities;
- without Landlock a shell command can read and write wherever the user can: the sealed evaluator
  (seal.py) then still detects any change to what it runs, and the key is still kept out of the
  shell's reach (childenv.py), but the repository's kernels and results can be read.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from . import policy as _policy
from . import reaper
from . import sandbox as _sandbox
from .childenv import child_env
from .exceptions import ToolError
from .procgroup import run_in_group


@dataclass
class ShellResult:
    exit_code: int | None  # None: killed at the timeout
    output: str  # stdout and stderr, interleaved
    timed_out: bool
    duration_s: float


def scrubbed_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The shell's environment: the allow-listed variables (childenv.py), `extra`, a dumb terminal."""
    return child_env({**(extra or {}), "TERM": "dumb"})


class Workspace:
    def __init__(self, root: Path, scratch: Path, sandbox: str = "auto", deny: list[Path] = ()):
        self.root = Path(root).resolve()
        self.scratch = Path(scratch).resolve()
        self.deny = list(deny)  # beyond the usual (policy.forbidden): e.g. this run's trace
        self.docs: list[Path] = []  # documents the arm gives the agent to read
        self._policy: _sandbox.Policy | None = None
        for d in (self.root, self.scratch / "home", self.scratch / "tmp"):
            d.mkdir(parents=True, exist_ok=True)
        available, detail = _sandbox.landlock_status()
        if sandbox == "landlock" and not available:
            raise RuntimeError(f"sandbox 'landlock' requested but unavailable: {detail}")
        if sandbox not in ("auto", "landlock", "none"):
            raise ValueError(f"sandbox must be auto, landlock or none, not {sandbox!r}")
        self.sandboxed = available and sandbox != "none"
        self.sandbox_detail = detail if sandbox != "none" else "disabled by configuration"

    @classmethod
    def create(cls, sandbox: str = "auto", parent: Path | None = None, deny: list[Path] = ()) -> Workspace:
        """A fresh workspace and scratch folder in a new private folder, removed with the run (and by
        the reaper if the process dies first)."""
        base = Path(tempfile.mkdtemp(prefix="ks-ws-", dir=parent))
        reaper.watch_dir(base)
        return cls(base / "work", base / "scratch", sandbox=sandbox, deny=deny)

    def allow_read(self, paths: list[Path]) -> None:
        """Lets the shell read `paths` too (the documents given to the arm)."""
        self.docs.extend(Path(p).resolve() for p in paths)
        self._policy = None

    def policy(self) -> _sandbox.Policy:
        if self._policy is None:
            self._policy = _policy.make_policy(
                [self.root, self.scratch, *self.docs], [self.root, self.scratch], deny_extra=self.deny
            )
        return self._policy

    def describe(self) -> dict:
        return {"sandbox": "landlock" if self.sandboxed else "none", "sandbox_detail": self.sandbox_detail}

    def cleanup(self) -> None:
        reaper.release_dir(self.root.parent)
        shutil.rmtree(self.root.parent, ignore_errors=True)

    def keep(self) -> None:
        """The workspace stays after the run (--keep-workspace): the reaper leaves it alone."""
        reaper.release_dir(self.root.parent)

    # ---- paths ----
    def resolve(self, path: str, must_exist: bool = False) -> Path:
        """An absolute path inside the workspace for `path` (relative to it, or absolute inside it)."""
        if not path or "\x00" in path:
            raise ToolError("empty or invalid path")
        p = Path(path)
        full = (p if p.is_absolute() else self.root / p).resolve()
        if full != self.root and self.root not in full.parents:
            raise ToolError(f"{path}: outside the workspace; only files in the workspace can be used")
        if must_exist and not full.is_file():
            raise ToolError(f"{path}: no such file in the workspace")
        return full

    def relative(self, full: Path) -> str:
        return str(Path(full).relative_to(self.root))

    # ---- shell ----
    def run(self, command: str, timeout_s: float) -> ShellResult:
        argv = ["bash", "--noprofile", "--norc", "-c", command]
        if self.sandboxed:
            argv = _sandbox.wrap(argv, self.policy())
        env = scrubbed_env(
            {
                "HOME": str(self.scratch / "home"),
                "TMPDIR": str(self.scratch / "tmp"),
                "XDG_CACHE_HOME": str(self.scratch / "home" / ".cache"),
            }
        )
        t0 = time.monotonic()
        # output goes to an unnamed file, not a pipe: a background job that keeps it open must not make
        # the command look unfinished; the job is killed with the process group right after
        with tempfile.TemporaryFile() as sink:
            code = run_in_group(argv, self.root, env, sink, subprocess.STDOUT, timeout_s)
            sink.seek(0)
            out = sink.read()
        return ShellResult(code, out.decode("utf-8", "replace"), code is None, time.monotonic() - t0)

    # ---- snapshots (for resuming a run) ----
    def files(self) -> dict[str, Path]:
        """Every regular file of the workspace (symlinks left out), whatever its size: relative path ->
        full path. Checkpoints store them content-addressed beside the trace."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            dirnames.sort()
            for name in sorted(filenames):
                p = Path(dirpath) / name
                if not p.is_symlink() and p.is_file():
                    out[self.relative(p)] = p
        return out

    def snapshot(self) -> dict[str, bytes]:
        return {rel: p.read_bytes() for rel, p in self.files().items()}

    def _clear(self) -> None:
        for child in self.root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child)
            else:
                child.unlink()

    def restore(self, files: dict[str, bytes]) -> None:
        self._clear()
        for rel, data in files.items():
            p = self.resolve(rel)
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_bytes(data)

    def restore_files(self, files: dict[str, Path]) -> None:
        """The workspace as it was: relative path -> a file to copy there (a blob of the trace)."""
        self._clear()
        for rel, src in files.items():
            p = self.resolve(rel)
            p.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(src, p)
