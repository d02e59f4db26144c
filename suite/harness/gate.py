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

The same kind of gate lets the sweep's first worker start while the kernel is still being built
(sweep.py, `start_early`): its job then carries a `build_gate` instead of the library, the seed and
the scenarios, and the parent opens that gate with them once the build has passed its checks. The
worker imports what it needs meanwhile and waits there (`await_build`) before it loads the library.
"""

from __future__ import annotations

import json
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

    def open(self, content: dict | None = None) -> None:
        """`content` is what the worker reads at the gate: written under another name and renamed,
        so that a worker that sees the file sees all of it."""
        if self.opened_at is None:
            self.opened_at = time.time()
            tmp = self.folder / "open.tmp"
            tmp.write_text(json.dumps(content or {}))
            os.replace(tmp, self.path)

    def is_open(self) -> bool:
        return self.opened_at is not None

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def wait_at_gate(gate: dict | None, on_wait: Callable[[], None] | None = None) -> dict | None:
    """Waits until the gate's file exists or its timeout has passed. None without a gate; otherwise
    {"waited_s", "timed_out"}. `on_wait` is called once, before waiting, if the gate is closed."""
    if not gate:
        return None
    return _wait(gate["path"], float(gate["timeout_s"]), on_wait)


def _wait(path: str, timeout_s: float, on_wait: Callable[[], None] | None) -> dict:
    t0 = time.monotonic()
    if not os.path.exists(path):
        if on_wait is not None:
            on_wait()
        while not os.path.exists(path):
            if time.monotonic() - t0 >= timeout_s:
                return {"waited_s": round(time.monotonic() - t0, 2), "timed_out": True}
            time.sleep(POLL_S)
    return {"waited_s": round(time.monotonic() - t0, 2), "timed_out": False}


class BuildNotDone(RuntimeError):
    """A worker started during the kernel's build waited longer than its build gate allows."""


def await_build(job: dict) -> dict:
    """The whole job. A worker started while the kernel was being built (its job has a `build_gate`)
    waits there for the rest: the library, the seed and the scenarios. A build that fails never opens
    the gate: the parent kills the worker instead."""
    gate = job.get("build_gate")
    if not gate:
        return job
    waited = _wait(gate["path"], float(gate["timeout_s"]), None)
    if waited["timed_out"]:
        raise BuildNotDone(f"the kernel's library was not built within {waited['waited_s']:.0f} s")
    return {**job, **json.loads(Path(gate["path"]).read_text())}
