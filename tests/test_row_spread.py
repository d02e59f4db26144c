"""The spread of each row's measurement in the per-scenario tables (bench.md, bench.csv, REPORT.md,
REPORT.html and tables/scenarios.csv): the interquartile range of the kernel's timed calls over their
median, per input distribution where the table shows one."""

import csv

import pytest

from kernelseek_suite import report
from kernelseek_suite.reports import html, tables
from kernelseek_suite.reports.data import load
from kernelseek_suite.results import summarize
from synthetic_results import BASELINES, DISTRIBUTIONS, make_rows, write_results

ID = "d128-h16kv16-s4096"


def _noisier(rows, scenario, factors):
    """Give one row's kernel timing a spread of its own on each distribution."""
    (r,) = [r for r in rows if r.scenario == scenario]
    for d, f in factors.items():
        t = r.times_ms_by_distribution[d]["kernel"]
        t["iqr_ms"] = f * t["median_ms"]
    return r


def test_the_kernel_iqr_of_a_row():
    rows = make_rows(spread=0.02)
    r = next(r for r in rows if r.scenario == ID)
    assert report.kernel_iqr(r) == pytest.approx(0.02)
    r.times_ms = {}
    assert report.kernel_iqr(r) is None  # not timed (a wrong row)
    rows = make_rows(by_distribution=True)
    r = _noisier(rows, ID, {"standard": 0.01, "wide": 0.05, "llm": 0.02, "rising": 0.03})
    assert report.kernel_iqr(r) == pytest.approx(0.05)  # the largest of the distributions'
    assert report.kernel_iqr(r, "llm") == pytest.approx(0.02)


def test_bench_md_and_csv_give_the_spread_per_row(tmp_path):
    rows = make_rows(spread=0.02)
    report.write_csv(tmp_path / "bench.csv", rows, BASELINES)
    with open(tmp_path / "bench.csv") as f:
        got = {r["scenario"]: r for r in csv.DictReader(f)}
    assert got[ID]["kernel IQR %"] == "2.0"
    summary = summarize(rows, "bench", "sm90", {"path": "k.cu", "sha256": "0" * 64}, {}, BASELINES)
    per_scenario = report.markdown(rows, BASELINES, summary).split("## Per scenario")[1]
    assert report.IQR_MEANING in per_scenario
    header, _, *body = [[c.strip() for c in line.split("|")[1:-1]] for line in per_scenario.strip().splitlines()[2:]]
    row = next(cells for cells in body if cells[0] == ID)
    assert float(row[header.index("kernel IQR %")]) == 2.0


def test_the_reports_scenario_table_gives_the_spread_of_its_view(tmp_path):
    rows = make_rows(by_distribution=True)
    _noisier(rows, ID, {"standard": 0.01, "wide": 0.05, "llm": 0.02, "rising": 0.03})
    res = load(write_results(tmp_path / "sm90", rows))
    col = report.IQR_HEADER
    for view, want in ((tables.LOWEST, 5.0), (tables.WORST, 5.0), ("llm", 2.0), ("standard", 1.0)):
        t = tables.scenario_table(res, view)
        row = next(r for r in t.rows if r[0] == ID)
        assert row[t.headers.index(col)] == pytest.approx(want), view
    # REPORT.html switches the column with the view, as it does the TFLOP/s
    views = html.table_views(res)
    i = tables.scenario_table(res).headers.index(col)
    assert i in views["cols"]
    j = views["cols"].index(i)
    assert [views["cells"][d][ID][j][1] for d in DISTRIBUTIONS] == ["1.0", "5.0", "2.0", "3.0"]
