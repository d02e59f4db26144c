"""The HTML pages' data and files, without a browser: REPORT.html's model (heat maps on the shared
scale, hover details, the table), the trace viewer's model (timeline, curve, conversation, diffs),
self-containment, escaping, and the vendored files' manifest. tests/test_browser_pages.py opens them
in Chromium."""

import hashlib
import json
import math
import re
from pathlib import Path

import pytest

from kernelseek_suite.contracts.traces import read_trace, validate_trace
from kernelseek_suite.reports import load, page, scale
from kernelseek_suite.reports.document import _claims
from kernelseek_suite.reports.html import heatmaps, model, render_html, scenario_detail
from kernelseek_suite.reports.trace_html import default_output, render_traces, run_model
from long_trace import LOST, write_long_trace
from synthetic_results import make_rows, write_results
from trace_builder import TraceBuilder

REPO = Path(__file__).resolve().parents[1]
SELFCHECK = REPO / "results" / "sm90" / "agents-selfcheck" / "trace.jsonl"


def _page_data(html: str) -> dict:
    m = re.search(r'<script type="application/json" id="page-data">(.*?)</script>', html, re.DOTALL)
    return json.loads(m.group(1))


def _ratio(s, b):
    if b == "fa4":
        return None  # no number for fa4 anywhere: no heat map for it
    return {"fa3": 0.8, "cudnn": 1.25}[b] * (1.1 if s.causal else 1.0)


# ---------------------------------------------------------------- the shared scale


def test_scale_is_logarithmic_symmetric_and_clipped():
    assert scale.position(1.0) == pytest.approx(0.5)
    assert scale.position(0.8) == pytest.approx(1 - scale.position(1.25))
    assert scale.position(0.5) == 0.0 and scale.position(2.0) == 1.0
    assert scale.color(0.3) == scale.color(0.5) and scale.color(5.0) == scale.color(2.0)
    assert scale.color(0.5) != scale.color(2.0)
    assert scale.color(None) == scale.MISSING == scale.color(0.0)
    # 1x is the middle of the diverging map: nearly white
    r, g, b = (int(scale.color(1.0)[i : i + 2], 16) for i in (1, 3, 5))
    assert min(r, g, b) > 230
    # slower is red, faster is blue
    slow, fast = scale.color(0.6), scale.color(1.6)
    assert int(slow[1:3], 16) > int(slow[5:7], 16) and int(fast[5:7], 16) > int(fast[1:3], 16)
    assert [p for p, _ in scale.gradient(5)] == [0.0, 0.25, 0.5, 0.75, 1.0]


# ---------------------------------------------------------------- REPORT.html


def test_heatmaps_cover_the_grid_on_the_shared_scale(tmp_path):
    wrong = {"d128-h16kv16-s4096", "d64-h32kv8-s512-causal"}
    res = load(write_results(tmp_path, make_rows(ratio=_ratio, wrong=wrong)))
    maps = {h["id"]: h for h in heatmaps(res)}
    assert sorted(maps) == ["cudnn-causal", "cudnn-non-causal", "fa3-causal", "fa3-non-causal"]  # no fa4
    for h in maps.values():
        assert len(h["cells"]) == 91 and len(h["head_configs"]) == 13 and len(h["seqlens"]) == 7
    cells = {c["scenario"]: c for c in maps["fa3-non-causal"]["cells"]}
    assert cells["d128-h16kv16-s4096"]["v"] is None and cells["d128-h16kv16-s4096"]["label"] == "wrong"
    assert cells["d128-h16kv16-s4096"]["color"] == scale.MISSING
    ok = cells["d64-h32kv32-s512"]
    assert ok["v"] == pytest.approx(0.8) and ok["label"] == "0.80" and ok["color"] == scale.color(0.8)
    # the same scale for every map: equal ratios, equal colours, whichever baseline
    causal = {c["scenario"]: c for c in maps["cudnn-causal"]["cells"]}
    assert causal["d64-h32kv32-s512-causal"]["color"] == scale.color(1.25 * 1.1)


