"""The part of a sharded bench that runs on a Dask worker: build the kernel once per worker and run
a shard of scenarios in the harness's isolated sweep on the worker's GPU, each row sent to the
client as soon as it exists (so a worker that dies loses only the scenario it was running).

The shard runner and the GPU probe are seams (`ShardJob.runner`, `ShardJob.probe`): tests put
GPU-free stand-ins there to exercise the sharding, the retries and the merge on the CPU."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..config import HarnessConfig
from ..provenance import _clocks
from ..results import ScenarioResult
from ..scenarios import Scenario
from .executor import Channel
from .gpus import MixedGPUs, WorkerGPU, probe_this_worker

ShardRunner = Callable[["ShardJob", list[Scenario], Callable[[ScenarioResult], None]], dict]
GPUProbe = Callable[[], WorkerGPU]


@dataclass
class ShardJob:
    kernel_name: str
    kernel_source: bytes
    kernel_sha256: str
    arch: str
    baselines: list[str]
    seed: int
    scenarios: list[dict]  # Scenario.to_dict()
    timed_ids: list[str]
    config: HarnessConfig = field(default_factory=HarnessConfig)
    runner: ShardRunner | None = None  # None: the GPU runner
    probe: GPUProbe | None = None  # None: NVML on the worker's pinned device
    worker_command: tuple[str, ...] | None = None  # tests only: a stand-in for the sweep's worker
    device_class: str | None = None  # the GPU class this sweep runs on; another one is refused


@functools.cache
def _this_gpu(probe: GPUProbe | None) -> WorkerGPU:
    return (probe or probe_this_worker)()


def run_shard(job: ShardJob, channel: Channel) -> dict:
    """Run one shard on this worker; each row goes to the client as soon as it exists."""
    from distributed import get_worker

    gpu = _this_gpu(job.probe)
    if job.device_class and gpu.device_class != job.device_class:
        # a worker that joined after the classes were checked (a batch job that started late)
        raise MixedGPUs(
            f"a worker holding {gpu.device_class} on {gpu.host} took a shard of the sweep on "
            f"{job.device_class}; ratios are only comparable within one class: restrict the "
            "workers, or use --per-class-reports (then --resume)"
        )
    try:
        where = {**gpu.provenance(), "worker": get_worker().address}
    except ValueError:
        where = gpu.provenance()
    done = channel.recorded()
    todo = [Scenario(**d) for d in job.scenarios if d["id"] not in done]

    def on_row(row: ScenarioResult) -> None:
        row.gpu = dict(where)
        channel.emit(row.scenario, row.to_dict())

    info = (job.runner or gpu_runner)(job, todo, on_row) if todo else {}
    return {"gpu": where, "skipped": len(job.scenarios) - len(todo), **info}


def _worker_dir(gpu: WorkerGPU) -> Path:
    from .. import config

    tag = (gpu.uuid or f"{gpu.host}-{os.getpid()}").replace("/", "-")
    return config.cache_dir() / "scaleout" / tag


@functools.cache
def _build_once(kernel_name: str, source: bytes, sha: str, arch: str, where: Path):
    from ..build import build

    src = where / "src" / sha[:16] / kernel_name
    src.parent.mkdir(parents=True, exist_ok=True)
    src.write_bytes(source)
    # a cache of this device's own: workers of one host never race on the same build folder
    return build(src, arch, cache=where / "build")


def gpu_runner(job: ShardJob, todo: list[Scenario], on_row: Callable[[ScenarioResult], None]) -> dict:
    """Build (once per worker) and run the scenarios in the harness's isolated sweep on this
    worker's GPU; the `implausible` status uses the GEMM ceiling measured on this GPU."""
    from ..harness import plausibility
    from ..harness.sweep import SweepSpec, run_sweep

    gpu = _this_gpu(job.probe)
    where = _worker_dir(gpu)
    built = _build_once(job.kernel_name, job.kernel_source, job.kernel_sha256, job.arch, where)
    hello: dict = {}
    timed = set(job.timed_ids)
    spec = SweepSpec(
        library=built.library,
        scenarios=todo,
        baselines=job.baselines,
        seed=job.seed,
        timed=lambda s: s.id in timed,
        config=job.config,
        gpu_index=gpu.index or 0,
        worker_log=where / "worker.log",
        gpu_uuid=gpu.uuid,
        worker_command=job.worker_command,
    )
    clocks_start = _clocks(gpu_info(gpu))
    run_sweep(
        spec,
        None,
        on_row=on_row,
        on_hello=hello.update,
        annotate=lambda row: plausibility.annotate(row, hello.get("gemm_tflops"), {}, job.config.plausibility),
    )
    return {
        "hello": hello,
        "clocks": {"start": clocks_start, "end": _clocks(gpu_info(gpu))},
        "build": _build_info(built),
    }


def _build_info(built) -> dict:
    return {"nvcc": built.nvcc_version, "flags": built.flags, "functions": [f.__dict__ for f in built.functions]}


def run_sanitize(job: ShardJob, channel: Channel) -> dict:
    """compute-sanitizer over config.SANITIZE_SUBSET on this worker's GPU (its logs stay on the worker)."""
    from .. import config
    from ..harness import sanitize

    gpu = _this_gpu(job.probe)
    where = _worker_dir(gpu)
    built = _build_once(job.kernel_name, job.kernel_source, job.kernel_sha256, job.arch, where)
    runs = sanitize.run_sanitizer(
        built.library, config.SANITIZE_SUBSET, job.seed, gpu.uuid, config.SANITIZER_TIMEOUT_S, where / "sanitize"
    )
    return {**sanitize.summary_entry(runs), "where": {**gpu.provenance(), "logs": str(where / "sanitize")}}


def gpu_info(gpu: WorkerGPU):
    from ..gpu import list_gpus

    return next((g for g in list_gpus() if g.uuid == gpu.uuid), None)
