"""The head-to-head: both arms through the loopback chat server on the CPU task, the table and the
plot, regenerating without a model, re-measuring recorded candidates, and the numbers a run is
reduced to (on constructed traces with known answers)."""

from __future__ import annotations

import csv
import json
import pickle
import shutil

import pytest
from click.testing import CliRunner

from agent_runs import FASTER_KERNEL, WRONG_KERNEL
from chat_server import ScriptedChatServer, reply
from kernelseek_suite.cli import main
from kernelseek_suite.contracts.traces import read_trace, validate_trace
from kernelseek_suite.headtohead.compare import CompareRequest, RunSpec, plan, run_spec
from kernelseek_suite.headtohead.report import read_runs, render
from kernelseek_suite.headtohead.runstats import stats_from_trace
from trace_builder import TraceBuilder

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
PNG = b"\x89PNG\r\n\x1a\n"


def respond(body):
    """The same plan for either arm: evaluate, improve, evaluate, break it, then claim a limit."""
    step = sum(m["role"] == "assistant" for m in body["messages"]) + 1
    toolrich = "record_lesson" in {t["function"]["name"] for t in body.get("tools", [])}
    if toolrich and step == 4:
        return reply(
            None,
            [
                ("record_lesson", {"text": "contiguous rows of v made it faster"}),
                ("edit_file", {"path": "attn.c", "new_text": WRONG_KERNEL}),
                ("evaluate", {}),
            ],
        )
    return {
        1: reply(None, [("evaluate", {})]),
        2: reply("Turn the loop.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})]),
        3: reply(None, [("evaluate", {})]),
        4: reply(None, [("edit_file", {"path": "attn.c", "new_text": WRONG_KERNEL}), ("evaluate", {})]),
    }.get(step, reply("It is memory-bound now; it cannot be improved further.", [("shell", {"command": "true"})]))


ARGS = [
    "compare",
    "--agents",
    "kernelseek,toolrich",
    "--task",
    "cpu-attn",
    "--task-opt",
    "budget_ms=2",
    "--model",
    "scripted-model",
    "--seeds",
    "2",
    "--max-steps",
    "5",
    "--temperature",
    "0.2",
]


def _compare(args, env=None):
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp") / "compare"
    with ScriptedChatServer([respond] * 100) as srv:
        r = _compare([*ARGS, "--base-url", srv.url, "--out", str(out)], env={"OPENAI_API_KEY": None})
        requests = [q["body"] for q in srv.requests]
    return out, r, requests


@needs_gcc
def test_compare_runs_every_arm_and_seed_on_equal_terms(compared):
    out, r, requests = compared
    assert r.exit_code == 0, r.output
    traces = sorted((out / "traces").glob("*.jsonl"))
    assert [t.name for t in traces] == [
        "kernelseek-seed1.jsonl",
        "kernelseek-seed2.jsonl",
        "toolrich-seed1.jsonl",
        "toolrich-seed2.jsonl",
    ]
    starts = {t.stem: read_trace(t).events[0] for t in traces}
    for name, s in starts.items():
        assert validate_trace(out / "traces" / f"{name}.jsonl").ok
        assert s["arm"] == name.split("-")[0] and s["seed"] == int(name[-1])
        cfg = s["config"]
        assert cfg["task"] == "cpu-attn" and cfg["task_options"] == {"budget_ms": 2}
        assert cfg["limits"]["max_steps"] == 5 and cfg["model"]["temperature"] == 0.2
        assert cfg["model"]["seed"] == s["seed"]
    # the arms take turns going first (the runs are one after another: the order of their first requests)
    arm = {True: "toolrich", False: "kernelseek"}
    order = [f"{arm['record_lesson' in {t['function']['name'] for t in b['tools']}]}-seed{b['seed']}" for b in requests]
    assert list(dict.fromkeys(order)) == ["kernelseek-seed1", "toolrich-seed1", "toolrich-seed2", "kernelseek-seed2"]
    assert len(requests) == 4 * 5


@needs_gcc
def test_compare_writes_the_table_and_the_plot(compared):
    out, r, _ = compared
    runs = {(x.arm, x.seed): x for x in read_runs(out / "runs.jsonl")}
    assert set(runs) == {("kernelseek", 1), ("kernelseek", 2), ("toolrich", 1), ("toolrich", 2)}
    for (arm, _seed), x in runs.items():
        # the KernelSeek arm's classification of its step-5 claim (50 + 3 tokens) counts in its budget
        assert x.evals == 3 and x.wrong == 1 and x.steps == 5
        assert x.total_tokens == 5 * 120 + (53 if arm == "kernelseek" else 0)
        assert x.best is not None and x.evals_to_best in (1, 2) and x.steps_to_best in (1, 3)
        assert (x.questions > 0) == (arm == "kernelseek")
    assert runs[("toolrich", 1)].tool_calls["record_lesson"] == 1
    md = (out / "compare.md").read_text()
    assert "## Per arm" in md and "## Per run" in md and md in r.output
    assert md.count("| kernelseek |") == 3 and md.count("| toolrich   |") == 3
    rows = list(csv.DictReader(open(out / "compare.csv")))
    assert [(x["arm"], x["seed"]) for x in rows] == [
        ("kernelseek", "1"),
        ("kernelseek", "2"),
        ("toolrich", "1"),
        ("toolrich", "2"),
    ]
    assert [x["calls_record_lesson"] for x in rows] == ["0", "0", "1", "1"]
    assert all(int(x["calls_evaluate"]) == 3 for x in rows)
    assert (out / "best_so_far.png").read_bytes()[:8] == PNG
    assert "<svg" in (out / "best_so_far.svg").read_text()[:500]
    # the runs as one page to browse, the two arms side by side
    page = (out / "traces.html").read_text()
    assert "Head-to-head: 4 runs" in page and str(out / "traces.html") in r.output
    assert page.count('"run_id":') == 4 and '"arm": "toolrich"' in page and '"arm": "kernelseek"' in page


@needs_gcc
def test_without_an_endpoint_compare_regenerates_from_its_traces(compared, tmp_path):
    out, _, _ = compared
    for name in ("compare.md", "compare.csv", "best_so_far.png"):
        (out / name).unlink()
    r = _compare(["compare", "--task", "cpu-attn", "--out", str(out)], env={"OPENAI_API_KEY": None})
    assert r.exit_code == 0
    assert "no model endpoint configured" in r.output and "regenerating from the 4 trace(s)" in r.output
    assert (out / "compare.md").exists() and (out / "best_so_far.png").read_bytes()[:8] == PNG
    r = _compare(["compare", "--task", "cpu-attn", "--out", str(tmp_path / "empty")], env={"OPENAI_API_KEY": None})
    assert r.exit_code == 4 and "--base-url" in r.output and "--from-traces" in r.output


@needs_gcc
def test_a_second_compare_keeps_runs_that_finished(compared):
    out, _, _ = compared
    with ScriptedChatServer([respond] * 10) as srv:
        r = _compare([*ARGS, "--base-url", srv.url, "--out", str(out)])
        assert not srv.requests
    assert r.exit_code == 0 and r.output.count("already finished, kept") == 4


@needs_gcc
def test_from_traces_with_remeasure_evaluates_every_candidate_again(compared, tmp_path):
    out, _, _ = compared
    other = tmp_path / "again"
    r = _compare(["compare", "--from-traces", str(out / "traces"), "--remeasure", "--out", str(other)])
    assert r.exit_code == 0, r.output
    lines = (other / "remeasure.jsonl").read_text().splitlines()
    head, rows = json.loads(lines[0]), [json.loads(l) for l in lines[1:]]
    assert "remeasured_at" in head and len(rows) == 4 * 3
    for row in rows:
        assert row["recorded_status"] == row["status"]  # correct stays correct, wrong stays wrong
        assert (row["geomean"] is not None) == (row["status"] == "ok")
    runs = read_runs(other / "runs.jsonl")
    assert all(x.remeasured and x.best is not None for x in runs)
    recorded = {(x.arm, x.seed): x.best for x in read_runs(out / "runs.jsonl")}
    best_rows = {(x.arm, x.seed): x.best for x in runs}
    assert best_rows.keys() == recorded.keys()
    assert "re-measured on this machine" in (other / "compare.md").read_text()


def test_the_plan_gives_each_arm_the_same_run_and_ships_as_plain_data(tmp_path):
    req = CompareRequest(
        arms=["kernelseek", "toolrich"],
        task="cpu-attn",
        model={"name": "m", "base_url": "u"},
        seeds=[1, 2, 3],
        limits={"max_evals": 7},
        task_options={"goal": 3.0},
        arm_options={"toolrich": {"population_size": 6}},
        out_dir=str(tmp_path),
    )
    specs = plan(req)
    assert [(s.seed, s.arm) for s in specs] == [
        (1, "kernelseek"),
        (1, "toolrich"),
        (2, "toolrich"),
        (2, "kernelseek"),
        (3, "kernelseek"),
        (3, "toolrich"),
    ]
    by_seed = {}
    for s in specs:
        c = dict(s.config)
        assert c.pop("arm") == s.arm and c["limits"]["max_evals"] == 7 and c["task_options"] == {"goal": 3.0}
        assert c.pop("arm_options") == ({"population_size": 6} if s.arm == "toolrich" else {})
        by_seed.setdefault(s.seed, []).append(c)
    assert all(a == b for a, b in by_seed.values())  # apart from the arm, the same run
    again = pickle.loads(pickle.dumps(specs[0]))
    assert isinstance(again, RunSpec) and again == specs[0]
    assert pickle.loads(pickle.dumps(run_spec)) is run_spec  # a plain, importable function


@needs_gcc
def test_run_spec_resumes_an_interrupted_run_and_keeps_a_finished_one(tmp_path):
    from kernelseek_suite.agents.selfcheck import ScriptedModel

    class Interrupting(ScriptedModel):
        def query(self, messages, tools):
            if self.calls == 1:
                raise KeyboardInterrupt
            return super().query(messages, tools)

    req = CompareRequest(
        arms=["toolrich"],
        task="cpu-attn",
        model={"name": "m"},
        seeds=[1],
        limits={"max_steps": 2},
        task_options={"budget_ms": 2},
        out_dir=str(tmp_path),
    )
    (spec,) = plan(req)
    first = run_spec(spec, model=Interrupting([[("evaluate", {})]]))
    assert first["state"] == "new" and first["exit_reason"] == "interrupted"
    second = run_spec(spec, model=ScriptedModel([[("evaluate", {})], [("population", {})]]))
    assert second["state"] == "resumed" and second["exit_reason"] == "limit"
    assert run_spec(spec)["state"] == "finished"
    events = read_trace(spec.trace_path).events
    assert [e["type"] for e in events].count("resume") == 1 and validate_trace(spec.trace_path).ok
    assert stats_from_trace(spec.trace_path).evals == 2


@needs_gcc
def test_run_spec_starts_over_a_run_cut_off_before_its_first_model_call(tmp_path):
    """Nothing to resume (e.g. the endpoint was down from the start, or the worker died at once): the
    run starts anew in the same trace."""
    from kernelseek_suite.agents.selfcheck import ScriptedModel
    from kernelseek_suite.headtohead.compare import trace_state

    class Down(ScriptedModel):
        def query(self, messages, tools):
            raise KeyboardInterrupt

    req = CompareRequest(
        arms=["kernelseek"],
        task="cpu-attn",
        model={"name": "m"},
        seeds=[1],
        limits={"max_steps": 1},
        task_options={"budget_ms": 2},
        out_dir=str(tmp_path),
    )
    (spec,) = plan(req)
    assert run_spec(spec, model=Down([]))["exit_reason"] == "interrupted"
    assert trace_state(spec.trace_path) == "absent"
    again = run_spec(spec, model=ScriptedModel([[("evaluate", {})]]))
    assert again["state"] == "new" and again["exit_reason"] == "limit"
    events = read_trace(spec.trace_path).events
    assert [e["type"] for e in events].count("run_start") == 1 and validate_trace(spec.trace_path).ok
    assert trace_state(spec.trace_path) == "finished"


def test_run_stats_and_the_table_from_a_constructed_trace(tmp_path):
    b = TraceBuilder(tmp_path / "t.jsonl", "kernelseek", "run-x", seed=4)
    b.step(tool="view_file").evaluate(0.50)
    b.step(edit="x").evaluate(None, correct=False)
    b.question("layer-shift")
    b.step(edit="y").evaluate(0.80)
    b.step().evaluate(0.70)
    b.step().evaluate(None, correct=False, status="no_gpu")
    s = stats_from_trace(b.end())
    assert (s.best, s.best_eval, s.steps_to_best, s.evals_to_best) == (0.80, 3, 3, 3)
    assert (s.steps, s.evals, s.wrong, s.questions, s.total_tokens, s.wall_s) == (5, 5, 1, 1, 500, 300.0)
    assert s.tool_calls == {"edit_file": 2, "evaluate": 5, "view_file": 1}
    assert s.curve() == [(1, 0.5), (2, 0.5), (3, 0.8), (4, 0.8), (5, 0.8)]
    assert s.question_steps == [(2, "layer-shift")]
    # re-measured numbers replace the recorded ones: here candidate 3 got slower
    s2 = stats_from_trace(b.path, {b.shas[2]: {"status": "ok", "correct": True, "geomean": 0.6}})
    assert (s2.best, s2.best_eval) == (0.70, 4) and s2.remeasured
    outs = render([s], tmp_path / "out")
    table = [
        [c.strip() for c in l.strip("|").split("|")]
        for l in outs.markdown.read_text().splitlines()
        if l.startswith("| kernelseek |")
    ]
    cells = next(c for c in table if c[1] == "4")
    assert cells[2:8] == ["0.800x", "3", "3", "5", "1", "1"]
    assert cells[8] == "evaluate 5, edit_file 2, view_file 1" and cells[9] == "500" and cells[11] == "5.0"
