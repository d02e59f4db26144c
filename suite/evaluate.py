"""`eval`: the agent-facing form of the evaluator. Compile; correctness on all 182 scenarios and the
extended set; timing on a fixed representative subset beside the architecture's baseline; a short
summary. Correct everywhere is the only passing result."""

from __future__ import annotations

from pathlib import Path

from . import config
from .bench import BenchRequest, run_bench


def evaluate(
    kernel: Path,
    arch: str = "sm90",
    baseline: str | None = None,
    out_dir: Path | None = None,
    extended: bool = True,
    scenario_filter: str | None = None,
    on_row=None,
    on_start=None,
    sanitize: bool = False,
    previous: Path | None = None,
    gpu_index: int = 0,
    harness_config: config.HarnessConfig | None = None,
) -> dict:
    """Without `out_dir`, the results go to a fresh temporary folder, made only once the checks
    without a GPU and the GPU check have passed; summary["out_dir"] says where."""
    base = baseline or (config.ARCHES[arch]["baseline"] if arch in config.ARCHES else "fa3")
    req = BenchRequest(
        kernel=Path(kernel),
        arch=arch,
        baselines=[base],
        extended=extended,
        out_dir=Path(out_dir) if out_dir else None,
        kind="eval",
        timed_ids=set(config.EVAL_TIMED_SUBSET),
        scenario_filter=scenario_filter,
        sanitize=sanitize,
        previous=previous,
        gpu_index=gpu_index,
        config=harness_config or config.HarnessConfig(),
    )
    summary = run_bench(req, on_row=on_row, on_start=on_start)
    summary["out_dir"] = str(req.out_dir)
    return summary


def passed(summary: dict) -> bool:
    """Correct on every scenario run (and clean under the sanitizer when it ran)."""
    return (
        summary["scenarios_correct"] == summary["scenarios_total"]
        and summary["extended_correct"] == summary["extended_total"]
        and summary.get("sanitize", {}).get("ok", True)
    )
