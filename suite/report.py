"""Render saved results: the per-scenario table (Markdown via tabulate, CSV), the summary lines, and
what a run timed on several input distributions adds to them (summary.json version 3): the headline
per baseline on its worst distribution, each distribution's geometric mean and lowest ratio, and the
data-dependent rows. Everything here reads rows and the summary from files; nothing is measured or
computed twice. REPORT.md and REPORT.html (suite/reports/) show the same, from the same functions."""

from __future__ import annotations

import csv
import dataclasses
from pathlib import Path

from tabulate import tabulate

from .results import ScenarioResult, breakdown, data_dependence, missing_columns, row_note

DATA_DEPENDENT = "data-dependent"
# what the mark means, in one sentence (summary.json's `data_dependent`); {threshold}: the run's
DATA_DEPENDENT_MEANING = (
    "the kernel's time on the row moves across the input distributions by more than any baseline's "
    "does anywhere in the run: a row's spread is its slowest distribution's median time over its "
    "fastest, and the threshold, {threshold}, is the largest spread of any baseline on any correct row "
    "(FA3, FA4 and cuDNN take the same time on any data, so theirs is the measurement's own noise)"
)
DATA_DEPENDENT_SHOWN = 5  # how many flagged rows the summary lines name


def _fmt(x, nd=2):
    return "" if x is None else f"{x:.{nd}f}"


# ---- the input distributions (summary.json version 3; a version-2 summary has none) --------------


def distributions(summary: dict) -> list[str]:
    """The input distributions the run timed every scenario on, in order ([] for one distribution)."""
    return list(summary.get("distributions") or [])


def worst_distribution(summary: dict, baseline: str) -> str | None:
    """The distribution whose geometric mean against `baseline` is the headline (None: version 2)."""
    return (summary.get("worst_distribution") or {}).get(baseline) if distributions(summary) else None


def min_distribution(summary: dict, baseline: str) -> str | None:
    """The distribution the run's lowest ratio against `baseline` was measured on."""
    want = ((summary.get("min_ratio") or {}).get(baseline), (summary.get("min_ratio_scenario") or {}).get(baseline))
    for d, e in (summary.get("by_distribution") or {}).items():
        if want[0] is not None and (e["min_ratio"].get(baseline), e["min_ratio_scenario"].get(baseline)) == want:
            return d
    return None


def data_dependent_rows(summary: dict) -> dict[str, dict]:
    """{scenario: {"kernel": spread, "baselines": spread}}: the rows summary.json flags."""
    return dict((summary.get("data_dependent") or {}).get("scenarios") or {})


def data_dependent_threshold(summary: dict) -> float | None:
    return (summary.get("data_dependent") or {}).get("threshold")


def data_dependent_note(entry: dict) -> str:
    """A flagged row's mark, for the note column of a per-scenario table."""
    b = entry.get("baselines")
    return f"{DATA_DEPENDENT} (kernel {entry['kernel']:.3f}x across the inputs" + (
        f", baselines {b:.3f}x)" if b else ")"
    )


def meaning(summary: dict) -> str:
    t = data_dependent_threshold(summary)
    return DATA_DEPENDENT_MEANING.format(threshold=f"{t:.3f}x in this run" if t else "not measured in this run")


def distribution_table(summary: dict, baselines: list[str]) -> tuple[list[str], list[list]]:
    """Input distribution x baseline: the geometric mean and the lowest ratio on each distribution,
    and the baselines whose headline it is (raw values; the baselines with no number left out)."""
    per = summary.get("by_distribution") or {}
    shown = [b for b in baselines if any(e["geomean"].get(b) is not None for e in per.values())]
    headers = ["distribution"]
    for b in shown:
        headers += [f"geomean vs {b}", f"lowest vs {b}"]
    headers.append("headline of")
    body = []
    for d in distributions(summary):
        e = per.get(d) or {"geomean": {}, "min_ratio": {}}
        line: list = [d]
        for b in shown:
            line += [e["geomean"].get(b), e["min_ratio"].get(b)]
        line.append(", ".join(b for b in shown if worst_distribution(summary, b) == d) or None)
        body.append(line)
    return headers, body


