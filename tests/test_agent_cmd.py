"""The agent-cmd arm: an external coding-agent command (a stand-in script here) stopped early,
evaluated, questioned, resumed in its continue form and evaluated again; everything in the trace."""

from __future__ import annotations

import hashlib
import json
import shlex
import shutil
import sys
import time
from pathlib import Path

import pytest

from agent_runs import FASTER_KERNEL, of_type
from kernelseek_suite.agents import RunConfig, new_run, resume_run
from kernelseek_suite.agents.arms import ArmOptionError
from kernelseek_suite.agents.external import (
    ADAPTERS,
    CLAUDE_TOOLS,
    THREAD_USAGE,
    SessionReport,
    _session_part,
    adapter_for,
    expand,
    parse_session,
)
from kernelseek_suite.agents.sandbox import landlock_status
from kernelseek_suite.contracts.traces import read_trace, validate_trace

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

STANDIN = f"{shlex.quote(sys.executable)} {shlex.quote(str(Path(__file__).with_name('standin_agent.py')))}"


# the stand-in lives in the repository's tests/ and imports the suite (agent_runs.py), which a sandboxed
# command may read only when given
import kernelseek_suite  # noqa: E402

TESTS = [str(Path(__file__).parent), str(Path(kernelseek_suite.__file__).resolve().parent)]


def standin_config(goal: float = 1000.0, **opts) -> RunConfig:
    cfg = RunConfig(arm="agent-cmd", task="cpu-attn", task_options={"goal": goal, "budget_ms": 2.0}, seed=7)
    cfg.arm_options = {
        "command": STANDIN,
        "start": "{cmd} start {prompt}",
        "resume": "{cmd} resume {prompt}",
        "read": TESTS,
        **opts,
    }
    cfg.limits.max_steps = 2
    return cfg


