"""`eval`: the agent-facing form of the evaluator. Compile; correctness on all 182 scenarios and the
extended set; timing on a fixed representative subset beside the architecture's baseline; a short
summary. Correct everywhere is the only passing result."""

from __future__ import annotations

import json
from pathlib import Path

from . import config
from .bench import BenchRequest
from .results import read_jsonl
from .run import LOCAL, Hooks


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
    ran = LOCAL.run(req, Hooks(on_row=on_row, on_start=on_start))
    ran.summary["out_dir"] = str(ran.out_dir)
    return ran.summary


def passed(summary: dict) -> bool:
    """Correct on every scenario run (and clean under the sanitizer when it ran)."""
    return (
        summary["scenarios_correct"] == summary["scenarios_total"]
        and summary["extended_correct"] == summary["extended_total"]
        and summary.get("sanitize", {}).get("ok", True)
    )


# the codes of a worker's `fatal` message that are not the kernel's: an exception in the worker before
# its hello (torch, CUDA, the GPU, the baselines' imports); the kernel's library is loaded before the
# hello too, but a library that does not load is a `contract` failure (contract.py)
MACHINERY_CODES = ("error", "cuda-error")
FATAL_PREFIX = "worker failed: "


def machinery_failure(out_dir: Path) -> str | None:
    """Why a sweep's failure is the evaluator's own and no verdict on the kernel, or None: every
    scenario failed the same way, from a fatal error of the worker before it said hello (CUDA
    unusable, e.g. `invalid argument to exchangeDevice`; the worker unable to start), so that no
    scenario ran the kernel. Read from the folder's bench.jsonl and provenance.json (a worker that
    said hello left its device there)."""
    out_dir = Path(out_dir)
    rows = read_jsonl(out_dir / "bench.jsonl") if (out_dir / "bench.jsonl").exists() else []
    try:
        prov = json.loads((out_dir / "provenance.json").read_text())
    except (OSError, ValueError):
        prov = {}
    if not rows or prov.get("device"):
        return None
    first = rows[0]
    same = all((r.status, r.code, r.reason) == (first.status, first.code, first.reason) for r in rows)
    ran = any(r.check or r.times_ms for r in rows)
    if not same or ran or first.correct or first.code not in MACHINERY_CODES:
        return None
    if not first.reason.startswith(FATAL_PREFIX):
        return None
    cause = first.reason[len(FATAL_PREFIX) :].strip()
    return (
        f"the evaluator's worker failed before it ran the kernel ({cause}); all {len(rows)} scenarios failed "
        "that same way: the GPU or CUDA is not usable by the evaluator here, and this is no verdict on the kernel"
    )