def kernel_extremes(row: ScenarioResult | None) -> tuple[str | None, str | None]:
    """(the distribution the kernel is slowest on, the one it is fastest on) for a row."""
    meds = {
        d: t["kernel"]["median_ms"]
        for d, t in ((row.times_ms_by_distribution if row else None) or {}).items()
        if (t.get("kernel") or {}).get("median_ms")
    }
    if not meds:
        return None, None
    return max(meds, key=lambda d: meds[d]), min(meds, key=lambda d: meds[d])


def data_dependent_table(summary: dict, rows: list[ScenarioResult]) -> tuple[list[str], list[list]]:
    """The flagged rows with their spreads, the kernel's largest first (raw values)."""
    by_id = {r.scenario: r for r in rows}
    flagged = sorted(data_dependent_rows(summary).items(), key=lambda kv: (-kv[1]["kernel"], kv[0]))
    headers = ["scenario", "kernel spread", "largest baseline spread", "kernel slowest on", "kernel fastest on"]
    return headers, [[s, e["kernel"], e.get("baselines"), *kernel_extremes(by_id.get(s))] for s, e in flagged]


IQR_HEADER = "kernel IQR %"  # the per-scenario tables' column of the kernel's timing spread
IQR_MEANING = (
    f"`{IQR_HEADER}`: the interquartile range of the kernel's timed calls over their median, in percent "
    "(with several input distributions, the largest of theirs): the spread of the measurement behind the row."
)


def kernel_iqr(row: ScenarioResult, distribution: str | None = None) -> float | None:
    """The spread of the kernel's timed calls on a row: their interquartile range over their median,
    on one distribution, or, for a row timed on several, the largest of them (a pooled spread would
    count the data-dependence too); None when the kernel was not timed."""

    def one(t: dict | None) -> float | None:
        t = t or {}
        return t["iqr_ms"] / t["median_ms"] if t.get("median_ms") and t.get("iqr_ms") is not None else None

    if distribution is not None:
        return one((row.times_ms_by_distribution.get(distribution) or {}).get("kernel"))
    per = [x for t in row.times_ms_by_distribution.values() if (x := one(t.get("kernel"))) is not None]
    return max(per) if per else one(row.times_ms.get("kernel"))


def on_distribution(rows: list[ScenarioResult], distribution: str) -> list[ScenarioResult]:
    """The rows with `ratio` and `tflops` those of one distribution (for the breakdowns of a
    headline, which is one distribution's)."""
    return [
        dataclasses.replace(
            r,
            ratio=dict(r.ratio_by_distribution.get(distribution) or {}),
            tflops=dict(r.tflops_by_distribution.get(distribution) or {}),
        )
        for r in rows
    ]


def table_rows(
    rows: list[ScenarioResult],
    baselines: list[str],
    column_notes: dict[str, str] | None = None,
    flagged: dict[str, dict] | None = None,
) -> tuple[list[str], list[list]]:
    """The per-scenario table; a baseline in `column_notes` (missing from the whole column) is left
    out of the rows' notes; a row in `flagged` (summary.json's data-dependent rows; default: as the
    rows give them) is marked so in its note. `ratio` is a row's lowest over the distributions;
    `kernel IQR %` the spread of the kernel's timed calls (kernel_iqr)."""
    if flagged is None:
        flagged = data_dependence(rows, baselines)["scenarios"]
    headers = ["scenario", "status", "kernel TFLOP/s"]
    for b in baselines:
        headers += [f"{b} TFLOP/s", f"ratio vs {b}"]
    headers += [IQR_HEADER, "max err", "tol", "note"]
    out = []
    for r in rows:
        status = f"{r.status} ({r.code})" if r.code and r.status != "ok" else r.status
        line = [r.scenario, status, _fmt(r.tflops.get("kernel"), 1)]
        for b in baselines:
            line += [_fmt(r.tflops.get(b), 1), _fmt(r.ratio.get(b), 3)]
        iqr = kernel_iqr(r)
        line.append(_fmt(None if iqr is None else 100 * iqr, 1))
        chk = r.check or {}
        note = row_note(r, column_notes)
        if r.scenario in flagged:
            note = "; ".join([data_dependent_note(flagged[r.scenario])] + ([note] if note else []))
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
    dists = distributions(s)
    for b, g in s["geomean"].items():
        if g is None:
            lines.append(f"vs {b}: no ratio measured")
            continue
        worst, low = worst_distribution(s, b), min_distribution(s, b)
        lines.append(
            f"vs {b}: geomean {g:.3f}x over {s['ratio_count'][b]} scenarios"
            + (f" on {worst}, the worst of {len(dists)} input distributions" if worst else "")
            + f", min {s['min_ratio'][b]:.3f}x ({s['min_ratio_scenario'][b]}{f', on {low}' if low else ''})"
        )
        per = [(d, ((s.get("by_distribution") or {}).get(d) or {}).get("geomean", {}).get(b)) for d in dists]
        if worst and per:
            each = ", ".join(f"{d} {x:.3f}x" if x is not None else f"{d} -" for d, x in per)
            lines.append(f"vs {b} per input distribution: {each}")
    lines += fast_p_lines(s.get("fast_p"), s.get("fast_p_total"))
    if dists:
        lines.append(_data_dependent_line(s))
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


