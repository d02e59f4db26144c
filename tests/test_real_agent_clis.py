"""The agent-cmd arm with the real coding-agent CLIs (codex, Claude Code, aider), each run once by
`kernelseek-suite run --agent-cmd ...` on the cpu-attn task against a model endpoint on loopback
(tests/cli_stub_server.py) whose scripted model edits the kernel once and stops: the CLI is launched
in the sandbox, reaches the endpoint in its own wire API, its edit reaches the workspace and is
evaluated, its own report of the session's tokens is read into the trace, and the workspace holds
only the task's files. The other tests of the adapters replay recorded output (test_agent_cmd.py);
these run the tools themselves.

A CLI that is not on PATH is skipped, except under CI (`CI` set), where `.ci/run` installs all three
and a missing one fails (conftest.py, the `agent_cli` marker)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_runs import of_type
from cli_stub_server import USAGE, CLIStubServer, marker
from kernelseek_suite.agents.sandbox import landlock_status
from kernelseek_suite.contracts.exitcodes import OK
from kernelseek_suite.contracts.traces import read_trace, validate_trace

SUITE = str(Path(sys.executable).with_name("kernelseek-suite"))
START = Path(__file__).resolve().parent.parent / "suite" / "agents" / "tasks" / "cpu_attn_files" / "attn.c"
SESSION_LIMIT_S = 60  # one session's time-out (the run's wall limit is a minute as well)


def _setup(cli: str, stub: CLIStubServer, home: Path) -> tuple[str, dict, list[str]]:
    """(the --agent-cmd command, the environment, the folders the CLI keeps its own state in): each CLI
    pointed at the stub through its documented configuration."""
    if cli == "codex":
        # codex's own sandbox (`--sandbox workspace-write`: bubblewrap through codex-linux-sandbox) cannot
        # start inside the run's Landlock sandbox (every command fails: "error building bubblewrap
        # command: Permission denied", then, with /tmp/codex-daemon-<uid> granted, "bwrap: setting up
        # uid map: Permission denied"), so codex runs its commands unconfined by itself, inside the
        # run's sandbox, which is what confines it
        codex_home = home / "codex"
        provider = f'{{name="stub", base_url="{stub.root}/v1", env_key="STUB_OPENAI_KEY", wire_api="responses"}}'
        command = (
            "codex exec --sandbox danger-full-access -m stub-model -c model_provider=stub "
            f"-c 'model_providers.stub={provider}'"
        )
        return command, {"CODEX_HOME": str(codex_home), "STUB_OPENAI_KEY": "sk-stub-codex-0123456789"}, [codex_home]
    if cli == "claude":
        config = home / "claude"
        env = {
            "ANTHROPIC_BASE_URL": stub.root,
            "ANTHROPIC_API_KEY": "sk-ant-stub-0123456789",
            "CLAUDE_CONFIG_DIR": str(config),
            "DISABLE_AUTOUPDATER": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        }
        return "claude -p --model stub-model", env, [config]
    env = {
        "OPENAI_API_BASE": f"{stub.root}/v1",
        "OPENAI_API_KEY": "sk-stub-aider-0123456789",
        "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    }
    command = "aider --model openai/stub-model --no-show-model-warnings --no-check-update --no-analytics"
    return command, env, [home / ".aider"]


def run_cli(
    cli: str, tmp_path: Path, goal: float = 0.01, sessions: int = 1
) -> tuple[subprocess.CompletedProcess, list[dict], CLIStubServer]:
    home = tmp_path / "home"
    trace = tmp_path / "run" / "trace.jsonl"
    with CLIStubServer() as stub:
        command, env, own = _setup(cli, stub, home)
        for folder in own:
            folder.mkdir(parents=True, exist_ok=True)
        argv = [
            SUITE,
            "run",
            "--agent-cmd",
            command,
            "--agent-opt",
            f"write=[{','.join(map(str, own))}]",
            "--agent-opt",
            f"invocation_timeout_s={SESSION_LIMIT_S}",
            "--task",
            "cpu-attn",
            "--task-opt",
            "budget_ms=2",
            "--goal",
            str(goal),
            "--max-steps",
            str(sessions),
            "--max-wall",
            "1",
            "--seed",
            "7",
            "--no-live",
            "--trace",
            str(trace),
        ]
        full_env = {**os.environ, "HOME": str(home), **env}
        full_env.pop("OPENAI_BASE_URL", None)
        r = subprocess.run(
            argv, env=full_env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=SESSION_LIMIT_S + 60
        )
    v = validate_trace(trace)
    assert v.ok, (v.errors, r.stdout[-3000:], r.stderr[-3000:])
    return r, read_trace(trace).events, stub


def check_session(cli: str, tmp_path: Path) -> dict:
    """What every CLI must do; returns the session's invocation event for the CLI's own checks."""
    r, events, stub = run_cli(cli, tmp_path)
    out = r.stdout[-3000:] + r.stderr[-3000:]
    inv = of_type(events, "invocation")
    assert len(inv) == 1, out
    session = inv[0]
    assert session["adapter"] == cli and session["argv"][0] == cli
    assert session["stopped"] == "exited" and session["exit_code"] == 0, session["output"]
    assert stub.requests, f"{cli} never reached the stub: {session['output']}"
    # its edit reached the workspace and the evaluator
    assert session["changed"] == ["attn.c"], session
    expected = f"{marker(cli)}\n{START.read_text()}"
    evals = of_type(events, "harness_eval")
    assert [e["status"] for e in evals] == ["ok"], evals
    assert evals[0]["candidate_sha256"] == hashlib.sha256(expected.encode()).hexdigest()
    # the session's tokens, from the CLI's own report, are the run's
    usage = session["usage"]
    assert usage["prompt_tokens"] > 0 and usage["completion_tokens"] > 0, usage
    end = of_type(events, "run_end")[0]
    assert end["totals"]["total_tokens"] == usage["total_tokens"]
    assert r.returncode == OK and end["exit_reason"] == "submitted", out
    # the workspace held only the task's files at the checkpoint
    steps = of_type(events, "step")
    assert steps and all(set(s["workspace"]) == {"attn.c"} for s in steps), steps
    # in the run's sandbox wherever Landlock is available
    assert events[0]["agent_cmd"]["sandbox"] == ("landlock" if landlock_status()[0] else "none")
    return session


@pytest.mark.agent_cli("codex")
def test_codex_exec_edits_the_kernel_through_the_responses_api(tmp_path):
    session = check_session("codex", tmp_path)
    p, c = USAGE
    # two requests in its one turn (the call, then its output): turn.completed sums them
    assert session["usage"]["prompt_tokens"] == 2 * p and session["usage"]["completion_tokens"] == 2 * c
    assert session["usage"]["source"] == "codex exec --json"
    assert "kernel has the comment line" in session["reply"]


@pytest.mark.agent_cli("claude")
def test_claude_code_edits_the_kernel_through_the_messages_api(tmp_path):
    session = check_session("claude", tmp_path)
    p, c = USAGE
    # Read, Edit, then the closing text: three requests of its loop (its title request is not counted)
    u = session["usage"]
    assert u["prompt_tokens"] % p == 0 and u["completion_tokens"] == c * (u["prompt_tokens"] // p) >= 3 * c
    assert u["source"] == "claude --output-format json" and u["cost"] is not None
    assert session["denied"] == [] and "kernel has the comment line" in session["reply"]


@pytest.mark.agent_cli("aider")
def test_aider_edits_the_kernel_through_chat_completions(tmp_path):
    session = check_session("aider", tmp_path)
    assert session["usage"]["source"].startswith("aider Tokens:")
    # its chat history went to the run's folder, not the workspace
    history = tmp_path / "run" / "trace.d" / "agent-state" / "aider.chat.history.md"
    assert marker("aider") in history.read_text()


@pytest.mark.parametrize(
    "cli",
    [
        pytest.param(
            "codex",
            # codex-cli 0.171's `exec resume` reports the thread's usage so far: the adapter takes the
            # previous session's report away (external.THREAD_USAGE)
            marks=pytest.mark.agent_cli("codex"),
        ),
        pytest.param("claude", marks=pytest.mark.agent_cli("claude")),
        pytest.param("aider", marks=pytest.mark.agent_cli("aider")),
    ],
)
def test_a_resumed_session_counts_only_its_own_tokens(cli, tmp_path):
    """The goal out of reach: the CLI is resumed in its continue form, and the run's tokens are the
    sum of the two sessions' own. The stub's model finds the edit made and answers once more: one
    request (aider: its whole-file answer again)."""
    r, events, stub = run_cli(cli, tmp_path, goal=1000.0, sessions=2)
    inv = of_type(events, "invocation")
    assert [(i["mode"], i["exit_code"], i["stopped"]) for i in inv] == [
        ("start", 0, "exited"),
        ("resume", 0, "exited"),
    ], r.stdout[-3000:]
    assert [e["status"] for e in of_type(events, "harness_eval")] == ["ok", "ok"]
    first, second = (i["usage"] for i in inv)
    end = of_type(events, "run_end")[0]
    assert end["totals"]["total_tokens"] == first["total_tokens"] + second["total_tokens"]
    if cli == "aider":  # counted by aider itself (its streamed answers carry no usage it reads)
        assert second["prompt_tokens"] > 0 and second["completion_tokens"] > 0, second
        return
    p, c = USAGE
    assert (second["prompt_tokens"], second["completion_tokens"]) == (p, c), (first, second)
