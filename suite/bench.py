"""`bench`: build a kernel, run it over the grid (and the extended set) beside its baselines in an
isolated worker, and write bench.jsonl, bench.csv, bench.md, provenance.json and summary.json.

Everything that needs no GPU is checked first (`check_statically`): the scenario filter, the baseline
names, the rules, the build and the contract's exports. Only then the GPU, and only then is anything
written."""

from __future__ import annotations

import json
import os
import secrets
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import baselines as _baselines
from . import build as _build
from . import config, report, rules, scenarios
from .baselines import fa4_warm
from .config import HarnessConfig
from .gpu import GPUInfo, NoGPUError, require_gpu
from .harness import plausibility, sanitize
from .harness.gate import Gate
from .harness.sweep import EarlyWorker, SweepSpec, gpu_env, run_sweep, start_early
from .provenance import clocks_now, hello_provenance, host_provenance, now_utc
from .results import ScenarioResult, read_jsonl, summarize


class ResumeMismatch(RuntimeError):
    """--resume in a folder that holds another kernel's results."""


class RequestError(ValueError):
    """The request itself is wrong (a filter that matches nothing, an unknown baseline or arch)."""


@dataclass
class BenchRequest:
    kernel: Path
    arch: str = "sm90"
    baselines: list[str] = field(default_factory=lambda: ["fa3"])
    scenario_filter: str | None = None
    extended: bool = False
    grid: bool = True
    out_dir: Path | None = Path("results/bench")  # None: a fresh temporary folder, made once the checks pass
    resume: bool = False
    seed: int | None = None
    gpu_index: int = 0
    config: HarnessConfig = field(default_factory=HarnessConfig)
    kind: str = "bench"
    timed_ids: set[str] | None = None  # None: every grid scenario is timed
    previous: Path | None = None  # a previous run's folder: ratios that jump are flagged
    sanitize: bool = False  # also run compute-sanitizer on config.SANITIZE_SUBSET
    worker_command: tuple[str, ...] | None = None  # tests only: a stand-in for the worker
    # with fa4 among the baselines: compile it before the sweep measures anything (baselines/fa4_warm.py)
    warm_fa4: bool = True
    # a safetensors file of q, k and v captured from a model: its one scenario, timed on those inputs
    # (harness/distributions.py, `file:`), instead of the grid
    inputs: Path | None = None
    causal: bool | None = None  # with `inputs`: the mask (None: the file's metadata says, else not causal)
    # custom scenarios (`--shape`, scenarios.parse_shape): timed instead of the grid
    shapes: list[scenarios.Scenario] = field(default_factory=list)

    def __post_init__(self):
        if self.inputs is not None and self.config.distributions is None:  # the file's inputs, and only them
            from dataclasses import replace

            from .harness.distributions import FILE_PREFIX

            self.config = replace(self.config, distributions=(FILE_PREFIX + str(Path(self.inputs).resolve()),))


def select_scenarios(req: BenchRequest) -> list[scenarios.Scenario]:
    if req.shapes:
        if req.inputs is not None or req.scenario_filter or req.extended:
            raise RequestError("custom shapes are timed on their own: no --inputs, --scenarios or --extended with them")
        return list(dict.fromkeys(req.shapes))
    if req.inputs is not None:
        from .harness.distributions import InputsError, scenario_from_file

        try:
            return [scenario_from_file(req.inputs, req.causal)]
        except InputsError as e:
            raise RequestError(str(e)) from None
    chosen = []
    if req.grid:
        chosen += scenarios.grid(req.arch)
    if req.extended:
        chosen += scenarios.extended(req.arch)
    chosen = scenarios.select(chosen, req.scenario_filter)
    if not chosen:
        raise RequestError(f"no scenario matches {req.scenario_filter!r}")
    return chosen


@dataclass
class Checked:
    """What the checks without a GPU found: the scenarios to run and the build (None where nvcc is
    not here: the rules were checked on the source, and the build waits for the GPU's machine)."""

    scenarios: list[scenarios.Scenario]
    built: _build.BuildResult | None


