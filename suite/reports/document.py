"""REPORT.md: provenance, the claims (correctness, geometric means), the input distributions (each
one's geometric means and lowest ratios, the data-dependent rows), the breakdowns, the share of the
measured GEMM reference, the plots and the per-scenario table; written beside tables/ (CSV, LaTeX) and plots/
(PNG). Everything is rendered from the raw data; the report is never edited by hand."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .. import config
from .. import report as bench_report
from ..results import fast_p, fast_p_rows, geomean
from . import plots, tables
from .data import MEASURED, ArchResults, load, version_of_cudnn

# the bf16 GEMM measured in the run (gemm_ceiling.json; summary.json's `ceiling`): a reference that
# the plausibility check scales (harness/plausibility.py), not a bound on what a kernel can reach
GEMM_REFERENCE = "bf16 GEMM reference (measured)"


@dataclass
class Rendered:
    report: Path
    tables: list[Path] = field(default_factory=list)
    plots: list[Path] = field(default_factory=list)
    status: str = MEASURED
    html: Path | None = None  # REPORT.html, when asked for and matplotlib (its colours) is there


def _rel(path: Path, start: Path) -> str:
    return os.path.relpath(path, start).replace(os.sep, "/")


def _provenance_lines(res: ArchResults, status: str) -> list[str]:
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
    import datetime as dt

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


def _claims(res: ArchResults) -> list[str]:
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


def _distribution_lines(res: ArchResults, t_dist: tables.Table, t_dd: tables.Table) -> list[str]:
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


def _plot_lines(res: ArchResults, figs: dict[str, Path], out: Path) -> list[str]:
    """The plots: per baseline and mask the heat map of each row's ratio and, for a run timed on
    several input distributions, the headline distribution's beside it and the others linked."""
    dists = bench_report.distributions(res.summary)
    lines = ["## Plots"]
    for mask in ("non-causal", "causal"):
        for b in res.baselines:
            name = plots.heatmap_name(b, mask)
            if name not in figs:
                continue
            title = name + (", each row's lowest over the input distributions" if dists else "")
            lines += [f"### {title}", f"![{name}]({_rel(figs[name], out)})", ""]
            worst = bench_report.worst_distribution(res.summary, b)
            if worst and plots.heatmap_name(b, mask, worst) in figs:
                head = plots.heatmap_name(b, mask, worst)
                lines += [f"### {head} (the headline's distribution)", f"![{head}]({_rel(figs[head], out)})", ""]
            others = [(d, figs[n]) for d in dists if d != worst and (n := plots.heatmap_name(b, mask, d)) in figs]
            if others:
                lines += ["On the other distributions: " + ", ".join(f"[{d}]({_rel(p, out)})" for d, p in others), ""]
        name = f"TFLOP/s vs seqlen, {mask}"
        if name in figs:
            lines += [f"### {name}", f"![{name}]({_rel(figs[name], out)})", ""]
    return lines


def _why_missing(res: ArchResults, b: str) -> str:
    reasons = {r.baselines.get(b) for r in res.grid_rows if r.baselines.get(b) and r.baselines[b] != "ok"}
    return next(iter(reasons))[:160] if reasons else "no scenario was timed"


