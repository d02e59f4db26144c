"""The pages in a real browser (headless Chromium, see browser.py): REPORT.html of the shipped
results/sm90 data and the viewer of the shipped self-check trace load from file:// with no console
error and no request; the heat maps' hover card and the table's filters and sorting work; the heat maps
and the table of a run timed on several input distributions switch between them; a constructed trace
of 10k events is ready in under 2 s and draws its rows lazily; two runs show side by side."""

import json
import time
from decimal import ROUND_HALF_UP, Decimal
from pathlib import Path

import pytest

from kernelseek_suite.reports import load
from kernelseek_suite.reports.html import render_html
from kernelseek_suite.reports.trace_html import render_traces
from long_trace import write_long_trace
from synthetic_results import SLOW, make_rows, write_results

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[1]
SM90 = REPO / "results" / "sm90"
SELFCHECK = SM90 / "agents-selfcheck" / "trace.jsonl"
READY_LIMIT_S = 2.0


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    return render_html(SM90, out), load(SM90)


def _cell_center(page, chart_id: str, scenario: str) -> dict:
    return page.evaluate(
        """([id, scenario]) => {
        const ch = window.ksReport.charts[id];
        const i = ch.data.datasets[0].data.findIndex((c) => c.scenario === scenario);
        const el = ch.getDatasetMeta(0).data[i];
        const box = ch.canvas.getBoundingClientRect(), p = el.getCenterPoint();
        return {x: box.left + p.x, y: box.top + p.y, i};
    }""",
        [chart_id, scenario],
    )


def _fixed(x: float, digits: int) -> str:
    """x as the page's JavaScript writes it (Number.toFixed: the exact binary value, a tie rounded up;
    Python's format rounds a tie such as 736.25 to the even digit)."""
    return str(Decimal(x).quantize(Decimal(1).scaleb(-digits), rounding=ROUND_HALF_UP))


def _visible_rows(page) -> list[dict]:
    return page.evaluate("""() => Array.from(document.querySelectorAll('#scenario-table tbody tr'))
        .filter((tr) => !tr.hidden).map((tr) => ({scenario: tr.cells[0].textContent, d: {...tr.dataset},
                                                  fa3: tr.getAttribute('data-ratio-fa3')}))""")


def test_report_loads_clean_from_file(browser, report):  # noqa: F811
    path, res = report
    o = browser.open(path)
    assert o.problems == []
    assert o.page.title() == "Results: sm90, NVIDIA H200"
    ids = sorted(o.page.evaluate("Object.keys(window.ksReport.charts)"))
    measured = sorted(res.summary["geomean"])  # the baselines the shipped run measured
    assert measured and "fa3" in measured
    assert ids == sorted(f"{b}-{m}" for b in measured for m in ("causal", "non-causal"))
    # the claims come first (then, for a run on several input distributions, those), provenance, the
    # heat maps and the table
    order = o.page.evaluate("Array.from(document.querySelectorAll('section')).map((s) => s.id)")
    several = len(res.summary.get("distributions") or []) > 1
    assert order == [
        "claims",
        *(["distributions"] if several else []),
        "provenance",
        "heatmaps",
        "geomeans",
        "scenarios",
        "extended",
    ]
    shipped = f"geometric mean {res.summary['geomean']['fa3']:.3f}x"  # the shipped summary's, not computed here
    assert o.page.locator("#claims").inner_text().count(shipped) == 1
    o.page.close()


