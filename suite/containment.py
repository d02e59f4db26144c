"""Containment of a worker: its host memory, core dumps, and the paths a kernel's author must not
be able to write.

Memory: the parent polls the worker's resident set and kills it over the limit. `RLIMIT_AS` is not
used: the CUDA driver reserves virtual address space far beyond what it touches (unified addressing
spans host and device memory), so an address-space limit makes CUDA fail to initialise. `RLIMIT_DATA`
would spare those reservations on recent kernels but has not been verified with CUDA here, so it is
not relied on either. Device memory needs no limit of ours: a kernel that allocates too much makes
its own scenario fail, and the driver frees it when the worker exits.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path


def rss_bytes(pid: int) -> int | None:
    """Resident set of a process (Linux /proc), or None where it cannot be read."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            parts = line.split()
            return int(parts[1]) * 1024
    return None


def no_core_dumps() -> None:
    """Called by the worker before it loads a kernel: a crashing kernel leaves no core file of the
    size of the process behind."""
    try:
        import resource

        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    except (ImportError, ValueError, OSError):
        pass


def protected_paths(repo_root: Path, results_dir: Path | None = None) -> list[Path]:
    """What an agent's workspace must not be able to write: the harness package, the reference
    kernel, the results, and the build cache (a library planted there under the key of an honest
    source would be loaded without being compiled from it)."""
    from . import config

    suite_dir = Path(__file__).resolve().parent
    paths = [suite_dir, repo_root / "kernels" / "reference", results_dir or (repo_root / "results"), config.cache_dir()]
    return [p for p in paths if p.exists()]


def writable(paths: list[Path]) -> list[Path]:
    """Those of `paths` (or a file in them) that this process can write. Run from inside an
    agent's sandbox, an empty list means the sandbox is set up as it must be."""
    bad = []
    for p in paths:
        if os.access(p, os.W_OK):
            bad.append(p)
            continue
        if p.is_dir():
            for child in p.rglob("*"):
                if child.is_file() and os.access(child, os.W_OK):
                    bad.append(child)
                    break
    return bad


def die_with_parent() -> None:
    """In a child before exec (`preexec_fn`): it is killed when the thread that started it ends or its
    process dies, even by SIGKILL (Linux PR_SET_PDEATHSIG), so a killed sweep never leaves a kernel
    running on the GPU, nor a run a measurement child."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        PR_SET_PDEATHSIG = 1
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
