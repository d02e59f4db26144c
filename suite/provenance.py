"""Provenance: the machine, versions, commit, kernel hash, seed and date of a run."""

from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import re
import socket
import subprocess

from . import config
from .gpu import list_gpus


def git_sha(root=config.REPO_ROOT) -> str | None:
    """HEAD (with -dirty when tracked files differ). KERNELSEEK_GIT_SHA, when set, wins: a tree
    copied onto a GPU node without its history names its commit that way."""
    if os.environ.get("KERNELSEEK_GIT_SHA"):
        return os.environ["KERNELSEEK_GIT_SHA"]
    try:
        sha = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        if not re.fullmatch(r"[0-9a-f]{40}", sha):
            return os.environ.get("KERNELSEEK_GIT_SHA")
        return sha + ("-dirty" if dirty else "")
    except Exception:
        return os.environ.get("KERNELSEEK_GIT_SHA")


def package_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def now_utc() -> str:
    return _dt.datetime.now(_dt.timezone.utc).replace(microsecond=0).isoformat()


def host_provenance(gpu_index: int = 0) -> dict:
    """What can be read without a CUDA context (the parent process)."""
    from .build import nvcc_version

    gpus = list_gpus()
    g = gpus[gpu_index] if gpu_index < len(gpus) else None
    try:
        nvcc = nvcc_version()
    except Exception:
        nvcc = None
    from . import __version__

    return {
        "date": now_utc(),
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "suite_version": __version__,
        "git_sha": git_sha(),
        "nvcc": nvcc,
        "gpu_name": g.name if g else None,
        "gpu_uuid": g.uuid if g else None,
        "gpu_index": gpu_index if g else None,
        "driver": g.driver if g else None,
        "compute_capability": list(g.compute_capability) if g and g.compute_capability else None,
        "clocks_start": _clocks(g),
        "torch": package_version("torch"),
    }


def _clocks(g) -> dict | None:
    if g is None:
        return None
    return {
        "sm_mhz": g.sm_clock_mhz,
        "mem_mhz": g.mem_clock_mhz,
        "max_sm_mhz": g.max_sm_clock_mhz,
        "temperature_c": g.temperature_c,
        "power_w": g.power_w,
        "throttle_reasons": g.throttle_reasons,
    }


def clocks_now(gpu_index: int = 0) -> dict | None:
    gpus = list_gpus()
    return _clocks(gpus[gpu_index]) if gpu_index < len(gpus) else None


def hello_provenance(hello: dict, ceiling_factor: float) -> dict:
    """What a worker's hello says about the GPU and the software, under the names the run's
    provenance uses (None where the hello does not say)."""
    return {
        "device": hello.get("device"),
        "sms": hello.get("sms"),
        "torch": hello.get("torch"),
        "cuda": hello.get("cuda"),
        "cudnn": hello.get("cudnn"),
        "gemm_tflops": hello.get("gemm_tflops"),
        "ceiling_factor": ceiling_factor,
        "device_state": hello.get("device_state"),
        "baseline_status": hello.get("baselines"),
        "baseline_versions": hello.get("baseline_versions"),
    }