def test_heatmap_hover_shows_the_scenario_for_every_implementation(browser, report):  # noqa: F811
    path, res = report
    o = browser.open(path, height=1400)
    worst = res.summary["min_ratio_scenario"]["fa3"]
    row = next(r for r in res.grid_rows if r.scenario == worst)
    chart = "fa3-causal" if row.causal else "fa3-non-causal"
    o.page.locator(f"#heatmap-{chart}").scroll_into_view_if_needed()
    c = _cell_center(o.page, chart, worst)
    o.page.mouse.move(c["x"], c["y"])
    tip = o.page.locator("#tooltip")
    tip.wait_for(state="visible", timeout=2000)
    text = tip.inner_text()
    assert text.startswith(worst) and "correct" in text
    for name in ("flash_fwd_sm90.cu", "fa3", "fa4", "cudnn"):
        assert name in text
    measured = sorted(res.summary["geomean"])
    for impl in ["kernel", *measured]:
        t = row.times_ms[impl]
        assert _fixed(t["median_ms"], 4) in text and _fixed(row.tflops[impl], 1) in text
        assert _fixed(100 * t["iqr_ms"] / t["median_ms"], 1) + "%" in text
    for b in measured:
        assert _fixed(row.ratio[b], 3) + "x" in text
    for b in {"fa3", "fa4", "cudnn"} - set(measured):
        assert f"{b}: not installed" in text
    assert f"max err {row.check['max_err']:.2e}".replace("e-0", "e-") in text
    # another cell, another card; off the map, none
    other = _cell_center(o.page, "fa3-non-causal", "d64-h32kv32-s512")
    o.page.mouse.move(other["x"], other["y"])
    o.page.wait_for_function("document.getElementById('tooltip').dataset.scenario === 'd64-h32kv32-s512'")
    o.page.mouse.move(5, 5)
    tip.wait_for(state="hidden", timeout=2000)
    assert o.problems == []
    o.page.close()