def test_a_command_stopped_early_is_evaluated_questioned_resumed_and_evaluated_again(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_HANG", "1")
    monkeypatch.setenv("STANDIN_API_KEY", "sk-standin-secret-0123456789")
    trace = tmp_path / "t.jsonl"
    cfg = standin_config(invocation_timeout_s=3)
    cfg.tools.keep_workspace = True
    agent = new_run(cfg, trace)
    t0 = time.monotonic()
    result = agent.run()
    assert time.monotonic() - t0 < 60
    v = validate_trace(trace)
    assert v.ok, v.errors
    events = read_trace(trace).events
    inv = of_type(events, "invocation")
    assert [(i["mode"], i["stopped"]) for i in inv] == [("start", "timeout"), ("resume", "exited")]
    assert inv[0]["exit_code"] is None and 2.5 < inv[0]["duration_s"] < 15 and inv[1]["exit_code"] == 0
    assert "memory-bound" in inv[0]["output"] and inv[0]["changed"] == [".standin/conversation.jsonl", "attn.c"]
    assert inv[0]["argv"][-2:] == ["start", inv[0]["prompt"]] and "Goal:" in inv[0]["prompt"]
    evals = of_type(events, "harness_eval")
    assert [e["status"] for e in evals] == ["ok", "ok"] and [e["meta"]["stopped"] for e in evals] == [
        "timeout",
        "exited",
    ]
    assert evals[1]["candidate_sha256"] == hashlib.sha256(FASTER_KERNEL.encode()).hexdigest()
    q = of_type(events, "question")
    assert len(q) == 1 and q[0]["trigger"] == "claimed-limit" and q[0]["category"] == "limit-rejection"
    assert [d["trigger"] for d in of_type(events, "decision")] == ["early-stop"]
    # the resumed session got the evaluation, the refusal and the question, in the continue form
    second = inv[1]["prompt"]
    assert inv[1]["argv"][-2:] == ["resume", second]
    assert "stopped at the time limit of one session" in second and "correct on 6/6 scenarios" in second
    assert "not met yet" in second and q[0]["text"] in second
    conversation = (agent.ctx.workspace.root / ".standin" / "conversation.jsonl").read_text().splitlines()
    assert len(conversation) == 2 and q[0]["text"] in conversation[1]
    assert result.exit_reason == "limit" and result.totals["steps"] == 2 and result.totals["evals"] == 2
    start = events[0]
    assert start["arm"] == "agent-cmd" and start["agent_cmd"]["adapter"] == "generic"
    assert start["arm_options"]["invocation_timeout_s"] == 3
    assert "sk-standin-secret-0123456789" not in trace.read_text()  # the CLI's credentials stay out
    # and the run resumes from its trace: a third session, in the continue form
    agent2 = resume_run(trace, limits={"max_steps": 3})
    result2 = agent2.run()
    events = read_trace(trace).events
    inv = of_type(events, "invocation")
    assert [(i["mode"], i["session"]) for i in inv][-1] == ("resume", 3) and result2.totals["evals"] == 3
    assert validate_trace(trace).ok


def test_a_command_that_reaches_the_goal_ends_the_run(tmp_path):
    cfg = standin_config(goal=0.01)
    result = new_run(cfg, tmp_path / "t.jsonl").run()
    assert result.exit_reason == "submitted" and result.goal_met and result.totals["steps"] == 1


def test_the_wall_limit_stops_a_command(tmp_path, monkeypatch):
    monkeypatch.setenv("STANDIN_HANG", "1")
    cfg = standin_config()
    cfg.limits.max_wall_s = 3.0
    t0 = time.monotonic()
    result = new_run(cfg, tmp_path / "t.jsonl").run()
    assert time.monotonic() - t0 < 3.0 + 10.0
    events = read_trace(tmp_path / "t.jsonl").events
    assert of_type(events, "invocation")[0]["stopped"] == "wall"
    assert result.exit_reason == "limit" and result.limit == "wall"


def test_adapters_and_their_templates():
    assert adapter_for("codex exec --sandbox workspace-write", None) == "codex"
    assert adapter_for("/usr/local/bin/claude -p", None) == "claude"
    assert adapter_for("aider --model m", None) == "aider" and adapter_for("my-agent", None) == "generic"
    assert expand("{cmd} --skip-git-repo-check resume --last {prompt}", "codex exec", "Why so?", "k.cu") == [
        "codex",
        "exec",
        "--skip-git-repo-check",
        "resume",
        "--last",
        "Why so?",
    ]
    assert expand("{cmd} --message {prompt} {kernel}", "aider --yes-always", "p q", "k.cu") == [
        "aider",
        "--yes-always",
        "--message",
        "p q",
        "k.cu",
    ]
    with pytest.raises(ValueError, match="unknown adapter"):
        adapter_for("x", "cursor")


def test_the_arm_needs_its_command(tmp_path):
    cfg = standin_config()
    cfg.arm_options = {}
    with pytest.raises(ArmOptionError, match="needs its command"):
        new_run(cfg, tmp_path / "t.jsonl")


def test_run_agent_cmd_from_the_command_line_needs_no_model(tmp_path):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    trace = tmp_path / "t.jsonl"
    r = CliRunner().invoke(
        main,
        [
            "run",
            "--agent-cmd",
            STANDIN,
            "--agent-opt",
            "start={cmd} start {prompt}",
            "--agent-opt",
            "resume={cmd} resume {prompt}",
            "--agent-opt",
            f"read=[{','.join(TESTS)}]",
            "--task",
            "cpu-attn",
            "--task-opt",
            "budget_ms=2",
            "--goal",
            "0.01",
            "--trace",
            str(trace),
        ],
        env={"OPENAI_API_KEY": None},
    )
    assert r.exit_code == 0, r.output
    assert "exit: submitted" in r.output and "agent  session 1 (start): exited, exit 0" in r.output
    start = read_trace(trace).events[0]
    assert start["model"]["name"] == "(the agent command's own)" and start["arm_options"]["command"] == STANDIN
    r = CliRunner().invoke(
        main,
        [
            "run",
            "--agent",
            "toolrich",
            "--plateau",
            "3",
            "--task",
            "cpu-attn",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            "--trace",
            str(tmp_path / "u.jsonl"),
        ],
    )
    assert r.exit_code == 4 and "unknown option(s) for the toolrich agent: plateau_evals" in r.output


# ---------------------------------------------------------------- the real CLIs' forms and reports

RECORDED = Path(__file__).parent / "fixtures" / "agent_cli"


def test_claudes_json_result_gives_its_usage_cost_reply_and_denials():
    r = parse_session("claude", (RECORDED / "claude-print-json.txt").read_text())
    assert r.usage == {
        "prompt_tokens": 2231 + 15872 + 96512,  # fresh input, written to the cache, read from it
        "completion_tokens": 3120,
        "total_tokens": 2231 + 15872 + 96512 + 3120,
        "cached_tokens": 96512,
        "cost": 0.18432,
        "source": "claude --output-format json",
    }
    assert r.reply.startswith("I compiled attn.c with gcc -O3") and r.denied == []
    denied = parse_session("claude", "some log line\n" + (RECORDED / "claude-print-json-denied.txt").read_text())
    assert denied.denied == ["Bash"] and denied.usage["completion_tokens"] == 1207
    assert parse_session("claude", "no JSON here") == SessionReport()


def test_codex_json_events_give_each_turns_usage_and_the_agents_messages():
    text = (RECORDED / "codex-exec-json.jsonl").read_text()
    r = parse_session("codex", text)
    assert r.usage == {
        "prompt_tokens": 48211,
        "completion_tokens": 2304,
        "total_tokens": 48211 + 2304,
        "cached_tokens": 41088,
        "cost": None,
        "source": "codex exec --json",
    }
    assert r.reply == "Reordered the P.V accumulation so that v is read along its rows; the kernel compiles cleanly."
    two = parse_session("codex", text + text)  # two turns in one session: summed
    assert two.usage["prompt_tokens"] == 2 * 48211 and two.usage["cached_tokens"] == 2 * 41088


def test_a_resumed_codex_session_counts_only_its_own_part_of_the_threads_usage():
    """codex-cli 0.171's `exec resume` reports the thread's usage so far (tests/test_real_agent_clis.py
    saw 2400/60 after the first session, 3600/90 after a one-request resume): the session's own is the
    difference, never below 0."""
    thread = {"prompt_tokens": 3600, "completion_tokens": 90, "total_tokens": 3690, "cached_tokens": 0, "cost": None}
    before = {"prompt_tokens": 2400, "completion_tokens": 60, "total_tokens": 2460, "cached_tokens": 10}
    own = _session_part(thread, before)
    assert (own["prompt_tokens"], own["completion_tokens"], own["total_tokens"], own["cached_tokens"]) == (
        1200,
        30,
        1230,
        0,
    )
    assert _session_part(thread, None) is thread and "codex" in THREAD_USAGE and "claude" not in THREAD_USAGE


def test_aiders_token_lines_are_summed_and_its_session_cost_kept():
    r = parse_session("aider", (RECORDED / "aider-message.txt").read_text())
    assert r.usage == {
        "prompt_tokens": 2400 + 3100,
        "completion_tokens": 512 + 96,
        "total_tokens": 2400 + 3100 + 512 + 96,
        "cached_tokens": 1200,
        "cost": 0.01,
        "source": "aider Tokens: lines (rounded by aider)",
    }
    assert r.reply is None  # aider's output is its reply
    assert parse_session("aider", "Tokens: 12k sent, 1.5k received.").usage["prompt_tokens"] == 12000
    assert parse_session("generic", "Tokens: 12k sent, 1.5k received.") == SessionReport()


def test_the_claude_adapter_allows_the_shell_commands_the_task_needs():
    start, resume = ADAPTERS["claude"]
    argv = expand(
        start, "claude -p --permission-mode acceptEdits", "Make it fast.", "attn.c", "/s", ",".join(CLAUDE_TOOLS)
    )
    assert argv[:5] == ["claude", "-p", "--permission-mode", "acceptEdits", "Make it fast."]
    assert argv[5:8] == ["--output-format", "json", "--allowedTools"]
    tools = argv[8].split(",")
    assert {
        "Read",
        "Edit",
        "Write",
        "Bash(gcc:*)",
        "Bash(nvcc:*)",
        "Bash(make:*)",
        "Bash(python3:*)",
        "Bash(./*)",
    } <= set(tools)
    assert "Bash" not in tools and "Bash(rm:*)" not in tools  # no shell beyond building, running and timing
    assert expand(resume, "claude -p", "Why?", "attn.c", "/s", "Read")[2:4] == ["--continue", "Why?"]
    aider = expand(ADAPTERS["aider"][1], "aider", "p", "attn.c", "/state")
    assert (
        "--no-git" in aider and "/state/aider.chat.history.md" in aider and aider[-3:] == ["--message", "p", "attn.c"]
    )


def _emulated(cli: str, tmp_path, monkeypatch, **opts) -> RunConfig:
    monkeypatch.setenv("STANDIN_HOME", str(tmp_path / "home"))
    (tmp_path / "home").mkdir(exist_ok=True)
    cfg = standin_config(**opts)
    cfg.arm_options = {
        "command": f"{STANDIN} --as {cli}",
        "adapter": cli,
        "read": TESTS,
        "write": [str(tmp_path / "home")],  # where the CLI keeps its sessions, as ~/.codex
        **opts,
    }
    cfg.tools.keep_workspace = True
    return cfg


def test_a_claude_session_reports_its_usage_into_the_trace_and_the_table(tmp_path, monkeypatch):
    from kernelseek_suite.headtohead.runstats import stats_from_trace

    trace = tmp_path / "t.jsonl"
    result = new_run(_emulated("claude", tmp_path, monkeypatch), trace).run()
    v = validate_trace(trace)
    assert v.ok, v.errors
    events = read_trace(trace).events
    inv = of_type(events, "invocation")
    assert [i["mode"] for i in inv] == ["start", "resume"]
    each = 2231 + 15872 + 96512 + 3120
    assert all(i["usage"]["total_tokens"] == each and i["usage"]["cost"] == 0.18432 for i in inv)
    assert result.totals["total_tokens"] == 2 * each and result.totals["cost"] == pytest.approx(2 * 0.18432)
    stats = stats_from_trace(trace)
    assert stats.total_tokens == 2 * each and stats.cost == pytest.approx(2 * 0.18432)
    # the shell commands it needs were allowed, and its own words (not the JSON) went on
    calls = [json.loads(l) for l in (tmp_path / "home" / "claude.jsonl").read_text().splitlines()]
    assert "Bash(gcc:*)" in calls[0]["argv"][calls[0]["argv"].index("--allowedTools") + 1].split(",")
    assert inv[0]["reply"].startswith("I compiled attn.c") and inv[0]["denied"] == []
    assert events[0]["agent_cmd"]["allowed_tools"] == list(CLAUDE_TOOLS)


def test_a_claude_without_the_shell_is_seen_refused(tmp_path, monkeypatch):
    cfg = _emulated("claude", tmp_path, monkeypatch, allowed_tools=["Read", "Edit"])
    new_run(cfg, tmp_path / "t.jsonl").run()
    inv = of_type(read_trace(tmp_path / "t.jsonl").events, "invocation")
    assert inv[0]["denied"] == ["Bash"] and "could not compile" in inv[0]["reply"]


def test_the_token_budget_binds_between_sessions(tmp_path, monkeypatch):
    cfg = _emulated("codex", tmp_path, monkeypatch)
    cfg.limits.max_tokens = 60000
    cfg.limits.max_steps = 5
    result = new_run(cfg, tmp_path / "t.jsonl").run()
    assert result.exit_reason == "limit" and result.limit == "tokens" and result.totals["steps"] == 2
    assert result.totals["total_tokens"] == 2 * (48211 + 2304)


def test_aider_leaves_the_workspace_clean_and_keeps_its_history_in_the_runs_folder(tmp_path, monkeypatch):
    trace = tmp_path / "t.jsonl"
    cfg = _emulated("aider", tmp_path, monkeypatch)
    agent = new_run(cfg, trace)
    result = agent.run()
    assert result.totals["steps"] == 2 and result.totals["total_tokens"] == 2 * (5500 + 608)
    events = read_trace(trace).events
    inv = of_type(events, "invocation")
    assert [i["moved"] for i in inv] == [[".aider.tags.cache.v4"], [".aider.tags.cache.v4"]]
    assert all(set(s["workspace"]) == {"attn.c"} for s in of_type(events, "step"))
    assert sorted(p.name for p in agent.ctx.workspace.root.iterdir()) == ["attn.c"]
    # the history lives beside the trace, and the resumed session found it
    history = trace.with_suffix(".d") / "agent-state" / "aider.chat.history.md"
    assert history.read_text().count("#### ") == 2 and inv[1]["exit_code"] == 0
    assert (trace.with_suffix(".d") / "agent-files" / "0001" / ".aider.tags.cache.v4" / "cache.db").exists()


# ---------------------------------------------------------------- the command in the sandbox


def _probing_command(tmp_path: Path, **opts) -> RunConfig:
    """A generic agent command that tries to write outside the workspace and to read the tuned kernel,
    and writes a note in the workspace."""
    from kernelseek_suite import config as suite_config

    hopper = suite_config.REPO_ROOT / "kernels" / "hopper" / "flash_fwd_sm90.cu"
    outside = tmp_path / "outside.txt"
    probe = (
        f"(echo x > {outside}) 2>/dev/null && echo WROTE-OUTSIDE || echo refused-write; "
        f"head -c 64 {hopper} >/dev/null 2>&1 && echo READ-KERNEL || echo refused-read; "
        "echo note > note.txt && echo wrote-workspace; echo $TMPDIR"
    )
    cfg = RunConfig(arm="agent-cmd", task="cpu-attn", task_options={"goal": 1000.0, "budget_ms": 2.0}, seed=7)
    cfg.arm_options = {"command": f"bash -c {shlex.quote(probe)}", "start": "{cmd}", "resume": "{cmd}", **opts}
    cfg.limits.max_steps = 1
    return cfg


@pytest.mark.skipif(not landlock_status()[0], reason=f"needs Landlock, not available here: {landlock_status()[1]}")
def test_an_agent_command_runs_in_the_sandbox_of_the_built_in_arms(tmp_path):
    trace = tmp_path / "run" / "t.jsonl"
    agent = new_run(_probing_command(tmp_path), trace)
    agent.run()
    events = read_trace(trace).events
    out = of_type(events, "invocation")[0]["output"]
    assert "refused-write" in out and "refused-read" in out and "wrote-workspace" in out, out
    assert "WROTE-OUTSIDE" not in out and "READ-KERNEL" not in out and not (tmp_path / "outside.txt").exists()
    assert str(agent.ctx.workspace.scratch / "tmp") in out  # its temporary files stay in the run's scratch folder
    prot = events[0]["protections"]
    assert prot["agent_command"]["sandbox"] == "landlock" and prot["complete"] is True
    assert events[0]["agent_cmd"]["sandbox"] == "landlock"


def test_an_agent_command_outside_the_sandbox_is_marked_and_compare_refuses_it(tmp_path):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    traces = tmp_path / "traces"
    new_run(_probing_command(tmp_path, sandbox="none"), traces / "cmd-seed1.jsonl").run()
    events = read_trace(traces / "cmd-seed1.jsonl").events
    out = of_type(events, "invocation")[0]["output"]
    assert "WROTE-OUTSIDE" in out and "READ-KERNEL" in out  # as the user: nothing kept it in
    prot = events[0]["protections"]
    assert prot["agent_command"]["sandbox"] == "none" and prot["complete"] is False
    refused = CliRunner().invoke(main, ["compare", "--from-traces", str(traces), "--out", str(tmp_path / "a")])
    assert refused.exit_code == 4, refused.output
    assert "cmd-seed1.jsonl: agent command not sandboxed" in refused.output and "--allow-unsandboxed" in refused.output
    taken = CliRunner().invoke(
        main, ["compare", "--from-traces", str(traces), "--out", str(tmp_path / "b"), "--allow-unsandboxed"]
    )
    assert taken.exit_code == 0, taken.output
    assert "cmd-seed1.jsonl: agent command not sandboxed" in (tmp_path / "b" / "compare.md").read_text()
