"""GPU-free stand-ins for the parts of a sharded bench that need a GPU: the probe that says which GPU
a Dask worker holds, and the shard runner. The runner's rows follow from (seed, scenario) alone, as
a real run's inputs do, so a sharded run and a serial run must give the same rows. It can block on
one scenario (so that a test kills the worker running it) and it logs every scenario it starts."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

from kernelseek_suite.results import ScenarioResult
from kernelseek_suite.scaleout.gpus import WorkerGPU


def _worker_name() -> str:
    from distributed.worker import Worker

    return str(next(iter(Worker._instances)).name)


def h200_probe() -> WorkerGPU:
    n = _worker_name()
    return WorkerGPU("node-a", int(n), f"GPU-fake-{n}", "NVIDIA H200", (9, 0), "580.1")


def mixed_probe() -> WorkerGPU:
    """Even workers hold H200s, odd ones H100s: two classes of one architecture."""
    n = int(_worker_name())
    return WorkerGPU(
        "node-a", n, f"GPU-fake-{n}", "NVIDIA H200" if n % 2 == 0 else "NVIDIA H100 80GB HBM3", (9, 0), "580.1"
    )


def fake_ratio(seed: int, scenario: str, baseline: str) -> float:
    h = int(hashlib.sha256(f"{seed}/{scenario}/{baseline}".encode()).hexdigest()[:8], 16)
    return round(0.5 + (h % 10000) / 10000, 4)


def fake_runner(
    job, todo, on_row, *, log_dir: str, block: str | None = None, block_class: str | None = None, pause_s: float = 0.0
):
    """Rows for `todo`, one at a time. On `block` (first attempt only; in the sweep of `block_class`
    when given) it writes its pid to log_dir/blocked and waits to be killed."""
    log = Path(log_dir)
    for s in todo:
        with open(log / "started", "a") as f:
            f.write(f"{s.id} {os.getpid()}\n")
        if s.id == block and block_class in (None, job.device_class) and not (log / "blocked").exists():
            (log / "blocked").write_text(str(os.getpid()))
            time.sleep(120)
        if pause_s:
            time.sleep(pause_s)
        on_row(
            ScenarioResult.for_scenario(
                s,
                status="ok",
                seed=job.seed,
                ratio={b: fake_ratio(job.seed, s.id, b) for b in job.baselines},
            )
        )
    return {"build": {"nvcc": "none (stand-in)"}, "hello": {"device": "NVIDIA H200", "torch": "stand-in"}}


def late_h100_probe() -> WorkerGPU:
    """Worker 2 holds an H100 once a marker file exists: a worker of another class joining late."""
    n = int(_worker_name())
    import os as _os

    late = _os.environ.get("KS_TEST_LATE_MARKER")
    if n == 2 and late and Path(late).exists():
        return WorkerGPU("node-b", 0, "GPU-fake-late", "NVIDIA H100 80GB HBM3", (9, 0), "580.1")
    return h200_probe()


def shared_probe() -> WorkerGPU:
    """Every worker sees the same GPU: workers not pinned to a device each."""
    return WorkerGPU("node-a", 0, "GPU-fake-0", "NVIDIA H200", (9, 0), "580.1")
