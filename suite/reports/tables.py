"""The report's tables, computed once from the rows and written as Markdown, CSV and LaTeX
(booktabs): the per-scenario table, the geometric means (overall, per head configuration, per
sequence length, causal vs not), and each scenario as a fraction of the measured GEMM reference; for a
run timed on several input distributions also the distribution x baseline table, the data-dependent
rows, and every scenario on every distribution.

A per-scenario view is one of VIEWS or a distribution's name: `lowest` (each row's lowest ratio over
the distributions, its times pooled over them: the rows as stored), `worst` (each baseline's ratios
on its headline distribution, the worst one) or one distribution's ratios and TFLOP/s."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from .. import report
from ..results import ScenarioResult, geomean, missing_columns, row_note
from ..scenarios import HEAD_CONFIGS, SEQLENS
from .data import ArchResults

LOWEST, WORST = "lowest", "worst"
VIEWS = (LOWEST, WORST)


@dataclass
class Table:
    name: str
    headers: list[str]
    rows: list[list]  # raw values: str, int, float or None
    digits: list[int | None]  # per column: decimals for floats (None: as is)

    def formatted(self) -> list[list[str]]:
        out = []
        for row in self.rows:
            out.append([_fmt(v, d) for v, d in zip(row, self.digits)])
        return out

    def markdown(self) -> str:
        return tabulate(self.formatted(), headers=self.headers, tablefmt="github", disable_numparse=True)

    def latex(self) -> str:
        return tabulate(self.formatted(), headers=self.headers, tablefmt="latex_booktabs", disable_numparse=True)

    def write(self, folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        csv_path, tex_path = folder / f"{self.name}.csv", folder / f"{self.name}.tex"
        with open(csv_path, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow(self.headers)
            w.writerows([["" if v is None else v for v in row] for row in self.rows])
        tex_path.write_text(self.latex() + "\n")
        return [csv_path, tex_path]


def _fmt(v, digits: int | None) -> str:
    if v is None:
        return ""
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float) and digits is not None:
        return f"{v:.{digits}f}"
    return str(v)


def ceiling_fraction(tflops: float | None, ceiling: float | None) -> float | None:
    if not tflops or not ceiling:
        return None
    return tflops / ceiling


def column_notes(res: ArchResults) -> dict[str, str]:
    """{baseline: why} for a baseline with no number in any timed scenario: said once for its column."""
    return missing_columns(res.grid_rows, res.baselines)


def view_ratio(res: ArchResults, r: ScenarioResult, baseline: str, view: str = LOWEST) -> float | None:
    """A row's ratio to `baseline` in a view (see the module's doc)."""
    if view == LOWEST:
        return r.ratio.get(baseline)
    d = report.worst_distribution(res.summary, baseline) if view == WORST else view
    return (r.ratio_by_distribution.get(d) or {}).get(baseline) if d else r.ratio.get(baseline)


def view_tflops(r: ScenarioResult, impl: str, view: str = LOWEST) -> float | None:
    """A row's TFLOP/s of `impl` in a view: pooled over the distributions, or one distribution's."""
    if view in VIEWS:
        return r.tflops.get(impl)
    return (r.tflops_by_distribution.get(view) or {}).get(impl)


def scenario_table(res: ArchResults, view: str = LOWEST) -> Table:
    """The per-scenario table; a data-dependent row says so in its note; `kernel IQR %` is the
    spread of the kernel's timed calls (report.kernel_iqr), on the view's distribution."""
    baselines = res.baselines
    flagged = report.data_dependent_rows(res.summary)
    skip = column_notes(res)
    ceiling = res.ceiling_tflops
    headers = ["scenario", "correct", "kernel TFLOP/s", "kernel % of GEMM"]
    digits: list[int | None] = [None, None, 1, 1]
    for b in baselines:
        headers += [f"{b} TFLOP/s", f"ratio vs {b}"]
        digits += [1, 3]
    headers += [report.IQR_HEADER, "max err", "tol", "note"]
    digits += [1, None, None, None]
    rows = []
    for r in res.grid_rows:
        k = view_tflops(r, "kernel", view)
        frac = ceiling_fraction(k, ceiling)
        line = [r.scenario, r.status if r.status != "ok" else "yes", k, 100 * frac if frac is not None else None]
        for b in baselines:
            line += [view_tflops(r, b, view), view_ratio(res, r, b, view)]
        iqr = report.kernel_iqr(r, None if view in VIEWS else view)
        line.append(None if iqr is None else 100 * iqr)
        chk = r.check or {}
        note = row_note(r, skip)
        if r.scenario in flagged:
            note = "; ".join([report.data_dependent_note(flagged[r.scenario])] + ([note] if note else []))
        line += [
            f"{chk['max_err']:.2e}" if chk.get("max_err") is not None else None,
            f"{chk['tol']:.2e}" if chk.get("tol") is not None else None,
            note[:120] or None,
        ]
        rows.append(line)
    return Table("scenarios", headers, rows, digits)


def _group_rows(rows: list[ScenarioResult]) -> list[tuple[str, str, list[ScenarioResult]]]:
    order_hc = [hc.name for hc in HEAD_CONFIGS]
    out = [("overall", "all", rows)]
    by_hc: dict[str, list] = {}
    by_s: dict[int, list] = {}
    for r in rows:
        by_hc.setdefault(r.head_config, []).append(r)
        by_s.setdefault(r.seqlen_q, []).append(r)
    for hc in sorted(by_hc, key=lambda h: (order_hc.index(h) if h in order_hc else 99, h)):
        out.append(("head config", hc, by_hc[hc]))
    for s in sorted(by_s, key=lambda s: (SEQLENS.index(s) if s in SEQLENS else 99, s)):
        out.append(("seqlen", str(s), by_s[s]))
    out.append(("mask", "non-causal", [r for r in rows if not r.causal]))
    out.append(("mask", "causal", [r for r in rows if r.causal]))
    return [g for g in out if g[2]]


def geomean_table(res: ArchResults) -> Table:
    """Geometric means of the ratio per baseline, and of the kernel's share of the GEMM reference,
    over the correct grid scenarios of each group; a baseline's ratios are those of its headline
    distribution where the run has several (so `overall` is the headline)."""
    baselines = res.baselines
    ceiling = res.ceiling_tflops
    worst = {b: report.worst_distribution(res.summary, b) for b in baselines}
    headers = (
        ["group", "value", "correct"]
        + [f"geomean vs {b}" + (f" (on {worst[b]})" if worst[b] else "") for b in baselines]
        + ["kernel TFLOP/s (geomean)", "kernel % of GEMM (geomean)"]
    )
    digits: list[int | None] = [None, None, None] + [3] * len(baselines) + [1, 1]
    rows = []
    for group, key, members in _group_rows(res.grid_rows):
        ok = [r for r in members if r.correct]
        line: list = [group, key, f"{len(ok)}/{len(members)}"]
        for b in baselines:
            line.append(geomean([x for r in ok if (x := view_ratio(res, r, b, WORST))]))
        tf = geomean([r.tflops["kernel"] for r in ok if r.tflops.get("kernel")])
        line += [tf, 100 * tf / ceiling if tf and ceiling else None]
        rows.append(line)
    return Table("geomeans", headers, rows, digits)


def distribution_table(res: ArchResults) -> Table:
    """Input distribution x baseline: each distribution's geometric mean and lowest ratio, and the
    baselines whose headline it is (summary.json's; no rows for a run timed on one distribution)."""
    headers, rows = report.distribution_table(res.summary, res.baselines)
    return Table("distributions", headers, rows, [None] + [3] * (len(headers) - 2) + [None])


def data_dependent_table(res: ArchResults) -> Table:
    """The rows summary.json flags as data-dependent, with the kernel's and the baselines' spreads."""
    headers, rows = report.data_dependent_table(res.summary, res.rows)
    return Table("data_dependent", headers, rows, [None, 3, 3, None, None])


def by_distribution_table(res: ArchResults) -> Table:
    """Every timed scenario on every input distribution: the check there, the kernel's and each
    baseline's TFLOP/s and ratio (CSV and LaTeX only: four times the per-scenario table)."""
    headers = ["scenario", "distribution", "max err", "tol", "kernel TFLOP/s"]
    digits: list[int | None] = [None, None, None, None, 1]
    for b in res.baselines:
        headers += [f"{b} TFLOP/s", f"ratio vs {b}"]
        digits += [1, 3]
    rows = []
    for r in res.grid_rows:
        for d in report.distributions(res.summary):
            chk = r.checks_by_distribution.get(d) or {}
            line = [
                r.scenario,
                d,
                f"{chk['max_err']:.2e}" if chk.get("max_err") is not None else None,
                f"{chk['tol']:.2e}" if chk.get("tol") is not None else None,
                view_tflops(r, "kernel", d),
            ]
            for b in res.baselines:
                line += [view_tflops(r, b, d), view_ratio(res, r, b, d)]
            rows.append(line)
    return Table("scenarios_by_distribution", headers, rows, digits)


def extended_table(res: ArchResults) -> Table:
    """The extended correctness set: a count per head configuration, and every failure by name."""
    rows = []
    by_hc: dict[str, list] = {}
    for r in res.extended_rows:
        by_hc.setdefault(r.head_config, []).append(r)
    for hc, members in by_hc.items():
        bad = [r for r in members if not r.correct]
        rows.append(
            [
                hc,
                f"{len(members) - len(bad)}/{len(members)}",
                ", ".join(f"{r.scenario} ({r.status})" for r in bad[:6])
                + (f" and {len(bad) - 6} more" if len(bad) > 6 else "")
                or None,
            ]
        )
    return Table("extended", ["head config", "correct", "failures"], rows, [None, None, None])
