"""Limits that hold wherever the run is (between retries, in a hung request, in a tool), a settable
retry budget for an endpoint that is down, and checkpoints that keep files of any size."""

from __future__ import annotations

import hashlib
import shutil
import time

import pytest

from agent_runs import FASTER_KERNEL, SECRET, config_for, of_type, run
from chat_server import ScriptedChatServer, fault, hang, reply
from kernelseek_suite.agents import resume_run
from kernelseek_suite.contracts.traces import read_trace, validate_trace

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def _timed(cfg, tmp_path):
    t0 = time.monotonic()
    result, events, agent = run(cfg, tmp_path)
    return result, events, time.monotonic() - t0


def test_the_wall_limit_kills_a_shell_command_at_the_deadline(tmp_path):
    with ScriptedChatServer(
        [reply(None, [("shell", {"command": "sleep 60", "timeout_s": 600}), ("shell", {"command": "echo never"})])] * 3
    ) as srv:
        result, events, took = _timed(config_for(srv, max_wall_s=2.0), tmp_path)
    assert result.exit_reason == "limit" and result.limit == "wall"
    assert took < 2.0 + 4.0
    first, second = of_type(events, "tool_result")[:2]
    assert first["is_error"] and "wall-time limit" in first["output"] and first["data"]["wall_limit"]
    assert first["duration_s"] < 3.0
    assert second["output"] == "error: not run: the run's wall-time limit is reached"
    assert len(srv.requests) == 1


def test_the_wall_limit_cuts_a_hung_request_and_the_waits_between_retries(tmp_path):
    with ScriptedChatServer([reply(None, [("shell", {"command": "true"})]), hang(30), hang(30)]) as srv:
        cfg = config_for(srv, max_wall_s=2.5)
        cfg.model.timeout_s = 60.0
        result, events, took = _timed(cfg, tmp_path)
    assert result.exit_reason == "limit" and result.limit == "wall" and took < 2.5 + 4.0
    with ScriptedChatServer([fault(503)] * 50) as srv:
        cfg = config_for(srv, max_wall_s=1.5)
        cfg.model.backoff_initial_s, cfg.model.backoff_max_s, cfg.model.max_attempts = 5.0, 30.0, 10
        result, events, took = _timed(cfg, tmp_path / "2")
    # one failed request, then a 5 s backoff cut to the wall time that was left
    assert result.exit_reason == "limit" and result.limit == "wall" and took < 1.5 + 4.0
    assert len(srv.requests) <= 3


def test_the_retry_budget_of_an_endpoint_that_is_down(tmp_path):
    with ScriptedChatServer([fault(503)] * 200) as srv:
        cfg = config_for(srv)
        cfg.model.max_attempts, cfg.model.backoff_initial_s, cfg.model.backoff_max_s = 1000, 0.05, 0.05
        cfg.model.retry_budget_s = 1.0
        result, events, took = _timed(cfg, tmp_path)
    assert result.exit_reason == "model_error" and "retry budget of 1s" in result.message
    assert took < 1.0 + 3.0 and 3 <= len(srv.requests) < 200


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_checkpoints_keep_files_of_any_size_and_a_resume_restores_them(tmp_path):
    # a 3 MiB kernel (a long comment) and a 20 MiB data file, both over the old 1 MiB cut
    big_kernel = FASTER_KERNEL + "/*" + ("x" * 100 + "\n") * 30_000 + "*/\n"
    script = [
        reply(
            None,
            [
                ("edit_file", {"path": "attn.c", "new_text": big_kernel}),
                ("shell", {"command": "head -c 20971520 /dev/urandom > data.bin; echo " + SECRET + " >> log.txt"}),
            ],
        ),
        reply(None, [("evaluate", {})]),
    ]
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, max_steps=1)
        cfg.tools.keep_workspace = True
        result, events, agent = run(cfg, tmp_path)
    ws = agent.ctx.workspace.root
    step = of_type(events, "step")[0]
    assert set(step["workspace"]) == {"attn.c", "data.bin", "log.txt"}
    blobs = agent.ctx.trace.artifacts / "blobs"
    assert (blobs / step["workspace"]["data.bin"]).read_bytes() == (ws / "data.bin").read_bytes()
    assert step["workspace"]["attn.c"] == _digest(ws / "attn.c")
    assert SECRET.encode() not in (blobs / step["workspace"]["log.txt"]).read_bytes()  # redacted like events
    with ScriptedChatServer(
        [reply(None, [("evaluate", {})]), reply(None, [("shell", {"command": "sha256sum data.bin attn.c"})])]
    ) as srv2:
        agent2 = resume_run(
            agent.ctx.trace.path, SECRET, limits={"max_steps": 3}, model_overrides={"base_url": srv2.url}
        )
        restored = {rel: _digest(p) for rel, p in agent2.ctx.workspace.files().items() if rel != "log.txt"}
        result2 = agent2.run()
    assert restored == {rel: step["workspace"][rel] for rel in ("attn.c", "data.bin")}
    events = read_trace(agent.ctx.trace.path).events
    ev = of_type(events, "harness_eval")[0]
    assert ev["status"] == "ok" and ev["candidate_sha256"] == step["workspace"]["attn.c"]
    assert step["workspace"]["data.bin"] in of_type(events, "tool_result")[-1]["output"]
    assert validate_trace(agent.ctx.trace.path).ok and result2.exit_reason == "limit"


def test_redaction_holds_across_the_chunks_of_a_streamed_file(tmp_path):
    from kernelseek_suite.agents.trace import TraceWriter

    w = TraceWriter(tmp_path / "t.jsonl", secrets=(SECRET,))
    f = tmp_path / "f.bin"
    for offset in (0, 1, 17, len(SECRET) - 1):  # the secret straddling the 1 MiB chunk boundary
        f.write_bytes(b"a" * ((1 << 20) - offset) + SECRET.encode() + b"z" * 10)
        data = w.blob_path(w.put_file(f)).read_bytes()
        assert SECRET.encode() not in data and data.endswith(b"[redacted]" + b"z" * 10)
        assert len(data) == (1 << 20) - offset + len("[redacted]") + 10
    w.close()