def check_statically(req: BenchRequest, build: bool = True) -> Checked:
    """Everything that needs no GPU, before the GPU is looked for: the scenario filter and the
    baseline names (RequestError), the rules (DependencyRuleError), and, with `build` and where nvcc is
    here, the build and the contract's exports (BuildError)."""
    chosen = select_scenarios(req)
    unknown = [b for b in req.baselines if b not in _baselines.REGISTRY]
    if unknown:
        raise RequestError(f"unknown baseline {', '.join(unknown)}; known: {', '.join(sorted(_baselines.REGISTRY))}")
    if req.arch not in config.ARCHES:
        raise RequestError(f"unknown arch {req.arch!r}; known: {', '.join(config.ARCHES)}")
    rules.enforce(req.kernel)
    built = _build.build(req.kernel, req.arch) if build and _build.nvcc_path() else None
    return Checked(chosen, built)


class SweepOutput:
    """One output folder of a sweep: bench.jsonl and provenance.json. With --resume, the rows already
    there (of the same kernel) are kept with their seed and provenance; otherwise the folder starts
    over with `fresh` provenance. Used by this module and by the Dask path (scaleout/bench.py)."""

    def __init__(
        self, out: Path, req: BenchRequest, kernel_sha: str, chosen: list[scenarios.Scenario], fresh: Callable[[], dict]
    ):
        self.out, self.req, self.sha, self.chosen = Path(out), req, kernel_sha, chosen
        self.out.mkdir(parents=True, exist_ok=True)
        self.jsonl, self.prov_path = self.out / "bench.jsonl", self.out / "provenance.json"
        self.prior: list[ScenarioResult] = []
        if req.resume and self.jsonl.exists():
            old = json.loads(self.prov_path.read_text()) if self.prov_path.exists() else {}
            if old.get("kernel_sha256") and old["kernel_sha256"] != kernel_sha:
                raise ResumeMismatch(
                    f"{self.out} holds results of another kernel (sha256 {old['kernel_sha256'][:16]}); "
                    "use another --out or drop --resume"
                )
            ids = {s.id for s in chosen}
            self.prior = dedup([r for r in read_jsonl(self.jsonl) if r.scenario in ids])
            self.prov = old
            self.seed = int(old.get("seed", req.seed if req.seed is not None else secrets.randbits(48)))
            self.prov.setdefault("resumed", []).append(now_utc())
        else:
            for stale in (self.jsonl, self.out / "sanitize.json", self.out / "summary.json"):
                if stale.exists():
                    stale.unlink()
            self.seed = req.seed if req.seed is not None else secrets.randbits(48)
            self.prov = fresh()
            self.prov.update(
                {
                    "seed": self.seed,
                    "kernel": recorded_path(req.kernel),
                    "kernel_sha256": kernel_sha,
                    "arch": req.arch,
                    "baselines": req.baselines,
                    "sampling": config.sampling_record(req.config),
                }
            )
        self.done = {r.scenario for r in self.prior}
        self.todo = [s for s in chosen if s.id not in self.done]

    def save(self) -> None:
        self.prov_path.write_text(json.dumps(self.prov, indent=1))

    def finish(self, rows: list[ScenarioResult], extra: dict | None = None) -> dict:
        """Rows in the order of the scenarios chosen; csv, md and summary.json written."""
        order = {s.id: i for i, s in enumerate(self.chosen)}
        rows = sorted(rows, key=lambda r: order.get(r.scenario, 1 << 30))
        self.prov["date_end"] = now_utc()
        self.save()
        return write_outputs(
            self.out,
            rows,
            self.req.baselines,
            self.req.arch,
            self.req.kind,
            recorded_path(self.req.kernel),
            self.sha,
            self.prov,
            extra,
        )


def recorded_path(path: Path | str) -> str:
    """A kernel's path as provenance.json and summary.json record it: relative to the checkout when
    the kernel is in it (results ship, and the measuring machine's folders are no part of them), else
    as given."""
    try:
        return Path(path).resolve().relative_to(config.REPO_ROOT).as_posix()
    except ValueError:
        return str(path)


def _timed(req: BenchRequest, s: scenarios.Scenario) -> bool:
    """Whether the sweep times a scenario (the extended cases are checked only)."""
    return not s.extended and (req.timed_ids is None or s.id in req.timed_ids)


