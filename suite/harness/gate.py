"""The gate a sweep's worker waits at before it measures anything on the GPU.

While other work still runs on the GPU (the FA4 warm-up, baselines/fa4_warm.py), the worker may
already start: import torch and the baselines, create its CUDA context, load the kernel's library.
It then waits at the gate before the first thing that is measured (the GEMM ceiling of its hello,
then the scenarios).

The gate is a file in a folder of its own that the parent creates when the other work has ended;
the worker's job carries its path and how long the worker waits for it (`{"path", "timeout_s"}`).
A worker never waits longer than that: past it, it goes on and its hello says so. The parent sends
the gate only to a worker that may still have to wait; once a worker has passed it (open, or timed
out), a fresh worker (after a crash) gets none.

Parent: `gate = Gate(timeout_s)`, `gate.job()` in the job, `gate.open()`, `gate.remove()` at the end.
Worker: `wait_at_gate(job.get("gate"), on_wait)` returns what goes in the hello.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

POLL_S = 0.05


class Gate:
    """The parent's side. `opened_at` (time.time()) is the parent's own record of the opening: the
    file's existence is only the signal to the worker."""

    def __init__(self, timeout_s: float):
        self.timeout_s = float(timeout_s)
        self.folder = Path(tempfile.mkdtemp(prefix="ks-gate-"))
        self.path = self.folder / "open"
        self.opened_at: float | None = None

    def job(self) -> dict:
        return {"path": str(self.path), "timeout_s": self.timeout_s}

    def open(self) -> None:
        if self.opened_at is None:
            self.opened_at = time.time()
            self.path.touch()

    def is_open(self) -> bool:
        return self.opened_at is not None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_at_gate(gate: dict | None, on_wait: Callable[[], None] | None = None) -> dict | None:
    """Waits until the gate's file exists or its timeout has passed. None without a gate; otherwise
    {"waited_s", "timed_out"}. `on_wait` is called once, before waiting, if the gate is closed."""
    if not gate:
        return None
    path, timeout_s = gate["path"], float(gate["timeout_s"])
    t0 = time.monotonic()
    if not os.path.exists(path):
        if on_wait is not None:
            on_wait()
        while not os.path.exists(path):
            if time.monotonic() - t0 >= timeout_s:
                return {"waited_s": round(time.monotonic() - t0, 2), "timed_out": True}
            time.sleep(POLL_S)
    return {"waited_s": round(time.monotonic() - t0, 2), "timed_out": False}