def test_hover_details_hold_every_implementation(tmp_path):
    res = load(write_results(tmp_path, make_rows(ratio=_ratio)))
    r = next(r for r in res.grid_rows if r.scenario == "d96-h16kv16-s8192-causal")
    d = scenario_detail(r, res.baselines)
    assert [i["name"] for i in d["impls"]] == ["kernel", "fa3", "fa4", "cudnn"]
    k, fa3, fa4 = d["impls"][:3]
    assert k["median_ms"] == pytest.approx(r.times_ms["kernel"]["median_ms"])
    assert k["iqr_ms"] == pytest.approx(r.times_ms["kernel"]["iqr_ms"])
    assert fa3["ratio"] == pytest.approx(r.ratio["fa3"]) and fa3["tflops"] == pytest.approx(r.tflops["fa3"])
    assert fa4["median_ms"] is None and fa4["note"] == "unsupported (synthetic)"
    assert d["status"] == "ok" and d["max_err"] == pytest.approx(1e-3) and d["tol"] == pytest.approx(4e-3)


def test_report_html_is_self_contained_and_says_what_the_markdown_says(tmp_path):
    root = write_results(tmp_path / "sm90", make_rows(ratio=_ratio, wrong={"d128-h16kv16-s4096"}))
    out = render_html(root)
    assert out == root / "REPORT.html"
    html = out.read_text()
    # nothing to fetch: no external script, stylesheet, image or font
    assert not re.search(r"<(script|img|iframe)[^>]+src=", html)
    assert "<link" not in html and "@import" not in html and "url(" not in html
    assert "Chart.js v4.6.1" in html and "Permission is hereby granted" in html  # inlined, licence beside it
    data = _page_data(html)
    assert len(data["scenarios"]) == 182 and data["kernel"] == "flash_fwd_sm90.cu"
    # the claims are the Markdown report's own lines, not computed again
    text = re.sub(r"<[^>]+>", "", html)
    for line in _claims(load(root)):
        plain = line.removeprefix("- ").replace("`", "").replace("**", "")
        assert plain in text
    # the table: every scenario once, with what the filters test
    rows = re.findall(r'<tr data-head-config="([^"]+)" data-seqlen="(\d+)" data-mask="([a-z-]+)"', html)
    assert len(rows) == 182 and len({r for r in rows}) == 182
    assert 'data-ratio-fa3="0.8"' in html and 'data-ratio-fa4=""' in html
    # the extended set is folded
    assert re.search(r"<details>\s*<summary>30/30 correct", html)


def test_report_model_marks_data_that_was_not_measured_here(tmp_path):
    from kernelseek_suite.reports.data import SHIPPED

    root = write_results(tmp_path / "sm90", make_rows(ratio=_ratio))
    html = render_html(root, tmp_path / "out", status=SHIPPED).read_text()
    assert "shipped, not re-measured" in html and "nothing in this page was measured on this machine" in html
    assert model(load(root))["main_baseline"] == "fa3"


def test_vendored_files_match_their_manifest(monkeypatch):
    manifest = page.vendor_manifest()
    assert set(manifest) == {"chart.umd.min.js", "chartjs-chart-matrix.min.js", "chartjs-plugin-datalabels.min.js"}
    vendor = REPO / "suite" / "reports" / "assets" / "vendor"
    for f, e in manifest.items():
        assert hashlib.sha256((vendor / f).read_bytes()).hexdigest() == e["sha256"]
        assert e["licence"] == "MIT" and "MIT" in (vendor / e["licence_file"]).read_text()
        assert e["version"] in (vendor / f).read_text()[:400]
    # a changed file is refused
    real = page._asset_text
    monkeypatch.setattr(page, "_asset_text", lambda n: real(n) + ("//" if n.endswith("chart.umd.min.js") else ""))
    page.vendor_script.cache_clear()
    try:
        with pytest.raises(page.AssetError, match="sha256"):
            page.vendor_script("chart.umd.min.js")
    finally:
        page.vendor_script.cache_clear()


def test_inlined_scripts_cannot_close_their_element():
    assert page._inline_script('a = "</script><b>"; // <!--') == 'a = "<\\/script><b>"; // <\\!--'


# ---------------------------------------------------------------- the trace viewer


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory):
    return write_long_trace(tmp_path_factory.mktemp("long") / "trace.jsonl", events=1200)


def test_constructed_trace_is_valid(long_trace):
    v = validate_trace(long_trace)
    assert v.ok, v.errors[:5]
    assert v.events >= 1200 and not v.notes


