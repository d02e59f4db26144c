"""Trace analysis on constructed traces whose answers are known: counts, gain attribution to the
nearest question and its category, the layers before and after, the shares, and the command."""

from __future__ import annotations

import csv

import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.contracts.traces import validate_trace
from kernelseek_suite.headtohead.analysis import analyze
from kernelseek_suite.headtohead.noise import Repeats, write_noise
from trace_builder import TraceBuilder

UNROLL = "#pragma unroll 4\nfor (int c = 0; c < d; c++) s = fmaf(q[c], k[c], s);"
SHARED = "__shared__ float tile[64][64];  // the K tile, loaded once into shared memory"
SYNC = "__syncthreads();  // a barrier between the two phases"
SKIP = "// skip the masked blocks: causal rows end early"
SPLIT = "int blocks = gridDim.x;  // split the rows across blocks"
LAUNCH = "cudaLaunchKernel(f, grid, block, args, 0, stream);"


def _run_a(path):
    """kernelseek: a layer-shift question then a large gain in another layer; a wrong candidate; a
    limit-rejection question then a large gain; a small gain; a large gain with no question since."""
    b = TraceBuilder(path, "kernelseek", "run-a")
    b.step().evaluate(1.00)  # step 1: the starting level, not a gain
    b.step(edit="float s = 0.0f;").evaluate(1.05)  # step 2: +5 %, a new best below the threshold
    b.step(edit=UNROLL).question("layer-shift", "plateau", "ls-mem-gap")  # step 3
    b.step(edit=SHARED).evaluate(1.30)  # step 4: +23.8 % -> after the layer-shift question
    b.step(edit=SYNC).evaluate(None, correct=False)  # step 5: a wrong candidate
    b.step().question("limit-rejection", "claimed-limit", "lr-evidence")  # step 6
    b.step(edit=SKIP).evaluate(1.60)  # step 7: +23.1 % -> after the limit-rejection question
    b.step(tool="view_file").evaluate(1.65)  # step 8: +3 %
    b.step(edit=SPLIT).evaluate(2.00)  # step 9: +21.2 %, no question since step 8's best
    return b.end()


def _run_b(path):
    """kernelseek with a person asking: a typed question, then a large gain; an information question
    followed by a small one."""
    b = TraceBuilder(path, "kernelseek", "run-b", seed=2)
    b.step().evaluate(1.00)
    b.step().question(None, "early-stop", source="human")
    b.step(edit=LAUNCH).evaluate(1.50)  # +50 %
    b.step().question("information", "plateau", "info-bw")
    b.step(edit=SHARED).evaluate(1.56)  # +4 %
    return b.end()


def _run_c(path):
    b = TraceBuilder(path, "toolrich", "run-c")
    b.step(tool="profile").evaluate(1.00)
    b.step(edit=SHARED, tool="search_docs").evaluate(1.20)  # +20 %, no questions in this arm
    b.step(edit=SYNC).evaluate(None, correct=False)
    b.step(tool="disassemble").evaluate(None, correct=False, status="build_failed")
    b.step().evaluate(None, correct=False, status="no_gpu")  # not a judgement of the candidate
    return b.end()


@pytest.fixture
def traces(tmp_path):
    paths = [_run_a(tmp_path / "a.jsonl"), _run_b(tmp_path / "b.jsonl"), _run_c(tmp_path / "c.jsonl")]
    for p in paths:
        v = validate_trace(p)
        assert v.ok, v.errors
    return paths


def test_large_gains_are_attributed_to_the_nearest_question_since_the_last_best(traces):
    a = analyze(traces, threshold=0.10)
    gains = {(g.run_id, g.eval_index): g for g in a.gains}
    assert sorted(gains) == [("run-a", 3), ("run-a", 5), ("run-a", 7), ("run-b", 2), ("run-c", 2)]
    g = gains[("run-a", 3)]
    assert (g.step, g.before, g.after, g.gain_pct) == (4, 1.05, 1.30, 23.81)
    assert (g.category, g.question_step, g.question_trigger, g.question_id) == (
        "layer-shift",
        3,
        "plateau",
        "ls-mem-gap",
    )
    assert (g.layer_before, g.layer_after) == ("instructions", "memory")
    g = gains[("run-a", 5)]
    assert (g.category, g.question_step, g.before, g.after) == ("limit-rejection", 6, 1.30, 1.60)
    # the layer-shift question of step 3 came before the previous best (step 4): not this gain's
    assert (g.layer_before, g.layer_after) == ("synchronization", "algorithm")
    g = gains[("run-a", 7)]
    assert (g.category, g.question_step, g.layer_before, g.layer_after) == ("none", None, None, "decomposition")
    assert (gains[("run-b", 2)].category, gains[("run-b", 2)].layer_after) == ("human", "launch")
    assert gains[("run-c", 2)].category == "none"