def render(
    root: Path, out: Path | None = None, status: str = MEASURED, extra: list[str] | None = None, html: bool = False
) -> Rendered:
    """Render REPORT.md, tables/ and plots/ for the results in `root` into `out` (default: `root`);
    with `html`, REPORT.html beside them (html.py)."""
    root = Path(root)
    out = Path(out) if out else root
    res = load(root)
    out.mkdir(parents=True, exist_ok=True)
    t_scen, t_geo, t_ext = tables.scenario_table(res), tables.geomean_table(res), tables.extended_table(res)
    t_dist, t_dd = tables.distribution_table(res), tables.data_dependent_table(res)
    written = []
    for t in (t_scen, t_geo, t_ext):
        written += t.write(out / "tables")
    if bench_report.distributions(res.summary):
        for t in (t_dist, t_dd, tables.by_distribution_table(res)):
            written += t.write(out / "tables")
    # a run that measured for an hour must not be lost to a missing plotting library: the report
    # says so and `kernelseek-suite render` draws them later
    figs = plots.render_all(res, out / "plots") if plots.available() else {}

    title = f"# Results: {res.arch}, {res.provenance.get('gpu_name') or 'GPU'}"
    parts = [title, ""]
    if status != MEASURED:
        parts += [
            f"> **{status}**: rendered from the raw data in `{_rel(res.run_dir, out)}`; nothing in "
            "this report was measured on this machine.",
            "",
        ]
    parts += [
        "Generated by `kernelseek-suite render` from the raw data beside it "
        f"(`{_rel(res.run_dir / 'bench.jsonl', out)}`); do not edit by hand.",
        "",
        "## Provenance",
        *_provenance_lines(res, status),
        "",
        "## Claims",
        *_claims(res),
        "",
        *_distribution_lines(res, t_dist, t_dd),
    ]
    parts += extra or []
    parts += [
        "## Geometric means",
        "Over the correct timed scenarios of each group; ratio = baseline time / "
        "kernel time (> 1: the kernel is faster)"
        + (
            "; each baseline's on its headline distribution, so `overall` is the headline."
            if bench_report.distributions(res.summary)
            else "."
        ),
        "",
        t_geo.markdown(),
        "",
    ]
    if not plots.available():
        parts += [
            "## Plots",
            "Not drawn: matplotlib is not installed here (`pip install 'kernelseek-suite[report]'`, "
            "then `kernelseek-suite render` on this folder).",
            "",
        ]
    if figs:
        parts += _plot_lines(res, figs, out)
    dists = bench_report.distributions(res.summary)
    parts += [
        "## Per scenario",
        f"`kernel` is `{res.kernel_file}`. TFLOP/s at the median time; `kernel % of GEMM` is the kernel's "
        f"TFLOP/s as a share of the {GEMM_REFERENCE} in the same run (a reference, not a bound: above 100% "
        "can happen). "
        + bench_report.IQR_MEANING
        + (
            " With several input distributions, a ratio is the row's lowest over them and a time is pooled "
            f"over them (each distribution's: `{_rel(out / 'tables' / 'scenarios_by_distribution.csv', out)}`); "
            f"a `{bench_report.DATA_DEPENDENT}` row says so in its note."
            if dists
            else ""
        ),
        "",
        *[f"- {b}: no number in any scenario: {why}" for b, why in tables.column_notes(res).items()],
        "",
        t_scen.markdown(),
        "",
    ]
    if t_ext.rows:
        parts += ["## Extended correctness set", t_ext.markdown(), ""]
    parts += [
        "## Files",
        "- raw data: "
        + ", ".join(f"`{_rel(res.run_dir / f, out)}`" for f in ("bench.jsonl", "provenance.json", "summary.json")),
        "- tables: " + ", ".join(f"`{_rel(p, out)}`" for p in written),
    ]
    if figs and dists:  # a run on one distribution has its plots named in the plots section
        parts.append("- plots: " + ", ".join(f"`{_rel(p, out)}`" for p in figs.values()))
    # the page shares the heat maps' colours with the plots: without matplotlib neither is drawn
    page = html and plots.available()
    if page:
        parts.append(
            "- this report as a page (heat maps with every scenario on hover, a sortable table): `REPORT.html`"
        )
    elif html:
        parts.append("- REPORT.html: not written, matplotlib is not installed here")
    report = out / "REPORT.md"
    report.write_text("\n".join(parts + [""]))
    rendered = Rendered(report, written, list(figs.values()), status)
    if page:
        from .html import render_html

        rendered.html = render_html(root, out, status, res=res, extra=extra)
    return rendered
