"""Failures that are no verdict: the evaluator's own machinery (CUDA unusable, its worker or its own
process unable to start, no suitable GPU), the model endpoint, and a cost limit that could not bind.
Each has its own exit code (suite/contracts/exitcodes.py, the README's table); the machinery's failure ends an
agent run without the model ever being told that its kernel is wrong."""

from __future__ import annotations

import json
import shutil
import socket
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from agent_runs import config_for, of_type, run
from chat_server import ScriptedChatServer, reply
from kernelseek_suite import config as suite_config
from kernelseek_suite import scenarios as sc
from kernelseek_suite.agents.tasks.fa_fwd import parse_eval_output
from kernelseek_suite.cli import main
from kernelseek_suite.config import HarnessConfig, SweepConfig
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.contracts.traces import read_trace
from kernelseek_suite.harness.sweep import SweepSpec, run_sweep

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
FAKE = Path(__file__).parent / "fake_worker.py"
KERNELS = Path(__file__).parent / "kernels"
FAST = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=3.0, worker_start_timeout_s=20.0, poll_s=0.05))
EXCHANGE = "invalid argument to exchangeDevice"


def _sweep(tmp_path: Path, plan: dict) -> Path:
    """A real sweep of six scenarios, its worker stood in by fake_worker.py; the folder it wrote."""
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    spec = SweepSpec(
        library="unused.so",
        scenarios=sc.select(sc.grid(), "d128-h16kv4-*")[:6],
        baselines=[],
        seed=1,
        config=FAST,
        worker_log=out / "worker.log",
        worker_command=(sys.executable, str(FAKE), str(tmp_path / "plan.json")),
    )
    run_sweep(spec, out / "bench.jsonl")
    (out / "provenance.json").write_text(json.dumps({"seed": 1}))
    return out


# ---------------------------------------------------------------- the evaluator's machinery


def test_a_worker_that_cannot_use_cuda_is_the_evaluators_failure_not_the_kernels(tmp_path):
    from kernelseek_suite.evaluate import machinery_failure

    why = machinery_failure(_sweep(tmp_path, {"at_start": "fatal_cuda"}))
    assert why and EXCHANGE in why and "all 6 scenarios" in why and "no verdict on the kernel" in why


@pytest.mark.parametrize(
    "plan",
    [
        {"at_start": "fatal"},  # the kernel's library breaks the contract: the kernel's failure
        {"actions": {s.id: "segv" for s in sc.select(sc.grid(), "d128-h16kv4-*")[:6]}},  # it crashes every time
        {},  # all correct
    ],
)
def test_failures_of_the_kernel_stay_verdicts(tmp_path, plan):
    from kernelseek_suite.evaluate import machinery_failure

    assert machinery_failure(_sweep(tmp_path, plan)) is None


@pytest.mark.nvcc
def test_eval_exits_with_the_evaluators_code_when_its_worker_cannot_use_cuda(tmp_path, monkeypatch):
    """`kernelseek-suite eval --json` on a kernel that builds, its worker stood in by one that fails as
    the real one did on an H200 (`invalid argument to exchangeDevice`, before its hello)."""
    from kernelseek_suite import bench, gpu
    from kernelseek_suite.gpu import GPUInfo
    from kernelseek_suite.harness import sweep

    h100 = GPUInfo(0, "NVIDIA H100 80GB HBM3", "GPU-00000000-test", (9, 0), "580.00")
    monkeypatch.setattr(bench, "require_gpu", lambda arch, index=0: h100)
    monkeypatch.setattr(gpu, "require_gpu", lambda arch, index=0: h100)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps({"at_start": "fatal_cuda"}))
    monkeypatch.setattr(sweep, "WORKER_COMMAND", (sys.executable, str(FAKE), str(plan)))
    out = tmp_path / "out"
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "spin.cu"), "--json", "--out", str(out), "--no-extended"])
    assert r.exit_code == exitcodes.EVALUATOR, r.output
    summary = json.loads(r.stdout.strip().splitlines()[-1])
    assert summary["status"] == "error" and EXCHANGE in summary["evaluator_error"]
    assert "no verdict on the kernel" in r.stderr
    # the agents' side reads it as the evaluator's failure, never as `wrong`
    ev = parse_eval_output(r.exit_code, r.stdout, r.stderr, "fa3", out, 1.0)
    assert ev.status == "error" and not ev.correct and EXCHANGE in ev.error


