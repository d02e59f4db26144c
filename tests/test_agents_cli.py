"""`kernelseek-suite run` and `kernelseek-suite traces` end to end, and the API key's discretion."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from agent_runs import SECRET, of_type
from chat_server import ScriptedChatServer, reply
from kernelseek_suite.cli import main
from kernelseek_suite.contracts.traces import read_trace

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

FAST = ["--task", "cpu-attn", "--task-opt", "budget_ms=2", "--model", "m", "--seed", "3"]


def _run(args, env=None):
    return CliRunner().invoke(main, args, env=env, catch_exceptions=False)


def test_run_reaches_the_goal_and_exits_0(tmp_path):
    trace = tmp_path / "t.jsonl"
    with ScriptedChatServer([reply(None, [("evaluate", {})]), reply("Done.")]) as srv:
        r = _run(
            ["run", *FAST, "--goal", "0.01", "--base-url", srv.url, "--trace", str(trace)], env={"OPENAI_API_KEY": None}
        )
    assert r.exit_code == 0, r.output
    assert "exit: submitted" in r.output and "goal met" in r.output
    assert "evaluation 1: ok" in r.output or "eval   #1 ok" in r.output
    v = _run(["traces", "validate", str(trace)])
    assert v.exit_code == 0 and "valid" in v.output
    show = _run(["traces", "show", str(trace)])
    assert "eval   #1 ok 6/6 correct" in show.output and "end: 2 steps" in show.output


def test_run_with_an_unmet_goal_exits_1_and_shows_questions(tmp_path):
    trace = tmp_path / "t.jsonl"
    with ScriptedChatServer([reply(None, [("evaluate", {})]), reply("Done.")]) as srv:
        r = _run(["run", *FAST, "--goal", "1000", "--max-steps", "2", "--base-url", srv.url, "--trace", str(trace)])
    assert r.exit_code == 1 and "exit: limit (steps)" in r.output
    show = _run(["traces", "show", str(trace)])
    assert "QUESTION [early-stop; bank" in show.output


def test_the_api_key_is_used_but_never_written(tmp_path):
    trace = tmp_path / "t.jsonl"

    def echo_key(body):  # an endpoint that repeats the key back; the model "tries" to leak it too
        return reply(
            f"my key is {SECRET}",
            [
                ("shell", {"command": "echo key=$OPENAI_API_KEY; env | sort"}),
                ("edit_file", {"path": "notes.txt", "new_text": SECRET}),
            ],
        )

    with ScriptedChatServer([echo_key, reply(None, [("evaluate", {})])]) as srv:
        r = _run(
            ["run", *FAST, "--max-steps", "2", "--base-url", srv.url, "--trace", str(trace)],
            env={"OPENAI_API_KEY": SECRET},
        )
        headers = [{k.lower(): v for k, v in q["headers"].items()} for q in srv.requests]
    assert all(h["authorization"] == f"Bearer {SECRET}" for h in headers)
    assert r.exit_code == 1
    assert SECRET not in r.output
    written = [trace] + sorted(p for p in trace.with_suffix(".d").rglob("*") if p.is_file())
    for p in written:
        assert SECRET.encode() not in p.read_bytes(), p
    shell = of_type(read_trace(trace).events, "tool_result")[0]
    assert "key=\n" in shell["output"] and "OPENAI_API_KEY" not in shell["output"]
    assert "[redacted]" in trace.read_text()


def test_resume_from_the_command_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    with ScriptedChatServer([reply(None, [("evaluate", {})])]) as srv:
        r = _run(["run", *FAST, "--max-steps", "1", "--base-url", srv.url, "--trace", str(trace)])
    assert r.exit_code == 1
    with ScriptedChatServer([reply(None, [("shell", {"command": "ls"})])]) as srv2:
        r = _run(["run", "--resume", str(trace), "--max-steps", "2", "--base-url", srv2.url])
        sent = srv2.bodies()[0]["messages"]
    assert r.exit_code == 1 and "exit: limit (steps)" in r.output
    assert sent[-1]["role"] == "tool" and "correct on 6/6" in sent[-1]["content"]
    events = read_trace(trace).events
    assert [e["type"] for e in events].count("resume") == 1 and events[-1]["totals"]["steps"] == 2


@pytest.mark.parametrize(
    "args,env,message",
    [
        (["run", "--task", "cpu-attn"], {}, "--model is required"),
        (["run", "--task", "cpu-attn", "--model", "m"], {"OPENAI_API_KEY": None}, "set OPENAI_API_KEY"),
        (["run", "--task", "no-such-task", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], {}, "unknown task"),
        (
            ["run", "--agent", "nobody", "--task", "cpu-attn", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"],
            {},
            "unknown agent",
        ),
    ],
)
def test_usage_errors_exit_4(args, env, message):
    r = _run(args, env=env)
    assert r.exit_code == 4 and message in r.output


def test_a_bad_bank_is_a_usage_error_naming_the_problem(tmp_path):
    bank = tmp_path / "b.yaml"
    bank.write_text(
        "version: 1\nquestions:\n  - id: x1\n    text: Why is this so?\n    category: rhetorical\n"
        "    triggers: [plateau]\n    layers: [memory]\n"
    )
    r = _run(
        ["run", *FAST, "--base-url", "http://127.0.0.1:9/v1", "--bank", str(bank), "--trace", str(tmp_path / "t.jsonl")]
    )
    assert r.exit_code == 4 and "entry questions[0] (id 'x1')" in r.output and "rhetorical" in r.output


def test_an_existing_trace_is_not_overwritten(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"type": "run_start"}\n')
    r = _run(["run", *FAST, "--base-url", "http://127.0.0.1:9/v1", "--trace", str(trace)])
    assert r.exit_code == 4 and "already holds a trace" in r.output


def test_traces_validate_rejects_a_broken_trace(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "llm_call", "seq": 0}\nnot json\n')
    r = _run(["traces", "validate", str(bad)])
    assert r.exit_code == 1 and "INVALID" in r.output and "line 2: not a JSON object" in r.output
