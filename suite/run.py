"""A run, from the request to its outputs: the checks that need no GPU, the start-ups that overlap
(the kernel's build, FA4's warm-up, and the caller's own GPU work such as reproduce's first GEMM
ceiling), the sweep, and the folder of outputs. `bench`, `eval`, `reproduce` and the agents' `eval`
all run through an `Executor`, chosen once by the command line and passed down:

- `Local` (this module): one GPU of this machine, `bench.run_bench`'s sweep in an isolated worker;
- `scaleout.bench.Dask`: the scenarios sharded over a Dask cluster's GPUs (the workers build).

Nothing below the command line picks an executor.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from . import bench
from .results import ScenarioResult


@dataclass
class Hooks:
    """What a caller hears of a run and adds to it. `before_sweep`: the caller's own GPU work, run
    once the start-ups that need no GPU of the sweep are under way (the local executor starts FA4's
    warm-up and the kernel's build first, so that they overlap it), and before the sweep."""

    on_row: Callable[[ScenarioResult], None] | None = None
    on_start: Callable[[int, int], None] | None = None
    on_phase: Callable[[str], None] | None = None
    before_sweep: Callable[[], None] | None = None


@dataclass
class Ran:
    """A finished run: summary.json's content and the folder that holds the outputs (a fresh
    temporary one where the request named none)."""

    summary: dict
    out_dir: Path


class Executor(Protocol):
    """Where a run's scenarios are measured."""

    kind: str  # "local" or "dask", as provenance records it
    # the exceptions that are the request's fault (a usage error, exit 4), beside bench.RequestError
    usage_errors: tuple[type[Exception], ...]

    def run(self, req: bench.BenchRequest, hooks: Hooks) -> Ran: ...


class Local:
    """One GPU of this machine (req.gpu_index)."""

    kind = "local"
    usage_errors: tuple[type[Exception], ...] = (bench.RequestError, bench.ResumeMismatch)

    def run(self, req: bench.BenchRequest, hooks: Hooks) -> Ran:
        warming = None
        if hooks.before_sweep is not None:
            # FA4's compilations and the kernel's build start first, so that they overlap the
            # caller's GPU work; run_bench then finishes the warm-up and finds the build cached
            warming = bench.start_fa4_warm(req)
            try:
                build_beside(req.kernel, req.arch)
                hooks.before_sweep()
            except BaseException:
                bench.stop_fa4_warm(warming)
                raise
        summary, out_dir = bench.run_local(req, hooks.on_row, hooks.on_start, warming, hooks.on_phase)
        return Ran(summary, out_dir)


LOCAL = Local()


def build_beside(kernel: Path, arch: str) -> threading.Thread | None:
    """The kernel's nvcc build, started in a thread to run beside the caller's GPU work (a measurement
    in another process): run_bench's own build waits for it (build.py builds one at a time) and finds
    it in the build cache. Where nvcc is not here, run_bench says so, as before. An error is dropped
    here: run_bench builds again (a failed build is never cached) and raises it as it would have
    without this thread."""
    from . import build as _build

    if not _build.nvcc_path():
        return None

    def work() -> None:
        try:
            _build.build(kernel, arch)
        except Exception:
            pass  # raised again, from the same source, by run_bench's build

    thread = threading.Thread(target=work, name="kernel-build", daemon=True)
    thread.start()
    return thread
