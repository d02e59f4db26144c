"""Complete runs of the agents on the CPU task, through a real chat-completions server on loopback."""

from __future__ import annotations

import json
import shutil

import pytest

from agent_runs import FASTER_KERNEL, SECRET, WRONG_KERNEL, config_for, of_type, run, user_texts
from chat_server import ScriptedChatServer, fault, hang, reply, reset
from kernelseek_suite.agents import resume_run
from kernelseek_suite.contracts.traces import read_trace, validate_trace

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def test_edits_land_in_the_workspace_and_the_evaluator_runs(tmp_path):
    script = [
        reply("Rewrite the P.V loop.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})]),
        reply(None, [("evaluate", {})]),
        reply(None, [("view_file", {"path": "attn.c", "start_line": 20, "end_line": 24})]),
    ]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=3)
        cfg.tools.keep_workspace = True
        result, events, agent = run(cfg, tmp_path)
    assert (agent.ctx.workspace.root / "attn.c").read_text() == FASTER_KERNEL
    ev = of_type(events, "harness_eval")
    assert len(ev) == 1 and ev[0]["status"] == "ok" and ev[0]["correct"]
    assert ev[0]["scenarios_correct"] == ev[0]["scenarios_total"] == 6
    assert ev[0]["geomean"] > 0 and ev[0]["best"]["eval_index"] == 1
    blob = agent.ctx.trace.artifacts / ev[0]["candidate_blob"]
    assert blob.read_text() == FASTER_KERNEL
    # the model saw the evaluation and the edited file
    tool_msgs = [m for m in srv.bodies()[2]["messages"] if m["role"] == "tool"]
    assert "correct on 6/6 scenarios" in tool_msgs[-1]["content"]
    assert "out[c] += p[j]" in of_type(events, "tool_result")[-1]["output"]
    assert result.exit_reason == "limit" and result.limit == "steps"


def test_a_plateau_brings_a_bank_question(tmp_path):
    script = [reply(None, [("evaluate", {})]) for _ in range(3)] + [reply(None, [("shell", {"command": "ls"})])]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=4)
        cfg.questions.plateau_evals = 2
        cfg.questions.new_best_min_gain = 10.0  # no later evaluation can count as a new best
        result, events, _ = run(cfg, tmp_path)
    qs = of_type(events, "question")
    assert [q["trigger"] for q in qs] == ["plateau"]
    q = qs[0]
    assert q["source"] == "bank" and q["category"] == "layer-shift" and q["bank_id"]
    assert q["step"] == 3 and q["evidence"]["evals_without_new_best"] == 2
    assert q["text"] in user_texts(srv.bodies()[3])
    assert q["text"] not in user_texts(srv.bodies()[2])


def test_a_claimed_limit_brings_a_limit_rejection_question(tmp_path):
    script = [
        reply(None, [("evaluate", {})]),
        reply(
            "This kernel is memory-bound now; the loop cannot be improved any further.",
            [("shell", {"command": "true"})],
        ),
        reply(None, [("shell", {"command": "true"})]),
    ]
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, max_steps=3), tmp_path)
    qs = of_type(events, "question")
    assert len(qs) == 1
    assert qs[0]["trigger"] == "claimed-limit" and qs[0]["category"] == "limit-rejection"
    assert "memory-bound" in qs[0]["evidence"]["sentence"]
    assert qs[0]["text"] in user_texts(srv.bodies()[2])


CLAIM_IN_OTHER_WORDS = "This feels final to me; the part is spent."


def _claim_then_shell(text):
    return [
        reply(None, [("evaluate", {})]),
        reply(text, [("shell", {"command": "true"})]),
        reply(None, [("shell", {"command": "true"})]),
    ]


