"""Render saved results: the per-scenario table (Markdown via tabulate, CSV) and the summary lines.
Everything here reads rows from files; nothing is measured or computed twice."""

from __future__ import annotations

import csv
from pathlib import Path

from tabulate import tabulate

from .results import ScenarioResult, breakdown, missing_columns, row_note


def _fmt(x, nd=2):
    return "" if x is None else f"{x:.{nd}f}"


def table_rows(
    rows: list[ScenarioResult], baselines: list[str], column_notes: dict[str, str] | None = None
) -> tuple[list[str], list[list]]:
    """The per-scenario table; a baseline in `column_notes` (missing from the whole column) is left
    out of the rows' notes."""
    headers = ["scenario", "status", "kernel TFLOP/s"]
    for b in baselines:
        headers += [f"{b} TFLOP/s", f"ratio vs {b}"]
    headers += ["max err", "tol", "note"]
    out = []
    for r in rows:
        status = f"{r.status} ({r.code})" if r.code and r.status != "ok" else r.status
        line = [r.scenario, status, _fmt(r.tflops.get("kernel"), 1)]
        for b in baselines:
            line += [_fmt(r.tflops.get(b), 1), _fmt(r.ratio.get(b), 3)]
        chk = r.check or {}
        note = row_note(r, column_notes)
        if r.flags:
            note = "; ".join(["ALARM " + f for f in r.flags] + ([note] if note else []))
        line += [
            f"{chk['max_err']:.2e}" if chk.get("max_err") is not None else "",
            f"{chk['tol']:.2e}" if chk.get("tol") is not None else "",
            note[:160],
        ]
        out.append(line)
    return headers, out


def write_csv(path: Path, rows: list[ScenarioResult], baselines: list[str]) -> None:
    headers, body = table_rows(rows, baselines)
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(headers)
        w.writerows(body)


def summary_lines(summary: dict) -> list[str]:
    s = summary
    lines = [
        f"correct: {s['scenarios_correct']}/{s['scenarios_total']} scenarios"
        + (f", extended {s['extended_correct']}/{s['extended_total']}" if s["extended_total"] else "")
    ]
    for b, g in s["geomean"].items():
        if g is None:
            lines.append(f"vs {b}: no ratio measured")
        else:
            lines.append(
                f"vs {b}: geomean {g:.3f}x over {s['ratio_count'][b]} scenarios, "
                f"min {s['min_ratio'][b]:.3f}x ({s['min_ratio_scenario'][b]})"
            )
    if s.get("failures"):
        lines.append("not correct: " + ", ".join(f"{n} {code}" for code, n in s["failures"].items()))
    if s.get("flagged"):
        codes = sorted({c for cs in s["flagged"].values() for c in cs})
        lines.append(f"flagged for a look: {len(s['flagged'])} scenarios ({', '.join(codes)})")
    if "sanitize" in s:
        runs = s["sanitize"].get("runs", [])
        lines.append(
            "compute-sanitizer: "
            + ("clean" if s["sanitize"].get("ok") else "FAILED")
            + " ("
            + ", ".join(f"{r['tool']}: {r['summary'] or ('ok' if r['ok'] else 'failed')}" for r in runs)
            + ")"
        )
    return lines


def markdown(rows: list[ScenarioResult], baselines: list[str], summary: dict) -> str:
    prov = summary.get("provenance", {})
    parts = [
        f"# Bench: {summary['kernel'].get('path')}",
        "",
        f"- GPU: {prov.get('gpu_name')} (driver {prov.get('driver')}), date {prov.get('date')}, "
        f"commit {prov.get('git_sha')}, kernel sha256 {summary['kernel'].get('sha256', '')[:16]}",
        f"- seed {prov.get('seed')}; torch {prov.get('torch')}, CUDA {prov.get('cuda')}",
        "",
    ]
    parts += [f"- {l}" for l in summary_lines(summary)] + [""]
    for b in baselines:
        bd = breakdown(rows, b)
        if not any(bd.values()):
            continue
        parts.append(f"## Geometric mean of the ratio vs {b}")
        for group, vals in bd.items():
            items = ", ".join(f"{k}: {v:.3f}" for k, v in vals.items() if v is not None)
            parts.append(f"- per {group.replace('_', ' ')}: {items}")
        parts.append("")
    missing = missing_columns(rows, baselines)
    headers, body = table_rows(rows, baselines, missing)
    parts.append("## Per scenario")
    parts += [f"- {b}: no number in any row: {why}" for b, why in missing.items()] + ([""] if missing else [])
    parts.append(tabulate(body, headers=headers, tablefmt="github"))
    return "\n".join(parts) + "\n"
