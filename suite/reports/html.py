"""REPORT.html: the report of a results folder as one self-contained page, beside REPORT.md and from
the same data model: the claims and provenance (the report's own lines), the ratio heat maps on the
shared scale (scale.py) with every scenario's times, TFLOP/s, spread, correctness and errors on hover,
the geometric means, the per-scenario table (sortable, filterable) and the extended set, folded.

For a run timed on several input distributions the page also has the distribution x baseline table
and the data-dependent rows (the report's own section), and the heat maps and the table can be
switched between views (tables.py: `worst`, the headline's, the heat maps' default; `lowest`, each
row's lowest ratio, the table's default; or one distribution's): the data holds every view's cells,
computed here from the rows as the report's tables and plots are."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

from .. import report
from ..results import ScenarioResult
from ..scenarios import HEAD_CONFIGS, SEQLENS
from . import scale, tables
from .data import MEASURED, ArchResults, load
from .page import render_page, write_page
from .sections import claim_lines, distribution_lines, provenance_lines, rel_path

VENDOR = ["chart.umd.min.js", "chartjs-chart-matrix.min.js", "chartjs-plugin-datalabels.min.js"]
FILENAME = "REPORT.html"


def _md(lines: list[str]) -> str:
    """The report's own Markdown lines (provenance, claims, extra sections) as HTML."""
    return MarkdownIt("commonmark").enable("table").render("\n".join(lines))


def kernel_label(res: ArchResults) -> str:
    """The kernel by its file name ("kernel" when the data does not say)."""
    kernel = res.summary.get("kernel") or {}
    path = kernel.get("path") or res.provenance.get("kernel") or ""
    return Path(path).name or "kernel"


def _num(x):
    return None if x is None else float(x)


def _impls(r: ScenarioResult, baselines: list[str], times: dict, tflops: dict, ratio: dict) -> list[dict]:
    """Per implementation its time, spread, TFLOP/s, and the ratio and note of each baseline."""
    impls = []
    for name in ["kernel", *baselines]:
        t = times.get(name) or {}
        note = "" if name == "kernel" else (r.baselines.get(name) or "not run")
        impls.append(
            {
                "name": name,
                "median_ms": _num(t.get("median_ms")),
                "iqr_ms": _num(t.get("iqr_ms")),
                "min_ms": _num(t.get("min_ms")),
                "max_ms": _num(t.get("max_ms")),
                "reps": t.get("reps"),
                "tflops": _num(tflops.get(name)),
                "ratio": _num(ratio.get(name)) if name != "kernel" else None,
                "note": "" if note == "ok" else note,
            }
        )
    return impls


def scenario_detail(r: ScenarioResult, baselines: list[str], flagged: dict[str, dict] | None = None) -> dict:
    """What hovering a scenario shows: per implementation its time, spread and TFLOP/s, and the
    ratio and note of each baseline (pooled over the input distributions, and on each); the check's
    numbers and any error; whether the row is data-dependent (`flagged`: summary.json's rows)."""
    impls = _impls(r, baselines, r.times_ms, r.tflops, r.ratio)
    by_dist = {
        d: _impls(r, baselines, times, r.tflops_by_distribution.get(d) or {}, r.ratio_by_distribution.get(d) or {})
        for d, times in r.times_ms_by_distribution.items()
    }
    chk = r.check or {}
    rechk = r.recheck or {}
    return {
        "scenario": r.scenario,
        "status": r.status,
        "code": r.code,
        "reason": r.reason,
        "flags": list(r.flags),
        "max_err": _num(chk.get("max_err")),
        "tol": _num(chk.get("tol")),
        "lse_err": _num(chk.get("lse_err")),
        "recheck_max_err": _num(rechk.get("max_err")),
        "recheck_tol": _num(rechk.get("tol")),
        "impls": impls,
        "by_distribution": by_dist,
        "data_dependent": (flagged or {}).get(r.scenario),
    }


def views(res: ArchResults) -> list[dict]:
    """The views the heat maps and the table can be switched between ([] for one distribution)."""
    dists = report.distributions(res.summary)
    if not dists:
        return []
    return [
        {"key": tables.WORST, "label": "each baseline's worst distribution (the headline)"},
        {"key": tables.LOWEST, "label": "each row's lowest ratio over the distributions"},
        *({"key": d, "label": d} for d in dists),
    ]


def _cells(res: ArchResults, rows: list[ScenarioResult], b: str, view: str, flagged: dict) -> list[dict]:
    cells = []
    for r in rows:
        v = tables.view_ratio(res, r, b, view) if r.correct else None
        label = f"{v:.2f}" if v is not None else (r.status if not r.correct else "n/a")
        cells.append(
            {
                "x": str(r.seqlen_q),
                "y": r.head_config,
                "v": v,
                "label": label + ("*" if r.scenario in flagged else ""),
                "scenario": r.scenario,
                "color": scale.color(v),
                "text": scale.text_color(v),
                "dd": r.scenario in flagged,
            }
        )
    return cells


