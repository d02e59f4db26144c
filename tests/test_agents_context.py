"""The conversation kept inside the model's context window: a long run under a small window, an
endpoint that refuses a request as too long, a window the endpoint reports, resuming after a
compaction, and the compaction itself on constructed conversations."""

from __future__ import annotations

import json
import shutil

import pytest

from agent_runs import FASTER_KERNEL, SECRET, config_for, of_type, run
from chat_server import ScriptedChatServer, reply, request_tokens
from kernelseek_suite.agents import resume_run
from kernelseek_suite.agents.compaction import SUMMARY_HEAD, ContextManager
from kernelseek_suite.agents.config import ContextConfig
from kernelseek_suite.contracts.traces import read_trace, validate_trace

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def big_kernel(i: int, kb: int = 40) -> str:
    """The faster kernel with a long comment: a whole-file rewrite the size of the Hopper kernel."""
    return FASTER_KERNEL + f"/* version {i}\n" + (f"{i} " + "x" * 76 + "\n") * (kb * 1024 // 80) + "*/\n"


def workload(steps: int, kb: int = 40) -> list:
    """Whole-file rewrites, views, long shell outputs, small edits and evaluations, over and over."""
    script = []
    for i in range(1, steps + 1):
        k = i % 10
        if k == 1:
            calls = [("edit_file", {"path": "attn.c", "new_text": big_kernel(i, kb)})]
        elif k == 2:
            calls = [("view_file", {"path": "attn.c"})]
        elif k == 3:
            calls = [("shell", {"command": "seq 1 4000"})]
        elif k == 4 and i % 20 == 4:
            calls = [("evaluate", {})]
        elif k == 5:
            calls = [("edit_file", {"path": "attn.c", "old_text": f"version {i - 4}\n", "new_text": f"v{i}\n"})]
        else:
            calls = [("shell", {"command": f"echo step {i}; wc -c attn.c"})]
        script.append(reply(f"Step {i}: next I try something else.", calls))
    return script


def _well_formed(messages: list[dict]) -> None:
    """Every tool call has its result right after its assistant message, and nothing else does."""
    pending: set = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in pending
            pending.discard(m["tool_call_id"])
        else:
            assert not pending, f"calls without results before a {m['role']} message"
            if m["role"] == "assistant":
                pending = {c["id"] for c in m.get("tool_calls") or []}
    assert not pending


@needs_gcc
def test_a_200_step_run_finishes_inside_a_32k_window(tmp_path):
    with ScriptedChatServer(workload(200), context_window=32_000) as srv:
        cfg = config_for(srv, max_steps=200)
        cfg.context.window_tokens = 32_000
        cfg.tools.sandbox = "none"
        result, events, _ = run(cfg, tmp_path)
        sizes = [request_tokens(b) for b in srv.bodies()]
        refused = list(srv.refused)
    assert result.exit_reason == "limit" and result.limit == "steps" and result.totals["steps"] == 200
    assert refused == [] and max(sizes) <= 32_000 - 4096
    ctx = of_type(events, "context")
    assert len(ctx) >= 5 and result.totals["compactions"] == len(ctx)
    assert all(c["reason"] == "budget" and c["fits"] and c["window_source"] == "option" for c in ctx)
    assert sum(c["elided"]["superseded_files"] for c in ctx) > 0 and sum(c["elided"]["turns_dropped"] for c in ctx) > 0
    assert len(of_type(events, "harness_eval")) == 10
    last = ctx[-1]
    assert last["summary"].startswith(SUMMARY_HEAD) and "evaluated: status: ok" in last["summary"]
    _well_formed(last["messages"])
    # the latest version of the kernel is in every request, whole; no superseded version is
    for body in srv.bodies()[150:]:
        text = json.dumps(body["messages"])
        assert text.count("/* version ") <= 2  # the latest write, and the view of it
    assert events[0]["context"] == {"window_tokens": 32_000, "window_source": "option", "room_tokens": 32_000 - 4096}


@needs_gcc
def test_an_oversized_request_is_compacted_and_asked_again_and_resume_does_not_resend_it(tmp_path):
    """The window is not known: the endpoint's refusal says it; the run compacts, asks again and goes
    on; resumed later, the run does not send an oversized request again."""
    with ScriptedChatServer(workload(8, kb=16), context_window=9_000) as srv:
        cfg = config_for(srv, max_steps=8)
        cfg.tools.sandbox = "none"
        result, events, agent = run(cfg, tmp_path)
        refused = list(srv.refused)
    assert result.exit_reason == "limit" and result.totals["steps"] == 8
    assert len(refused) >= 1 and all(t > 9_000 for t in refused)
    ctx = of_type(events, "context")
    first = ctx[0]
    assert first["reason"] == "endpoint" and first["window_source"] == "refusal" and first["window_tokens"] == 9_000
    assert "maximum context length is 9000 tokens" in first["error"] and first["refused_tokens"] == refused[0]
    assert events[0]["context"]["window_source"] == "unknown"
    # after the first refusal the window is known: later requests are compacted before they are sent
    assert len(refused) == 1
    trace = agent.ctx.trace.path
    with ScriptedChatServer(workload(4, kb=16), context_window=9_000) as srv2:
        agent2 = resume_run(trace, SECRET, limits={"max_steps": 12}, model_overrides={"base_url": srv2.url})
        result2 = agent2.run()
        assert srv2.refused == [] and len(srv2.requests) == 4
    assert result2.exit_reason == "limit" and validate_trace(trace).ok


@needs_gcc
def test_the_window_the_endpoint_reports_is_used(tmp_path):
    with ScriptedChatServer(workload(12, kb=16), context_window=10_000, advertise_window=True) as srv:
        cfg = config_for(srv, max_steps=12)
        cfg.tools.sandbox = "none"
        result, events, _ = run(cfg, tmp_path)
        assert srv.refused == []
    assert events[0]["context"]["window_source"] == "endpoint" and events[0]["context"]["window_tokens"] == 10_000
    assert of_type(events, "context") and result.totals["steps"] == 12


@needs_gcc
def test_a_run_resumed_after_compactions_rebuilds_the_compacted_conversation(tmp_path):
    from kernelseek_suite.agents import new_run
    from kernelseek_suite.agents.selfcheck import ScriptedModel

    steps = [list(r["calls"]) for r in workload(30, kb=16)]

    class Interrupting(ScriptedModel):
        def query(self, messages, tools):
            if self.calls == 25:
                raise KeyboardInterrupt
            return super().query(messages, tools)

    with ScriptedChatServer([]) as srv:
        cfg = config_for(srv, max_steps=30)
    cfg.context.window_tokens = 12_000
    cfg.tools.sandbox = "none"
    trace = tmp_path / "t.jsonl"
    result = new_run(cfg, trace, model=Interrupting(steps[:])).run()
    assert result.exit_reason == "interrupted" and result.totals["compactions"] >= 2
    events = read_trace(trace).events
    last_ctx = of_type(events, "context")[-1]
    seen = []

    class Recording(ScriptedModel):
        def query(self, messages, tools):
            seen.append(json.loads(json.dumps(messages)))
            return super().query(messages, tools)

    agent = resume_run(trace, limits={"max_steps": 27}, model=Recording(steps[25:]))
    assert agent.window.state.dropped_through_step == last_ctx["state"]["dropped_through_step"] > 0
    assert agent.messages[2]["content"] == last_ctx["summary"]
    agent.run()
    assert seen[0][:3] == last_ctx["messages"][:3]
    assert validate_trace(trace).ok


# ---------------------------------------------------------------- the compaction on its own


def _call(i, name, args):
    return {"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _conversation(n_turns: int) -> list[dict]:
    msgs = [{"role": "system", "content": "system"}, {"role": "user", "content": "the task"}]
    for i in range(1, n_turns + 1):
        if i % 3 == 1:
            call, out = _call(i, "edit_file", {"path": "k.c", "new_text": f"/* v{i} */" + "y" * 4000}), "k.c: wrote"
        elif i % 3 == 2:
            call, out = _call(i, "view_file", {"path": "k.c"}), f"    1  /* v{i - 1} */" + "y" * 4000
        else:
            call, out = _call(i, "shell", {"command": f"make {i}"}), f"output of {i}\n" + "z" * 3000
        msgs.append({"role": "assistant", "content": f"turn {i}", "tool_calls": [call]})
        msgs.append({"role": "tool", "tool_call_id": f"c{i}", "content": out})
        if i == 4:
            msgs.append({"role": "user", "content": "What would a layer below this change?"})
    return msgs


def test_compaction_keeps_only_the_latest_version_of_a_file_and_the_recent_turns_whole():
    msgs = _conversation(9)
    m = ContextManager(ContextConfig(window_tokens=100_000, keep_recent_turns=3))
    r = m.compact(msgs, [], target=100_000, first_step=1)  # within the target: only superseded files go
    assert r.elided == {"superseded_files": 5, "tool_outputs": 0, "arguments": 0, "turns_dropped": 0}
    text = json.dumps(r.messages)
    assert "/* v7 */" in text and "/* v4 */" not in text and "/* v1 */" not in text
    assert msgs == _conversation(9)  # the caller's list is not touched
    _well_formed(r.messages)


def test_compaction_elides_older_outputs_first_then_drops_turns_into_a_summary():
    msgs = _conversation(12)
    m = ContextManager(ContextConfig(keep_recent_turns=3))
    full = m.tokens(msgs, [])
    r = m.compact(msgs, [], target=int(full * 0.3), first_step=1)
    assert r.fits and r.elided["tool_outputs"] > 0 and r.elided["turns_dropped"] == 0
    assert r.messages[-4:] == msgs[-4:]  # the recent turns whole, but for a superseded version of k.c
    assert (
        "[elided: 4009 characters of k.c written at step 10" in r.messages[-6]["tool_calls"][0]["function"]["arguments"]
    )
    r2 = m.compact(msgs, [], target=int(full * 0.2), first_step=1)
    assert r2.fits and r2.elided["turns_dropped"] > 0 and r2.dropped_through_step == r2.elided["turns_dropped"]
    summary = r2.messages[2]["content"]
    assert summary.startswith(SUMMARY_HEAD) and "- step 1: wrote k.c" in summary and "ran `make 3`" in summary
    assert "What would a layer below this change?" in summary  # the question asked after step 4
    assert r2.messages[:2] == msgs[:2]
    _well_formed(r2.messages)
    again = m.compact(msgs, [], target=int(full * 0.2), first_step=1)
    assert again.messages == r2.messages  # deterministic


def test_the_estimate_is_calibrated_on_what_the_endpoint_reports():
    m = ContextManager(ContextConfig(window_tokens=10_000, reserve_tokens=1000))
    msgs = _conversation(3)
    chars = len(json.dumps(msgs))
    m.calibrate(msgs, [], chars // 2)
    assert m.estimator.chars_per_token == pytest.approx(2.0, rel=0.01)
    m.calibrate(msgs, [], 1)  # an endpoint that reports nonsense: clamped
    assert m.estimator.chars_per_token == 6.0
    assert m.room == 9000 and ContextManager(ContextConfig(window_tokens=2000, reserve_tokens=4096)).room == 1500


@needs_gcc
def test_a_resume_with_a_smaller_window_compacts_before_its_first_request(tmp_path):
    """A run made for one window, resumed on a model with a smaller one (run --resume
    --context-tokens): the first request of the new session already fits."""
    with ScriptedChatServer(workload(6, kb=16)) as srv:
        cfg = config_for(srv, max_steps=6)
        cfg.tools.sandbox = "none"
        result, events, agent = run(cfg, tmp_path)
    assert not of_type(events, "context")
    with ScriptedChatServer(workload(2, kb=16), context_window=6_000) as srv2:
        agent2 = resume_run(
            agent.ctx.trace.path,
            SECRET,
            limits={"max_steps": 8},
            model_overrides={"base_url": srv2.url},
            context_overrides={"window_tokens": 6_000},
        )
        agent2.run()
        assert srv2.refused == [] and len(srv2.requests) == 2
    events = read_trace(agent.ctx.trace.path).events
    ctx = of_type(events, "context")
    assert ctx and ctx[0]["reason"] == "budget" and ctx[0]["window_source"] == "option"
