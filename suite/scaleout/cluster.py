"""Where the work runs: a Dask cluster named by a spec, and the client connected to it.

A spec is one of
  local-cuda   this host's GPUs through dask-cuda: one worker per GPU, pinned to its device
  local        a LocalCluster of CPU worker processes (the CPU task, and tests of the sharding)
  address      an existing scheduler (`tcp://host:8786`), e.g. started by `dask cuda worker`
  slurm / pbs  workers submitted as batch jobs through dask-jobqueue, one per GPU (dask-cuda's worker)

`--scheduler` takes an address, `local-cuda`, `local[:N]`, or a YAML file holding a spec
(`kind: slurm`, `jobs: 2`, `gpus_per_job: 4`, `options: {queue: gpu, walltime: "02:00:00"}`).
dask, distributed, dask-jobqueue and dask-cuda are imported only here and only when a cluster is
opened, so nothing of this is needed on the single-GPU path."""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..gpu import NoGPUError, list_gpus

KINDS = ("local-cuda", "local", "address", "slurm", "pbs")

EXTRA_HINT = {
    "dask": 'pip install "kernelseek-suite[dask]"',
    "distributed": 'pip install "kernelseek-suite[dask]"',
    "dask_jobqueue": 'pip install "kernelseek-suite[dask]"',
    "dask_cuda": 'pip install "kernelseek-suite[dask-cuda]" on a machine with NVIDIA GPUs, with the cuda-bindings '
    'of its CUDA (e.g. pip install "dask-cuda[cu13]")',
}


class ClusterError(RuntimeError):
    """The cluster cannot be used as asked; the message says why and what to do."""


def need(module: str):
    """Import an optional dependency, or say which extra brings it."""
    try:
        return importlib.import_module(module)
    except ImportError as e:
        top = module.split(".")[0]
        raise ClusterError(
            f"the Dask executor needs {top} ({e}); install it with {EXTRA_HINT.get(top, 'pip install ' + top)}"
        ) from e


@dataclass
class ClusterSpec:
    kind: str = "local-cuda"
    address: str | None = None  # kind "address"
    workers: int | None = None  # local: worker processes; local-cuda: GPUs to use (default all)
    devices: str | None = None  # local-cuda: CUDA_VISIBLE_DEVICES to spread over, e.g. "0,1,2,3"
    jobs: int = 1  # slurm / pbs: batch jobs to submit
    gpus_per_job: int = 1  # slurm / pbs: GPUs (and so workers) per job
    options: dict[str, Any] = field(default_factory=dict)  # passed on to the cluster class
    wait_s: float = 600.0  # how long to wait for the workers (batch jobs may queue longer)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ClusterError(f"unknown cluster kind {self.kind!r}; known: {', '.join(KINDS)}")
        if self.kind == "address" and not self.address:
            raise ClusterError("a cluster of kind 'address' needs its scheduler address")

    def describe(self) -> dict:
        d = {"kind": self.kind}
        for k in ("address", "workers", "devices"):
            if getattr(self, k) is not None:
                d[k] = getattr(self, k)
        if self.kind in ("slurm", "pbs"):
            d.update(jobs=self.jobs, gpus_per_job=self.gpus_per_job, options=self.options)
        return d


def parse_scheduler(text: str | None) -> ClusterSpec:
    """`--scheduler`'s value: nothing (this host's GPUs), an address, local[:N], or a YAML spec."""
    if not text or text == "local-cuda":
        return ClusterSpec("local-cuda")
    if text == "local" or text.startswith("local:"):
        n = text.partition(":")[2]
        return ClusterSpec("local", workers=int(n) if n else None)
    if "://" in text:
        return ClusterSpec("address", address=text)
    path = Path(text)
    if path.suffix in (".yaml", ".yml") or path.is_file():
        if not path.is_file():
            raise ClusterError(f"cluster spec {path} not found")
        import yaml

        data = yaml.safe_load(path.read_text()) or {}
        if not isinstance(data, dict):
            raise ClusterError(f"{path}: a cluster spec is a mapping (kind: slurm, jobs: 2, ...)")
        known = set(ClusterSpec.__dataclass_fields__)
        unknown = sorted(set(data) - known)
        if unknown:
            raise ClusterError(f"{path}: unknown keys {', '.join(unknown)}; known: {', '.join(sorted(known))}")
        return ClusterSpec(**data)
    if ":" in text:  # host:port
        return ClusterSpec("address", address=f"tcp://{text}")
    raise ClusterError(
        f"--scheduler {text!r}: give an address (tcp://host:8786), local-cuda, local[:N], or a YAML cluster spec"
    )