def _start_fa4_warm(req: BenchRequest, chosen: list[scenarios.Scenario]) -> fa4_warm.Warming | None:
    """With FA4 among the baselines: its compilations started now, on the timed scenarios (not the
    extended cases), so that they overlap our kernel's build. None where there is nothing to warm or
    no suitable GPU (run_bench then reports that after the build, as without FA4). The processes'
    output goes to a file of its own until the run's folder exists."""
    to_time = [s for s in chosen if _timed(req, s)]
    if "fa4" not in req.baselines or not req.warm_fa4 or not to_time:
        return None
    gpu = _gpu_or_none(req)
    if gpu is None:
        return None
    fd, log = tempfile.mkstemp(prefix="ks-fa4-warm-", suffix=".log")
    os.close(fd)
    sw = req.config.sweep
    return fa4_warm.start(
        to_time,
        gpu_env(req.gpu_index, gpu.uuid or None),
        jobs=sw.fa4_warm_jobs,
        timeout_s=sw.fa4_warm_timeout_s,
        log=Path(log),
    )


def _gpu_or_none(req: BenchRequest) -> GPUInfo | None:
    """The GPU, for what may start before the build; its absence is reported after the build."""
    try:
        return require_gpu(req.arch, req.gpu_index)
    except NoGPUError:
        return None


def _start_early_worker(req: BenchRequest, gate: Gate | None) -> EarlyWorker | None:
    """With the FA4 warm-up (its gate) and nvcc here: the sweep's first worker, started now so that
    its imports overlap the build (harness/sweep.py, `start_early`). It loads the kernel's library only
    once the build has passed, and is killed if it fails."""
    if gate is None or not _build.nvcc_path():
        return None
    gpu = _gpu_or_none(req)
    if gpu is None:
        return None
    return start_early(req.baselines, req.config, req.gpu_index, gpu.uuid or None, req.worker_command, gate)


def _abandon(warming: fa4_warm.Warming | None, gate: Gate | None, early: EarlyWorker | None) -> None:
    """What started before the sweep, ended when the run fails before it: nothing is left running."""
    if early is not None:
        early.stop()
    if gate is not None:
        gate.remove()
    stop_fa4_warm(warming)


def start_fa4_warm(req: BenchRequest) -> fa4_warm.Warming | None:
    """The FA4 warm-up started ahead of run_bench, for a caller with work of its own first (reproduce
    measures the GEMM ceiling meanwhile): pass the result to run_bench as `warming`, which finishes it,
    or stops it if the request fails. Raises RequestError for a filter that matches nothing."""
    return _start_fa4_warm(req, select_scenarios(req))


def stop_fa4_warm(warming: fa4_warm.Warming | None) -> None:
    """Ends a warm-up at once and drops its log (a run that fails before its sweep)."""
    if warming is not None:
        warming.stop()
        _drop(warming.log)


def _drop(path: Path | None) -> None:
    if path is not None:
        path.unlink(missing_ok=True)


def dedup(rows: list[ScenarioResult]) -> list[ScenarioResult]:
    """The first row of each scenario."""
    seen, out = set(), []
    for r in rows:
        if r.scenario not in seen:
            seen.add(r.scenario)
            out.append(r)
    return out


def run_bench(req: BenchRequest, *args, **kwargs) -> dict:
    """`run_local`'s summary (the same arguments): one GPU (req.gpu_index)."""
    return run_local(req, *args, **kwargs)[0]