def test_the_runs_own_model_decides_a_claimed_limit_and_the_call_is_in_the_trace(tmp_path):
    """A claim the patterns miss, found by the model's classification call: asked about, the call
    recorded and its tokens counted (not as a step)."""
    seen = []

    def model(text):
        seen.append(text)
        return f"CLAIM\n{CLAIM_IN_OTHER_WORDS}"

    with ScriptedChatServer(_claim_then_shell(CLAIM_IN_OTHER_WORDS), classifier=model) as srv:
        result, events, _ = run(config_for(srv, max_steps=3), tmp_path)
        (body,) = srv.classifications
    assert seen == [CLAIM_IN_OTHER_WORDS] and body["model"] == "scripted-model" and "tools" not in body
    (q,) = of_type(events, "question")
    assert q["trigger"] == "claimed-limit" and q["evidence"]["decided_by"] == "model"
    assert q["evidence"]["sentence"] == CLAIM_IN_OTHER_WORDS and q["evidence"]["rules_agree"] is False
    (c,) = of_type(events, "classification")
    assert (c["purpose"], c["verdict"], c["quote"], c["rules"]) == (
        "claimed-limit",
        "claim",
        CLAIM_IN_OTHER_WORDS,
        False,
    )
    assert c["text"] == CLAIM_IN_OTHER_WORDS and c["candidates"] == [CLAIM_IN_OTHER_WORDS] and c["step"] == 2
    assert c["usage"]["prompt_tokens"] == 50 and c["usage"]["completion_tokens"] == 3
    # three steps of 100 + 20 tokens, and the classification's 53: the budget sees them all
    assert result.totals["steps"] == 3 and result.totals["total_tokens"] == 3 * 120 + 53
    assert len(srv.requests) == 3
    # the timeline and the page show it as a model call of its own
    from kernelseek_suite.contracts.traces import timeline_lines
    from kernelseek_suite.reports.trace_html import run_model

    assert any("classify claimed-limit: claim" in line and "(50+3 tok)" in line for line in timeline_lines(events))
    (row,) = [r for r in run_model(tmp_path / "run" / "trace.jsonl")["rows"] if r["g"] == "classification"]
    assert row["k"] == "model" and row["l"].startswith("classification (claimed-limit): claim, 50+3 tokens")


def test_the_model_saying_no_overrules_the_patterns(tmp_path):
    text = "This kernel is memory-bound now; the loop cannot be improved any further."
    with ScriptedChatServer(_claim_then_shell(text), classifier=lambda t: "NO") as srv:
        _, events, _ = run(config_for(srv, max_steps=3), tmp_path)
    assert of_type(events, "question") == []
    (c,) = of_type(events, "classification")
    assert c["verdict"] == "no" and c["rules"] is True and c["quote"] is None


def test_without_a_verdict_the_patterns_decide(tmp_path):
    text = "This kernel is memory-bound now; the loop cannot be improved any further."
    for classifier, verdict in ((lambda t: fault(400), "error"), (lambda t: "It depends.", "unreadable")):
        with ScriptedChatServer(_claim_then_shell(text), classifier=classifier) as srv:
            _, events, _ = run(config_for(srv, max_steps=3), tmp_path / verdict)
        (c,) = of_type(events, "classification")
        assert c["verdict"] == verdict
        (q,) = of_type(events, "question")
        assert q["evidence"]["decided_by"] == "rules" and q["evidence"]["phrase"] == "is memory-bound"
    # told not to classify: no call, the patterns decide
    with ScriptedChatServer(_claim_then_shell(text)) as srv:
        cfg = config_for(srv, max_steps=3)
        cfg.arm_options = {"classify_claims": False}
        _, events, _ = run(cfg, tmp_path / "off")
        assert srv.classifications == []
    assert (
        of_type(events, "classification") == [] and of_type(events, "question")[0]["evidence"]["decided_by"] == "rules"
    )


def test_a_spent_token_budget_leaves_the_claim_to_the_patterns(tmp_path):
    text = "This kernel is memory-bound now; the loop cannot be improved any further."
    with ScriptedChatServer(_claim_then_shell(text)) as srv:
        _, events, _ = run(config_for(srv, max_steps=3, max_tokens=200), tmp_path)
        assert srv.classifications == []
    (c,) = of_type(events, "classification")
    assert c["verdict"] == "skipped" and c["error"] == "budget spent"


def test_an_early_stop_is_refused_while_the_goal_is_unmet(tmp_path):
    script = [reply(None, [("evaluate", {})]), reply("I am done here."), reply(None, [("shell", {"command": "ls"})])]
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, goal=1000.0, max_steps=3), tmp_path)
    qs = of_type(events, "question")
    assert [q["trigger"] for q in qs] == ["early-stop"]
    after_stop = srv.bodies()[2]["messages"][-1]
    assert (
        after_stop["role"] == "user" and "not met" in after_stop["content"] and qs[0]["text"] in after_stop["content"]
    )
    assert result.exit_reason == "limit" and not result.goal_met
    assert len(srv.requests) == 3


