"""Agent runs (arm x seed) as work items: a head-to-head comparison spread over a cluster's workers,
one run per worker (per GPU) at a time.

An item is the comparison's own RunSpec, run by the same `run_spec` as `compare` on one machine: a
finished trace is kept, a trace cut short (its worker died, the comparison was interrupted) is
resumed from its last checkpoint, and one with no model call yet starts anew. Traces must be on
storage every worker sees (one host, or a shared file system); each worker reads the API key from
its own environment (OPENAI_API_KEY), so no key travels through the scheduler. On a worker with a
GPU, the run's evaluations and its recorded hardware are that GPU's."""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..contracts.traces import artifacts_dir
from ..gpu import GPU_ENV
from ..headtohead.compare import CompareRequest, RunSpec, prepare, run_spec
from . import cluster
from .executor import Channel, ItemFailure, WorkItem, run_items
from .gpus import WorkerGPU, check_cluster, cluster_gpus, probe_this_worker


class RunsLost(RuntimeError):
    """Runs whose workers kept dying (Dask's allowed-failures); the others finished. Running the
    comparison again resumes them from their traces."""

    def __init__(self, failures: list[tuple[RunSpec, ItemFailure]]):
        self.failures = failures
        super().__init__(
            "these runs lost their workers too often and did not finish: "
            + "; ".join(f"{s.arm} seed {s.seed} ({f.error})" for s, f in failures)
            + "; run the comparison again to resume them from their traces"
        )


@contextmanager
def _one_writer(trace: Path) -> Iterator[None]:
    """One process at a time writes a trace: an attempt Dask started again elsewhere while the first
    one still runs (a worker taken for dead, a comparison started again while the runs of an
    interrupted one go on) waits for it, then finds its trace finished or resumable."""
    lock = artifacts_dir(trace) / "run.lock"
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@contextmanager
def _on_gpu(gpu: WorkerGPU) -> Iterator[None]:
    """The run's evaluations use the worker's GPU (a worker runs one item at a time, so its
    environment is the run's)."""
    if gpu.index is None:
        yield
        return
    before = os.environ.get(GPU_ENV)
    os.environ[GPU_ENV] = str(gpu.index)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(GPU_ENV, None)
        else:
            os.environ[GPU_ENV] = before


def _worker_address() -> str | None:
    try:
        from distributed import get_worker

        return get_worker().address
    except (ImportError, ValueError):
        return None  # not on a Dask worker


def run_on_worker(
    spec: RunSpec, channel: Channel | None = None, probe: Callable[[], WorkerGPU] = probe_this_worker, model=None
) -> dict:
    """`run_spec` on the worker this runs in, with its GPU; the record says where it ran.
    `model` replaces the OpenAI client (tests)."""
    gpu = dataclasses.replace(probe(), worker=_worker_address())
    with _one_writer(Path(spec.trace_path)), _on_gpu(gpu):
        record = run_spec(spec, model=model)
    return {**record, "gpu": gpu.provenance()}


def run_agent_items(
    client,
    specs: list[RunSpec],
    on_result: Callable[[RunSpec, dict], None] | None = None,
    on_failure: Callable[[RunSpec, ItemFailure], None] | None = None,
    probe: Callable[[], WorkerGPU] = probe_this_worker,
) -> dict[str, Any]:
    """Run every spec on the cluster, one per worker at a time; returns {spec.key: record}. A run
    whose workers keep dying, or that raises, goes to on_failure (default: raise)."""
    work = [WorkItem(s.key, s) for s in specs]
    return run_items(
        client,
        work,
        functools.partial(run_on_worker, probe=probe),
        on_result=(lambda w, rec: on_result(w.payload, rec)) if on_result else None,
        on_failure=(lambda w, f: on_failure(w.payload, f)) if on_failure else None,
    )


def task_arch(req: CompareRequest) -> str | None:
    """The GPU architecture the comparison's task needs (None: a CPU task)."""
    from ..agents.tasks import make_task

    task = make_task(req.task, **req.task_options)
    try:
        return getattr(task, "arch", None)
    finally:
        if hasattr(task, "close"):
            task.close()


def check_gpus(gpus: dict[str, WorkerGPU], arch: str) -> None:
    """Every worker holds a GPU for `arch`, all of one class, and no two workers share one (two runs
    on one GPU would slow each other down)."""
    check_cluster(gpus, arch, per_class=False)
    seen: dict[tuple, str] = {}
    for addr, g in sorted(gpus.items()):
        where = (g.host, g.uuid)
        if where in seen:
            raise cluster.ClusterError(
                f"workers {seen[where]} and {addr} share GPU {g.uuid} on {g.host}: start one worker "
                "per GPU, each pinned to its device (dask-cuda's worker does)"
            )
        seen[where] = addr


def run_compare_distributed(
    req: CompareRequest,
    scaleout,
    on_run: Callable[[RunSpec, dict], None] | None = None,
    probe: Callable[[], WorkerGPU] = probe_this_worker,
) -> list[dict]:
    """`run_compare` on a Dask cluster (`scaleout`: a ScaleOut): the same specs, request.json, traces
    and records (in the plan's order), each run on one worker. A GPU task needs every worker to hold
    its own GPU of the task's architecture, all of one class (so that the arms are compared on
    equal terms). A run that raises stops the comparison as on one machine; runs whose workers kept
    dying are reported by RunsLost once the others have finished."""
    arch = task_arch(req)
    with cluster.open_client(scaleout.cluster) as client:
        if arch:
            check_gpus(cluster_gpus(client, probe), arch)
        specs = prepare(req)
        planned = {s.key: s for s in specs}
        # workers may run elsewhere: they get absolute paths, the records keep the planned ones
        shipped = [dataclasses.replace(s, trace_path=str(Path(s.trace_path).resolve())) for s in specs]
        lost: list[tuple[RunSpec, ItemFailure]] = []

        def finished(spec: RunSpec, record: dict) -> None:
            record["trace"] = planned[spec.key].trace_path
            if on_run:
                on_run(planned[spec.key], record)

        def failed(spec: RunSpec, failure: ItemFailure) -> None:
            if not failure.worker_died:
                raise failure.exception
            lost.append((planned[spec.key], failure))

        records = run_agent_items(client, shipped, on_result=finished, on_failure=failed, probe=probe)
    if lost:
        raise RunsLost(lost)
    return [records[s.key] for s in specs]
