"""`bench`: build a kernel, run it over the grid (and the extended set) beside its baselines in an
isolated worker, and write bench.jsonl, bench.csv, bench.md, provenance.json and summary.json."""
from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from . import build as _build
from . import config, report, scenarios
from .config import HarnessConfig
from .gpu import require_gpu
from .harness import plausibility, sanitize
from .harness.sweep import SweepSpec, run_sweep
from .provenance import clocks_now, host_provenance, now_utc
from .results import ScenarioResult, read_jsonl, summarize

if TYPE_CHECKING:
    from .scaleout.bench import ScaleOut


class ResumeMismatch(RuntimeError):
    pass


@dataclass
class BenchRequest:
    kernel: Path
    arch: str = "sm90"
    baselines: list[str] = field(default_factory=lambda: ["fa3"])
    scenario_filter: str | None = None
    extended: bool = False
    grid: bool = True
    out_dir: Path = Path("results/bench")
    resume: bool = False
    seed: int | None = None
    gpu_index: int = 0
    config: HarnessConfig = field(default_factory=HarnessConfig)
    kind: str = "bench"
    timed_ids: set[str] | None = None   # None: every grid scenario is timed
    previous: Path | None = None        # a previous run's folder: ratios that jump are flagged
    sanitize: bool = False              # also run compute-sanitizer on config.SANITIZE_SUBSET
    worker_command: tuple[str, ...] | None = None   # tests only: a stand-in for the worker
    scaleout: "ScaleOut | None" = None   # a Dask cluster (scaleout.bench); None: this one GPU


def select_scenarios(req: BenchRequest) -> list[scenarios.Scenario]:
    chosen = []
    if req.grid:
        chosen += scenarios.grid(req.arch)
    if req.extended:
        chosen += scenarios.extended(req.arch)
    chosen = scenarios.select(chosen, req.scenario_filter)
    if not chosen:
        raise ValueError(f"no scenario matches {req.scenario_filter!r}")
    return chosen


def run_bench(req: BenchRequest, on_row: Callable[[ScenarioResult], None] | None = None,
              on_start: Callable[[int, int], None] | None = None) -> dict:
    """Returns summary.json's content. Raises NoGPUError without a suitable GPU, BuildError when the
    kernel does not build."""
    if req.scaleout is not None:
        from .scaleout.bench import run_bench_distributed
        return run_bench_distributed(req, on_row=on_row, on_start=on_start)
    gpu = require_gpu(req.arch, req.gpu_index)
    built = _build.build(req.kernel, req.arch)
    out = Path(req.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    jsonl = out / "bench.jsonl"
    prov_path = out / "provenance.json"
    chosen = select_scenarios(req)

    prior: list[ScenarioResult] = []
    prov: dict
    if req.resume and jsonl.exists():
        old = json.loads(prov_path.read_text()) if prov_path.exists() else {}
        if old.get("kernel_sha256") and old["kernel_sha256"] != built.source_sha256:
            raise ResumeMismatch(f"{out} holds results of another kernel (sha256 {old['kernel_sha256'][:16]}); "
                                 "use another --out or drop --resume")
        chosen_ids = {s.id for s in chosen}
        prior = [r for r in read_jsonl(jsonl) if r.scenario in chosen_ids]
        prov = old or {}
        seed = int(prov.get("seed", req.seed if req.seed is not None else secrets.randbits(48)))
        prov.setdefault("resumed", []).append(now_utc())
    else:
        for stale in (jsonl, out / "sanitize.json", out / "summary.json"):
            if stale.exists():
                stale.unlink()
        seed = req.seed if req.seed is not None else secrets.randbits(48)
        prov = host_provenance(req.gpu_index)
        prov.update({"seed": seed, "kernel": str(req.kernel), "kernel_sha256": built.source_sha256,
                     "arch": req.arch, "baselines": req.baselines, "build": {
                         "nvcc": built.nvcc_version, "flags": built.flags,
                         "functions": [f.__dict__ for f in built.functions]}})
    prov_path.write_text(json.dumps(prov, indent=1))
    done = {r.scenario for r in prior}
    todo = [s for s in chosen if s.id not in done]
    if on_start:
        on_start(len(chosen), len(chosen) - len(todo))

    def on_hello(h: dict):
        prov.update({"device": h.get("device"), "sms": h.get("sms"), "torch": h.get("torch"),
                     "cuda": h.get("cuda"), "cudnn": h.get("cudnn"), "gemm_tflops": h.get("gemm_tflops"),
                     "baseline_status": h.get("baselines"), "baseline_versions": h.get("baseline_versions")})
        prov_path.write_text(json.dumps(prov, indent=1))

    previous = plausibility.load_previous(req.previous)

    def annotate(row: ScenarioResult):
        plausibility.annotate(row, prov.get("gemm_tflops"), previous, req.config.plausibility)

    timed = (lambda s: not s.extended and (req.timed_ids is None or s.id in req.timed_ids))
    spec = SweepSpec(library=built.library, scenarios=todo, baselines=req.baselines, seed=seed, timed=timed,
                     config=req.config, gpu_index=req.gpu_index, worker_log=out / "worker.log",
                     gpu_uuid=gpu.uuid or None, worker_command=req.worker_command)
    new_rows = run_sweep(spec, jsonl, on_row=on_row, on_hello=on_hello, annotate=annotate) if todo else []
    rows = prior + new_rows
    extra = {}
    if req.sanitize:
        runs = sanitize.run_sanitizer(built.library, config.SANITIZE_SUBSET, seed, gpu.uuid or None,
                                      config.SANITIZER_TIMEOUT_S, out / "sanitize")
        extra["sanitize"] = sanitize.summary_entry(runs)
        (out / "sanitize.json").write_text(json.dumps(extra["sanitize"], indent=1))
    order = {s.id: i for i, s in enumerate(chosen)}
    rows.sort(key=lambda r: order.get(r.scenario, 1 << 30))
    prov["clocks_end"] = clocks_now(req.gpu_index)
    prov["date_end"] = now_utc()
    prov_path.write_text(json.dumps(prov, indent=1))
    return write_outputs(out, rows, req.baselines, req.arch, req.kind, str(req.kernel), built.source_sha256, prov,
                         extra)


def write_outputs(out: Path, rows: list[ScenarioResult], baselines: list[str], arch: str, kind: str,
                  kernel_path: str, kernel_sha: str, prov: dict, extra: dict | None = None) -> dict:
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
    return write_outputs(out, rows, baselines, prov.get("arch", "sm90"), old.get("kind", "bench"),
                         prov.get("kernel", ""), prov.get("kernel_sha256", ""), prov, extra)