def heatmaps(res: ArchResults) -> list[dict]:
    """One grid per baseline with a ratio and per mask: head configuration x sequence length; `cells`
    are each row's ratio, and where the run has several input distributions `views` holds the cells
    of every view (the heat maps' default: `worst`, the baseline's headline distribution)."""
    out = []
    flagged = report.data_dependent_rows(res.summary)
    keys = [v["key"] for v in views(res)]
    for b in res.baselines:
        for causal in (False, True):
            cell = {(r.head_config, r.seqlen_q): r for r in res.grid_rows if r.causal == causal}
            if not any(r.ratio.get(b) for r in cell.values()):
                continue
            hcs = [hc.name for hc in HEAD_CONFIGS if any(k[0] == hc.name for k in cell)]
            seqlens = [s for s in SEQLENS if any(k[1] == s for k in cell)]
            rows = [cell[(h, s)] for h in hcs for s in seqlens if (h, s) in cell]
            mask = "causal" if causal else "non-causal"
            entry: dict[str, object] = {
                "id": f"{b}-{mask}",
                "baseline": b,
                "mask": mask,
                "seqlens": [str(s) for s in seqlens],
                "head_configs": hcs,
                "cells": _cells(res, rows, b, tables.LOWEST, flagged),
            }
            if keys:
                entry["worst"] = report.worst_distribution(res.summary, b)
                entry["views"] = {k: _cells(res, rows, b, k, flagged) for k in keys}
            out.append(entry)
    return out


def table_views(res: ArchResults) -> dict:
    """The per-scenario table's cells that change with the view: {"cols": the columns' indices,
    "ratio_cols": {baseline: its ratio column}, "cells": {view: {scenario: [[raw, text] per col]}}}
    (empty for one distribution). Each view's table is tables.scenario_table's."""
    keys = [v["key"] for v in views(res)]
    if not keys:
        return {}
    base = tables.scenario_table(res)
    varying = {"kernel TFLOP/s", "kernel % of GEMM", report.IQR_HEADER}
    varying |= {f"{b} TFLOP/s" for b in res.baselines} | {f"ratio vs {b}" for b in res.baselines}
    cols = [i for i, h in enumerate(base.headers) if h in varying]
    cells = {}
    for k in keys:
        t = tables.scenario_table(res, k)
        text = t.formatted()
        cells[k] = {row[0]: [[row[i], text[j][i]] for i in cols] for j, row in enumerate(t.rows)}
    ratio_cols = {b: base.headers.index(f"ratio vs {b}") for b in res.baselines}
    return {"cols": cols, "ratio_cols": ratio_cols, "cells": cells}


def scenario_rows(res: ArchResults) -> tuple[tables.Table, list[dict]]:
    """The report's per-scenario table, and per row what the filters test."""
    t = tables.scenario_table(res)
    flagged = report.data_dependent_rows(res.summary)
    attrs = [
        {
            "scenario": r.scenario,
            "head_config": r.head_config,
            "seqlen": r.seqlen_q,
            "mask": "causal" if r.causal else "non-causal",
            "ratios": {b: r.ratio.get(b) for b in res.baselines},
            "data_dependent": r.scenario in flagged,
        }
        for r in res.grid_rows
    ]
    return t, attrs


def model(res: ArchResults) -> dict:
    """The page's data (JSON): what the script draws and shows on hover."""
    baselines = res.baselines
    flagged = report.data_dependent_rows(res.summary)
    return {
        "kernel": kernel_label(res),
        "baselines": baselines,
        "main_baseline": res.main_baseline,
        "scale": {"min": scale.RATIO_MIN, "max": scale.RATIO_MAX, "ticks": list(scale.TICKS)},
        "distributions": report.distributions(res.summary),
        "views": views(res),
        "heatmap_view": tables.WORST if views(res) else None,
        "table_view": tables.LOWEST if views(res) else None,
        "data_dependent_threshold": report.data_dependent_threshold(res.summary),
        "heatmaps": heatmaps(res),
        "table_views": table_views(res),
        "scenarios": {r.scenario: scenario_detail(r, baselines, flagged) for r in res.grid_rows},
    }


def render_html(
    root: Path,
    out: Path | None = None,
    status: str = MEASURED,
    res: ArchResults | None = None,
    extra: list[str] | None = None,
) -> Path:
    """Write REPORT.html for the results in `root` into `out` (default: `root`)."""
    root = Path(root)
    out = Path(out) if out else root
    res = res or load(root)
    t_scen, attrs = scenario_rows(res)
    t_geo, t_ext = tables.geomean_table(res), tables.extended_table(res)
    dist_lines = distribution_lines(res, tables.distribution_table(res), tables.data_dependent_table(res))
    gpu = res.provenance.get("gpu_name") or "GPU"
    html = render_page(
        "report.html.j2",
        title=f"Results: {res.arch}, {gpu}",
        data=model(res),
        vendor=VENDOR,
        scripts=["report.js"],
        styles=["common.css", "report.css"],
        status=status,
        measured=status == MEASURED,
        kernel=kernel_label(res),
        arch=res.arch,
        gpu=gpu,
        source=rel_path(res.run_dir / "bench.jsonl", out),
        provenance_html=_md(provenance_lines(res, status)),
        claims_html=_md(claim_lines(res)),
        distributions_html=_md(dist_lines) if dist_lines else "",
        extra_html=_md(extra) if extra else "",
        gradient=scale.gradient(),
        scale_ticks=[(t, scale.position(t)) for t in scale.TICKS],
        geomeans=t_geo,
        scenarios=t_scen,
        scenario_attrs=attrs,
        scenario_cells=[list(zip(raw, text)) for raw, text in zip(t_scen.rows, t_scen.formatted())],
        head_configs=[hc.name for hc in HEAD_CONFIGS if any(r.head_config == hc.name for r in res.grid_rows)],
        seqlens=[s for s in SEQLENS if any(r.seqlen_q == s for r in res.grid_rows)],
        baselines=[b for b in res.baselines if any(r.ratio.get(b) for r in res.grid_rows)],
        main_baseline=res.main_baseline,
        extended=t_ext,
        extended_count=len(res.extended_rows),
        extended_correct=sum(r.correct for r in res.extended_rows),
    )
    return write_page(out / FILENAME, html)