def test_the_shares_of_large_gains_by_category(traces):
    a = analyze(traces, threshold=0.10)
    assert a.shares() == {
        "layer-shift": (1, 0.2),
        "limit-rejection": (1, 0.2),
        "information": (0, 0.0),
        "human": (1, 0.2),
        "none": (2, 0.4),
    }
    assert a.shares("kernelseek")["none"] == (1, 0.25) and a.shares("toolrich") == {
        "layer-shift": (0, 0.0),
        "limit-rejection": (0, 0.0),
        "information": (0, 0.0),
        "human": (0, 0.0),
        "none": (1, 1.0),
    }
    # a higher threshold leaves only the +50 % gain
    assert [(g.run_id, g.category) for g in analyze(traces, threshold=0.25).gains] == [("run-b", "human")]


def test_the_counts_per_run(traces):
    runs = {r.run_id: r for r in analyze(traces).runs}
    a, b, c = runs["run-a"], runs["run-b"], runs["run-c"]
    assert a.questions_by_category == {"layer-shift": 1, "limit-rejection": 1} and a.human_messages == 0
    assert b.questions_by_category == {"human": 1, "information": 1} and b.human_messages == 1
    assert a.tool_calls == {"edit_file": 6, "evaluate": 7, "view_file": 1}
    assert c.tool_calls == {"disassemble": 1, "edit_file": 2, "evaluate": 5, "profile": 1, "search_docs": 1}
    assert (a.evaluations, a.wrong, c.evaluations, c.wrong) == (7, 1, 5, 2)  # no_gpu judges no candidate
    assert a.steps == 9 and c.steps == 5


