"""The report's sections that REPORT.md and REPORT.html both show, as Markdown lines: the
provenance, the claims and the input distributions; and the paths the report gives relative to
where it is written."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

from .. import config
from .. import report as bench_report
from ..results import fast_p, fast_p_rows, geomean
from . import tables
from .data import ArchResults, version_of_cudnn

# the bf16 GEMM measured in the run (gemm_ceiling.json; summary.json's `ceiling`): a reference that
# the plausibility check scales (harness/plausibility.py), not a bound on what a kernel can reach
GEMM_REFERENCE = "bf16 GEMM reference (measured)"


def rel_path(path: Path, start: Path) -> str:
    """`path` relative to `start`, with forward slashes (as the report and the page link it)."""
    return os.path.relpath(path, start).replace(os.sep, "/")


def provenance_lines(res: ArchResults, status: str) -> list[str]:
    p, rec = res.provenance, res.record
    kernel = res.summary.get("kernel") or {"sha256": p.get("kernel_sha256")}
    versions = p.get("baseline_versions") or {}
    lines = [
        f"- **Data**: {status}. Measured {p.get('date', '?')} to {p.get('date_end', '?')} "
        f"at commit `{p.get('git_sha')}`.",
        f"- **GPU**: {p.get('gpu_name') or p.get('device')} ({p.get('sms')} SMs), driver {p.get('driver')}, "
        f"compute capability {'.'.join(map(str, p.get('compute_capability') or [])) or '?'}; "
        f"clocks at start {_clocks(p.get('clocks_start'))}, at end {_clocks(p.get('clocks_end'))}.",
        f"- **Software**: torch {p.get('torch')}, CUDA {p.get('cuda')}, cuDNN {version_of_cudnn(p.get('cudnn'))}, "
        f"nvcc {p.get('nvcc')}; " + ", ".join(f"{b}: {v or 'not installed'}" for b, v in versions.items()),
        f"- **Kernel**: `{res.kernel_path}` (sha256 `{(kernel.get('sha256') or '')[:16]}`), seed {p.get('seed')}.",
    ]
    if rec.get("stand_in"):
        lines.append(f"- **Note**: {rec['stand_in']}")
    if rec.get("missing_kernels"):
        lines.append("- **Kernels not in this checkout**: " + ", ".join(f"`{k}`" for k in rec["missing_kernels"]))
    runtime = rec.get("runtime")
    if runtime:
        image = rec.get("image") or p.get("container") or {}
        where = (
            f"container `{image.get('tag')}` (image {image.get('id', '?')[:19]}, base `{image.get('base')}`)"
            if runtime == "docker"
            else "natively"
        )
        resumed = rec.get("resumed") or []
        wall = _span(rec.get("date_start"), rec.get("date_end")) if resumed else rec.get("wall_s")
        lines.append(
            f"- **Run**: `{rec.get('command', 'kernelseek-suite reproduce')}` {where}, "
            f"wall time {_duration(wall)}"
            + (f" from the first start to the end, resumed {len(resumed)} time(s)" if resumed else "")
            + (f"; the scenarios themselves took {_duration(rec['sweep_s'])}" if rec.get("sweep_s") else "")
            + "."
        )
    if res.ceiling_tflops:
        c = res.ceiling
        factor = (res.summary.get("ceiling") or {}).get("factor") or config.PlausibilityConfig().ceiling_factor
        lines.append(
            f"- **{GEMM_REFERENCE}**: {c['tflops']:.0f} TFLOP/s ({c.get('n')}^3, torch.matmul on random "
            f"data, median of {c.get('reps')} runs; before the sweep {_num(c.get('before_tflops'))}, "
            f"after {_num(c.get('after_tflops'))}). A reference measured on this GPU, not its peak: a kernel "
            f"may run above it; a row above {factor:g}x of it is `implausible` (not correct)."
        )
    else:
        lines.append(f"- **{GEMM_REFERENCE}**: not measured in this run.")
    return lines


def _clocks(c: dict | None) -> str:
    if not c:
        return "?"
    return f"SM {c.get('sm_mhz')}/{c.get('max_sm_mhz')} MHz, {c.get('temperature_c')} C"


def _span(start: str | None, end: str | None) -> float | None:
    try:
        return (dt.datetime.fromisoformat(end) - dt.datetime.fromisoformat(start)).total_seconds()
    except (TypeError, ValueError):
        return None


def _num(x) -> str:
    return "?" if x is None else f"{x:.0f}"


def _duration(s) -> str:
    if s is None:
        return "not recorded"
    s = int(s)
    return f"{s // 3600} h {s % 3600 // 60:02d} min" if s >= 3600 else f"{s // 60} min {s % 60:02d} s"


def claim_lines(res: ArchResults) -> list[str]:
    s = res.summary
    lines = [
        f"- Correct on {s.get('scenarios_correct')}/{s.get('scenarios_total')} timed scenarios"
        + (
            f" and {s.get('extended_correct')}/{s.get('extended_total')} of the extended set."
            if s.get("extended_total")
            else "; the extended set was not run."
        )
    ]
    for b in res.baselines:
        g = (s.get("geomean") or {}).get(b)
        if g is None:
            lines.append(f"- vs {b}: no ratio measured ({_why_missing(res, b)}).")
        else:
            worst, low = bench_report.worst_distribution(s, b), bench_report.min_distribution(s, b)
            on = (
                f" on the `{worst}` inputs, the worst of the {len(bench_report.distributions(s))} input "
                "distributions (each below)"
                if worst
                else ""
            )
            lines.append(
                f"- vs {b}: geometric mean {g:.3f}x over {s['ratio_count'][b]} scenarios{on}; lowest "
                f"{s['min_ratio'][b]:.3f}x ({s['min_ratio_scenario'][b]}{f', on `{low}`' if low else ''})."
            )
    if "fast_p" in s:  # KernelBench's fast_p; a summary written before it has none: computed from the rows
        fp, total = s["fast_p"], s.get("fast_p_total")
    else:
        kind = s.get("kind") or "bench"
        fp, total = fast_p(res.rows, kind, res.baselines), len(fast_p_rows(res.rows, kind))
    lines += [f"- {line}." for line in bench_report.fast_p_lines(fp, total)]
    c = res.ceiling_tflops
    fr = [r.tflops["kernel"] / c for r in res.grid_rows if c and r.correct and r.tflops.get("kernel")]
    if fr:
        lines.append(
            f"- Share of the {GEMM_REFERENCE}: geometric mean {100 * geomean(fr):.1f}%, highest {100 * max(fr):.1f}%."
        )
    return lines


def distribution_lines(res: ArchResults, t_dist: tables.Table, t_dd: tables.Table) -> list[str]:
    """The section on the input distributions (none for a run timed on one): each distribution's
    geometric mean and lowest ratio per baseline, what `data-dependent` means, the flagged rows."""
    s = res.summary
    dists = bench_report.distributions(s)
    if not dists:
        return []
    lines = [
        "## Input distributions",
        f"Every scenario was checked and timed on {len(dists)} input distributions: "
        + ", ".join(f"`{d}`" for d in dists)
        + " (`suite/harness/distributions.py` says what each stands for). The headline "
        "geometric mean against each baseline is that of its lowest distribution (`headline of`); a row's "
        "ratio in the tables and the first heat maps is its lowest over the distributions.",
        "",
        t_dist.markdown(),
        "",
        "### Data-dependent rows",
        f"A row is marked `{bench_report.DATA_DEPENDENT}` when {bench_report.meaning(s)}.",
        "",
    ]
    if t_dd.rows:
        lines += [f"{len(t_dd.rows)} row(s):", "", t_dd.markdown(), ""]
    else:
        lines += ["No row in this run.", ""]
    return lines


def _why_missing(res: ArchResults, b: str) -> str:
    reasons = {r.baselines.get(b) for r in res.grid_rows if r.baselines.get(b) and r.baselines[b] != "ok"}
    return next(iter(reasons))[:160] if reasons else "no scenario was timed"