def test_a_stop_is_accepted_once_the_goal_is_met(tmp_path):
    script = [reply(None, [("evaluate", {})]), reply("Finished: the goal is met.")]
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, goal=0.01, max_steps=10), tmp_path)
    assert result.exit_reason == "submitted" and result.goal_met
    assert not of_type(events, "question") and len(srv.requests) == 2
    assert of_type(events, "run_end")[0]["goal_met"] is True


def test_the_general_agent_stops_when_it_says_so(tmp_path):
    with ScriptedChatServer([reply("Nothing to do.")]) as srv:
        result, events, _ = run(config_for(srv, arm="general"), tmp_path)
    assert result.exit_reason == "submitted" and not of_type(events, "question")


@pytest.mark.parametrize(
    "limit,script,limits",
    [
        ("steps", [reply(None, [("shell", {"command": "true"})])] * 5, {"max_steps": 2}),
        ("tokens", [reply(None, [("shell", {"command": "true"})], usage=(900, 100))] * 5, {"max_tokens": 2500}),
        ("cost", [reply(None, [("shell", {"command": "true"})], cost=0.01)] * 5, {"max_cost": 0.025}),
        ("wall", [reply(None, [("shell", {"command": "sleep 0.5"})])] * 8, {"max_wall_s": 1.0}),
        ("evals", [reply(None, [("evaluate", {}), ("evaluate", {})])] * 3, {"max_evals": 1}),
    ],
)
def test_each_limit_ends_the_run_cleanly(tmp_path, limit, script, limits):
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, **limits)
        if limit == "cost":  # a cost limit needs a price; the cost the endpoint reports is the one counted
            cfg.model.price_input_per_mtok = cfg.model.price_output_per_mtok = 1.0
        result, events, _ = run(cfg, tmp_path)
    assert result.exit_reason == "limit" and result.limit == limit
    ex, end = of_type(events, "exit")[0], of_type(events, "run_end")[0]
    assert ex["limit"] == limit and events[-1] is end
    t = end["totals"]
    assert {
        "steps": t["steps"] == 2,
        "tokens": t["total_tokens"] == 3000,
        "cost": t["steps"] == 3,
        "wall": t["wall_s"] >= 1.0,
        "evals": t["evals"] == 1,
    }[limit]
    if limit == "evals":
        second = of_type(events, "tool_result")[1]
        assert second["is_error"] and "no evaluations left" in second["output"]
    # the limit was checked before a model call: no request was sent after it was reached
    assert len(srv.requests) == t["steps"]


def test_api_faults_are_retried_counted_and_traced(tmp_path):
    script = [
        fault(429, retry_after=0),
        fault(502),
        reset(),
        hang(1.5),
        reply(None, [("shell", {"command": "echo ok"})]),
    ]
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, max_steps=1), tmp_path)
    retries = of_type(events, "retry")
    assert [r["kind"] for r in retries] == ["rate_limit", "server_error", "connection", "timeout"]
    assert [r["attempt"] for r in retries] == [1, 2, 3, 4]
    assert retries[0]["status_code"] == 429 and retries[1]["status_code"] == 502
    call = of_type(events, "llm_call")[0]
    assert call["attempts"] == 5 and call["response"]["tool_calls"][0]["arguments"] == {"command": "echo ok"}
    end = of_type(events, "run_end")[0]
    assert end["totals"]["retries"] == 4 and end["totals"]["steps"] == 1
    assert end["totals"]["total_tokens"] == 120