def test_traces_analyze_writes_tables_and_a_timeline_per_run(traces, tmp_path):
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["traces", "analyze", *map(str, traces), "--gain", "10", "--out", str(out)])
    assert r.exit_code == 0, r.output
    assert "| layer-shift     |             1 | 20 %" in r.output
    assert "| none            |             2 | 40 %" in r.output
    md = (out / "analysis.md").read_text()
    assert "1.050x -> 1.300x" in md and "instructions -> memory" in md
    rows = list(csv.DictReader(open(out / "gains.csv")))
    assert [(x["run_id"], x["category"]) for x in rows] == [
        ("run-a", "layer-shift"),
        ("run-a", "limit-rejection"),
        ("run-a", "none"),
        ("run-b", "human"),
        ("run-c", "none"),
    ]
    for run in ("run-a", "run-b", "run-c"):
        assert (out / f"timeline-{run}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a folder of traces is read the same way
    r2 = CliRunner().invoke(main, ["traces", "analyze", str(traces[0].parent), "--out", str(tmp_path / "o2")])
    assert r2.exit_code == 0 and (tmp_path / "o2" / "gains.csv").read_text() == (out / "gains.csv").read_text()


def test_traces_analyze_without_traces_is_a_usage_error(tmp_path):
    (tmp_path / "x.jsonl").write_text('{"type": "llm_call"}\n')
    r = CliRunner().invoke(main, ["traces", "analyze", str(tmp_path / "x.jsonl")])
    assert r.exit_code == 4 and "no traces" in r.output


# ---------------------------------------------------------------- the control


def _growing(path, arm, run_id, steps, jumps, questions, category="limit-rejection"):
    """A run whose best rises 1 % a step (below the threshold) and jumps 15 % at `jumps`; a question
    after each step in `questions`."""
    b = TraceBuilder(path, arm, run_id)
    value = 1.0
    for s in range(1, steps + 1):
        value *= 1.15 if s in jumps else 1.01
        b.step(edit="s += 1;").evaluate(round(value, 6))
        if s in questions:
            b.question(category, "plateau", f"q-{s}")
    return b.end()


def test_the_same_gains_credited_by_timing_alone_are_no_more_than_chance(tmp_path):
    """The issue's case: both arms get the same gains; the asking arm asks at every step, so every
    gain follows a question. The shuffled baseline credits as many, and the other arm's rate
    accounts for them."""
    asking = _growing(tmp_path / "k.jsonl", "kernelseek", "k", 20, {6, 12, 18}, set(range(1, 21)))
    silent = _growing(tmp_path / "t.jsonl", "toolrich", "t", 20, {6, 12, 18}, set())
    a = analyze([asking, silent], threshold=0.10, shuffles=300)
    assert [g.category for g in a.gains if g.arm == "kernelseek"] == ["limit-rejection"] * 3
    (c,) = a.control.categories
    assert (c.arm, c.category, c.questions, c.credited) == ("kernelseek", "limit-rejection", 20, 3)
    assert c.chance_mean == 3.0 and c.p == 1.0
    rates = {r.arm: r for r in a.control.rates}
    assert rates["kernelseek"].per_eval == rates["toolrich"].per_eval == 3 / 20
    assert c.evals_after == 19 and c.at_other_rate == pytest.approx(19 * 3 / 20)


def test_well_timed_questions_are_credited_above_chance(tmp_path):
    run = _growing(tmp_path / "s.jsonl", "kernelseek", "s", 60, {20, 40, 60}, {19, 39, 59})
    silent = _growing(tmp_path / "t.jsonl", "toolrich", "t", 60, {30}, set())
    a = analyze([run, silent], threshold=0.10, shuffles=500)
    (c,) = a.control.categories
    assert c.credited == 3 and c.chance_mean < 0.5 and c.p < 0.01
    assert c.evals_after == 20 + 20 + 1 and c.at_other_rate == pytest.approx(41 / 60)  # toolrich: 1 in 60
    again = analyze([run, silent], threshold=0.10, shuffles=500)
    assert again.control.categories[0].chance_mean == c.chance_mean  # a fixed seed: the same numbers


def test_traces_analyze_reports_the_control(tmp_path):
    asking = _growing(tmp_path / "k.jsonl", "kernelseek", "k", 20, {6, 12, 18}, set(range(1, 21)))
    silent = _growing(tmp_path / "t.jsonl", "toolrich", "t", 20, {6, 12, 18}, set())
    r = CliRunner().invoke(main, ["traces", "analyze", str(asking), str(silent), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert "## Against chance and against the other arms" in r.output
    assert "| kernelseek | limit-rejection |          20 |          3 | 3.00 [3-3]" in r.output
    rows = list(csv.DictReader(open(tmp_path / "o" / "attribution.csv")))
    assert rows[0]["credited"] == "3" and float(rows[0]["p"]) == 1.0


# ---------------------------------------------------------------- gains and the noise of the measurements

SAME = "5a" * 32  # one kernel file, evaluated more than once


def _reevaluated(path, run_id="re", jump=1.20):
    """A question, then the previous best's file evaluated again, unchanged, and measured `jump` higher."""
    b = TraceBuilder(path, "kernelseek", run_id)
    b.step().evaluate(1.00, sha=SAME)
    b.step().question("limit-rejection", "claimed-limit", "lr-evidence")
    b.step(edit="// nothing changed").evaluate(1.00 * jump, sha=SAME)
    return b


def test_a_byte_identical_reevaluation_never_gets_credit(tmp_path):
    path = _reevaluated(tmp_path / "t.jsonl").end()
    tiny = [Repeats("cpu-attn", "evaluation", "the starting kernel", "ab" * 32, [1.0, 1.01, 1.02])]
    for a in (analyze([path], threshold=0.10), analyze([path], noise=tiny), analyze([path], threshold=0.0, noise=tiny)):
        assert a.gains == [] and a.shares()["limit-rejection"] == (0, 0.0)
        (held,) = a.runs[0].not_credited
        assert (held.gain_pct, held.category, held.eval_index) == (20.0, "limit-rejection", 2)
        assert "the same kernel as the previous best" in held.note
        assert a.control.categories[0].credited == 0


def test_a_kernel_evaluated_before_is_no_gain_when_measured_again(tmp_path):
    b = TraceBuilder(tmp_path / "t.jsonl", "kernelseek", "back")
    b.step().evaluate(1.00, sha="01" * 32)
    b.step(edit="a").evaluate(1.05, sha="02" * 32)  # the best
    b.step(edit="b").evaluate(0.98, sha="03" * 32)
    b.step().question("layer-shift", "plateau", "ls-1")
    b.step(edit="back to b").evaluate(1.40, sha="03" * 32)  # evaluation 3's file again
    a = analyze([b.end()], threshold=0.10)
    assert a.gains == []
    (held,) = a.runs[0].not_credited
    assert held.note == "a kernel first evaluated at evaluation 3: a re-measurement, not a gain"


def _new_kernel_gain(path, gain=1.15):
    b = TraceBuilder(path, "kernelseek", "new")
    b.step().evaluate(1.00, sha="0a" * 32)
    b.step().question("layer-shift", "plateau", "ls-1")
    b.step(edit="new").evaluate(1.00 * gain, sha="0b" * 32)
    return b.end()


def test_the_threshold_is_the_tasks_noise_band_not_a_constant(tmp_path):
    path = _new_kernel_gain(tmp_path / "t.jsonl")  # a new kernel, +15 %
    wide = [Repeats("cpu-attn", "evaluation", "the starting kernel", "ab" * 32, [0.89, 1.00, 1.12])]  # band 25.8 %
    narrow = [Repeats("cpu-attn", "evaluation", "the starting kernel", "ab" * 32, [1.00, 1.02, 1.04])]  # band 4 %
    a = analyze([path], noise=wide)
    assert a.gains == [] and a.runs[0].threshold == pytest.approx(1.12 / 0.89 - 1)
    assert a.thresholds["cpu-attn"][1].startswith("the noise band of cpu-attn, +25.8 %")
    a = analyze([path], noise=narrow)
    assert [g.category for g in a.gains] == ["layer-shift"] and a.gains[0].threshold == pytest.approx(0.04)
    # a --gain above the band raises the threshold; one below it does not lower it
    assert analyze([path], threshold=0.20, noise=narrow).gains == []
    assert analyze([path], threshold=0.01, noise=wide).gains == []
    # no band measured: 10 % stands in, and says it is not a measurement
    a = analyze([path])
    assert len(a.gains) == 1 and "10 % stands in (not a measurement)" in a.thresholds["cpu-attn"][1]


def test_the_runs_own_reevaluations_of_one_file_are_a_noise_band(tmp_path):
    # two runs evaluate the same starting file: 1.00 and 1.18 -> a band of 18 %; a +15 % gain is noise
    first = TraceBuilder(tmp_path / "a.jsonl", "toolrich", "a")
    first.step().evaluate(1.00, sha="ee" * 32)
    second = TraceBuilder(tmp_path / "b.jsonl", "kernelseek", "b", seed=2)
    second.step().evaluate(1.18, sha="ee" * 32)
    second.step().question("layer-shift", "plateau", "ls-1")
    second.step(edit="new").evaluate(1.18 * 1.15, sha="0c" * 32)
    a = analyze([first.end(), second.end()])
    assert a.gains == [] and a.runs[1].threshold == pytest.approx(0.18)
    assert "a candidate evaluated 2 times unchanged in 2 run(s)" in a.thresholds["cpu-attn"][1]


def test_traces_analyze_reads_the_comparisons_noise_file(tmp_path):
    out = tmp_path / "cmp"
    (out / "traces").mkdir(parents=True)
    _reevaluated(out / "traces" / "k.jsonl").end()
    _new_kernel_gain(out / "traces" / "n.jsonl")
    write_noise(out / "noise.json", [Repeats("cpu-attn", "evaluation", "the starting kernel", "ab" * 32, [1.0, 1.3])])
    r = CliRunner().invoke(main, ["traces", "analyze", str(out / "traces"), "--out", str(tmp_path / "o")])
    assert r.exit_code == 0, r.output
    assert f"the A/A control of {out / 'noise.json'}" in r.output
    assert "- cpu-attn: +30.0 %: the noise band of cpu-attn, +30.0 %" in r.output
    assert "## Large gains\n\n(none)" in r.output  # +15 % is within the band, +20 % is the same file
    assert "## Not credited: re-measurements of an unchanged kernel" in r.output
    assert "the same kernel as the previous best" in r.output
