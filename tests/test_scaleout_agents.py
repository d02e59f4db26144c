"""compare on a Dask cluster of CPU workers (`--executor dask --scheduler local:2`) on the CPU task,
against the scripted chat-completions server on loopback: the same runs, traces and table as a serial
compare, a worker killed in the middle of a run (only that run is taken up again, from its trace), an
interrupted comparison resumed, and the checks a GPU task makes of the cluster's workers."""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import threading
from contextlib import contextmanager

import pytest
from click.testing import CliRunner

distributed = pytest.importorskip("distributed")

from chat_server import ScriptedChatServer, reply  # noqa: E402
from kernelseek_suite.cli import main  # noqa: E402
from kernelseek_suite.contracts.traces import read_trace, validate_trace  # noqa: E402
from kernelseek_suite.gpu import GPU_ENV  # noqa: E402
from kernelseek_suite.headtohead.compare import CompareRequest, plan  # noqa: E402
from kernelseek_suite.headtohead.report import read_runs  # noqa: E402
from kernelseek_suite.scaleout import cluster as cluster_mod  # noqa: E402
from kernelseek_suite.scaleout.agent_runs import run_compare_distributed, run_on_worker  # noqa: E402
from kernelseek_suite.scaleout.bench import ScaleOut  # noqa: E402
from kernelseek_suite.scaleout.cluster import ClusterError, ClusterSpec  # noqa: E402
from kernelseek_suite.scaleout.gpus import MixedGPUs, WorkerGPU  # noqa: E402
from scaleout_fakes import mixed_probe, shared_probe  # noqa: E402
from test_compare import ARGS, respond  # noqa: E402

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")

DASK = ["--executor", "dask", "--scheduler", "local:2"]
# the compares here run without the final bench and its A/A control: those run in this process once the
# runs are done, whichever the executor (test_headtohead.py tests them, test_compare.py's compare runs
# them), and took two thirds of each compare's time here
FAST = [*ARGS, "--no-final-bench"]
TARGET = ("kernelseek", 2)  # the run whose worker is killed, while its third model call waits


def _arm(body) -> str:
    return "toolrich" if "record_lesson" in {t["function"]["name"] for t in body.get("tools", [])} else "kernelseek"


class HoldTarget:
    """`respond`, except that the target run's third request is held until the worker running it has
    been killed (its answer then goes nowhere)."""

    def __init__(self, target=TARGET):
        self.target = target
        self.held = threading.Event()
        self.release = threading.Event()

    def __call__(self, body):
        step = sum(m["role"] == "assistant" for m in body["messages"]) + 1
        if (_arm(body), body.get("seed")) == self.target and step == 3 and not self.held.is_set():
            self.held.set()
            self.release.wait(60)
            return reply("too late")
        return respond(body)


@contextmanager
def capture_client(monkeypatch):
    """The compare command opens its own cluster; keep a handle on its client (to kill a worker)."""
    got: dict = {}
    real = cluster_mod.open_client

    @contextmanager
    def opening(spec):
        with real(spec) as client:
            got["client"] = client
            yield client

    monkeypatch.setattr(cluster_mod, "open_client", opening)
    yield got


def kill_target_worker(got: dict, script: HoldTarget) -> threading.Thread:
    def watch():
        if not script.held.wait(60):
            return
        client = got["client"]
        key = f"{script.target[0]}/seed-{script.target[1]}"
        for addr, keys in client.processing().items():
            if any(key in str(k) for k in keys):
                got["workers"] = set(client.run(os.getpid).values())
                got["killed"] = pid = client.run(os.getpid, workers=[addr])[addr]
                os.kill(pid, signal.SIGKILL)
                break
        script.release.set()

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def _compare(args):
    return CliRunner().invoke(main, args, env={"OPENAI_API_KEY": None}, catch_exceptions=False)


