"""Timings too good to be true.

- **implausible** (a status): the kernel's TFLOP/s is above `ceiling_factor` x the bf16 GEMM
  throughput the worker measured on this GPU at start. Attention does the work of two matrix
  products and a softmax on the same tensor cores, so it cannot run faster than a GEMM; the timing
  (or what was timed) is wrong. The row is not correct: it is left out of the geometric means,
  counted in summary.json's `failures`, and makes `bench`/`eval` exit 1.
  The margin (1.10): the Hopper kernel with its softmax taken out -- two GEMMs and nothing else --
  reached 790-825 TFLOP/s against 789 TFLOP/s for torch's 8192^3 GEMM on the same H200
  (kernels/hopper/NOTES.md, 2026-12-03): up to 1.046x, since that GEMM is not the chip's peak. A
  correct attention kernel stays below its own softmax-free variant, so 1.10 leaves about twice
  the largest excess seen for clock and measurement spread.
- **jump** (a flag, for a person to look at; the row keeps its status): a ratio is more than
  `jump_factor` x the same scenario's ratio in a previous run.
"""

from __future__ import annotations

from pathlib import Path

from ..config import PlausibilityConfig
from ..results import STATUS_IMPLAUSIBLE, STATUS_OK, ScenarioResult, read_jsonl


def implausible_reason(tflops: float | None, gemm_tflops: float | None, factor: float) -> str | None:
    if not tflops or not gemm_tflops or gemm_tflops <= 0:
        return None
    if tflops > factor * gemm_tflops:
        return (
            f"the kernel's {tflops:.1f} TFLOP/s is above {factor:g} x the bf16 GEMM ceiling measured on this "
            f"GPU ({gemm_tflops:.1f} TFLOP/s): attention does the work of two matrix products and a softmax, "
            "so it cannot be faster than the GEMM; the timing does not measure the work"
        )
    return None


def jump_flags(ratios: dict[str, float], previous: dict[str, float], factor: float) -> list[str]:
    out = []
    for b, r in sorted(ratios.items()):
        old = previous.get(b)
        if r and old and old > 0 and r > factor * old:
            out.append(
                f"jump: ratio vs {b} {r:.3f} is {r / old:.2f}x the previous run's {old:.3f} (alarm above {factor:g}x)"
            )
    return out


def load_previous(path: Path | None) -> dict[str, dict[str, float]]:
    """{scenario: {baseline: ratio}} from a previous run's folder (or its bench.jsonl); correct rows only."""
    if path is None:
        return {}
    p = Path(path)
    if p.is_dir():
        p = p / "bench.jsonl"
    return {r.scenario: dict(r.ratio) for r in read_jsonl(p) if r.correct and r.ratio}


def annotate(
    row: ScenarioResult,
    gemm_tflops: float | None,
    previous: dict[str, dict[str, float]],
    cfg: PlausibilityConfig = PlausibilityConfig(),
) -> ScenarioResult:
    """A correct row above the ceiling becomes `implausible`; jumps are added to `row.flags` (in
    place; returns the row)."""
    why = implausible_reason(row.tflops.get("kernel"), gemm_tflops, cfg.ceiling_factor)
    if why and row.status == STATUS_OK:
        row.status, row.code, row.reason = STATUS_IMPLAUSIBLE, "implausible", why
    for f in jump_flags(row.ratio, previous.get(row.scenario, {}), cfg.jump_factor):
        if f not in row.flags:
            row.flags.append(f)
    return row
