"""The report's tables, computed once from the rows and written as Markdown, CSV and LaTeX
(booktabs): the per-scenario table, the geometric means (overall, per head configuration, per
sequence length, causal vs not), and each scenario as a fraction of the measured GEMM ceiling."""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from ..results import ScenarioResult, geomean, missing_columns, row_note
from ..scenarios import HEAD_CONFIGS, SEQLENS
from .data import ArchResults


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


def scenario_table(res: ArchResults) -> Table:
    baselines = res.baselines
    skip = column_notes(res)
    ceiling = res.ceiling_tflops
    headers = ["scenario", "correct", "kernel TFLOP/s", "kernel % of GEMM"]
    digits: list[int | None] = [None, None, 1, 1]
    for b in baselines:
        headers += [f"{b} TFLOP/s", f"ratio vs {b}"]
        digits += [1, 3]
    headers += ["max err", "tol", "note"]
    digits += [None, None, None]
    rows = []
    for r in res.grid_rows:
        k = r.tflops.get("kernel")
        frac = ceiling_fraction(k, ceiling)
        line = [r.scenario, r.status if r.status != "ok" else "yes", k, 100 * frac if frac is not None else None]
        for b in baselines:
            line += [r.tflops.get(b), r.ratio.get(b)]
        chk = r.check or {}
        note = row_note(r, skip)
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
    """Geometric means of the ratio per baseline, and of the kernel's share of the GEMM ceiling,
    over the correct grid scenarios of each group."""
    baselines = res.baselines
    ceiling = res.ceiling_tflops
    headers = (
        ["group", "value", "correct"]
        + [f"geomean vs {b}" for b in baselines]
        + ["kernel TFLOP/s (geomean)", "kernel % of GEMM (geomean)"]
    )
    digits: list[int | None] = [None, None, None] + [3] * len(baselines) + [1, 1]
    rows = []
    for group, key, members in _group_rows(res.grid_rows):
        ok = [r for r in members if r.correct]
        line: list = [group, key, f"{len(ok)}/{len(members)}"]
        for b in baselines:
            line.append(geomean([r.ratio[b] for r in ok if r.ratio.get(b)]))
        tf = geomean([r.tflops["kernel"] for r in ok if r.tflops.get("kernel")])
        line += [tf, 100 * tf / ceiling if tf and ceiling else None]
        rows.append(line)
    return Table("geomeans", headers, rows, digits)


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