def test_table_filters_and_sorting(browser, report):  # noqa: F811
    path, res = report
    o = browser.open(path)
    p = o.page
    assert len(_visible_rows(p)) == 182
    assert p.locator("#shown").inner_text() == "182 of 182 scenarios shown"
    p.select_option("select[name=head_config]", "d96-h16kv16")
    rows = _visible_rows(p)
    assert len(rows) == 14 and all(r["d"]["headConfig"] == "d96-h16kv16" for r in rows)
    p.select_option("select[name=mask]", "causal")
    assert sorted(r["scenario"] for r in _visible_rows(p)) == sorted(
        r.scenario for r in res.grid_rows if r.head_config == "d96-h16kv16" and r.causal
    )
    p.select_option("select[name=seqlen]", "8192")
    assert [r["scenario"] for r in _visible_rows(p)] == ["d96-h16kv16-s8192-causal"]
    p.click("button[type=reset]")
    p.wait_for_function("document.getElementById('shown').textContent.startsWith('182 of')")
    # worse than a chosen ratio (the shipped data's median vs fa3), against a chosen baseline
    fa3 = sorted(r.ratio["fa3"] for r in res.grid_rows if r.ratio.get("fa3") is not None)
    below = round(fa3[len(fa3) // 2], 3)
    p.select_option("select[name=baseline]", "fa3")
    p.fill("input[name=below]", str(below))
    want = sorted(r.scenario for r in res.grid_rows if r.ratio.get("fa3") is not None and r.ratio["fa3"] < below)
    assert want and sorted(r["scenario"] for r in _visible_rows(p)) == want
    p.select_option("select[name=baseline]", "cudnn")
    want_cudnn = sorted(
        r.scenario for r in res.grid_rows if r.ratio.get("cudnn") is not None and r.ratio["cudnn"] < below
    )
    assert sorted(r["scenario"] for r in _visible_rows(p)) == want_cudnn != want
    p.click("button[type=reset]")
    # sorting by a column, ascending then descending
    col = p.locator("#scenario-table th", has_text="ratio vs fa3")
    col.click()
    ratios = [float(r["fa3"]) for r in _visible_rows(p)]
    assert ratios == sorted(ratios) and ratios[0] == pytest.approx(res.summary["min_ratio"]["fa3"])
    col.click()
    ratios = [float(r["fa3"]) for r in _visible_rows(p)]
    assert ratios == sorted(ratios, reverse=True)
    assert col.get_attribute("aria-sort") == "descending"
    # the extended set is folded until opened
    ext = p.locator("#extended details")
    assert ext.get_attribute("open") is None and not p.locator("#extended table").is_visible()
    p.click("#extended summary")
    assert p.locator("#extended table").is_visible()
    assert o.problems == []
    p.close()


def test_heat_maps_and_table_switch_between_input_distributions(browser, tmp_path):  # noqa: F811
    root = write_results(tmp_path / "sm90", make_rows(by_distribution=True))
    res = load(root)
    (slow,) = SLOW
    row = next(r for r in res.grid_rows if r.scenario == slow)
    o = browser.open(render_html(root, tmp_path / "out"), height=1400)
    p = o.page
    label = """([id, sid]) => window.ksReport.charts[id].data.datasets[0].data.find((c) => c.scenario === sid).label"""
    caption = p.locator("#heatmap-fa3-causal figcaption")
    # the heat maps start on each baseline's worst distribution (the headline's): fa3's is rising
    assert p.locator("#heatmap-view").input_value() == "worst"
    assert p.evaluate(label, ["fa3-causal", slow]) == f"{row.ratio_by_distribution['rising']['fa3']:.2f}*"
    assert caption.inner_text() == "vs fa3, causal (on rising, the headline's)"
    assert "(on wide, the headline's)" in p.locator("#heatmap-cudnn-causal figcaption").inner_text()
    p.select_option("#heatmap-view", "standard")
    assert p.evaluate(label, ["fa3-causal", slow]) == f"{row.ratio_by_distribution['standard']['fa3']:.2f}*"
    assert caption.inner_text() == "vs fa3, causal (on standard)"
    # the hover card shows that distribution's times, and every distribution's ratios
    p.locator("#heatmap-fa3-causal").scroll_into_view_if_needed()
    c = _cell_center(p, "fa3-causal", slow)
    p.mouse.move(c["x"], c["y"])
    tip = p.locator("#tooltip")
    tip.wait_for(state="visible", timeout=2000)
    text = tip.inner_text()
    assert "on the standard inputs" in text and "data-dependent" in text
    assert f"{row.times_ms_by_distribution['standard']['kernel']['median_ms']:.4f}" in text
    assert f"{row.ratio_by_distribution['rising']['fa3']:.3f}x" in text
    # the table starts on each row's lowest ratio; switched to a distribution, the cells change
    tr = p.locator(f"#scenario-table tr[data-scenario='{slow}']")
    col = res.baselines.index("fa3") * 2 + 5  # scenario, correct, kernel TFLOP/s, % of GEMM, fa3 TFLOP/s, ratio
    cell = tr.locator("td").nth(col)
    assert cell.inner_text() == f"{row.ratio['fa3']:.3f}" and "data-dependent" in tr.inner_text()
    p.select_option("select[name=view]", "standard")
    assert cell.inner_text() == f"{row.ratio_by_distribution['standard']['fa3']:.3f}" != f"{row.ratio['fa3']:.3f}"
    assert tr.get_attribute("data-ratio-fa3") == str(row.ratio_by_distribution["standard"]["fa3"])
    # the ratio filter tests the view's ratios: on standard the slow row is no longer below 0.8
    p.fill("input[name=below]", "0.8")
    assert p.locator("#shown").inner_text() == "0 of 182 scenarios shown"
    p.select_option("select[name=view]", "rising")
    assert [r["scenario"] for r in _visible_rows(p)] == [slow]
    p.click("button[type=reset]")
    p.wait_for_function("document.getElementById('shown').textContent.startsWith('182 of')")
    assert cell.inner_text() == f"{row.ratio['fa3']:.3f}"
    p.check("input[name=data_dependent]")
    assert [r["scenario"] for r in _visible_rows(p)] == [slow]
    assert o.problems == []
    p.close()


def test_selfcheck_trace_viewer(browser, tmp_path):  # noqa: F811
    out = render_traces([SELFCHECK], tmp_path / "trace.html")
    o = browser.open(out)
    p = o.page
    assert o.problems == []
    rows = p.locator(".timeline .row")
    assert rows.count() == 21
    assert "evaluation 1: ok, 182/182 correct, geomean 0.217x vs fa3 NEW BEST" in p.locator(".timeline").inner_text()
    # filters: the model calls out, then the shell calls
    p.locator("input[data-group=model]").uncheck()
    assert rows.count() == 15
    p.locator("input[data-group='tool:shell']").uncheck()
    assert rows.count() == 13
    p.locator("input[data-group=model]").check()
    assert rows.count() == 19
    # the conversation, with tool outputs folded until opened
    p.click("button[data-tab=conversation]")
    msgs = p.locator(".conversation .msg")
    n = sum(len(json.loads(line).get("messages_delta") or []) for line in SELFCHECK.read_text().splitlines())
    assert msgs.count() == n
    tool = p.locator(".conversation .msg.role-tool details").first
    assert tool.get_attribute("open") is None and tool.locator("pre").count() == 0
    tool.locator("summary").click()
    assert "Reference FlashAttention forward kernel" in tool.locator("pre").inner_text()
    # the evaluation: the starting kernel itself
    p.click("button[data-tab=evaluations]")
    assert "the same candidate as the starting kernel" in p.locator(".evaluations").inner_text()
    assert o.problems == []
    p.close()


def test_10k_event_trace_is_ready_in_under_2_s_and_draws_lazily(browser, tmp_path):  # noqa: F811
    trace = write_long_trace(tmp_path / "long" / "trace.jsonl", events=10_000)
    out = render_traces([trace], tmp_path / "long.html")
    t0 = time.monotonic()
    o = browser.open(out)
    wall = time.monotonic() - t0
    p = o.page
    ready_ms = p.evaluate("window.ksTraces.readyAt")
    assert wall < READY_LIMIT_S and ready_ms < 1000 * READY_LIMIT_S, (wall, ready_ms)
    assert o.problems == []
    total = p.evaluate("window.ksTraces.runs[0].rows.length")
    assert total >= 10_000
    rows = p.locator(".timeline .row")
    first = rows.count()
    assert 0 < first <= 200  # drawn a chunk at a time
    p.locator(".timeline").evaluate("(el) => { el.scrollTop = el.scrollHeight; }")
    p.wait_for_function(f"document.querySelectorAll('.timeline .row').length > {first}")
    # a model call's row opens its messages in the conversation, drawing up to them
    target = p.evaluate("window.ksTraces.runs[0].rows.filter((r) => r.m !== undefined)[400].m")
    p.evaluate("(m) => window.ksTraces.panes[0].openMessage(m)", target)
    hl = p.locator(".conversation .msg.highlight")
    assert hl.count() == 1 and hl.get_attribute("data-index") == str(target)
    assert p.locator(".conversation .msg").count() < p.evaluate("window.ksTraces.runs[0].messages.length")
    # a diff is drawn when opened
    p.click("button[data-tab=evaluations]")
    ev = p.locator(".evaluations .eval").nth(2)
    assert ev.locator(".diff").count() == 0
    ev.locator("summary").click()
    assert "+// candidate 3" in ev.locator(".diff").inner_text()
    assert o.problems == []
    p.close()


def test_two_arms_side_by_side(browser, tmp_path):  # noqa: F811
    a = write_long_trace(tmp_path / "a" / "trace.jsonl", events=400, arm="kernelseek", run_id="ks-1")
    b = write_long_trace(tmp_path / "b" / "trace.jsonl", events=400, arm="kernelseek", run_id="ks-2", seed=5)
    c = write_long_trace(tmp_path / "c" / "trace.jsonl", events=400, arm="general", run_id="gen-1", seed=6)
    o = browser.open(render_traces([a, b, c], tmp_path / "traces.html"))
    p = o.page
    panes = p.locator(".pane")
    assert panes.count() == 2
    # the second pane starts on the other arm
    assert panes.nth(0).locator(".run-title").inner_text() == "kernelseek: ks-1"
    assert panes.nth(1).locator(".run-title").inner_text() == "general: gen-1"
    left, right = (panes.nth(i).bounding_box() for i in (0, 1))
    assert abs(left["y"] - right["y"]) < 1 and right["x"] >= left["x"] + left["width"]
    assert p.locator("#runs-table tbody tr").count() == 3
    panes.nth(1).locator(".run-select").select_option(label="kernelseek: ks-2")
    assert panes.nth(1).locator(".run-title").inner_text() == "kernelseek: ks-2"
    assert o.problems == []
    p.close()
