"""REPORT.html: the report of a results folder as one self-contained page, beside REPORT.md and from
the same data model: the claims and provenance (the report's own lines), the ratio heat maps on the
shared scale (scale.py) with every scenario's times, TFLOP/s, spread, correctness and errors on hover,
the geometric means, the per-scenario table (sortable, filterable) and the extended set, folded."""

from __future__ import annotations

from pathlib import Path

from markdown_it import MarkdownIt

from ..results import ScenarioResult
from ..scenarios import HEAD_CONFIGS, SEQLENS
from . import scale, tables
from .data import MEASURED, ArchResults, load
from .document import _claims, _provenance_lines
from .page import render_page, write_page

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


def scenario_detail(r: ScenarioResult, baselines: list[str]) -> dict:
    """What hovering a scenario shows: per implementation its time, spread and TFLOP/s, and the
    ratio and note of each baseline; the check's numbers and any error."""
    impls = []
    for name in ["kernel", *baselines]:
        t = r.times_ms.get(name) or {}
        note = "" if name == "kernel" else (r.baselines.get(name) or "not run")
        impls.append(
            {
                "name": name,
                "median_ms": _num(t.get("median_ms")),
                "iqr_ms": _num(t.get("iqr_ms")),
                "min_ms": _num(t.get("min_ms")),
                "max_ms": _num(t.get("max_ms")),
                "reps": t.get("reps"),
                "tflops": _num(r.tflops.get(name)),
                "ratio": _num(r.ratio.get(name)) if name != "kernel" else None,
                "note": "" if note == "ok" else note,
            }
        )
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
    }


def heatmaps(res: ArchResults) -> list[dict]:
    """One grid per baseline with a ratio and per mask: head configuration x sequence length."""
    out = []
    for b in res.baselines:
        for causal in (False, True):
            cell = {(r.head_config, r.seqlen_q): r for r in res.grid_rows if r.causal == causal}
            if not any(r.ratio.get(b) for r in cell.values()):
                continue
            hcs = [hc.name for hc in HEAD_CONFIGS if any(k[0] == hc.name for k in cell)]
            seqlens = [s for s in SEQLENS if any(k[1] == s for k in cell)]
            cells = []
            for h in hcs:
                for s in seqlens:
                    r = cell.get((h, s))
                    if r is None:
                        continue
                    v = r.ratio.get(b) if r.correct else None
                    label = f"{v:.2f}" if v is not None else (r.status if not r.correct else "n/a")
                    cells.append(
                        {
                            "x": str(s),
                            "y": h,
                            "v": v,
                            "label": label,
                            "scenario": r.scenario,
                            "color": scale.color(v),
                            "text": scale.text_color(v),
                        }
                    )
            mask = "causal" if causal else "non-causal"
            out.append(
                {
                    "id": f"{b}-{mask}",
                    "baseline": b,
                    "mask": mask,
                    "seqlens": [str(s) for s in seqlens],
                    "head_configs": hcs,
                    "cells": cells,
                }
            )
    return out


def scenario_rows(res: ArchResults) -> tuple[tables.Table, list[dict]]:
    """The report's per-scenario table, and per row what the filters test."""
    t = tables.scenario_table(res)
    attrs = [
        {
            "head_config": r.head_config,
            "seqlen": r.seqlen_q,
            "mask": "causal" if r.causal else "non-causal",
            "ratios": {b: r.ratio.get(b) for b in res.baselines},
        }
        for r in res.grid_rows
    ]
    return t, attrs


def model(res: ArchResults) -> dict:
    """The page's data (JSON): what the script draws and shows on hover."""
    baselines = res.baselines
    return {
        "kernel": kernel_label(res),
        "baselines": baselines,
        "main_baseline": res.main_baseline,
        "scale": {"min": scale.RATIO_MIN, "max": scale.RATIO_MAX, "ticks": list(scale.TICKS)},
        "heatmaps": heatmaps(res),
        "scenarios": {r.scenario: scenario_detail(r, baselines) for r in res.grid_rows},
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
        source=_rel(res.run_dir / "bench.jsonl", out),
        provenance_html=_md(_provenance_lines(res, status)),
        claims_html=_md(_claims(res)),
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


def _rel(path: Path, start: Path) -> str:
    import os

    return os.path.relpath(path, start).replace(os.sep, "/")
