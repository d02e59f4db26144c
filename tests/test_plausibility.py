"""The plausibility alarm: flags on timings too good to be true, never a change of status."""
import json

from kernelseek_suite.config import PlausibilityConfig
from kernelseek_suite.harness import plausibility as P
from kernelseek_suite.results import ScenarioResult, summarize


def row(tflops=None, ratio=None, sid="d128-h16kv16-s4096"):
    return ScenarioResult(sid, "d128-h16kv16", 8, 4096, 4096, False, False, 1e12, "ok",
                          tflops={"kernel": tflops} if tflops else {}, ratio=ratio or {})


def test_roofline():
    assert P.roofline_flag(700.0, 672.0, 1.2) is None            # FA3-like: a little above GEMM is fine
    f = P.roofline_flag(900.0, 672.0, 1.2)
    assert f.startswith("roofline:") and "900.0" in f and "672.0" in f
    assert P.roofline_flag(900.0, None, 1.2) is None              # no ceiling measured: no alarm
    assert P.roofline_flag(None, 672.0, 1.2) is None


def test_jump():
    assert P.jump_flags({"fa3": 0.9}, {"fa3": 0.7}, 1.5) == []
    [f] = P.jump_flags({"fa3": 1.2, "cudnn": 1.0}, {"fa3": 0.7, "cudnn": 0.9}, 1.5)
    assert f.startswith("jump: ratio vs fa3 1.200") and "1.71x" in f
    assert P.jump_flags({"fa3": 5.0}, {}, 1.5) == []


def test_annotate_adds_flags_once_and_keeps_the_status():
    r = row(1000.0, {"fa3": 3.0})
    prev = {r.scenario: {"fa3": 1.0}}
    P.annotate(r, 672.0, prev, PlausibilityConfig())
    P.annotate(r, 672.0, prev, PlausibilityConfig())
    assert [f.split(":")[0] for f in r.flags] == ["roofline", "jump"] and r.status == "ok"


def test_load_previous_reads_correct_rows_only(tmp_path):
    good, bad = row(ratio={"fa3": 0.8}, sid="a"), row(ratio={"fa3": 9.0}, sid="b")
    bad.status = "wrong"
    (tmp_path / "bench.jsonl").write_text(json.dumps(good.to_dict()) + "\n" + json.dumps(bad.to_dict()) + "\n")
    assert P.load_previous(tmp_path) == {"a": {"fa3": 0.8}}
    assert P.load_previous(tmp_path / "bench.jsonl") == {"a": {"fa3": 0.8}}
    assert P.load_previous(None) == {}


def test_flags_are_listed_in_the_summary():
    a, b = row(sid="a"), row(sid="b")
    b.flags = ["roofline: x", "nondeterministic: y"]
    s = summarize([a, b], "eval", "sm90", {}, {}, ["fa3"])
    assert s["flagged"] == {"b": ["roofline", "nondeterministic"]} and s["scenarios_correct"] == 2
