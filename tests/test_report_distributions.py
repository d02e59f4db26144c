"""What a run timed on several input distributions (summary.json version 3) shows: the summary lines
`eval` and `bench` print, `eval --json`, bench.md and bench.csv, REPORT.md with its tables and plots,
REPORT.html's data; `agreement` on such runs; and a run timed on one distribution (version 2) as
before. The synthetic run (synthetic_results.make_rows(by_distribution=True)): the kernel takes 1.25x
as long on `rising` on one row (SLOW), the one data-dependent row; fa3's worst distribution is
`rising`, cudnn's `wide`. Nothing here is a measurement."""

import csv
import json
import math
import re
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
from click.testing import CliRunner

from kernelseek_suite import report
from kernelseek_suite.cli import main
from kernelseek_suite.reports import load, plots, render, scale
from kernelseek_suite.reports.html import heatmaps, model, render_html, scenario_detail, table_views
from kernelseek_suite.results import geomean, summarize
from kernelseek_suite.scaleout.agreement import ratio_agreement
from synthetic_results import BASELINES, DISTRIBUTIONS, SLOW, make_rows, write_results

KERNELS = Path(__file__).parent / "kernels"
SLOW_ID = next(iter(SLOW))


def _summary(rows):
    return summarize(rows, "bench", "sm90", {"path": "k.cu", "sha256": "0" * 64}, {}, BASELINES)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A results folder of the synthetic run, rendered once (REPORT.md, tables, plots, REPORT.html)."""
    root = write_results(tmp_path_factory.mktemp("v3") / "sm90", make_rows(by_distribution=True))
    return render(root, html=True), load(root)


def _csv(path: Path) -> list[dict]:
    with open(path) as f:
        return list(csv.DictReader(f))


# ---- the synthetic run is what the tests below take it for ---------------------------------------


def test_the_synthetic_run_has_one_data_dependent_row_and_a_worst_distribution_per_baseline():
    s = _summary(make_rows(by_distribution=True))
    assert s["distributions"] == DISTRIBUTIONS
    assert s["worst_distribution"] == {"fa3": "rising", "fa4": "rising", "cudnn": "wide"}
    assert list(s["data_dependent"]["scenarios"]) == [SLOW_ID]
    assert s["data_dependent"]["threshold"] == pytest.approx(1.002 / 0.99, abs=1e-4)  # cudnn's spread
    for b in BASELINES:  # the headline is the lowest distribution's geomean
        assert s["geomean"][b] == min(e["geomean"][b] for e in s["by_distribution"].values())


# ---- the summary lines (eval, bench, report, reproduce) -------------------------------------------


def test_summary_lines_give_the_worst_distribution_as_the_headline_and_each_distribution():
    s = _summary(make_rows(by_distribution=True))
    lines = report.summary_lines(s)
    for b, worst in (("fa3", "rising"), ("cudnn", "wide")):
        (head,) = [l for l in lines if l.startswith(f"vs {b}: geomean")]
        assert head == (
            f"vs {b}: geomean {s['geomean'][b]:.3f}x over 182 scenarios on {worst}, the worst of 4 input "
            f"distributions, min {s['min_ratio'][b]:.3f}x ({SLOW_ID}, on rising)"
        )
        (per,) = [l for l in lines if l.startswith(f"vs {b} per input distribution: ")]
        want = ", ".join(f"{d} {s['by_distribution'][d]['geomean'][b]:.3f}x" for d in DISTRIBUTIONS)
        assert per == f"vs {b} per input distribution: {want}"
    (dd,) = [l for l in lines if l.startswith("data-dependent:")]
    spread = s["data_dependent"]["scenarios"][SLOW_ID]["kernel"]
    assert dd.startswith("data-dependent: 1 scenario where the kernel's time spreads across the inputs")
    assert dd.endswith(f"(1.012x): {SLOW_ID} {spread:.3f}x")


def test_summary_lines_of_a_run_on_one_distribution_are_as_before():
    s = _summary(make_rows())
    want = ["correct: 182/182 scenarios, extended 30/30"] + [
        f"vs {b}: geomean {s['geomean'][b]:.3f}x over 182 scenarios, "
        f"min {s['min_ratio'][b]:.3f}x ({s['min_ratio_scenario'][b]})"
        for b in BASELINES
    ]
    fast_p = report.fast_p_lines(s["fast_p"], s["fast_p_total"])  # added to schema 3 (test_fast_p.py)
    assert len(fast_p) == len(BASELINES)
    assert report.summary_lines(s) == want + fast_p
    # a version-2 summary.json has none of the distributions' keys (nor fast_p)
    old = {
        k: v
        for k, v in s.items()
        if k not in ("distributions", "worst_distribution", "by_distribution", "fast_p", "fast_p_total")
    }
    assert report.summary_lines({**old, "schema_version": 2}) == want


def test_a_distribution_without_a_number_reads_as_a_dash():
    s = _summary(make_rows(by_distribution=True))
    s["by_distribution"]["llm"]["geomean"]["fa3"] = None
    (per,) = [l for l in report.summary_lines(s) if l.startswith("vs fa3 per input distribution: ")]
    assert ", llm -, rising " in per


def test_flagged_rows_past_the_shown_few_are_counted():
    s = _summary(make_rows(by_distribution=True))
    s["data_dependent"]["scenarios"] = {f"s{i}": {"kernel": 1.1 + i / 100, "baselines": 1.01} for i in range(7)}
    (dd,) = [l for l in report.summary_lines(s) if l.startswith("data-dependent:")]
    assert "7 scenarios" in dd and dd.endswith("s6 1.160x, s5 1.150x, s4 1.140x, s3 1.130x, s2 1.120x and 2 more")


# ---- eval: what it prints, and --json ------------------------------------------------------------


@pytest.fixture
def fake_eval(monkeypatch, tmp_path):
    """`eval` with the evaluation replaced by the synthetic run (written to its --out)."""
    from kernelseek_suite import evaluate

    rows = make_rows(by_distribution=True)
    out = tmp_path / "out"
    out.mkdir()
    (out / "bench.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows))
    summary = {**_summary(rows), "out_dir": str(out)}

    def fake(kernel, arch, baseline, out_dir, **kw):
        return json.loads(json.dumps(summary))

    monkeypatch.setattr(evaluate, "evaluate", fake)
    return summary


def test_eval_json_keeps_every_key_and_adds_the_distributions(fake_eval):
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "spin.cu"), "--json"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    for key in ("geomean", "min_ratio", "min_ratio_scenario", "ratio_count", "scenarios_total", "scenarios_correct"):
        assert got[key] == fake_eval[key]
    assert got["worst_distribution"] == {"fa3": "rising", "fa4": "rising", "cudnn": "wide"}
    assert got["geomean"]["fa3"] == got["by_distribution"]["rising"]["geomean"]["fa3"]
    assert list(got["by_distribution"]) == DISTRIBUTIONS and list(got["data_dependent"]["scenarios"]) == [SLOW_ID]


def test_eval_prints_the_headline_on_the_worst_distribution_and_each_one(fake_eval):
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "spin.cu")])
    assert r.exit_code == 0, r.output
    for line in report.summary_lines(fake_eval):
        assert line in r.stdout
    assert "vs fa3 per input distribution: standard" in r.stdout and "data-dependent: 1 scenario" in r.stdout


# ---- bench.md and bench.csv ----------------------------------------------------------------------


def test_bench_md_has_the_distribution_table_and_the_data_dependent_rows(tmp_path):
    rows = make_rows(by_distribution=True)
    s = _summary(rows)
    md = report.markdown(rows, BASELINES, s)
    dist = md[md.index("## Input distributions") : md.index("## Data-dependent rows")]
    for d in DISTRIBUTIONS:
        (line,) = [l for l in dist.splitlines() if l.startswith(f"| {d} ")]
        cells = [c.strip() for c in line.strip("|").split("|")]
        e = s["by_distribution"][d]
        assert cells[1:7] == [f"{x:.3f}" for b in BASELINES for x in (e["geomean"][b], e["min_ratio"][b])]
        assert cells[7] == {"rising": "fa3, fa4", "wide": "cudnn"}.get(d, "")
    dd = md[md.index("## Data-dependent rows") : md.index("## Geometric mean of the ratio")]
    assert "the threshold, 1.012x in this run, is the largest spread of any baseline" in dd
    (line,) = [l for l in dd.splitlines() if l.startswith(f"| {SLOW_ID} ")]
    assert [c.strip() for c in line.strip("|").split("|")] == [SLOW_ID, "1.255", "1.012", "rising", "llm"]
    # the breakdowns are of the headline: each baseline's worst distribution
    assert "## Geometric mean of the ratio vs fa3, on rising (the headline's)" in md
    assert "## Geometric mean of the ratio vs cudnn, on wide (the headline's)" in md
    causal = geomean([r.ratio_by_distribution["rising"]["fa3"] for r in rows if r.causal and not r.extended])
    fa3 = md[md.index("vs fa3, on rising") : md.index("vs fa4, on rising")]
    assert f"causal: {causal:.3f}" in fa3
    # the per-scenario table marks the one flagged row, in bench.md and in bench.csv
    table = md[md.index("## Per scenario") :]
    assert table.count("data-dependent") == 1
    (line,) = [l for l in table.splitlines() if l.startswith(f"| {SLOW_ID} ")]
    assert "data-dependent (kernel 1.255x across the inputs, baselines 1.012x)" in line
    report.write_csv(tmp_path / "bench.csv", rows, BASELINES)
    notes = {r["scenario"]: r["note"] for r in _csv(tmp_path / "bench.csv")}
    assert (
        notes[SLOW_ID].startswith("data-dependent (kernel 1.255x")
        and sum("data-dependent" in n for n in notes.values()) == 1
    )


def test_bench_md_of_a_run_on_one_distribution_has_no_distribution_sections():
    rows = make_rows()
    md = report.markdown(rows, BASELINES, _summary(rows))
    assert "Input distributions" not in md and "data-dependent" not in md and "headline" not in md
    assert "## Geometric mean of the ratio vs fa3\n" in md


# ---- REPORT.md, its tables and its plots ---------------------------------------------------------


def test_report_claims_name_the_worst_distribution(run):
    out, res = run
    text = out.report.read_text()
    s = res.summary
    claims = text[text.index("## Claims") : text.index("## Input distributions")]
    for b, worst in (("fa3", "rising"), ("fa4", "rising"), ("cudnn", "wide")):
        assert (
            f"- vs {b}: geometric mean {s['geomean'][b]:.3f}x over 182 scenarios on the `{worst}` inputs, the worst "
            f"of the 4 input distributions (each below); lowest {s['min_ratio'][b]:.3f}x ({SLOW_ID}, on `rising`)."
        ) in claims


def test_report_tables_per_distribution_are_the_summarys(run):
    out, res = run
    s = res.summary
    folder = out.report.parent / "tables"
    dists = _csv(folder / "distributions.csv")
    assert [r["distribution"] for r in dists] == DISTRIBUTIONS
    for r in dists:
        e = s["by_distribution"][r["distribution"]]
        for b in BASELINES:
            assert float(r[f"geomean vs {b}"]) == e["geomean"][b] and float(r[f"lowest vs {b}"]) == e["min_ratio"][b]
    assert {r["distribution"]: r["headline of"] for r in dists} == {
        "standard": "",
        "wide": "cudnn",
        "llm": "",
        "rising": "fa3, fa4",
    }
    (dd,) = _csv(folder / "data_dependent.csv")
    assert (
        dd["scenario"] == SLOW_ID and float(dd["kernel spread"]) == s["data_dependent"]["scenarios"][SLOW_ID]["kernel"]
    )
    assert (dd["kernel slowest on"], dd["kernel fastest on"]) == ("rising", "llm")
    # the geometric means per group: each baseline on its headline distribution, so `overall` is the headline
    overall = _csv(folder / "geomeans.csv")[0]
    assert overall["group"] == "overall"
    for b in BASELINES:
        worst = s["worst_distribution"][b]
        assert math.isclose(float(overall[f"geomean vs {b} (on {worst})"]), s["geomean"][b], abs_tol=1e-4)
    # every scenario on every distribution
    by = _csv(folder / "scenarios_by_distribution.csv")
    assert len(by) == 182 * 4
    slow = {r["distribution"]: r for r in by if r["scenario"] == SLOW_ID}
    row = next(r for r in res.rows if r.scenario == SLOW_ID)
    for d in DISTRIBUTIONS:
        assert float(slow[d]["ratio vs fa3"]) == row.ratio_by_distribution[d]["fa3"]
        assert float(slow[d]["kernel TFLOP/s"]) == row.tflops_by_distribution[d]["kernel"]
    # the per-scenario table: the row's lowest ratio, and the flag in its note
    scen = {r["scenario"]: r for r in _csv(folder / "scenarios.csv")}
    assert float(scen[SLOW_ID]["ratio vs fa3"]) == row.ratio["fa3"] == row.ratio_by_distribution["rising"]["fa3"]
    assert scen[SLOW_ID]["note"].startswith("data-dependent")
    assert sum("data-dependent" in r["note"] for r in scen.values()) == 1


def test_report_says_what_data_dependent_means_and_lists_the_row(run):
    out, res = run
    text = out.report.read_text()
    section = text[text.index("### Data-dependent rows") : text.index("## Geometric means")]
    assert (
        "when the kernel's time on the row moves across the input distributions by more than any baseline's" in section
    )
    assert "the threshold, 1.012x in this run, is the largest spread of any baseline on any correct row" in section
    assert re.search(rf"\| {SLOW_ID} +\| 1\.255 +\| 1\.012 +\| rising +\| llm +\|", section)
    per_scenario = text[text.index("## Per scenario") :]
    assert per_scenario.count("data-dependent (kernel 1.255x") == 1


def test_report_has_a_heat_map_per_distribution_named_and_listed(run):
    out, res = run
    text = out.report.read_text()
    names = {p.name for p in out.plots}
    for b in BASELINES:
        for m in ("causal", "non-causal"):
            assert f"ratio_vs_{b}_{m}.png" in names
            for d in DISTRIBUTIONS:
                assert f"ratio_vs_{b}_{m}_{d}.png" in names
    assert len(names) == 3 * 2 * 5 + 2
    files = next(l for l in text.splitlines() if l.startswith("- plots: "))
    assert all(f"`plots/{n}`" in files for n in names)
    # the headline's distribution drawn in, the others linked
    assert "### ratio vs fa3, causal, on rising (the headline's distribution)" in text
    assert "![ratio vs cudnn, causal, on wide](plots/ratio_vs_cudnn_causal_wide.png)" in text
    assert "[standard](plots/ratio_vs_fa3_causal_standard.png)" in text
    assert "[rising](plots/ratio_vs_cudnn_causal_rising.png)" in text


@pytest.fixture
def figures(monkeypatch):
    kept = []
    monkeypatch.setattr(plt, "close", lambda fig=None: kept.append(fig))
    return kept


def test_a_heat_map_of_one_distribution_shows_its_ratios_and_marks_the_flagged_row(run, figures, tmp_path):
    _, res = run
    row = next(r for r in res.rows if r.scenario == SLOW_ID)
    for d in (None, "rising", "standard"):
        plots.heatmap(res, "fa3", True, tmp_path / f"{d}.png", d)
    texts = [{t.get_text() for t in fig.axes[0].texts} for fig in figures]
    lowest, rising, standard = texts
    assert f"{row.ratio['fa3']:.2f}*" in lowest and f"{row.ratio_by_distribution['rising']['fa3']:.2f}*" in rising
    assert f"{row.ratio_by_distribution['standard']['fa3']:.2f}*" in standard and "0.76*" not in standard
    titles = [fig.axes[0].get_title() for fig in figures]
    assert "each row's lowest over the inputs" in titles[0] and "on rising inputs" in titles[1]
    assert figures[1].axes[0].get_xlabel().endswith("*: data-dependent")


# ---- REPORT.html's data --------------------------------------------------------------------------


def test_report_html_heat_maps_hold_every_view(run):
    _, res = run
    maps = {h["id"]: h for h in heatmaps(res)}
    fa3, cudnn = maps["fa3-causal"], maps["cudnn-causal"]
    assert list(fa3["views"]) == ["worst", "lowest", *DISTRIBUTIONS]
    assert (fa3["worst"], cudnn["worst"]) == ("rising", "wide")
    row = next(r for r in res.rows if r.scenario == SLOW_ID)

    def cell(h, view):
        return next(c for c in h["views"][view] if c["scenario"] == SLOW_ID)

    assert cell(fa3, "worst")["v"] == row.ratio_by_distribution["rising"]["fa3"]
    assert cell(cudnn, "worst")["v"] == row.ratio_by_distribution["wide"]["cudnn"]
    assert cell(fa3, "lowest")["v"] == row.ratio["fa3"] and fa3["cells"] == fa3["views"]["lowest"]
    std = cell(fa3, "standard")
    assert std["v"] == row.ratio_by_distribution["standard"]["fa3"] and std["color"] == scale.color(std["v"])
    assert std["label"] == f"{std['v']:.2f}*" and std["dd"]
    assert [c["scenario"] for c in fa3["views"]["llm"] if c["dd"]] == [SLOW_ID]


def test_report_html_table_views_and_hover_details(run):
    _, res = run
    tv = table_views(res)
    cells = tv["cells"]
    assert list(cells) == ["worst", "lowest", *DISTRIBUTIONS]
    col = tv["cols"].index(tv["ratio_cols"]["cudnn"])
    row = next(r for r in res.rows if r.scenario == SLOW_ID)
    assert cells["wide"][SLOW_ID][col] == [row.ratio_by_distribution["wide"]["cudnn"], "1.136"]
    assert cells["worst"][SLOW_ID][col][0] == row.ratio_by_distribution["wide"]["cudnn"]
    assert cells["lowest"][SLOW_ID][col][0] == row.ratio["cudnn"]
    d = scenario_detail(row, res.baselines, report.data_dependent_rows(res.summary))
    assert list(d["by_distribution"]) == DISTRIBUTIONS and d["data_dependent"]["kernel"] == 1.255
    rising = {i["name"]: i for i in d["by_distribution"]["rising"]}
    assert rising["kernel"]["median_ms"] == row.times_ms_by_distribution["rising"]["kernel"]["median_ms"]
    assert rising["fa3"]["ratio"] == row.ratio_by_distribution["rising"]["fa3"]
    m = model(res)
    assert (m["heatmap_view"], m["table_view"], m["distributions"]) == ("worst", "lowest", DISTRIBUTIONS)


def test_report_html_has_the_selectors_the_flag_and_the_distribution_section(run):
    out, _ = run
    html = out.html.read_text()
    assert '<select id="heatmap-view">' in html and '<select name="view">' in html
    assert 'name="data_dependent"' in html
    assert re.search(rf'data-scenario="{SLOW_ID}"\s+data-data-dependent="1" class="data-dependent"', html)
    assert html.count('data-data-dependent="1"') == 1
    section = html[html.index('<section id="distributions">') : html.index('<section id="provenance">')]
    assert "<h2>Input distributions</h2>" in section and "<table>" in section and SLOW_ID in section


def test_report_html_of_a_run_on_one_distribution_has_no_views(tmp_path):
    root = write_results(tmp_path / "sm90", make_rows())
    res = load(root)
    m = model(res)
    assert m["views"] == [] and m["heatmap_view"] is None and m["table_views"] == {}
    assert all("views" not in h for h in m["heatmaps"])
    html = render_html(root, tmp_path / "out").read_text()
    body = html[html.index("<body>") : html.index('<script type="application/json" id="page-data">')]
    assert 'id="heatmap-view"' not in body and 'id="distributions"' not in body and "data-dependent" not in body
    assert '<section id="heatmaps">' in body  # (the markup itself, without the inlined styles and scripts)


# ---- agreement reads each row's ratio: its lowest over the distributions -------------------------


def test_agreement_of_two_runs_on_several_distributions(tmp_path):
    ref = write_results(tmp_path / "ref", make_rows(by_distribution=True)) / "flash_fwd_sm90"
    fixed = write_results(tmp_path / "run", make_rows(by_distribution=True, slow={})) / "flash_fwd_sm90"
    ag = ratio_agreement(ref, fixed, "fa3")
    assert ag.scenarios == 182
    ref_row = next(r for r in load(ref).rows if r.scenario == SLOW_ID)
    run_row = next(r for r in load(fixed).rows if r.scenario == SLOW_ID)
    assert ag.max_abs_dev == pytest.approx(run_row.ratio["fa3"] / ref_row.ratio["fa3"] - 1, abs=1e-4)
