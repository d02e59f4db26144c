"""Which GPU each Dask worker holds, and the device classes of a cluster.

A dask-cuda worker's CUDA_VISIBLE_DEVICES lists its own device first; NVML (which ignores that
variable) tells its name, UUID and compute capability without creating a CUDA context. Ratios are
only comparable within one device class (name + compute capability), so a sweep over workers of
several classes is refused unless per-class reports are asked for."""

from __future__ import annotations

import os
import re
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass

from .. import config
from ..gpu import NoGPUError, list_gpus


class MixedGPUs(ValueError):
    """The cluster's workers hold GPUs of more than one class."""


@dataclass(frozen=True)
class WorkerGPU:
    host: str
    index: int | None  # the device's index on its host (NVML order)
    uuid: str | None
    name: str | None
    compute_capability: tuple[int, int] | None
    driver: str | None = None
    worker: str | None = None  # the Dask worker's address

    @property
    def device_class(self) -> str:
        cc = "sm{}{}".format(*self.compute_capability) if self.compute_capability else "sm?"
        return f"{self.name or 'no GPU'} ({cc})"

    @property
    def slug(self) -> str:
        return re.sub(r"[^a-z0-9]+", "-", self.device_class.lower()).strip("-")

    def provenance(self) -> dict:
        """What each row records of where it ran."""
        return {"index": self.index, "uuid": self.uuid, "host": self.host, "name": self.name, "worker": self.worker}

    def to_dict(self) -> dict:
        d = asdict(self)
        d["compute_capability"] = list(self.compute_capability) if self.compute_capability else None
        return d

    @classmethod
    def from_dict(cls, d: dict) -> WorkerGPU:
        cc = d.get("compute_capability")
        return cls(
            d["host"],
            d.get("index"),
            d.get("uuid"),
            d.get("name"),
            tuple(cc) if cc else None,
            d.get("driver"),
            d.get("worker"),
        )


def pinned_device() -> str | None:
    """The first entry of CUDA_VISIBLE_DEVICES: the device a dask-cuda worker is pinned to."""
    v = os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")[0].strip()
    return v or None


def probe_this_worker() -> WorkerGPU:
    """The GPU of the worker process this runs in (run on each worker through client.run)."""
    host = socket.gethostname()
    gpus = list_gpus()
    want = pinned_device()
    g = None
    if want is not None:
        g = next((x for x in gpus if x.uuid == want or x.uuid.startswith(want) or str(x.index) == want), None)
    elif gpus:
        g = gpus[0]
    if g is None:
        return WorkerGPU(host, None, None, None, None)
    return WorkerGPU(
        host, g.index, g.uuid, g.name, tuple(g.compute_capability) if g.compute_capability else None, g.driver
    )


def _probe_as_dict(probe: Callable[[], WorkerGPU]) -> dict:
    return probe().to_dict()


def cluster_gpus(client, probe: Callable[[], WorkerGPU] = probe_this_worker) -> dict[str, WorkerGPU]:
    """{worker address: its GPU}."""
    got = client.run(_probe_as_dict, probe)
    out = {}
    for addr, d in got.items():
        d["worker"] = addr
        out[addr] = WorkerGPU.from_dict(d)
    return out


def by_class(gpus: dict[str, WorkerGPU]) -> dict[str, list[WorkerGPU]]:
    classes: dict[str, list[WorkerGPU]] = {}
    for addr in sorted(gpus):
        classes.setdefault(gpus[addr].device_class, []).append(gpus[addr])
    return classes


def check_cluster(gpus: dict[str, WorkerGPU], arch: str, per_class: bool) -> dict[str, list[WorkerGPU]]:
    """The device classes a sweep runs on; raises NoGPUError when a worker's GPU does not fit the
    architecture, MixedGPUs when there are several classes and per-class reports were not asked for."""
    want = config.ARCHES[arch]["cc"]
    missing = [g for g in gpus.values() if g.name is None]
    if missing:
        raise NoGPUError("these workers see no GPU: " + ", ".join(f"{g.worker} on {g.host}" for g in missing))
    if arch != "sm80":
        wrong = [g for g in gpus.values() if g.compute_capability is not None and tuple(g.compute_capability) != want]
        if wrong:
            raise NoGPUError(
                f"{arch} needs GPUs of compute capability {want[0]}.{want[1]} "
                f"({config.ARCHES[arch]['gpus']}); these workers hold others: "
                + ", ".join(f"{g.worker} ({g.device_class} on {g.host})" for g in wrong)
            )
    classes = by_class(gpus)
    if len(classes) > 1 and not per_class:
        raise MixedGPUs(
            "the cluster mixes GPU classes ("
            + "; ".join(f"{c}: {len(v)} workers" for c, v in classes.items())
            + "): ratios are only comparable within one class, so one sweep is refused; "
            "ask for per-class reports (--per-class-reports) or restrict the workers"
        )
    return classes