def fast_p_lines(fast_p: dict | None, total: int | None) -> list[str]:
    """One line per baseline with its fast_p (summary.json's; none for a summary without it)."""
    out = []
    for b, shares in (fast_p or {}).items():
        if shares:
            each = ", ".join(f"p={p} {100 * x:.1f}%" for p, x in shares.items())
            out.append(f"vs {b} fast_p (correct and more than p times as fast, of {total} timed scenarios): {each}")
    return out


def _data_dependent_line(summary: dict) -> str:
    flagged = data_dependent_rows(summary)
    t = data_dependent_threshold(summary)
    if t is None:
        return "data-dependent: not assessed (no baseline was timed on two distributions)"
    if not flagged:
        return f"data-dependent: none (no kernel time spreads across the inputs by more than {t:.3f}x)"
    shown = sorted(flagged.items(), key=lambda kv: -kv[1]["kernel"])[:DATA_DEPENDENT_SHOWN]
    more = len(flagged) - len(shown)
    return (
        f"data-dependent: {len(flagged)} scenario{'s' if len(flagged) > 1 else ''} where the kernel's time "
        f"spreads across the inputs by more than any baseline's ({t:.3f}x): "
        + ", ".join(f"{sid} {e['kernel']:.3f}x" for sid, e in shown)
        + (f" and {more} more" if more else "")
    )


def distribution_markdown(rows: list[ScenarioResult], baselines: list[str], summary: dict) -> list[str]:
    """bench.md's sections on the input distributions (none for a run timed on one)."""
    dists = distributions(summary)
    if not dists:
        return []
    headers, body = distribution_table(summary, baselines)
    parts = [
        "## Input distributions",
        f"Every scenario timed on {len(dists)} input distributions; the headline geomean against each "
        "baseline is its lowest distribution's (`headline of`), and a row's ratio its lowest over them.",
        "",
        tabulate(
            [[_cell(v) for v in line] for line in body], headers=headers, tablefmt="github", disable_numparse=True
        ),
        "",
        "## Data-dependent rows",
        f"A row is marked `{DATA_DEPENDENT}` when {meaning(summary)}.",
        "",
    ]
    headers, body = data_dependent_table(summary, rows)
    if body:
        parts += [
            tabulate(
                [[_cell(v) for v in line] for line in body], headers=headers, tablefmt="github", disable_numparse=True
            ),
            "",
        ]
    else:
        parts += ["None in this run.", ""]
    return parts


def _cell(v) -> str:
    return _fmt(v, 3) if isinstance(v, float) else ("" if v is None else str(v))


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
    parts += distribution_markdown(rows, baselines, summary)
    for b in baselines:
        worst = worst_distribution(summary, b)
        bd = breakdown(on_distribution(rows, worst) if worst else rows, b)
        if not any(bd.values()):
            continue
        parts.append(f"## Geometric mean of the ratio vs {b}" + (f", on {worst} (the headline's)" if worst else ""))
        for group, vals in bd.items():
            items = ", ".join(f"{k}: {v:.3f}" for k, v in vals.items() if v is not None)
            parts.append(f"- per {group.replace('_', ' ')}: {items}")
        parts.append("")
    missing = missing_columns(rows, baselines)
    headers, body = table_rows(rows, baselines, missing, data_dependent_rows(summary))
    parts.append("## Per scenario")
    parts += [IQR_MEANING, ""]
    parts += [f"- {b}: no number in any row: {why}" for b, why in missing.items()] + ([""] if missing else [])
    parts.append(tabulate(body, headers=headers, tablefmt="github"))
    return "\n".join(parts) + "\n"
