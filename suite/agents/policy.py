"""What a sandboxed process may read and write (the launcher that applies it is sandbox.py).

Reads are an allow-list: system folders, the toolchain (this Python and its packages, CUDA, the
compilers on the PATH) and the folders of the job at hand: the shell gets its workspace, its scratch
folder and the documents given to its arm; the evaluator gets its sealed snapshot and the scratch
folder of one evaluation. Nothing else: not the repository (its kernels/, results/, the question
bank), not the traces of this run or of others, not the user's home. Where an allowed folder holds a
forbidden one (the repository under /opt, a virtual environment inside the repository), the allowed
folder is opened up child by child around it, since Landlock only grants.
"""

from __future__ import annotations

import os
import shutil
import site
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from .. import config as suite_config
from .sandbox import Policy

SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt", "/proc", "/sys")
CAP_SYS_ADMIN = 21  # the GPU profiler's counters need it where the driver keeps them for admins
# The user a sandboxed evaluation runs as where the suite runs as root: not root (so /proc/sys and the
# other files root owns stay out of reach) and not the sealed copy's owner (seal.OWNER_UID, 65534), so
# it cannot change the copy's file modes either
SANDBOX_UID = 65533
# CUDA's initialization writes per-thread files under /proc/<pid>/task (measured on the H200,
# 2026-12-05: cuInit fails with error 304 unless /proc/self/task is writable; docs/threat-model.md).
# A rule can only name /proc as a whole for the processes that a sandboxed one starts (their pids do
# not exist yet), so it is granted only to a process that is not root.
PROC = "/proc"


def _inside(p: Path, root: Path) -> bool:
    return p == root or root in p.parents


def _real(p) -> Path | None:
    try:
        return Path(os.path.realpath(p))
    except (OSError, ValueError):
        return None


def python_roots() -> list[Path]:
    """This interpreter and the folders its packages come from (the sealed evaluator imports the
    same third-party packages as the agent's process)."""
    roots = {
        sys.prefix,
        sys.exec_prefix,
        sys.base_prefix,
        sys.base_exec_prefix,
        os.path.dirname(os.path.dirname(os.path.realpath(sys.executable))),
    }
    try:
        roots.update(site.getsitepackages())
    except AttributeError:
        pass
    user = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    if user and user in sys.path:  # packages installed with --user, which the agent's process imports
        roots.add(user)
    return sorted({r for r in map(_real, roots) if r and r.is_dir()})


def import_paths(exclude: list[Path]) -> list[Path]:
    """Entries of sys.path outside `exclude` (e.g. a GPU image's packages reached through a .pth
    file), for the sealed evaluator to import from as the agent's process does."""
    out = []
    for entry in sys.path:
        p = _real(entry) if entry and os.path.isabs(entry) else None
        if p and p.is_dir() and not any(_inside(p, e) for e in exclude) and p not in out:
            out.append(p)
    return out


def tool_roots() -> list[Path]:
    """CUDA (CUDA_HOME, CUDA_PATH, where nvcc is) and the compilers' installations."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")]
    for exe in ("nvcc", "gcc", "cc", "ncu", "cuobjdump"):
        found = shutil.which(exe)
        if found:
            roots.append(os.path.dirname(os.path.dirname(os.path.realpath(found))))
    return sorted({r for r in map(_real, filter(None, roots)) if r and r.is_dir() and str(r) != "/"})


def path_dirs() -> list[Path]:
    out = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = _real(d) if d and os.path.isabs(d) else None
        if p and p.is_dir():
            out.append(p)
    return out


def forbidden(extra: list[Path] = ()) -> list[Path]:
    """Never readable from a sandbox: the repository (answers, results, bank, traces under it), the
    user's home, and `extra` (e.g. the folder of this run's trace)."""
    try:
        home = [Path.home()]
    except RuntimeError:  # no HOME and no passwd entry
        home = []
    out = [suite_config.REPO_ROOT, *home, *extra]
    return sorted({r for r in map(_real, out) if r and str(r) != "/"})


def open_up(trusted: list[Path], untrusted: list[Path], deny: list[Path]) -> list[Path]:
    """The paths to grant so that everything under `trusted` and `untrusted` is reachable except what
    lies under `deny`. A trusted path inside a denied folder is still granted (the virtual environment
    inside the repository); an untrusted one there is dropped (a PATH entry inside the repository)."""
    granted: list[Path] = []

    def grant(p: Path) -> None:
        holds = [d for d in deny if d != p and p in d.parents]
        if not holds:
            granted.append(p)
            return
        try:
            children = sorted(p.iterdir())
        except OSError:
            return
        for c in children:
            if any(c == d for d in deny):
                continue
            grant(c)

    for p in trusted:
        grant(p)
    for p in untrusted:
        if not any(_inside(p, d) for d in deny):
            grant(p)
    # a granted folder covers what is under it
    granted = sorted(set(granted))
    return [p for p in granted if not any(q != p and q in p.parents for q in granted)]


def _reachable_by_others(p: Path) -> bool:
    """Whether a user other than the owner can reach `p` (search on every folder above it) and read
    it (and search it, for a folder)."""
    try:
        p = Path(os.path.realpath(p))
        for parent in p.parents:
            if not os.stat(parent).st_mode & stat.S_IXOTH:
                return False
        mode = os.stat(p).st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & need == need


def run_as(extra: Sequence[Path] = ()) -> int | None:
    """SANDBOX_UID where this process is root and that user can run this Python (the interpreter and
    the folders its packages come from) and read `extra`; None otherwise (the sandboxed process then
    runs as this user: not root, or root without CUDA under the sandbox, docs/threat-model.md)."""
    if os.geteuid() != 0:
        return None
    need = [Path(sys.executable), *python_roots(), *extra]
    return SANDBOX_UID if all(_reachable_by_others(p) for p in need) else None


def make_policy(
    read: list[Path],
    write: list[Path],
    deny_extra: list[Path] = (),
    keep_caps: tuple[int, ...] = (),
    uid: int | None = None,
    cuda: bool = False,
) -> Policy:
    """Reads: system folders, the toolchain and `read`; writes: `write`. Both may name folders inside
    a forbidden one (a workspace is never there; a documents file of the repository can be). `uid`:
    the user to run as (from root). `cuda`: the process may initialize CUDA, which needs /proc
    writable; granted only where the process is not root (with `uid`, or when not run as root)."""
    deny = forbidden(list(deny_extra))
    own = [r for r in map(_real, [*read, *write]) if r and r.exists()]
    untrusted = [Path(r) for r in SYSTEM_ROOTS if os.path.isdir(r)] + path_dirs() + import_paths(deny)
    trusted = python_roots() + tool_roots() + own
    reads = open_up(trusted, untrusted, deny)
    writes = [str(w) for w in map(_real, write) if w]
    if cuda and (uid is not None or os.geteuid() != 0) and os.path.isdir(PROC):
        writes.append(PROC)
    return Policy(tuple(map(str, reads)), tuple(writes), tuple(keep_caps), None, uid)


def describe(policy: Policy, labels: dict[str, Path]) -> dict:
    """For the trace: the labelled folders it grants, and how many paths in all."""
    reads = {Path(p) for p in policy.read}
    return {
        "reads": sorted(k for k, v in labels.items() if _real(v) in reads or any(_inside(_real(v), r) for r in reads)),
        "writes": sorted(k for k, v in labels.items() if str(_real(v)) in policy.write),
        "read_paths": len(policy.read),
        "capabilities_kept": list(policy.keep_caps),
    }