def test_run_model_counts_every_event(long_trace):
    events = read_trace(long_trace).events
    run = run_model(long_trace)
    assert len(run["rows"]) == len(events) == run["events"]
    assert [r["q"] for r in run["rows"]] == [e["seq"] for e in events]
    tools = {}
    for e in events:
        if e["type"] == "tool_result":
            tools[e["tool"]] = tools.get(e["tool"], 0) + 1
    assert run["tools"] == tools and set(tools) == {"shell", "edit_file", "evaluate"}
    g = run["groups"]

    def count(t, **kw):
        return sum(e["type"] == t and all(e.get(k) == v for k, v in kw.items()) for e in events)

    assert g["model"] == count("llm_call") and g["eval"] == count("harness_eval")
    assert g["question"] == count("question", source="bank") and g["human"] == count("question", source="human") > 0
    assert g["retry"] == count("retry") > 0 and g["resume"] == 1 and g["decision"] == count("decision") > 0
    assert g["exit"] == 1 and run["limit"] == "steps" and run["exit"] == "limit" and run["finished"]
    labels = [r["l"] for r in run["rows"] if r["g"] == "question"]
    assert all(
        re.match(r"question \[[a-z-]+; (layer-shift|limit-rejection|information); q-\d\]", lab) for lab in labels
    )


def test_curve_and_best_so_far(long_trace):
    events = read_trace(long_trace).events
    run = run_model(long_trace)
    evals = [e for e in events if e["type"] == "harness_eval"]
    assert [p["index"] for p in run["curve"]] == [e["index"] for e in evals]
    best = None
    for p, e in zip(run["curve"], evals):
        if e["correct"]:
            best = max(best or 0, e["geomean"])
            assert p["geomean"] == e["geomean"]
        else:
            assert p["geomean"] is None
        assert p["best"] == best == (e["best"] or {}).get("geomean")
    assert run["best"] == best
    assert [q["step"] for q in run["questions"]] == [e["step"] for e in events if e["type"] == "question"]


def test_each_candidate_is_diffed_against_the_best_before_it(long_trace):
    run = run_model(long_trace)
    evals = run["evals"]
    assert evals[0]["diff"]["against"] == "the starting kernel"
    assert "-// candidate 0" in evals[0]["diff"]["lines"] and "+// candidate 1" in evals[0]["diff"]["lines"]
    best_index = None
    for e in evals:
        if best_index is not None:
            assert e["diff"]["against"] == f"evaluation {best_index} (the best before)"
            assert f"-// candidate {best_index}" in e["diff"]["lines"]
        assert e["diff"]["added"] == e["diff"]["removed"] > 0
        if e["new_best"]:
            best_index = e["index"]


def test_conversation_rebuilt_with_the_discarded_step_marked(long_trace):
    run = run_model(long_trace)
    msgs = run["messages"]
    assert msgs[0]["role"] == "system" and msgs[1]["role"] == "user"
    lost = [m for m in msgs if m["content"] == LOST]
    assert len(lost) == 1 and lost[0]["discarded"]
    assert sum(m["discarded"] for m in msgs) == 1
    resume = next(i for i, m in enumerate(msgs) if m["role"] == "resume")
    assert msgs[resume - 1]["content"] == LOST
    tools = [m for m in msgs if m["role"] == "tool"]
    assert len(tools) == run["groups"]["tool:shell"] + run["groups"]["tool:edit_file"] + run["groups"]["tool:evaluate"]
    # rows that added messages point at the first of them
    linked = [r for r in run["rows"] if "m" in r]
    assert linked and all(msgs[r["m"]]["seq"] == r["q"] for r in linked)