def test_a_malformed_tool_call_is_answered_with_an_error_not_resent(tmp_path):
    """A model that gets a call wrong hears why, once, and goes on; one that keeps getting it wrong
    (a deterministic model) spends its steps, not its retries."""
    bad = reply("Run it.", [("shell", '{"command": "ls"'), ("no_such_tool", {}), ("view_file", {"path": 3})])
    script = [bad, reply(None, [("shell", {"command": "echo fixed"})])] + [reply(None, [("shell", "[1, 2]")])] * 3
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, max_steps=5), tmp_path)
        bodies = srv.bodies()
    assert not of_type(events, "retry") and len(srv.requests) == 5
    assert result.exit_reason == "limit" and result.limit == "steps"
    outs = of_type(events, "tool_result")
    assert [(o["tool"], o["call_error"]) for o in outs[:3]] == [
        ("shell", "malformed"),
        ("no_such_tool", "unknown_tool"),
        ("view_file", "bad_arguments"),
    ]
    assert all(o["is_error"] for o in outs[:3]) and "not valid JSON" in outs[0]["output"]
    assert '{"command": "ls"' in outs[0]["output"]
    assert outs[3]["call_error"] is None and "fixed" in outs[3]["output"]
    assert [o["call_error"] for o in outs[4:]] == ["malformed"] * 3 and "not an object" in outs[4]["output"]
    # the model read the error in the next request; the history holds a well-formed call
    second = bodies[1]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    assert [m["content"] for m in second if m["role"] == "tool"][0].startswith("error: this shell call was not run")
    call = of_type(events, "llm_call")[0]["response"]["tool_calls"][0]
    assert call["error"] and call["raw_arguments"] == '{"command": "ls"'
    assert of_type(events, "run_end")[0]["totals"]["tool_call_errors"] == 6


def test_api_faults_that_persist_are_reported(tmp_path):
    with ScriptedChatServer([fault(503)] * 10) as srv:
        cfg = config_for(srv)
        cfg.model.max_attempts = 3
        result, events, _ = run(cfg, tmp_path)
    assert result.exit_reason == "model_error" and "3 times" in result.message and "server_error" in result.message
    assert len(of_type(events, "retry")) == 2 and len(srv.requests) == 3


def test_a_refused_request_is_not_retried(tmp_path):
    with ScriptedChatServer([fault(401), reply("never")]) as srv:
        result, events, _ = run(config_for(srv), tmp_path)
    assert result.exit_reason == "model_error" and "401" in result.message
    assert not of_type(events, "retry") and len(srv.requests) == 1


def test_a_resumed_run_continues_from_its_trace(tmp_path):
    first = [
        reply("Edit.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})]),
        reply(None, [("evaluate", {})]),
    ] + [fault(500)] * 3
    with ScriptedChatServer(first) as srv:
        cfg = config_for(srv, max_steps=10)
        cfg.model.max_attempts = 3
        result, events, agent = run(cfg, tmp_path)
        before = srv.bodies()
    assert result.exit_reason == "model_error"
    trace = agent.ctx.trace.path
    # the writer died mid-line: the resume must cope
    with open(trace, "a") as f:
        f.write('{"type": "llm_call", "seq": 9')
    second = [reply(None, [("view_file", {"path": "attn.c"})]), reply("Evaluate again.", [("evaluate", {})])]
    with ScriptedChatServer(second) as srv2:
        agent2 = resume_run(trace, SECRET, limits={"max_steps": 4}, model_overrides={"base_url": srv2.url})
        result2 = agent2.run()
    assert result2.exit_reason == "limit" and result2.limit == "steps"
    v = validate_trace(trace)
    assert v.ok, v.errors
    events = read_trace(trace).events
    resume = of_type(events, "resume")[0]
    assert resume["from_step"] == 2 and resume["session"] == 2 and resume["dropped_partial_line"]
    # the conversation goes on where it stopped: the last request of the first session, plus nothing lost
    sent = srv2.bodies()[0]["messages"]
    assert sent[: len(before[-1]["messages"])] == before[-1]["messages"]
    # and the workspace holds the earlier edit
    viewed = of_type(events, "tool_result")[-2]
    assert viewed["tool"] == "view_file" and "out[c] += p[j]" in viewed["output"]
    steps = [e["step"] for e in of_type(events, "llm_call")]
    assert steps == [1, 2, 3, 4]
    end = of_type(events, "run_end")[-1]
    assert end["totals"]["steps"] == 4 and end["totals"]["evals"] == 2 and end["totals"]["retries"] == 2
    assert end["best"] is not None


def test_the_workspace_cannot_touch_the_harness(tmp_path):
    holder = {}

    def attack(body):
        hd = holder["harness"]
        return reply(
            None,
            [
                ("shell", {"command": f"echo hacked >> {hd}/harness.c; echo rc=$?"}),
                ("edit_file", {"path": f"{hd}/harness.c", "new_text": "int main(void){return 0;}"}),
                ("edit_file", {"path": "../../../../../../" + str(hd / "baseline.c"), "new_text": "x"}),
                ("shell", {"command": f"ln -s {hd}/harness.c link.c"}),
                ("edit_file", {"path": "link.c", "old_text": "int main", "new_text": "int nope"}),
            ],
        )

    def look(body):  # the harness as it is after the attack (it is removed at the end of the run)
        holder["after"] = {p.name: p.read_bytes() for p in holder["harness"].iterdir()}
        return reply(None, [("evaluate", {})])

    with ScriptedChatServer([attack, look]) as srv:
        cfg = config_for(srv, max_steps=2)
        from kernelseek_suite.agents import new_run

        agent = new_run(cfg, tmp_path / "t.jsonl", SECRET)
        hd = holder["harness"] = agent.ctx.seal.path("task")
        before = {p.name: p.read_bytes() for p in hd.iterdir()}
        result = agent.run()
    events = read_trace(tmp_path / "t.jsonl").events
    outs = of_type(events, "tool_result")
    assert all(o["is_error"] and "outside the workspace" in o["output"] for o in (outs[1], outs[2], outs[4]))
    assert not hd.exists()
    if agent.ctx.workspace.sandboxed:  # Landlock: the shell's write was refused
        assert "Permission denied" in outs[0]["output"] and "rc=1" in outs[0]["output"]
        assert holder["after"] == before
        assert of_type(events, "harness_eval")[0]["status"] == "ok" and result.exit_reason == "limit"
    else:  # no sandbox here: the guard must stop the evaluation
        assert result.exit_reason == "harness_tampered" and not of_type(events, "harness_eval")


def test_a_changed_harness_ends_the_run_before_the_evaluation(tmp_path):
    holder = {}
    script = [
        lambda body: reply(None, [("shell", {"command": f"echo '/* x */' >> {holder['harness']}/harness.c"})]),
        reply(None, [("evaluate", {})]),
    ]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=3)
        cfg.tools.sandbox = "none"  # no write protection: detection must catch it
        from kernelseek_suite.agents import new_run

        agent = new_run(cfg, tmp_path / "t.jsonl", SECRET)
        holder["harness"] = agent.ctx.seal.path("task")
        result = agent.run()
    assert result.exit_reason == "harness_tampered" and "harness.c" in result.message
    events = read_trace(tmp_path / "t.jsonl").events
    assert not of_type(events, "harness_eval")
    assert validate_trace(tmp_path / "t.jsonl").ok


