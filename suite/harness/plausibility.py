"""Plausibility alarms: a timing too good to be true is flagged in the row's `flags` (and in
summary.json's `flagged`), for a person to look at. An alarm does not change a row's status: it is
the net under the defences, for tricks nobody has thought of yet.

- roofline: the kernel's TFLOP/s exceeds `roofline_factor` x the bf16 GEMM throughput the worker
  measured on this GPU at start (attention does the same matrix products plus a softmax; FA3 has
  been seen a little above the measured GEMM figure, hence the margin);
- jump: a ratio is more than `jump_factor` x the same scenario's ratio in a previous run.
"""
from __future__ import annotations

from pathlib import Path

from ..config import PlausibilityConfig
from ..results import ScenarioResult, read_jsonl


def roofline_flag(tflops: float | None, gemm_tflops: float | None, factor: float) -> str | None:
    if not tflops or not gemm_tflops or gemm_tflops <= 0:
        return None
    if tflops > factor * gemm_tflops:
        return (f"roofline: kernel {tflops:.1f} TFLOP/s is above {factor:g} x the bf16 GEMM ceiling measured "
                f"on this GPU ({gemm_tflops:.1f} TFLOP/s)")
    return None


def jump_flags(ratios: dict[str, float], previous: dict[str, float], factor: float) -> list[str]:
    out = []
    for b, r in sorted(ratios.items()):
        old = previous.get(b)
        if r and old and old > 0 and r > factor * old:
            out.append(f"jump: ratio vs {b} {r:.3f} is {r / old:.2f}x the previous run's {old:.3f} "
                       f"(alarm above {factor:g}x)")
    return out


def load_previous(path: Path | None) -> dict[str, dict[str, float]]:
    """{scenario: {baseline: ratio}} from a previous run's folder (or its bench.jsonl); correct rows only."""
    if path is None:
        return {}
    p = Path(path)
    if p.is_dir():
        p = p / "bench.jsonl"
    return {r.scenario: dict(r.ratio) for r in read_jsonl(p) if r.correct and r.ratio}


def annotate(row: ScenarioResult, gemm_tflops: float | None, previous: dict[str, dict[str, float]],
             cfg: PlausibilityConfig = PlausibilityConfig()) -> ScenarioResult:
    """Add the alarms that apply to `row.flags` (in place; returns the row)."""
    flags = []
    f = roofline_flag(row.tflops.get("kernel"), gemm_tflops, cfg.roofline_factor)
    if f:
        flags.append(f)
    flags += jump_flags(row.ratio, previous.get(row.scenario, {}), cfg.jump_factor)
    for f in flags:
        if f not in row.flags:
            row.flags.append(f)
    return row
