"""`bench` on a Dask cluster, the client's side: the scenarios are sharded over the GPUs.

Each worker builds the kernel once and runs its shards beside the baselines on its own GPU
(shard.py), so every ratio is still measured side by side on one device. Rows come back one at a
time and are appended to the same bench.jsonl as a single-GPU run, each with the GPU it ran on
(index, UUID, host); the csv/md/summary/provenance are written as by `run_bench`. A worker that dies
loses only the scenario it was running: Dask runs its shard again elsewhere, without the rows
already recorded. An interrupted run continues with --resume."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from ..bench import BenchRequest, RequestError, SweepOutput, check_statically
from ..provenance import hello_provenance, host_provenance
from ..results import STATUS_CRASH, ScenarioResult
from ..run import Hooks, Ran
from ..scenarios import Scenario
from .cluster import ClusterSpec, open_client
from .executor import Channel, ItemFailure, WorkItem, run_items
from .gpus import WorkerGPU, check_cluster, cluster_gpus, probe_this_worker
from .shard import GPUProbe, ShardJob, ShardRunner, run_sanitize, run_shard


@dataclass
class ScaleOut:
    """How `bench` spreads over a cluster."""

    cluster: ClusterSpec = field(default_factory=ClusterSpec)
    per_class_reports: bool = False  # mixed GPU classes: one report per class under --out
    chunk: int | None = None  # scenarios per work item (default: about four items per worker)


class Dask:
    """The executor (run.Executor) that shards a run's scenarios over a Dask cluster's GPUs; the
    workers build the kernel, so nothing starts ahead of the sweep here but the caller's own work."""

    kind = "dask"

    def __init__(self, scaleout: ScaleOut):
        from ..bench import ResumeMismatch
        from .cluster import ClusterError

        self.scaleout = scaleout
        self.usage_errors: tuple[type[Exception], ...] = (RequestError, ResumeMismatch, ClusterError)

    def run(self, req: BenchRequest, hooks: Hooks) -> Ran:
        if hooks.before_sweep is not None:
            hooks.before_sweep()
        summary = run_bench_distributed(req, hooks.on_row, hooks.on_start, scaleout=self.scaleout)
        return Ran(summary, Path(req.out_dir or "."))


def plan_shards(scenarios: list[Scenario], workers: int, chunk: int | None = None) -> list[list[Scenario]]:
    """Consecutive slices of the scenario list, about four per worker unless `chunk` says: small
    enough to balance the tail, large enough that a worker's sweep process is started rarely."""
    if not scenarios:
        return []
    size = chunk or max(1, math.ceil(len(scenarios) / (4 * max(1, workers))))
    return [scenarios[i : i + size] for i in range(0, len(scenarios), size)]


class _Sweep(SweepOutput):
    """One output folder (one device class): its rows, provenance and files."""

    def __init__(
        self, out: Path, req: BenchRequest, sha: str, chosen: list[Scenario], gpus: list[WorkerGPU], executor: dict
    ):
        super().__init__(out, req, sha, chosen, lambda: _client_provenance(gpus))
        self.gpus = gpus
        self.prov["executor"] = executor
        known = {d.get("uuid") or d.get("worker") for d in self.prov.get("devices", [])}
        self.prov.setdefault("devices", []).extend(g.to_dict() for g in gpus if (g.uuid or g.worker) not in known)
        self.rows: list[ScenarioResult] = list(self.prior)
        self.extra: dict = {}
        self.save()

    def record(self, row: ScenarioResult) -> bool:
        if row.scenario in self.done:
            return False
        self.done.add(row.scenario)
        self.rows.append(row)
        with open(self.jsonl, "a") as f:
            f.write(json.dumps(row.to_dict()) + "\n")
        return True

    def shard_done(self, res: dict) -> None:
        dev = self._device(res.get("gpu") or {})
        if dev is None:
            return
        if res.get("clocks"):
            dev.setdefault("clocks_start", res["clocks"]["start"])
            dev["clocks_end"] = res["clocks"]["end"]
        h = res.get("hello") or {}
        if h:
            dev["software"] = {
                k: h.get(k)
                for k in ("device", "sms", "torch", "cuda", "cudnn", "gemm_tflops", "baselines", "baseline_versions")
            }
            if not self.prov.get("device"):
                got = hello_provenance(h, self.req.config.plausibility.ceiling_factor)
                self.prov.update({k: v for k, v in got.items() if v is not None})
        if res.get("build") and "build" not in self.prov:
            self.prov["build"] = res["build"]
        self.save()

    def _device(self, where: dict) -> dict | None:
        for d in self.prov.get("devices", []):
            if (where.get("uuid") and d.get("uuid") == where.get("uuid")) or d.get("worker") == where.get("worker"):
                return d
        return None

    def sanitized(self, entry: dict) -> None:
        self.extra["sanitize"] = entry
        (self.out / "sanitize.json").write_text(json.dumps(entry, indent=1))

    def finish_all(self) -> dict:
        return self.finish(self.rows, self.extra)


