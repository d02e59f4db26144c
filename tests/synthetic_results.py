"""Synthetic results folders for the tests of the report, verify and reproduce: made-up numbers in
the real file formats (bench.jsonl, summary.json, provenance.json, reproduce.json,
gemm_ceiling.json). Nothing here is a measurement."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from kernelseek_suite import scenarios
from kernelseek_suite.results import ScenarioResult, summarize

BASELINES = ["fa3", "fa4", "cudnn"]

# Per input distribution (opt-in, `make_rows(by_distribution=True)`): the baselines take nearly the
# same time on any data (their factors below, the noise of a measurement; cudnn's is the widest, so
# the data-dependence threshold is its spread, 1.002 / 0.99), the kernel too, except on SLOW: there it
# takes 1.25x as long on `rising`, which makes that row data-dependent and `rising` fa3's worst
# distribution; cudnn's worst is `wide`, where it is 1% faster.
DISTRIBUTIONS = ["standard", "wide", "llm", "rising"]
BASELINE_FACTOR = {
    "fa3": {"standard": 1.0, "wide": 1.001, "llm": 0.999, "rising": 1.0},
    "fa4": {"standard": 1.0, "wide": 1.0, "llm": 1.001, "rising": 0.999},
    "cudnn": {"standard": 1.0, "wide": 0.99, "llm": 1.0, "rising": 1.002},
}
KERNEL_FACTOR = {"standard": 1.0, "wide": 1.002, "llm": 0.999, "rising": 1.003}
SLOW = {"d128-h16kv16-s2048-causal": ("rising", 1.25)}


def _timing(ms: float, spread: float, reps: int = 9) -> dict:
    return {"median_ms": ms, "min_ms": ms, "max_ms": ms, "iqr_ms": ms * spread, "reps": reps}


def _tflops(s: scenarios.Scenario, ms: float) -> float:
    return round(s.flops / (ms * 1e-3) / 1e12, 2)


def _by_distribution(r: ScenarioResult, s: scenarios.Scenario, spread: float, slow: dict) -> None:
    """Give a row filled for one distribution its fields per distribution (the kernel's and each
    baseline's time on each, the ratios, a check each), its ratio the lowest of them and its times
    pooled over all of them."""
    k_ms = r.times_ms["kernel"]["median_ms"]
    for d in DISTRIBUTIONS:
        dist_slow = slow.get(r.scenario, (None, 1.0))
        kd = k_ms * KERNEL_FACTOR[d] * (dist_slow[1] if dist_slow[0] == d else 1.0)
        times = {"kernel": _timing(kd, spread)}
        ratios = {}
        for b in r.ratio:
            bd = r.times_ms[b]["median_ms"] * BASELINE_FACTOR.get(b, {}).get(d, 1.0)
            times[b] = _timing(bd, spread)
            ratios[b] = round(bd / kd, 4)
        r.times_ms_by_distribution[d] = times
        r.tflops_by_distribution[d] = {impl: _tflops(s, t["median_ms"]) for impl, t in times.items()}
        r.ratio_by_distribution[d] = ratios
        r.checks_by_distribution[d] = dict(r.check or {})
    for impl in list(r.times_ms):
        meds = sorted(t[impl]["median_ms"] for t in r.times_ms_by_distribution.values())
        pooled = (meds[1] + meds[2]) / 2
        r.times_ms[impl] = {**_timing(pooled, spread, 9 * len(meds)), "min_ms": meds[0], "max_ms": meds[-1]}
        r.tflops[impl] = _tflops(s, pooled)
    r.ratio = {b: min(rs[b] for rs in r.ratio_by_distribution.values()) for b in r.ratio}


def default_ratio(s: scenarios.Scenario, baseline: str) -> float:
    return {"fa3": 0.9, "fa4": 0.95, "cudnn": 1.1}[baseline] + (0.05 if s.causal else 0.0)


def make_rows(
    ratio: Callable[[scenarios.Scenario, str], float | None] = default_ratio,
    kernel_tflops: Callable[[scenarios.Scenario], float] = lambda s: 400.0 + s.seqlen_q / 100,
    wrong: set[str] = frozenset(),
    spread: float = 0.01,
    extended: bool = True,
    baselines: list[str] = BASELINES,
    by_distribution: bool = False,
    slow: dict[str, tuple[str, float]] = SLOW,
) -> list[ScenarioResult]:
    """One row per grid scenario (and 30 of the extended set); with `by_distribution`, timed on each
    of DISTRIBUTIONS as a schema-3 run is, `ratio` and `kernel_tflops` being the standard one's."""
    rows = []
    for s in scenarios.grid("sm90"):
        k_tf = kernel_tflops(s)
        k_ms = s.flops / (k_tf * 1e12) * 1e3
        r = ScenarioResult.for_scenario(
            s,
            status="wrong" if s.id in wrong else "ok",
            reason="max err too large" if s.id in wrong else "",
            check={"max_err": 1e-3, "tol": 4e-3},
            seed=7,
        )
        r.times_ms["kernel"] = _timing(k_ms, spread)
        r.tflops["kernel"] = round(k_tf, 2)
        for b in baselines:
            q = ratio(s, b)
            if q is None:
                r.baselines[b] = "unsupported (synthetic)"
                continue
            b_ms = k_ms * q
            r.times_ms[b] = _timing(b_ms, spread)
            r.tflops[b] = _tflops(s, b_ms)
            r.ratio[b] = round(q, 4)
            r.baselines[b] = "ok"
        if by_distribution:
            _by_distribution(r, s, spread, slow)
        rows.append(r)
    if extended:
        for s in scenarios.extended("sm90")[:30]:
            rows.append(
                ScenarioResult.for_scenario(
                    s,
                    status="wrong" if s.id in wrong else "ok",
                    seed=7,
                )
            )
    return rows


def write_results(
    root: Path,
    rows: list[ScenarioResult] | None = None,
    arch: str = "sm90",
    ceiling: float | None = 700.0,
    run: str = "flash_fwd_sm90",
    baselines: list[str] = BASELINES,
) -> Path:
    """A results/<arch> folder as `reproduce` leaves it (before rendering)."""
    rows = make_rows(baselines=baselines) if rows is None else rows
    run_dir = Path(root) / run
    run_dir.mkdir(parents=True, exist_ok=True)
    with open(run_dir / "bench.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r.to_dict()) + "\n")
    prov = {
        "date": "2026-12-01T00:00:00+00:00",
        "date_end": "2026-12-01T01:00:00+00:00",
        "git_sha": "abc123",
        "gpu_name": "Synthetic GPU",
        "driver": "580.0",
        "compute_capability": [9, 0],
        "sms": 132,
        "torch": "2.11.0",
        "cuda": "13.0",
        "cudnn": 91900,
        "nvcc": "13.0.88",
        "seed": 7,
        "arch": arch,
        "kernel": f"kernels/hopper/{run}.cu",
        "kernel_sha256": "0" * 64,
        "baselines": baselines,
        "baseline_versions": {b: f"{b}==1" for b in baselines},
    }
    (run_dir / "provenance.json").write_text(json.dumps(prov))
    summary = summarize(rows, "bench", arch, {"path": prov["kernel"], "sha256": prov["kernel_sha256"]}, prov, baselines)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    (Path(root) / "reproduce.json").write_text(
        json.dumps({"arch": arch, "run": run, "runtime": "native", "status": "measured", "wall_s": 3725})
    )
    if ceiling:
        (Path(root) / "gemm_ceiling.json").write_text(
            json.dumps(
                {"tflops": ceiling, "n": 8192, "reps": 30, "before_tflops": ceiling, "after_tflops": ceiling - 5}
            )
        )
    return Path(root)


def stand_in_bench_outputs(req) -> dict:
    """What a finished `run_bench` leaves in `req.out_dir` (synthetic rows, a short provenance), and
    the summary it returns: for tests that stand in for the sweep."""
    from kernelseek_suite import bench

    out = Path(req.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rows = make_rows()
    (out / "bench.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    prov = {"gpu_name": "NVIDIA H200", "arch": req.arch, "baselines": req.baselines}
    (out / "provenance.json").write_text(json.dumps(prov))
    return bench.write_outputs(out, rows, req.baselines, req.arch, "bench", str(req.kernel), "f" * 64, prov)


def as_run_local(fake):
    """A stand-in for `bench.run_bench(req, on_row, on_start, warming, on_phase) -> summary` made
    into one for `bench.run_local`, the local executor's sweep, which also returns the output folder."""

    def run_local(req, on_row=None, on_start=None, warming=None, on_phase=None):
        return fake(req, on_row=on_row, on_start=on_start, warming=warming, on_phase=on_phase), Path(req.out_dir)

    return run_local