def outcomes(out) -> dict:
    """What each run did and ended with: everything in runs.jsonl that does not depend on the
    machine's timing (the speed-ups, and so the best, are measured on the CPU)."""
    keep = (
        "arm",
        "seed",
        "task",
        "model",
        "baseline",
        "steps",
        "evals",
        "wrong",
        "questions",
        "questions_by_category",
        "tool_calls",
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "exit_reason",
        "question_steps",
    )
    got = {}
    for r in read_runs(out / "runs.jsonl"):
        d = r.to_dict()
        got[(r.arm, r.seed)] = {k: d[k] for k in keep} | {
            "points": [(p["index"], p["step"], p["status"], p["correct"], p["candidate_sha256"]) for p in d["points"]]
        }
    return got


def test_compare_on_a_cluster_equals_a_serial_compare_and_survives_a_killed_worker(tmp_path, monkeypatch):
    serial, spread = tmp_path / "serial", tmp_path / "dask"
    with ScriptedChatServer([respond] * 100) as srv:
        r = _compare([*FAST, "--base-url", srv.url, "--out", str(serial)])
    assert r.exit_code == 0, r.output

    script = HoldTarget()
    with ScriptedChatServer([script] * 100) as srv, capture_client(monkeypatch) as got:
        watcher = kill_target_worker(got, script)
        r = _compare([*FAST, *DASK, "--base-url", srv.url, "--out", str(spread)])
        watcher.join(5)
    assert r.exit_code == 0, r.output
    assert got.get("killed") in got.get("workers", ()), "no worker was killed"

    # the same runs, ending the same way, in the same table
    assert outcomes(spread) == outcomes(serial)
    assert len(outcomes(spread)) == 4
    rows = {p.name: list(csv.DictReader(open(p / "compare.csv"))) for p in (serial, spread)}
    assert [(x["arm"], x["seed"]) for x in rows["dask"]] == [(x["arm"], x["seed"]) for x in rows["serial"]]
    assert rows["dask"][0].keys() == rows["serial"][0].keys()
    for p in (serial, spread):
        md = (p / "compare.md").read_text()
        assert md.count("| kernelseek |") == 3 and md.count("| toolrich   |") == 3
        assert (p / "best_so_far.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (spread / "compare.md").read_text() in r.output
    asked = [json.loads((p / "request.json").read_text()) for p in (serial, spread)]
    for q, p in zip(asked, (serial, spread)):
        assert q.pop("out_dir") == str(p) and q["model"].pop("base_url").startswith("http://127.0.0.1:")
    assert asked[0] == asked[1]
    assert sorted(t.name for t in (spread / "traces").glob("*.jsonl")) == sorted(
        t.name for t in (serial / "traces").glob("*.jsonl")
    )
    runs = {(x.arm, x.seed): x for x in read_runs(spread / "runs.jsonl")}
    assert all(x.trace.startswith(str(spread / "traces")) for x in runs.values())

    # only the killed run was taken up again, from its trace, once
    for arm, seed in runs:
        trace = spread / "traces" / f"{arm}-seed{seed}.jsonl"
        assert validate_trace(trace).ok
        events = read_trace(trace).events
        assert [e["type"] for e in events].count("run_start") == 1
        assert [e["type"] for e in events].count("resume") == ((arm, seed) == TARGET)
    events = read_trace(spread / "traces" / "kernelseek-seed2.jsonl").events
    assert [e["call"] for e in events if e["type"] == "llm_call"] == [1, 2, 3, 4, 5]
    assert "kernelseek seed 2: resumed: exit limit" in r.output
    assert r.output.count(": new: exit limit") == 3 and r.output.count(" on tcp://") == 4

    # an interrupted comparison: one run cut off after its second step; the others are kept
    trace = spread / "traces" / "toolrich-seed1.jsonl"
    lines = trace.read_text().splitlines(keepends=True)
    steps = [i for i, l in enumerate(lines) if json.loads(l)["type"] == "step"]
    trace.write_text("".join(lines[: steps[1] + 1]))
    with ScriptedChatServer([respond] * 100) as srv:
        r = _compare([*FAST, *DASK, "--base-url", srv.url, "--out", str(spread)])
        calls = [(_arm(q["body"]), q["body"].get("seed")) for q in srv.requests]
    assert r.exit_code == 0, r.output
    assert r.output.count("already finished, kept") == 3 and "toolrich seed 1: resumed: exit limit" in r.output
    assert calls == [("toolrich", 1)] * 3  # steps 3, 4 and 5, nothing else
    assert outcomes(spread) == outcomes(serial)


def test_a_run_whose_workers_keep_dying_is_reported_and_resumed_by_the_next_compare(tmp_path, monkeypatch):
    """With no failures allowed, one killed worker is enough for Dask to give the run up: the other
    run finishes, the command names the lost run and exits 1; the next compare (here on this machine)
    resumes it from its trace and keeps the other."""
    import dask

    out = tmp_path / "cmp"
    args = [*FAST, "--seeds", "1", "--out", str(out)]  # the last --seeds counts
    script = HoldTarget(("kernelseek", 1))
    with (
        ScriptedChatServer([script] * 100) as srv,
        capture_client(monkeypatch) as got,
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
    ):
        watcher = kill_target_worker(got, script)
        r = _compare([*args, *DASK, "--base-url", srv.url])
        watcher.join(5)
    assert got.get("killed") in got.get("workers", ())
    assert (
        r.exit_code == 1
        and "lost their workers too often" in r.output
        and "kernelseek seed 1 (KilledWorker" in r.output
    )
    assert "toolrich seed 1: new: exit limit" in r.output and not (out / "compare.md").exists()
    with ScriptedChatServer([respond] * 100) as srv:
        r = _compare([*args, "--base-url", srv.url])
    assert r.exit_code == 0, r.output
    assert (
        "kernelseek seed 1: resumed: exit limit" in r.output and "toolrich seed 1: already finished, kept" in r.output
    )
    assert {(x.arm, x.seed, x.steps, x.evals) for x in read_runs(out / "runs.jsonl")} == {
        ("kernelseek", 1, 5, 3),
        ("toolrich", 1, 5, 3),
    }


def test_a_gpu_task_needs_one_class_of_suitable_gpus_on_every_worker(tmp_path):
    """Without GPUs (these CPU workers) the command says so and exits 3; workers of two GPU classes,
    or workers that share one GPU, are refused before anything is written (the arms would not run on
    equal terms)."""
    r = _compare(
        [
            "compare",
            "--task",
            "fa-fwd-sm90",
            "--model",
            "m",
            "--base-url",
            "http://127.0.0.1:9/v1",
            *DASK,
            "--out",
            str(tmp_path / "a"),
        ]
    )
    assert r.exit_code == 3 and "see no GPU" in r.output
    req = CompareRequest(
        arms=["kernelseek", "toolrich"],
        task="fa-fwd-sm90",
        model={"name": "m", "base_url": "u"},
        seeds=[1],
        out_dir=str(tmp_path / "b"),
    )
    with pytest.raises(MixedGPUs):
        run_compare_distributed(req, ScaleOut(cluster=ClusterSpec("local", workers=2)), probe=mixed_probe)
    with pytest.raises(ClusterError, match="share GPU GPU-fake-0"):
        run_compare_distributed(req, ScaleOut(cluster=ClusterSpec("local", workers=2)), probe=shared_probe)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_run_on_a_worker_evaluates_on_that_workers_gpu(tmp_path, monkeypatch):
    """The item function in this process, with a stand-in probe that says the worker holds GPU 3:
    while the run goes on, the evaluator's GPU variable names that GPU; afterwards it is as before."""
    monkeypatch.delenv(GPU_ENV, raising=False)
    seen = []

    def answer(body):
        seen.append(os.environ.get(GPU_ENV))
        return respond(body)

    with ScriptedChatServer([answer] * 10) as srv:
        req = CompareRequest(
            arms=["kernelseek"],
            task="cpu-attn",
            model={"name": "m", "base_url": srv.url},
            seeds=[1],
            limits={"max_steps": 2},
            task_options={"budget_ms": 2},
            out_dir=str(tmp_path),
        )
        (spec,) = plan(req)
        rec = run_on_worker(spec, probe=lambda: WorkerGPU("node-a", 3, "GPU-fake-3", "NVIDIA H200", (9, 0)))
    assert seen == ["3", "3"] and os.environ.get(GPU_ENV) is None
    assert rec["state"] == "new" and rec["exit_reason"] == "limit"
    assert rec["gpu"] == {"index": 3, "uuid": "GPU-fake-3", "host": "node-a", "name": "NVIDIA H200", "worker": None}


def test_eval_uses_the_gpu_its_variable_names(tmp_path, monkeypatch):
    """`eval` (which a run's evaluations call) checks and measures on KERNELSEEK_GPU's device."""
    from kernelseek_suite import bench as bench_mod
    from kernelseek_suite import gpu as gpu_mod

    gpus = [gpu_mod.GPUInfo(i, "NVIDIA H200", f"GPU-fake-{i}", (9, 0), "580.1") for i in range(2)]
    monkeypatch.setattr(gpu_mod, "list_gpus", lambda: gpus)
    taken = []

    def run_local(req, *a, **kw):
        gpu_mod.require_gpu(req.arch, req.gpu_index)  # as the real one does, after its static checks
        taken.append(req.gpu_index)
        summary = {"scenarios_total": 1, "scenarios_correct": 1, "extended_total": 0, "extended_correct": 0}
        return summary, req.out_dir

    monkeypatch.setattr(bench_mod, "run_local", run_local)
    kernel = tmp_path / "k.cu"
    kernel.write_text("// a kernel\n")
    args = ["eval", str(kernel), "--arch", "sm90", "--json", "--out", str(tmp_path / "out")]
    r = CliRunner().invoke(main, args, env={GPU_ENV: "5"})
    assert r.exit_code == 3 and "GPU index 5 does not exist (2 visible)" in r.output and not taken
    r = CliRunner().invoke(main, args, env={GPU_ENV: "1"})
    assert r.exit_code == 0, r.output
    r = CliRunner().invoke(main, [*args, "--gpu", "0"], env={GPU_ENV: "1"})
    assert r.exit_code == 0 and taken == [1, 0]


def test_a_second_attempt_at_a_run_waits_for_the_first_to_let_go_of_its_trace(tmp_path):
    """Dask may start a run again elsewhere while its first attempt still runs (a worker taken for
    dead): the second waits for the trace's lock instead of writing into the same trace."""
    import fcntl

    with ScriptedChatServer([respond] * 10) as srv:
        req = CompareRequest(
            arms=["kernelseek"],
            task="cpu-attn",
            model={"name": "m", "base_url": srv.url},
            seeds=[1],
            limits={"max_steps": 1},
            task_options={"budget_ms": 2},
            out_dir=str(tmp_path),
        )
        (spec,) = plan(req)
        lock = tmp_path / "traces" / "kernelseek-seed1.d" / "run.lock"
        lock.parent.mkdir(parents=True)
        got = {}
        with open(lock, "a") as held:
            fcntl.flock(held, fcntl.LOCK_EX)  # the first attempt, still running
            second = threading.Thread(target=lambda: got.update(run_on_worker(spec)), daemon=True)
            second.start()
            second.join(1.0)
            assert (
                second.is_alive() and not srv.requests and not (tmp_path / "traces" / "kernelseek-seed1.jsonl").exists()
            )
        second.join(30)
    assert got["state"] == "new" and got["exit_reason"] == "limit" and len(srv.requests) == 1
