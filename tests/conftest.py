import os
import shutil
import tempfile
from pathlib import Path

import pytest

# The tests write only to temporary folders: the build cache too (never ~/.cache/kernelseek-suite).
# It lives in the system's temporary folder and is kept between sessions (builds are keyed by source,
# flags and nvcc version, and written atomically, so sessions can share it). Set before the suite is
# imported, so that every child process the tests start inherits it.
CACHE = os.path.join(tempfile.gettempdir(), f"kernelseek-suite-test-cache-{os.getuid()}")
os.environ["KERNELSEEK_CACHE"] = CACHE

from kernelseek_suite.gpu import list_gpus  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# what tools keep in a checkout (the venv, caches): not written by the tests
TOOLING = {
    ".git",
    ".venv",
    ".pytest_cache",
    ".ruff_cache",
    ".mypy_cache",
    ".import_linter_cache",
    "__pycache__",
    "kernelseek_suite.egg-info",
    "scratch",
}

HAS_GPU = bool(list_gpus())
HAS_NVCC = shutil.which("nvcc") is not None or __import__("os").path.exists("/usr/local/cuda/bin/nvcc")
# per-test limits beyond pyproject's `timeout` (120 s): builds with nvcc, and runs on a GPU
SLOW_TIMEOUT_S = 900
GPU_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc")
    for item in items:
        if item.get_closest_marker("timeout") is None:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.timeout(GPU_TIMEOUT_S))
            elif "nvcc" in item.keywords or "slow" in item.keywords:
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)
        if "nvcc" in item.keywords and not HAS_NVCC:
            item.add_marker(skip_nvcc)


def _checkout_paths() -> set[str]:
    out = set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        dirnames[:] = [d for d in dirnames if d not in TOOLING and not d.startswith(".venv")]
        rel = os.path.relpath(dirpath, ROOT)
        out.update(os.path.normpath(os.path.join(rel, n)) for n in dirnames + filenames)
    return out


def pytest_sessionstart(session):
    session.config._checkout_before = _checkout_paths()


def pytest_sessionfinish(session, exitstatus):
    """A test that leaves a file in the checkout (runs/<id>/, results/...) fails the session."""
    before = getattr(session.config, "_checkout_before", None)
    if before is None:
        return
    new = sorted(_checkout_paths() - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        lines = ["the tests left files in the checkout (they write only to temporary folders):", *new[:20]]
        if reporter:
            reporter.write_line("\n".join(lines), red=True)
        if session.exitstatus == 0:
            session.exitstatus = 1