def _bin_with_gcc(tmp_path: Path) -> Path:
    """A PATH folder with the compiler and the tools it calls, to be taken away mid-run."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for tool in ("gcc", "as", "ld", "cc"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return bin_dir


@needs_gcc
def test_an_evaluator_that_cannot_run_ends_the_run_and_the_model_is_never_told(tmp_path, monkeypatch):
    """cpu-attn: the compiler is gone when the first evaluation runs (the evaluator's own toolchain):
    the run stops as the evaluator's failure, the model gets no result, and `run` exits 6."""
    bin_dir = _bin_with_gcc(tmp_path)
    trace = tmp_path / "t.jsonl"

    def toolchain_gone(body):
        (bin_dir / "gcc").unlink()
        (bin_dir / "cc").unlink(missing_ok=True)
        return reply(None, [("evaluate", {})])

    script = [toolchain_gone, reply(None, [("shell", {"command": "echo still here"})]), reply("Done.")]
    with ScriptedChatServer(script) as srv:
        r = CliRunner().invoke(
            main,
            ["run", "--agent", "general", "--task", "cpu-attn", "--task-opt", "budget_ms=2", "--model", "m"]
            + ["--base-url", srv.url, "--trace", str(trace), "--max-steps", "5", "--no-live"],
            env={"PATH": str(bin_dir), "OPENAI_API_KEY": None},
        )
        requests = len(srv.requests)
    assert r.exit_code == exitcodes.EVALUATOR, r.output
    events = read_trace(trace).events
    (ev,) = of_type(events, "harness_eval")
    assert ev["status"] == "error" and "gcc" in ev["error"]
    assert requests == 1 and not of_type(events, "tool_result")  # the model never heard of it
    (ex,) = of_type(events, "exit")
    assert ex["reason"] == "error" and ex["details"]["evaluator_status"] == "error"
    assert "not the kernel's fault" in ex["message"] and "the evaluator failed" in r.output


@needs_gcc
def test_the_same_run_with_its_toolchain_in_place_goes_on(tmp_path, monkeypatch):
    """The control: nothing taken away, the evaluation is a verdict and the run goes on."""
    bin_dir = _bin_with_gcc(tmp_path)
    monkeypatch.setenv("PATH", str(bin_dir))
    script = [reply(None, [("evaluate", {})]), reply("Done.")]
    with ScriptedChatServer(script) as srv:
        result, events, _ = run(config_for(srv, arm="general", max_steps=2), tmp_path)
    assert of_type(events, "harness_eval")[0]["status"] == "ok" and of_type(events, "tool_result")
    assert result.exit_reason != "error"


@pytest.mark.slow
def test_no_suitable_gpu_stops_the_run_with_exit_3(tmp_path):
    """fa-fwd-sm90 where the evaluator finds no suitable GPU: the run stops at its first evaluation
    (the model is not asked to go on against an evaluator that cannot judge) and `run` exits 3."""
    from kernelseek_suite.gpu import list_gpus

    if list_gpus():
        pytest.skip("a GPU is present: the real evaluation would take minutes")
    trace = tmp_path / "t.jsonl"
    script = [reply(None, [("evaluate", {})]), reply(None, [("shell", {"command": "true"})]), reply("Done.")]
    with ScriptedChatServer(script) as srv:
        r = CliRunner().invoke(
            main,
            ["run", "--agent", "general", "--task", "fa-fwd-sm90", "--model", "m", "--base-url", srv.url]
            + ["--trace", str(trace), "--max-steps", "3", "--no-live"],
        )
        requests = len(srv.requests)
    assert r.exit_code == exitcodes.NO_GPU, r.output
    events = read_trace(trace).events
    assert of_type(events, "harness_eval")[0]["status"] == "no_gpu" and requests == 1
    assert of_type(events, "exit")[0]["details"]["evaluator_status"] == "no_gpu"


# ---------------------------------------------------------------- the model endpoint


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the block ends: nothing listens there


@needs_gcc
def test_an_unreachable_endpoint_exits_with_its_own_code_after_a_bounded_wait(tmp_path):
    trace = tmp_path / "t.jsonl"
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    t0 = time.monotonic()
    r = CliRunner().invoke(
        main,
        ["run", "--agent", "general", "--task", "cpu-attn", "--model", "m", "--base-url", url]
        + ["--trace", str(trace), "--max-attempts", "2", "--retry-budget", "20", "--no-live"],
        env={"OPENAI_API_KEY": None},
    )
    assert time.monotonic() - t0 < 60
    assert r.exit_code == exitcodes.ENDPOINT, r.output
    assert "exit: model_error" in r.output and "the model endpoint" in r.output and "--max-attempts" in r.output
    end = of_type(read_trace(trace).events, "run_end")[0]
    assert end["exit_reason"] == "model_error"
    assert exitcodes.ENDPOINT not in (exitcodes.FAIL, exitcodes.EVALUATOR)


# ---------------------------------------------------------------- a cost limit without a price


@needs_gcc
def test_max_cost_without_a_price_refuses_to_start(tmp_path):
    args = ["--agent", "general", "--task", "cpu-attn", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
    r = CliRunner().invoke(main, ["run", *args, "--max-cost", "1", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == exitcodes.USAGE and "--max-cost needs a known price" in r.output, r.output
    assert not (tmp_path / "t.jsonl").exists()
    c = CliRunner().invoke(
        main,
        ["compare", "--agents", "general", "--task", "cpu-attn", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"]
        + ["--max-cost", "1", "--seeds", "1", "--out", str(tmp_path / "c"), "--allow-unsandboxed"],
    )
    assert c.exit_code == exitcodes.USAGE and "--max-cost needs a known price" in c.output, c.output
    assert not (tmp_path / "c" / "traces").exists()


@needs_gcc
def test_max_cost_with_a_price_binds(tmp_path):
    script = [reply(None, [("shell", {"command": "true"})], usage=(500_000, 0))] * 4
    with ScriptedChatServer(script) as srv:
        cfg = config_for(srv, arm="general", max_cost=1.5, max_steps=10)
        cfg.model.price_input_per_mtok, cfg.model.price_output_per_mtok = 1.0, 2.0
        result, events, _ = run(cfg, tmp_path)
    assert result.exit_reason == "limit" and result.limit == "cost" and result.totals["steps"] == 3


def test_the_readme_lists_the_new_codes():
    readme = (suite_config.REPO_ROOT / "README.md").read_text()
    for code in (exitcodes.EVALUATOR, exitcodes.ENDPOINT):
        assert f"\n| {code} | " in readme


def _eval_out(tmp_path: Path, baseline_status: dict, geomean: dict) -> tuple[str, Path]:
    """What `eval --json` leaves: its summary as stdout's last line, provenance.json in its out folder."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "provenance.json").write_text(json.dumps({"baseline_status": baseline_status}))
    summary = {"scenarios_total": 182, "scenarios_correct": 182, "extended_total": 316, "extended_correct": 316}
    return "building...\n" + json.dumps({**summary, "geomean": geomean}) + "\n", out


def test_a_goal_baseline_that_could_not_run_is_the_evaluators_failure_not_a_missing_speed(tmp_path):
    """On a GPU node (2026-12-05) the sandboxed evaluation judged a kernel 182/182 and 316/316 and then
    said `speed vs fa3: not measured`: the agent would go on with no way to meet its goal. The
    baseline's own reason ends the run instead."""
    why = "not installed (ImportError: libcudart.so.13: cannot open shared object file): pip install fa3-fwd"
    stdout, out = _eval_out(tmp_path, {"fa3": why, "cudnn": "ok"}, {"cudnn": 1.2})
    ev = parse_eval_output(0, stdout, "", "fa3", out, 1.0)
    assert ev.status == "error" and not ev.correct
    assert "libcudart.so.13" in ev.error and "not the kernel's fault" in ev.error
    assert (ev.scenarios_correct, ev.extended_correct) == (182, 316)  # what was checked stays on record
    assert "libcudart.so.13" in ev.report()


def test_a_goal_baseline_that_ran_gives_the_speed(tmp_path):
    stdout, out = _eval_out(tmp_path, {"fa3": "ok"}, {"fa3": 1.04})
    ev = parse_eval_output(0, stdout, "", "fa3", out, 1.0)
    assert ev.status == "ok" and ev.correct and ev.geomean == 1.04 and ev.error is None
    # no speed and no word on the baseline (an evaluator older than baseline_status): as before
    (out / "provenance.json").unlink()
    ev = parse_eval_output(0, stdout.replace('"fa3": 1.04', '"cudnn": 1.1'), "", "fa3", out, 1.0)
    assert ev.status == "ok" and ev.correct and ev.geomean is None and ev.error is None


def test_a_goal_baseline_that_failed_on_every_scenario_is_the_evaluators_failure(tmp_path):
    """The baseline imported but raised wherever it ran: its column's words end the run."""
    stdout, out = _eval_out(tmp_path, {"fa3": "ok"}, {})
    shape = {"head_config": "d64-h32kv8", "batch": 1, "seqlen_q": 2048, "seqlen_k": 2048, "causal": False}
    rows = [
        {
            "scenario": s,
            **shape,
            "extended": False,
            "flops": 1e9,
            "status": "ok",
            "baselines": {"fa3": "error: CUDA error: operation not permitted"},
        }
        for s in ("d64-h32kv8-s2048", "d128-h16kv16-s4096")
    ]
    (out / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    ev = parse_eval_output(0, stdout, "", "fa3", out, 1.0)
    assert ev.status == "error" and "on every scenario: error: CUDA error: operation not permitted" in ev.error
    # where it ran somewhere, a missing geomean is not the evaluator's failure
    rows[1]["baselines"]["fa3"] = "ok"
    (out / "bench.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert parse_eval_output(0, stdout, "", "fa3", out, 1.0).status == "ok"
