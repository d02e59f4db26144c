"""Agent runs (arm x seed) spread over a Dask cluster of CPU workers on the CPU task, against the
scripted chat-completions server on loopback: one run per worker at a time, a worker killed in the
middle of a run, the run resumed from its trace on another worker, and a finished comparison read
back instead of run again."""
from __future__ import annotations

import os
import signal
import threading

import pytest

distributed = pytest.importorskip("distributed")

from chat_server import ScriptedChatServer, reply  # noqa: E402
from agent_runs import config_for  # noqa: E402
from kernelseek_suite.agents import read_trace, validate_trace  # noqa: E402
from kernelseek_suite.scaleout.agent_runs import AgentRunItem, run_agent_item, run_agent_items  # noqa: E402

TARGET = "scripted-kernelseek-2"          # the run whose worker is killed


class Script:
    """Per run (told apart by the model name): evaluate first, then say there is nothing more to do.
    The target's second request is held until the worker running it has been killed."""

    def __init__(self):
        self.counts: dict[str, int] = {}
        self.lock = threading.Lock()
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, body):
        model = body["model"]
        with self.lock:
            self.counts[model] = n = self.counts.get(model, 0) + 1
        if model == TARGET and n == 2 and not self.held.is_set():
            self.held.set()
            self.release.wait(60)
            return reply("too late")       # its client is gone
        return reply(None, [("evaluate", {})]) if n == 1 else reply("Nothing more to do.")


def items_for(srv, tmp_path):
    out = []
    for arm in ("kernelseek", "general"):
        for seed in (1, 2):
            cfg = config_for(srv, arm=arm, max_steps=3)
            cfg.model.name = f"scripted-{arm}-{seed}"
            cfg.model.timeout_s = 60
            out.append(AgentRunItem(arm, seed, cfg.to_dict(), str(tmp_path / "runs" / f"{arm}-{seed}" / "trace.jsonl")))
    return out


def kill_worker_running(client, key_part: str, script: Script) -> threading.Thread:
    def watch():
        if not script.held.wait(60):
            return
        for addr, keys in client.processing().items():
            if any(key_part in str(k) for k in keys):
                pid = client.run(os.getpid, workers=[addr])[addr]
                os.kill(pid, signal.SIGKILL)
                script.killed = pid
                break
        script.release.set()
    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_arm_seed_runs_spread_over_workers_survive_a_killed_worker(tmp_path):
    script = Script()
    with ScriptedChatServer([script] * 100) as srv, \
            distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                     dashboard_address=":0") as cluster, distributed.Client(cluster) as client:
        items = items_for(srv, tmp_path)
        pids = set(client.run(os.getpid).values())
        watcher = kill_worker_running(client, "kernelseek/seed-2", script)
        results = run_agent_items(client, items)
        watcher.join(5)
        assert getattr(script, "killed", None) in pids
        assert set(results) == {"kernelseek/seed-1", "kernelseek/seed-2", "general/seed-1", "general/seed-2"}
        for item in items:
            res = results[item.key]
            v = validate_trace(item.trace)
            assert v.ok, v.errors
            events = read_trace(item.trace).events
            evals = [e for e in events if e["type"] == "harness_eval"]
            assert evals and evals[0]["status"] == "ok" and evals[0]["scenarios_correct"] == 6      # the CPU task ran on the worker
            if item.arm == "general":
                assert res["exit_reason"] == "submitted" and res["how"] == "new"
            else:
                assert res["exit_reason"] == "limit" and res["totals"]["steps"] == 3
        target = results["kernelseek/seed-2"]
        # taken up again from its trace on a live worker, not started over
        assert target["how"] == "resumed" and target["sessions"] == 2
        events = read_trace(items[1].trace).events
        assert [e["type"] for e in events].count("run_start") == 1
        assert [e["call"] for e in events if e["type"] == "llm_call"] == [1, 2, 3]
        assert all(results[k]["how"] == "new" for k in results if k != "kernelseek/seed-2")
        # the comparison started again: every run is read back from its trace, no model call is made
        n_requests = len(srv.requests)
        again = run_agent_items(client, items)
        assert {k: v["how"] for k, v in again.items()} == {k: "read back" for k in results}
        assert {k: v["totals"] for k, v in again.items()} == {k: v["totals"] for k, v in results.items()}
        assert len(srv.requests) == n_requests


def test_an_item_runs_the_same_in_process(tmp_path):
    """The serial path: the same item function without a cluster."""
    with ScriptedChatServer([Script()] * 10) as srv:
        item = items_for(srv, tmp_path)[2]            # general, seed 1
        res = run_agent_item(item)
    assert res["how"] == "new" and res["exit_reason"] == "submitted" and res["seed"] == 1
    assert read_trace(item.trace).events[0]["seed"] == 1
    assert run_agent_item(item)["how"] == "read back"