def test_wrong_candidates_repeated_bring_a_question(tmp_path):
    script = [reply(None, [("edit_file", {"path": "attn.c", "new_text": WRONG_KERNEL}), ("evaluate", {})])]
    script += [reply(None, [("evaluate", {})])] * 3
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=4)
        cfg.questions.repeated_failure = 3
        cfg.questions.plateau_evals = 100
        result, events, _ = run(cfg, tmp_path)
    qs = of_type(events, "question")
    assert [q["trigger"] for q in qs] == ["repeated-failure"] and qs[0]["evidence"]["count"] == 3
    assert all(e["status"] == "wrong" for e in of_type(events, "harness_eval"))
    assert result.best is None


def test_the_trace_records_what_later_tools_read(tmp_path):
    script = [reply("Plan.", [("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL}), ("evaluate", {})])]
    with ScriptedChatServer(script) as srv:
        result, events, agent = run(config_for(srv, max_steps=1), tmp_path)
    start = events[0]
    assert start["arm"] == "kernelseek" and start["task"]["name"] == "cpu-attn" and start["seed"] == 7
    assert start["model"]["name"] == "scripted-model" and start["model"]["base_url"].startswith("http://127.0.0.1")
    assert set(start["prompts"]) == {"system_sha256", "task_sha256", "tools_sha256"}
    assert start["tools"] == ["shell", "view_file", "edit_file", "evaluate"]
    assert start["bank"]["questions"] >= 30 and start["versions"]["openai"]
    call = of_type(events, "llm_call")[0]
    assert [m["role"] for m in call["messages_delta"]] == ["system", "user"]
    step = of_type(events, "step")[0]
    assert step["layers"] and step["dominant_layer"]
    assert [m["role"] for m in step["messages_delta"]] == ["assistant", "tool", "tool"]
    assert set(step["workspace"]) == {"attn.c"}
    assert json.dumps(events).count(SECRET) == 0


def test_a_person_types_the_question_or_takes_the_suggestion(tmp_path):
    from kernelseek_suite.agents import new_run

    prompts = []

    def ask(decision, suggestion):
        prompts.append((decision.trigger, suggestion.id if suggestion else None))
        return "What did you measure?" if len(prompts) == 1 else ""

    script = [reply("All done."), reply("Done again."), reply(None, [("shell", {"command": "true"})])]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=3)
        cfg.human = True
        agent = new_run(cfg, tmp_path / "t.jsonl", SECRET, ask_human=ask)
        agent.run()
        bodies = srv.bodies()
    qs = of_type(read_trace(tmp_path / "t.jsonl").events, "question")
    assert [(q["source"], q["bank_id"] is None) for q in qs] == [("human", True), ("bank", False)]
    assert qs[0]["text"] == "What did you measure?" and qs[0]["category"] is None
    assert qs[1]["bank_id"] == prompts[1][1]  # the suggestion shown is the one asked
    assert "What did you measure?" in bodies[1]["messages"][-1]["content"]
    assert validate_trace(tmp_path / "t.jsonl").ok


def test_an_interrupted_run_ends_cleanly_and_resumes(tmp_path):
    from kernelseek_suite.agents import new_run
    from kernelseek_suite.agents.selfcheck import ScriptedModel

    class Interrupting(ScriptedModel):
        def query(self, messages, tools):
            if self.calls == 2:
                raise KeyboardInterrupt
            return super().query(messages, tools)

    with ScriptedChatServer([]) as srv:
        cfg = config_for(srv, max_steps=10)
    trace = tmp_path / "t.jsonl"
    model = Interrupting([[("edit_file", {"path": "attn.c", "new_text": FASTER_KERNEL})], [("evaluate", {})]])
    result = new_run(cfg, trace, model=model).run()
    assert result.exit_reason == "interrupted" and result.totals["steps"] == 2
    agent = resume_run(trace, limits={"max_steps": 3}, model=ScriptedModel([[("evaluate", {})]]))
    result = agent.run()
    assert result.exit_reason == "limit" and result.totals["evals"] == 2
    events = read_trace(trace).events
    assert [e["reason"] for e in of_type(events, "exit")] == ["interrupted", "limit"]
    assert (
        of_type(events, "harness_eval")[-1]["candidate_sha256"]
        == of_type(events, "harness_eval")[0]["candidate_sha256"]
    )  # the same edited kernel, restored from the checkpoint
    assert [e["call"] for e in of_type(events, "llm_call")] == [1, 2, 3]
    assert validate_trace(trace).ok


def test_every_arm_takes_or_refuses_each_option(tmp_path):
    from kernelseek_suite.agents import new_run
    from kernelseek_suite.agents.arms import ArmOptionError, arm_names, arm_options
    from kernelseek_suite.agents.selfcheck import ScriptedModel

    with ScriptedChatServer([]) as srv:
        base = config_for(srv)
    for n, arm in enumerate(arm_names()):
        cfg = config_for(srv)
        cfg.arm, cfg.arm_options = arm, {"plateau_evalz": 3}
        with pytest.raises(ArmOptionError, match=f"unknown option.*for the {arm} agent: plateau_evalz"):
            new_run(cfg, tmp_path / f"{n}.jsonl", model=ScriptedModel([]))
    assert "plateau_evals" in arm_options("kernelseek") and "plateau_evals" not in arm_options("toolrich")
    assert arm_options("general") == {}
    for bad in ({"categories": ["rhetorical"]}, {"plateau_evals": 0}, {"min_steps_between": "2"}):
        cfg = config_for(srv)
        cfg.arm_options = bad
        with pytest.raises(ArmOptionError):
            new_run(cfg, tmp_path / "bad.jsonl", model=ScriptedModel([]))
    assert base.arm == "kernelseek"


def test_the_information_arm_asks_information_questions_with_its_own_plateau(tmp_path):
    script = [reply(None, [("evaluate", {})]) for _ in range(3)] + [reply(None, [("shell", {"command": "ls"})])]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=4)
        cfg.arm_options = {"categories": ["information"], "plateau_evals": 2, "new_best_min_gain": 10.0}
        result, events, _ = run(cfg, tmp_path)
    qs = of_type(events, "question")
    assert [(q["trigger"], q["category"]) for q in qs] == [("plateau", "information")]
    start = events[0]
    assert start["bank"]["categories"] == ["information"] and start["config"]["questions"]["plateau_evals"] == 2
    assert start["arm_options"]["categories"] == ["information"] and start["arm_options"]["repeated_failure"] == 3