def _client_provenance(gpus: list[WorkerGPU]) -> dict:
    """The client's machine and versions, with the GPU fields describing the workers' device class."""
    prov = host_provenance(0)
    g = gpus[0]
    prov.update(
        {
            "gpu_name": g.name,
            "gpu_uuid": None,
            "gpu_index": None,
            "driver": g.driver,
            "compute_capability": list(g.compute_capability) if g.compute_capability else None,
            "clocks_start": None,
            "client_host": prov.get("host"),
            "hosts": sorted({x.host for x in gpus}),
        }
    )
    return prov


@contextmanager
def _connected(spec: ClusterSpec, client) -> Iterator:
    if client is not None:
        yield client
    else:
        with open_client(spec) as c:
            yield c


def run_bench_distributed(
    req: BenchRequest,
    on_row: Callable[[ScenarioResult], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    *,
    scaleout: ScaleOut | None = None,
    client=None,
    runner: ShardRunner | None = None,
    probe: GPUProbe | None = None,
) -> dict:
    """`bench.run_bench` on a cluster. Returns summary.json's content; with per-class reports,
    {"per_class": {class: summary}} with one folder per class under req.out_dir. `client` uses an
    existing distributed.Client instead of opening scaleout.cluster; `runner` and `probe` replace the
    GPU parts on the workers (tests)."""
    from ..harness import plausibility

    so = scaleout or ScaleOut()
    # here, before any cluster: the filter, the baselines and the rules (the workers build the file)
    chosen = check_statically(req, build=False).scenarios
    if req.out_dir is None:
        raise RequestError("a sharded bench needs an output folder")
    source = Path(req.kernel).read_bytes()
    with _connected(so.cluster, client) as cl:
        gpus = cluster_gpus(cl, probe or probe_this_worker)
        classes = check_cluster(gpus, req.arch, so.per_class_reports)
        executor = {
            "kind": "dask",
            "cluster": so.cluster.describe() if client is None else {"kind": "client"},
            "scheduler": cl.scheduler.address,
            "workers": len(gpus),
        }
        plan = _Plan(req, so, source, runner, probe)
        for cls_name, members in classes.items():
            plan.add_class(cls_name, members, chosen, executor, several=len(classes) > 1)
        if on_start:
            sweeps = plan.sweeps.values()
            on_start(sum(len(s.chosen) for s in sweeps), sum(len(s.prior) for s in sweeps))
        calls = _Callbacks(plan.sweeps, req, on_row, plausibility.load_previous(req.previous))
        run_items(
            cl, plan.items, _run_payload, on_emit=calls.on_emit, on_result=calls.on_result, on_failure=calls.on_failure
        )
    summaries = {name: sw.finish_all() for name, sw in plan.sweeps.items()}
    if so.per_class_reports:
        return {"per_class": summaries}
    return next(iter(summaries.values()))


class _Plan:
    """The work of a sharded bench: one output folder (a _Sweep) per class of GPU, and its work items,
    shards of the scenarios still to do (and a sanitizer run)."""

    def __init__(self, req: BenchRequest, so: ScaleOut, source: bytes, runner, probe):
        self.req, self.so, self.source, self.runner, self.probe = req, so, source, runner, probe
        self.sha = hashlib.sha256(source).hexdigest()
        self.sweeps: dict[str, _Sweep] = {}
        self.items: list[WorkItem] = []

    def job(self, sw: _Sweep, cls_name: str, shard: list[Scenario], baselines: list[str]) -> ShardJob:
        req = self.req
        timed = [s.id for s in shard if not s.extended and (req.timed_ids is None or s.id in req.timed_ids)]
        return ShardJob(
            Path(req.kernel).name,
            self.source,
            self.sha,
            req.arch,
            baselines,
            sw.seed,
            [s.to_dict() for s in shard],
            timed,
            req.config,
            self.runner,
            self.probe,
            req.worker_command,
            cls_name,
        )

    def add_class(self, cls_name: str, members: list, chosen: list[Scenario], executor: dict, several: bool):
        req, so = self.req, self.so
        assert req.out_dir is not None  # run_bench_distributed refuses a request without one
        out = Path(req.out_dir) / members[0].slug if so.per_class_reports else Path(req.out_dir)
        sw = _Sweep(out, req, self.sha, chosen, members, {**executor, "workers": len(members), "chunk": so.chunk})
        self.sweeps[cls_name] = sw
        # one class: any worker (a restarted one too); several: only that class's workers
        pool = tuple(g.worker for g in members) if several else None
        for i, shard in enumerate(plan_shards(sw.todo, len(members), so.chunk)):
            job = self.job(sw, cls_name, shard, list(req.baselines))
            self.items.append(WorkItem(f"{members[0].slug}/{i:04d}", (cls_name, job, "shard"), pool))
        if req.sanitize:
            job = self.job(sw, cls_name, [], [])
            self.items.append(WorkItem(f"{members[0].slug}/sanitize", (cls_name, job, "sanitize"), pool))


class _Callbacks:
    """What the executor's callbacks do with a shard's rows, results and failures."""

    def __init__(self, sweeps: dict[str, _Sweep], req: BenchRequest, on_row, previous):
        self.sweeps, self.req, self.on_row, self.previous = sweeps, req, on_row, previous

    def _record(self, sw: _Sweep, row: ScenarioResult) -> None:
        if sw.record(row) and self.on_row:
            self.on_row(row)

    def on_emit(self, item: WorkItem, mark: str, data: dict) -> None:
        from ..harness import plausibility

        cfg = self.req.config.plausibility
        self._record(
            self.sweeps[item.payload[0]],
            plausibility.annotate(ScenarioResult.from_dict(data), None, self.previous, cfg),
        )

    def on_result(self, item: WorkItem, res: dict) -> None:
        if item.payload[2] == "sanitize":
            self.sweeps[item.payload[0]].sanitized(res)
        else:
            self.sweeps[item.payload[0]].shard_done(res)

    def on_failure(self, item: WorkItem, failure: ItemFailure) -> list[WorkItem]:
        if not failure.worker_died:  # a build error, a bug: the run stops (and can be resumed)
            raise failure.exception
        if item.payload[2] == "sanitize":
            self.sweeps[item.payload[0]].sanitized({"ok": False, "runs": [], "error": failure.error})
            return []
        # Dask gave up on the shard: its workers kept dying. A shard runs in order, so the first
        # scenario not recorded is the one they died on; the rest go on as a new shard.
        sw, job = self.sweeps[item.payload[0]], item.payload[1]
        left = [d for d in job.scenarios if d["id"] not in sw.done]
        if not left:
            return []
        why = f"the Dask worker died while running it, {failure.error.split(':')[0]} ({failure.error[-300:]})"
        self._record(sw, _failed(Scenario(**left[0]), sw.seed, why))
        if len(left) == 1:
            return []
        rest = [d for d in left[1:]]
        again = dataclasses.replace(
            job, scenarios=rest, timed_ids=[t for t in job.timed_ids if t in {d["id"] for d in rest}]
        )
        return [WorkItem(f"{item.key}+{left[1]['id']}", (item.payload[0], again, "shard"), item.workers)]


def _run_payload(payload: tuple[str, ShardJob, str], channel: Channel) -> dict:
    return (run_sanitize if payload[2] == "sanitize" else run_shard)(payload[1], channel)


def _failed(s: Scenario, seed: int, reason: str) -> ScenarioResult:
    return ScenarioResult.for_scenario(s, STATUS_CRASH, reason=reason, seed=seed)
