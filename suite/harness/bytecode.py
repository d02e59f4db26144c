"""One bytecode cache for the Python processes a run starts, where a package ships none.

A Python process imports a module from its cached bytecode (`__pycache__/*.pyc` beside the source)
or compiles it from source. Where a package was installed without its bytecode into a folder the
run cannot write (a read-only image), nothing is ever cached: every process compiles every module it
imports again. torch and what it pulls in are about 1,500 modules, about 3 s of one core per process
(a profile of the sweep's worker on an H200 node whose torch had no bytecode), and a reproduce run
starts a dozen such processes: the sweep's worker, the FA4 warm-up's, the GEMM ceiling's children.

`PYTHONPYCACHEPREFIX` sends bytecode to a tree of its own: the first process writes it there and the
others read it. It is set for the children only where torch's bytecode is missing and its folder
cannot be written, so that a normal installation keeps using the bytecode it has."""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from pathlib import Path

from .. import config

ENV = "PYTHONPYCACHEPREFIX"


def _writable(folder: Path) -> bool:
    return os.access(folder, os.W_OK)


def lacks_bytecode(package: str, writable: Callable[[Path], bool] = _writable) -> bool:
    """Whether `package`'s `__init__` has no cached bytecode and none can be written beside it
    (`writable(folder)`). False where the package is not installed (nothing to speed up). The package
    is not imported."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return False
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return False
    pyc = Path(importlib.util.cache_from_source(spec.origin))
    if pyc.exists():
        return False
    folder = pyc.parent if pyc.parent.exists() else pyc.parent.parent
    return not writable(folder)


def share_bytecode(env: dict[str, str] | None = None, package: str = "torch") -> str | None:
    """Sets `PYTHONPYCACHEPREFIX` in `env` (default: this process's environment, which its children
    inherit) to a folder in the suite's cache where `package` lacks bytecode; returns the folder, or
    None where nothing was set (already set by the user, or the bytecode is there)."""
    target = os.environ if env is None else env
    if target.get(ENV) or target.get("PYTHONDONTWRITEBYTECODE") or not lacks_bytecode(package):
        return None
    folder = config.cache_dir() / "pycache"
    folder.mkdir(parents=True, exist_ok=True)
    target[ENV] = str(folder)
    return str(folder)
