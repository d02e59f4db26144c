"""REPORT.md: provenance, the claims (correctness, geometric means), the breakdowns, the share of
the GEMM ceiling, the plots and the per-scenario table; written beside tables/ (CSV, LaTeX) and
plots/ (PNG). Everything is rendered from the raw data; the report is never edited by hand."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..results import geomean
from . import plots, tables
from .data import MEASURED, ArchResults, load, version_of_cudnn


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
        lines.append(
            f"- **bf16 GEMM ceiling**: {c['tflops']:.0f} TFLOP/s ({c.get('n')}^3, torch.matmul on random "
            f"data, median of {c.get('reps')} runs; before the sweep {_num(c.get('before_tflops'))}, "
            f"after {_num(c.get('after_tflops'))})."
        )
    else:
        lines.append("- **bf16 GEMM ceiling**: not measured in this run.")
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
            lines.append(
                f"- vs {b}: geometric mean {g:.3f}x over {s['ratio_count'][b]} scenarios; lowest "
                f"{s['min_ratio'][b]:.3f}x ({s['min_ratio_scenario'][b]})."
            )
    c = res.ceiling_tflops
    fr = [r.tflops["kernel"] / c for r in res.grid_rows if c and r.correct and r.tflops.get("kernel")]
    if fr:
        lines.append(
            f"- Share of the measured bf16 GEMM ceiling: geometric mean {100 * geomean(fr):.1f}%, "
            f"highest {100 * max(fr):.1f}%."
        )
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
    written = []
    for t in (t_scen, t_geo, t_ext):
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
    ]
    parts += extra or []
    parts += [
        "## Geometric means",
        "Over the correct timed scenarios of each group; ratio = baseline time / "
        "kernel time (> 1: the kernel is faster).",
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
        parts.append("## Plots")
        for name, p in figs.items():
            parts += [f"### {name}", f"![{name}]({_rel(p, out)})", ""]
    parts += [
        "## Per scenario",
        f"`kernel` is `{res.kernel_file}`. TFLOP/s at the median time; `kernel % of GEMM` is the kernel's "
        "TFLOP/s as a share of the bf16 GEMM ceiling measured in the same run.",
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
