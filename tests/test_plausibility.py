"""Timings too good to be true: a row above the GEMM ceiling is `implausible` (not correct); a ratio
that jumps past a previous run is flagged for a look."""

import json

from kernelseek_suite.config import PlausibilityConfig
from kernelseek_suite.harness import plausibility as P
from kernelseek_suite.results import ScenarioResult, summarize


def row(tflops=None, ratio=None, sid="d128-h16kv16-s4096"):
    return ScenarioResult(
        sid,
        "d128-h16kv16",
        8,
        4096,
        4096,
        False,
        False,
        1e12,
        "ok",
        tflops={"kernel": tflops} if tflops else {},
        ratio=ratio or {},
    )


def test_implausible_above_the_ceiling_times_the_margin():
    assert P.implausible_reason(700.0, 672.0, 1.1) is None  # FA3-like: a little above GEMM is fine
    assert P.implausible_reason(739.0, 672.0, 1.1) is None  # 1.0997 x
    why = P.implausible_reason(740.0, 672.0, 1.1)  # 1.101 x
    assert "740.0" in why and "672.0" in why and "1.1 x" in why
    assert P.implausible_reason(900.0, None, 1.1) is None  # no ceiling measured: no verdict
    assert P.implausible_reason(None, 672.0, 1.1) is None
    assert P.implausible_reason(900.0, 0.0, 1.1) is None


def test_the_margin_is_above_what_the_softmax_free_kernel_reached():
    """825 TFLOP/s for two GEMMs without the softmax against 789 for torch's GEMM (H200): a correct
    attention kernel is slower than that, so it stays inside the margin."""
    factor = PlausibilityConfig().ceiling_factor
    assert P.implausible_reason(825.0, 789.0, factor) is None
    assert 1.05 < factor <= 1.15


def test_jump():
    assert P.jump_flags({"fa3": 0.9}, {"fa3": 0.7}, 1.5) == []
    [f] = P.jump_flags({"fa3": 1.2, "cudnn": 1.0}, {"fa3": 0.7, "cudnn": 0.9}, 1.5)
    assert f.startswith("jump: ratio vs fa3 1.200") and "1.71x" in f
    assert P.jump_flags({"fa3": 5.0}, {}, 1.5) == []


def test_annotate_makes_a_correct_row_implausible_and_adds_jumps_once():
    r = row(1000.0, {"fa3": 3.0})
    prev = {r.scenario: {"fa3": 1.0}}
    P.annotate(r, 672.0, prev, PlausibilityConfig())
    P.annotate(r, 672.0, prev, PlausibilityConfig())
    assert (r.status, r.code) == ("implausible", "implausible") and not r.correct
    assert [f.split(":")[0] for f in r.flags] == ["jump"] and "1000.0 TFLOP/s" in r.reason


def test_annotate_keeps_a_row_that_failed_for_another_reason_and_a_plausible_one():
    r = row(1000.0)
    r.status, r.code, r.reason = "rejected", "cached", "replayed"
    P.annotate(r, 672.0, {}, PlausibilityConfig())
    assert (r.status, r.code, r.reason) == ("rejected", "cached", "replayed")
    ok = row(600.0)
    P.annotate(ok, 672.0, {}, PlausibilityConfig())
    assert ok.status == "ok" and ok.code == "" and not ok.flags


def test_implausible_rows_are_left_out_of_the_geomean_and_counted():
    a, b = row(500.0, {"fa3": 0.9}, sid="a"), row(1000.0, {"fa3": 3.0}, sid="b")
    for r in (a, b):
        P.annotate(r, 672.0, {}, PlausibilityConfig())
    s = summarize([a, b], "bench", "sm90", {}, {"gemm_tflops": 672.0, "ceiling_factor": 1.1}, ["fa3"])
    assert s["geomean"] == {"fa3": 0.9} and s["ratio_count"] == {"fa3": 1} and s["scenarios_correct"] == 1
    assert s["failures"] == {"implausible": 1}
    assert s["ceiling"] == {"gemm_tflops": 672.0, "factor": 1.1, "implausible_above_tflops": 739.2}
    assert summarize([a], "bench", "sm90", {}, {}, ["fa3"])["ceiling"] is None


def test_load_previous_reads_correct_rows_only(tmp_path):
    good, bad = row(ratio={"fa3": 0.8}, sid="a"), row(ratio={"fa3": 9.0}, sid="b")
    bad.status = "wrong"
    (tmp_path / "bench.jsonl").write_text(json.dumps(good.to_dict()) + "\n" + json.dumps(bad.to_dict()) + "\n")
    assert P.load_previous(tmp_path) == {"a": {"fa3": 0.8}}
    assert P.load_previous(tmp_path / "bench.jsonl") == {"a": {"fa3": 0.8}}
    assert P.load_previous(None) == {}


def test_flags_are_listed_in_the_summary():
    a, b = row(sid="a"), row(sid="b")
    b.flags = ["jump: x", "nondeterministic: y"]
    s = summarize([a, b], "eval", "sm90", {}, {}, ["fa3"])
    assert s["flagged"] == {"b": ["jump", "nondeterministic"]} and s["scenarios_correct"] == 2