def make_cluster(spec: ClusterSpec):
    """The Dask cluster object for a spec (None for an existing scheduler)."""
    if spec.kind == "address":
        return None
    if spec.kind == "local":
        distributed = need("distributed")
        n = spec.workers or max(1, min(4, os.cpu_count() or 1))
        opts = {"n_workers": n, "threads_per_worker": 1, "processes": True, "dashboard_address": ":0", **spec.options}
        return distributed.LocalCluster(**opts)
    if spec.kind == "local-cuda":
        if not list_gpus():
            raise NoGPUError(
                "no NVIDIA GPU on this host for a local-cuda cluster: give --scheduler the address of "
                "a scheduler whose workers hold GPUs, or a Slurm/PBS cluster spec"
            )
        dask_cuda = need("dask_cuda")
        opts = {"threads_per_worker": 1, "dashboard_address": ":0", **spec.options}
        if spec.devices:
            opts["CUDA_VISIBLE_DEVICES"] = spec.devices
        if spec.workers:
            opts["n_workers"] = spec.workers
        return dask_cuda.LocalCUDACluster(**opts)
    jobqueue = need("dask_jobqueue")
    return _batch_cluster(jobqueue, spec)


def batch_options(spec: ClusterSpec) -> dict:
    """Options for dask-jobqueue: each job starts dask-cuda's worker, which starts one worker per GPU
    of the job, each pinned to its device and running one item at a time."""
    g = int(spec.gpus_per_job)
    opts: dict[str, Any] = {
        "cores": 1,
        "processes": 1,  # one thread per GPU worker
        "memory": f"{16 * g}GB",
        "worker_command": "dask_cuda.cli worker",
    }
    if spec.kind == "slurm":
        opts.update(job_cpu=4 * g, job_extra_directives=[f"--gres=gpu:{g}"])
    else:
        opts.update(resource_spec=f"select=1:ncpus={4 * g}:ngpus={g}")
    opts.update(spec.options)
    return opts


def _batch_cluster(jobqueue, spec: ClusterSpec):
    cls = jobqueue.SLURMCluster if spec.kind == "slurm" else jobqueue.PBSCluster
    cluster = cls(**batch_options(spec))
    cluster.scale(jobs=spec.jobs)
    return cluster


def expected_workers(spec: ClusterSpec, cluster) -> int:
    if spec.kind in ("slurm", "pbs"):
        return spec.jobs * spec.gpus_per_job
    if cluster is not None:
        return len(cluster.workers)
    return 1


@contextmanager
def open_client(spec: ClusterSpec) -> Iterator[Any]:
    """A connected distributed.Client; the cluster it made (if any) is closed on the way out."""
    distributed = need("distributed")
    try:
        cluster = make_cluster(spec)
    except (ClusterError, NoGPUError):
        raise
    except Exception as e:  # e.g. NVML or the batch system refusing: say what failed, no traceback
        raise ClusterError(f"the {spec.kind} cluster could not be started: {type(e).__name__}: {e}") from e
    try:
        client = distributed.Client(cluster if cluster is not None else spec.address)
        try:
            client.wait_for_workers(expected_workers(spec, cluster), timeout=spec.wait_s)
        except Exception as e:
            client.close()
            raise ClusterError(
                f"the workers of the {spec.kind} cluster did not come up within {spec.wait_s:.0f} s "
                f"({type(e).__name__}: {e})"
            ) from e
        try:
            yield client
        finally:
            client.close()
    finally:
        if cluster is not None:
            cluster.close()