def test_long_texts_are_cut_for_the_page(tmp_path):
    b = TraceBuilder(tmp_path / "t.jsonl")
    b.step()
    b.w.emit(
        "tool_result",
        call_id="c",
        tool="shell",
        arguments={"command": "yes"},
        output="y\n" * 50_000,
        is_error=False,
        duration_s=0.0,
        data=None,
    )
    b.w.emit(
        "llm_call",
        call=1,
        messages_count=3,
        messages_sha256="0" * 64,
        messages_delta=[{"role": "tool", "tool_call_id": "c", "content": "x" * 100_000}],
        request={"model": "m"},
        response={"content": None, "tool_calls": [], "finish_reason": "stop"},
        usage={"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2, "cost": None},
        latency_s=0.1,
        attempts=1,
    )
    run = run_model(b.end())
    msg = run["messages"][0]["content"]
    assert len(msg) < 7000 and "characters not shown here" in msg and msg.startswith("x" * 4000)
    assert all(len(r["l"]) <= 400 for r in run["rows"])


def test_untrusted_text_is_escaped_in_the_page(long_trace, tmp_path):
    html = render_traces([long_trace], tmp_path / "v.html").read_text()
    assert "<script>x</script>" not in html and "<b>not bold</b>" not in html
    data = _page_data(html)
    assert data["runs"][0]["messages"][1]["content"].endswith("<b>not bold</b> & <script>x</script>")


def test_selfcheck_trace_model():
    run = run_model(SELFCHECK)
    assert (
        run["arm"] == "general"
        and run["events"] == 21
        and run["tools"] == {"edit_file": 1, "evaluate": 1, "shell": 2, "view_file": 1}
    )
    (e,) = run["evals"]
    assert e["geomean"] == pytest.approx(0.2171) and e["scenarios"] == "182/182" and e["extended"] == "316/316"
    # it evaluated the starting kernel unchanged (the same sha256), so there is nothing to diff
    assert e["diff"] == {"against": "the starting kernel", "same": True}
    assert run["exit"] == "submitted" and not run["goal_met"]


def test_a_candidate_not_stored_says_so(long_trace, tmp_path):
    import shutil

    copy = tmp_path / "trace.jsonl"
    shutil.copy(long_trace, copy)  # without its .d folder: no blobs
    e = run_model(copy)["evals"][0]
    assert e["diff"]["missing"] == "the candidate is not stored beside the trace (trace.d/blobs/)"


def test_output_names(tmp_path):
    assert default_output([tmp_path / "a" / "trace.jsonl"]) == tmp_path / "a" / "trace.html"
    assert (
        default_output([tmp_path / "a.jsonl", tmp_path / "b.jsonl"], tmp_path / "o") == tmp_path / "o" / "traces.html"
    )


def test_several_runs_in_one_page(tmp_path):
    a = write_long_trace(tmp_path / "a" / "trace.jsonl", events=300, arm="kernelseek", run_id="ks-1")
    b = write_long_trace(tmp_path / "b" / "trace.jsonl", events=300, arm="general", run_id="gen-1", seed=4)
    html = render_traces([a, b], tmp_path / "traces.html").read_text()
    data = _page_data(html)
    assert [r["run_id"] for r in data["runs"]] == ["ks-1", "gen-1"]
    assert "Agent runs: 2 (general, kernelseek)" in html and 'id="overview-chart"' in html
    assert math.isclose(data["runs"][1]["best"], max(p["best"] for p in data["runs"][1]["curve"]))


# ---------------------------------------------------------------- the commands


def test_render_html_command(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main
    from kernelseek_suite.reports import plots

    monkeypatch.setattr(plots, "render_all", lambda res, folder: {})  # the PNGs are tested in test_reports.py

    root = write_results(tmp_path / "sm90", make_rows(ratio=_ratio))
    r = CliRunner().invoke(main, ["render", str(root)])
    assert r.exit_code == 0 and not (root / "REPORT.html").exists()
    r = CliRunner().invoke(main, ["render", str(root), "--html"])
    assert r.exit_code == 0, r.output
    assert f"page: {root / 'REPORT.html'}" in r.output
    assert len(_page_data((root / "REPORT.html").read_text())["scenarios"]) == 182
    assert "`REPORT.html`" in (root / "REPORT.md").read_text()


def test_traces_html_command(long_trace, tmp_path):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    r = CliRunner().invoke(main, ["traces", "html", str(SELFCHECK), "--out", str(tmp_path / "one")])
    assert r.exit_code == 0, r.output
    one = tmp_path / "one" / "trace.html"
    assert r.output.strip() == f"page: {one}"
    assert _page_data(one.read_text())["runs"][0]["run_id"] == "20261202-183539-general-fa-fwd-sm90-7f99"
    r = CliRunner().invoke(main, ["traces", "html", str(SELFCHECK), str(long_trace), "--out", str(tmp_path)])
    assert r.exit_code == 0 and len(_page_data((tmp_path / "traces.html").read_text())["runs"]) == 2
    bad = tmp_path / "not-a-trace.jsonl"
    bad.write_text('{"type": "step"}\n')
    r = CliRunner().invoke(main, ["traces", "html", str(bad)])
    assert r.exit_code == 4 and "not a trace" in r.output
    assert not (tmp_path / "not-a-trace.html").exists()


def test_png_heat_maps_use_the_same_scale(tmp_path):
    import numpy as np
    from matplotlib.image import imread

    from kernelseek_suite.reports import plots

    res = load(write_results(tmp_path, make_rows(ratio=_ratio)))
    for baseline, ratio in (("fa3", 0.8), ("cudnn", 1.25)):
        png = plots.heatmap(res, baseline, False, tmp_path / f"{baseline}.png")
        pixels = (imread(png)[..., :3] * 255).round()
        want = np.array([int(scale.color(ratio)[i : i + 2], 16) for i in (1, 3, 5)])
        # the cells fill a large part of the picture, in the page's colour for that ratio
        assert (np.abs(pixels - want).max(axis=-1) <= 2).mean() > 0.25


def test_context_compactions_and_agent_sessions_have_rows_of_their_own():
    from kernelseek_suite.reports.trace_html import _row

    ctx = {
        "type": "context",
        "reason": "window",
        "tokens_before": 30100,
        "tokens_after": 9800,
        "window_tokens": 32768,
        "window_source": "server",
        "elided": {"tool_outputs": 12, "messages": 0, "candidates": 3},
    }
    assert _row(ctx) == (
        "context",
        "context",
        "context compacted (window): 30100 -> 9800 tokens, window 32768 (server); elided tool_outputs 12, candidates 3",
    )
    inv = {
        "type": "invocation",
        "session": 2,
        "mode": "resume",
        "stopped": "question",
        "exit_code": 0,
        "duration_s": 41.6,
        "output": "\n  compiled ok\nmore",
    }
    assert _row(inv) == ("agent", "agent", "agent session 2 (resume): question, exit 0 after 42 s: compiled ok")
    assert _row({**inv, "exit_code": None, "output": None})[2] == "agent session 2 (resume): question after 42 s:"


def test_every_timeline_group_has_a_filter_in_the_viewer():
    from kernelseek_suite.reports.trace_html import _row

    js = (REPO / "suite/reports/assets/trace.js").read_text()
    groups = json.loads(re.search(r"const GROUPS = (\[[^\]]*\])", js).group(1).replace("\n", " "))
    types = ["llm_call", "harness_eval", "question", "decision", "retry", "resume", "context", "invocation"]
    types += ["exit", "step", "run_start", "run_end", "something_new"]
    made = {_row({"type": t})[1] for t in types}
    assert made <= set(groups), made - set(groups)
    labels = re.search(r"const GROUP_LABEL = \{(.*?)\};", js, re.S).group(1)
    assert all(re.search(rf"\b{g}: \"", labels) for g in groups)


def test_the_timeline_and_the_viewer_share_their_small_formats():
    from kernelseek_suite.contracts.traces import event_lines, first_line, ratio_text

    assert ratio_text(None) == "-" and ratio_text(1.23456) == "1.235x"
    assert first_line("\n  \n  first\nsecond") == "  first" and first_line("") == ""
    # an event's further lines are indented under its time and step; the run's own stand alone
    call = {
        "type": "llm_call",
        "elapsed_s": 12.5,
        "step": 3,
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
        "latency_s": 1.0,
        "response": {"content": "thinking", "tool_calls": [{"name": "shell", "arguments": {"command": "ls"}}]},
    }
    head = "[    12.5s] step   3  "
    assert event_lines(call) == [
        head + "model  10+2 tok 1.0s  -> shell(command=ls)",
        " " * len(head) + "       says: thinking",
    ]
    assert event_lines({"type": "x-note"}) == ["[     0.0s] step   0  x-note"]
    assert event_lines({"type": "something_new"}) == [] and event_lines({"type": ["odd"]}) == []
    end = {"type": "run_end", "totals": {"steps": 2, "total_tokens": 5, "cost": None, "wall_s": 1.0}, "best": None}
    assert event_lines(end) == [
        "end: 2 steps, 5 tokens, cost -, 1.0s, None evaluations, None retries, 0 questions; best -; goal not met"
    ]