def run_local(
    req: BenchRequest,
    on_row: Callable[[ScenarioResult], None] | None = None,
    on_start: Callable[[int, int], None] | None = None,
    warming: fa4_warm.Warming | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> tuple[dict, Path]:
    """One GPU (req.gpu_index). Returns summary.json's content and the output folder (req.out_dir, or
    a fresh temporary one, made once the checks have passed). Raises, before anything is written:
    RequestError for a filter that matches nothing or an unknown baseline, DependencyRuleError or
    BuildError when the kernel breaks the rules or does not build, and only then NoGPUError without
    a suitable GPU. `warming`: an FA4 warm-up already started (start_fa4_warm); otherwise one starts
    here, once the request is checked.

    With a warm-up, the sweep's worker starts while it runs and measures nothing until it has ended
    (harness/gate.py): the gate opens when `warming.finish()` returns. Where nvcc is here, that worker
    starts even before the build, so that its imports overlap it; it loads the kernel's library only
    once the build has passed, and is killed (nothing written) if it fails. `on_phase` is called with
    "build_done", "fa4_warm_done" (from another thread) and "worker_ready" (each worker's hello)."""
    run = _LocalRun(req, on_phase or (lambda _name: None))
    run.start(warming, on_start)
    new_rows = run.sweep(on_row)
    return run.finish(new_rows), run.sweep_out.out


class _LocalRun:
    """One run on one GPU, in its steps: `start` (the checks, the warm-up, the early worker, the
    build, the GPU, the output folder), `sweep`, `finish` (the sanitizer, the outputs)."""

    def __init__(self, req: BenchRequest, phase: Callable[[str], None]):
        self.req, self.phase = req, phase
        self.gate: Gate | None = None
        self.early: EarlyWorker | None = None
        self.warming: fa4_warm.Warming | None = None

    def start(self, warming: fa4_warm.Warming | None, on_start) -> None:
        req = self.req
        self.warming = warming
        try:
            chosen = check_statically(req, build=False).scenarios
            if self.warming is None:
                self.warming = _start_fa4_warm(req, chosen)  # FA4 compiles while our kernel builds
            self.gate = Gate(req.config.sweep.fa4_warm_gate_timeout_s) if self.warming is not None else None
            self.early = _start_early_worker(req, self.gate)  # and the worker imports meanwhile
            built = _build.build(req.kernel, req.arch) if _build.nvcc_path() else None
            self.gpu = require_gpu(req.arch, req.gpu_index)
            self.built = built or _build.build(req.kernel, req.arch)
            self.phase("build_done")
            out = Path(req.out_dir) if req.out_dir is not None else Path(tempfile.mkdtemp(prefix=f"ks-{req.kind}-"))
            self.sweep_out = SweepOutput(out, req, self.built.source_sha256, chosen, self._fresh_provenance)
            self.sweep_out.save()
            if on_start:
                on_start(len(chosen), len(chosen) - len(self.sweep_out.todo))
            self.previous = plausibility.load_previous(req.previous)
        except BaseException:  # nothing that started ahead of the sweep is left running
            _abandon(self.warming, self.gate, self.early)
            raise

    def _fresh_provenance(self) -> dict:
        return _fresh_provenance(self.req, self.built)

    def sweep(self, on_row) -> list[ScenarioResult]:
        req, sweep, gate, warming = self.req, self.sweep_out, self.gate, self.warming
        out, prov = sweep.out, sweep.prov
        lock = threading.Lock()  # prov is also written by the thread that finishes the warm-up

        def on_hello(h: dict):
            self.phase("worker_ready")
            with lock:
                _record_hello(prov, h, req.config.plausibility.ceiling_factor)
                sweep.save()

        def annotate(row: ScenarioResult):
            plausibility.annotate(row, prov.get("gemm_tflops"), self.previous, req.config.plausibility)

        spec = SweepSpec(
            library=self.built.library,
            scenarios=sweep.todo,
            baselines=req.baselines,
            seed=sweep.seed,
            timed=lambda s: _timed(req, s),
            config=req.config,
            gpu_index=req.gpu_index,
            worker_log=out / "worker.log",
            gpu_uuid=self.gpu.uuid or None,
            worker_command=req.worker_command,
            gate=gate,
            early=self.early,
        )
        finisher = None
        if warming is not None and gate is not None:
            args = (warming, gate, prov, lock, sweep, out, self.phase)
            finisher = threading.Thread(target=_finish_warm, args=args, name="fa4-warm", daemon=True)
            finisher.start()
        try:
            if not sweep.todo:
                return []
            return run_sweep(spec, sweep.jsonl, on_row=on_row, on_hello=on_hello, annotate=annotate)
        except BaseException:
            if warming is not None:  # the run is cut short: its processes go, and `finish` returns
                warming.kill()
            raise
        finally:
            if finisher is not None:
                finisher.join()
            if gate is not None:
                gate.remove()
            if self.early is not None:
                self.early.stop()

    def finish(self, new_rows: list[ScenarioResult]) -> dict:
        req, sweep = self.req, self.sweep_out
        extra = {}
        if req.sanitize:
            runs = sanitize.run_sanitizer(
                self.built.library,
                config.SANITIZE_SUBSET,
                sweep.seed,
                self.gpu.uuid or None,
                config.SANITIZER_TIMEOUT_S,
                sweep.out / "sanitize",
            )
            extra["sanitize"] = sanitize.summary_entry(runs)
            (sweep.out / "sanitize.json").write_text(json.dumps(extra["sanitize"], indent=1))
        sweep.prov["clocks_end"] = clocks_now(req.gpu_index)
        return sweep.finish(sweep.prior + new_rows, extra)


def _fresh_provenance(req: BenchRequest, built: _build.BuildResult) -> dict:
    return {
        **host_provenance(req.gpu_index),
        "build": {
            "nvcc": built.nvcc_version,
            "flags": built.flags,
            "functions": [f.__dict__ for f in built.functions],
        },
    }


def _record_hello(prov: dict, h: dict, ceiling_factor: float) -> None:
    """What a worker's hello says about the GPU and the software, in the run's provenance; the gate's
    record (how long the worker waited for the FA4 warm-up) only where there was a gate."""
    prov.update(hello_provenance(h, ceiling_factor))
    if h.get("gate") is not None:  # a worker started after another's hello has none: the first one's stays
        prov["worker_gate"] = h["gate"]


def _finish_warm(
    warming: fa4_warm.Warming,
    gate: Gate,
    prov: dict,
    lock: threading.Lock,
    sweep: SweepOutput,
    out: Path,
    phase: Callable[[str], None],
) -> None:
    """In a thread of its own, beside the sweep: waits for the warm-up, opens the gate at once, then
    keeps the warm-up's record and its processes' output with the run. A failure here only means the
    worker compiles what is missing, as without the warm-up."""
    try:
        record = warming.finish().to_dict()
    except Exception as e:
        record = {"error": f"{type(e).__name__}: {e}"[:500]}
    finally:
        gate.open()
    phase("fa4_warm_done")
    with lock:
        prov["fa4_warm"] = record
        if warming.log is not None:  # the processes' own output, kept with the run
            with open(out / "fa4-warm.log", "a") as log:
                log.write(warming.log.read_text(errors="replace"))
            _drop(warming.log)
        sweep.save()


def write_outputs(
    out: Path,
    rows: list[ScenarioResult],
    baselines: list[str],
    arch: str,
    kind: str,
    kernel_path: str,
    kernel_sha: str,
    prov: dict,
    extra: dict | None = None,
) -> dict:
    summary = summarize(rows, kind, arch, {"path": kernel_path, "sha256": kernel_sha}, prov, baselines)
    summary.update(extra or {})
    (out / "summary.json").write_text(json.dumps(summary, indent=1))
    report.write_csv(out / "bench.csv", rows, baselines)
    (out / "bench.md").write_text(report.markdown(rows, baselines, summary))
    return summary


def rerender(out: Path) -> dict:
    """Re-render csv/md/summary from a folder's bench.jsonl and provenance.json (no GPU needed)."""
    out = Path(out)
    rows = read_jsonl(out / "bench.jsonl")
    if not rows:
        raise FileNotFoundError(f"no rows in {out / 'bench.jsonl'}")
    prov = json.loads((out / "provenance.json").read_text())
    old = json.loads((out / "summary.json").read_text()) if (out / "summary.json").exists() else {}
    baselines = prov.get("baselines") or sorted({b for r in rows for b in r.ratio})
    extra = {"sanitize": old["sanitize"]} if "sanitize" in old else None
    return write_outputs(
        out,
        rows,
        baselines,
        prov.get("arch", "sm90"),
        old.get("kind", "bench"),
        prov.get("kernel", ""),
        prov.get("kernel_sha256", ""),
        prov,
        extra,
    )
