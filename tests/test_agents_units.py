"""The agents' parts on their own: decision points, layers, tools, workspace, evaluator parsing,
trace validation, the public surface."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from pathlib import Path

import pytest

import kernelseek_suite.agents as agents
from kernelseek_suite.agents import layers
from kernelseek_suite.agents.config import QuestionConfig, RunConfig
from kernelseek_suite.agents.decisions import DecisionDetector, claimed_limit, failure_signature
from kernelseek_suite.agents.exceptions import ToolError
from kernelseek_suite.agents.tasks import Evaluation, GridResult, make_task, task_names
from kernelseek_suite.agents.tools import elide
from kernelseek_suite.agents.workspace import Workspace, scrubbed_env
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.contracts.traces import trace_schema, validate_events, validate_trace


def test_public_surface():
    assert agents.__all__ == sorted(
        [
            "Agent",
            "Bank",
            "BankError",
            "Environment",
            "Evaluation",
            "Goal",
            "HarnessTampered",
            "LimitExceeded",
            "Limits",
            "Model",
            "ModelConfig",
            "ModelError",
            "Question",
            "QuestionConfig",
            "RunConfig",
            "RunResult",
            "RunSetupError",
            "StepRecord",
            "Submitted",
            "Supervisor",
            "Task",
            "Terminate",
            "Tool",
            "ToolRegistry",
            "ToolResult",
            "ToolsConfig",
            "TraceWriter",
            "Workspace",
            "base_tools",
            "load_bank",
            "make_task",
            "new_run",
            "resume_run",
            "task_names",
        ]
    )
    for name in agents.__all__:
        assert getattr(agents, name) is not None
    assert set(task_names()) >= {"fa-fwd-sm90", "cpu-attn"}


@pytest.mark.parametrize(
    "text",
    [
        "We are at the theoretical limit of the hardware.",
        "This loop cannot be improved further.",
        "The kernel is memory-bound.",
        "Performance is bound by DRAM bandwidth.",
        "The tensor cores are saturated.",
        "Going faster is impossible with this layout.",
        "There is no further room for improvement.",
    ],
)
def test_claimed_limits_are_detected(text):
    found = claimed_limit(text, QuestionConfig().claimed_limit_patterns)
    assert found and found["phrase"].lower() in text.lower() and found["sentence"]


@pytest.mark.parametrize(
    "text",
    [
        "Let me try a larger tile.",
        "The bound check at the edge was wrong; fixed.",
        "The next step is to pipeline loads.",
        None,
        "",
    ],
)
def test_ordinary_text_claims_no_limit(text):
    assert claimed_limit(text, QuestionConfig().claimed_limit_patterns) is None


def test_failure_signatures_ignore_numbers_and_paths():
    a = failure_signature("eval wrong", "/tmp/ks-eval-1/x.cu:12: error 0x1f at 3.5")
    b = failure_signature("eval wrong", "/tmp/ks-eval-9/y.cu:40: error 0x2a at 7.25")
    assert a == b and failure_signature("shell", "x") != failure_signature("eval wrong", "x")


class _Resp:
    def __init__(self, content=None):
        self.content = content


def _step(n, evals=(), layer=None, content=None):
    from kernelseek_suite.agents.agent import StepRecord
    from kernelseek_suite.agents.context import EvalRecord

    recs = [EvalRecord(i, e, "0" * 64, False, False, n) for i, e in enumerate(evals)]
    return StepRecord(n, _Resp(content), [], recs, {layer: 1} if layer else {}, layer)


def _ok(gm):
    return Evaluation("ok", True, "baseline", 6, 6, geomean=gm)


def test_plateau_counts_evaluations_without_a_meaningful_new_best():
    det = DecisionDetector(QuestionConfig(plateau_evals=3, new_best_min_gain=0.05))
    assert det.observe(_step(1, [_ok(1.0)])) == []
    assert det.observe(_step(2, [_ok(1.02)])) == []  # +2%: not a new best at 5%
    assert det.observe(_step(3, [Evaluation("wrong", False, "baseline", 6, 2)])) == []
    found = det.observe(_step(4, [_ok(1.01)]))
    assert [d.trigger for d in found] == ["plateau"] and found[0].evidence["evals_without_new_best"] == 3
    det.answered("plateau")
    assert det.observe(_step(5, [_ok(1.2)])) == []  # a real new best
    assert det.state()["plateau_best"] == 1.2


def test_layer_dwell_and_repeated_failure():
    det = DecisionDetector(QuestionConfig(layer_dwell_steps=3, repeated_failure=2, plateau_evals=99))
    assert det.observe(_step(1, layer="memory")) == []
    assert det.observe(_step(2, layer=None)) == []  # a step in no layer does not break the run
    assert det.observe(_step(3, layer="memory")) == []
    found = det.observe(_step(4, layer="memory"))
    assert found[0].trigger == "layer-dwell" and found[0].evidence == {"layer": "memory", "steps": 3, "from_step": 1}
    bad = Evaluation("build_failed", False, "baseline", error="x.c:3: error: y undeclared")
    assert det.observe(_step(5, [bad])) == []
    found = det.observe(_step(6, [bad], content="It is impossible to go faster."))
    assert [d.trigger for d in found] == ["claimed-limit", "repeated-failure"]


def test_the_layer_classifier():
    s = layers.scores("add __syncthreads() after the shared memory tile load; __launch_bounds__(128)")
    assert {"synchronization", "memory", "registers"} <= set(s)
    assert layers.dominant({"memory": 2, "numerics": 2}) == "memory"
    assert layers.dominant({}) is None


def test_elide_keeps_head_and_tail():
    text = "a" * 1000 + "MIDDLE" + "z" * 1000
    out = elide(text, 300)
    assert out.startswith("a" * 100) and out.endswith("z" * 50) and "elided" in out and "MIDDLE" not in out
    assert elide("short", 300) == "short"


def test_workspace_paths_stay_inside(tmp_path):
    ws = Workspace(tmp_path / "w", tmp_path / "s")
    (ws.root / "a.c").write_text("x")
    assert ws.resolve("a.c") == ws.root / "a.c"
    assert ws.resolve(str(ws.root / "sub" / "b.c")) == ws.root / "sub" / "b.c"
    os.symlink("/etc/passwd", ws.root / "link")
    for bad in ("../s/x", "/etc/passwd", "link", "sub/../../x", ""):
        with pytest.raises(ToolError):
            ws.resolve(bad)


def test_the_shell_times_out_and_leaves_nothing_running(tmp_path):
    ws = Workspace(tmp_path / "w", tmp_path / "s")
    t0 = time.monotonic()
    r = ws.run("sleep 30 & echo $! > pid; sleep 30", 0.5)
    assert r.timed_out and r.exit_code is None and time.monotonic() - t0 < 5
    pid = int((ws.root / "pid").read_text())
    time.sleep(0.1)
    assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]


def test_the_shell_sees_no_secrets(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-hidden")
    monkeypatch.setenv("SOME_TOKEN", "tok-hidden")
    assert "OPENAI_API_KEY" not in scrubbed_env() and "SOME_TOKEN" not in scrubbed_env()
    ws = Workspace(tmp_path / "w", tmp_path / "s")
    out = ws.run("env", 10).output
    assert "hidden" not in out and f"HOME={ws.scratch}/home" in out


def test_snapshot_and_restore(tmp_path):
    ws = Workspace(tmp_path / "w", tmp_path / "s")
    (ws.root / "d").mkdir()
    (ws.root / "d" / "f.c").write_text("one")
    (ws.root / "g.c").write_text("two")
    snap = ws.snapshot()
    (ws.root / "g.c").write_text("changed")
    (ws.root / "junk").write_text("junk")
    ws.restore(snap)
    assert ws.snapshot() == snap == {"d/f.c": b"one", "g.c": b"two"}


def test_config_round_trips_through_a_dict():
    cfg = RunConfig(task="cpu-attn", task_options={"goal": 3.0}, seed=5)
    cfg.limits.max_evals = 7
    cfg.questions.categories = ("information",)
    again = RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg
    with pytest.raises(ValueError, match="unknown field"):
        RunConfig.from_dict({"nonsense": 1})


# ---------------------------------------------------------------- fa-fwd-sm90's evaluator, without a GPU

FAKE_EVAL = r"""
import json, sys
from pathlib import Path
from kernelseek_suite.results import ScenarioResult, append_jsonl, summarize
args = sys.argv[1:]
out = Path(args[args.index("--out") + 1])
mode = Path(args[1]).read_text().strip()
if mode == "build":
    print(json.dumps({"status": "build_failed", "error": "ptxas error C7515"})); sys.exit(2)
rows = [ScenarioResult("d64-h32kv32-s1024", "d64-h32kv32", 32, 1024, 1024, False, False, 1e12, "ok",
                       ratio={"fa3": 0.5}),
        ScenarioResult("d128-h16kv16-s2048", "d128-h16kv16", 16, 2048, 2048, False, False, 1e12,
                       "ok" if mode == "ok" else "wrong", reason="" if mode == "ok" else "max err 3 > tol 0.01",
                       ratio={"fa3": 2.0} if mode == "ok" else {})]
for r in rows:
    append_jsonl(out / "bench.jsonl", r)
s = summarize(rows, "eval", "sm90", {"path": args[1], "sha256": "0"}, {}, ["fa3"])
print(json.dumps(s)); sys.exit(0 if mode == "ok" else 1)
"""


class FakeSeal:
    """Runs a stand-in evaluator script where the sealed copy would run `kernelseek_suite.cli`."""

    def __init__(self, script: Path, root: Path):
        self.script, self.root, self.commands = script, root, []

    def new_scratch(self) -> Path:
        d = self.root / f"scratch{len(self.commands)}"
        d.mkdir()
        return d

    def command(self, module, args):
        self.commands.append((module, args))
        return [sys.executable, str(self.script), *args]

    def run(self, argv, scratch, timeout_s, env=None, keep_caps=()):
        import subprocess

        from kernelseek_suite.agents.seal import Ran

        p = subprocess.run(argv, capture_output=True, text=True, cwd=scratch, timeout=timeout_s)
        return Ran(p.returncode, p.stdout, p.stderr, 0.1)


@pytest.mark.parametrize(
    "mode,status,correct,geomean",
    [("ok", "ok", True, 1.0), ("wrong", "wrong", False, 0.5), ("build", "build_failed", False, None)],
)
def test_fa_task_reads_the_evaluator_output(tmp_path, mode, status, correct, geomean):
    script = tmp_path / "fake_eval.py"
    script.write_text(FAKE_EVAL)
    seal = FakeSeal(script, tmp_path)
    task = make_task("fa-fwd-sm90")
    kernel = tmp_path / "k.cu"
    kernel.write_text(mode)
    ev = task.evaluate(kernel, tmp_path / "out", 60, seal)
    assert seal.commands[0][0] == "kernelseek_suite.cli" and seal.commands[0][1][0] == "eval"
    assert (ev.status, ev.correct, ev.geomean) == (status, correct, geomean), ev.error
    if mode == "wrong":
        assert ev.scenarios_correct == 1 and ev.scenarios_total == 2
        assert "d128-h16kv16-s2048: wrong max err 3 > tol 0.01" in ev.report()
        assert (tmp_path / "out" / "bench.jsonl").is_file()  # the outputs are kept in the trace's folder
    if mode == "build":
        assert "C7515" in ev.report()
    assert not list(tmp_path.glob("scratch*"))  # the evaluation's scratch folder is gone


FAKE_BENCH = r"""
import json, sys
from pathlib import Path
args = sys.argv[1:]
out = Path(args[args.index("--out") + 1])
mode = Path(args[args.index("--kernel") + 1]).read_text().strip()
if mode == "build":
    print("build failed: ptxas error C7515", file=sys.stderr); sys.exit(2)
if mode == "crash":
    print("Traceback: boom", file=sys.stderr); sys.exit(7)
correct = 182 if mode == "ok" else 181
(out / "summary.json").write_text(json.dumps({"scenarios_total": 182, "scenarios_correct": correct,
                                              "geomean": {"fa3": 1.25}}))
sys.exit(0 if mode == "ok" else 1)
"""


@pytest.mark.parametrize(
    "mode,expected",
    [
        ("ok", GridResult("ok", 1.25, 182, 182, "fa3", "")),
        ("wrong", GridResult("wrong", 1.25, 181, 182, "fa3", "not correct on every scenario of the grid")),
        ("build", GridResult("build_failed", baseline="fa3", note="build failed: ptxas error C7515")),
        ("crash", GridResult("error", baseline="fa3", note="the bench exited with 7: Traceback: boom")),
    ],
)
def test_fa_task_benches_its_full_grid_with_the_suites_bench(tmp_path, mode, expected):
    script = tmp_path / "fake_bench.py"
    script.write_text(FAKE_BENCH)
    seal = FakeSeal(script, tmp_path)
    task = make_task("fa-fwd-sm90")
    kernel = tmp_path / "k.cu"
    kernel.write_text(mode)
    assert task.bench_full_grid(kernel, tmp_path / "out", 60, seal) == expected
    module, args = seal.commands[0]
    assert module == "kernelseek_suite.cli" and args[:3] == ["bench", "--arch", "sm90"]
    assert args[args.index("--baseline") + 1] == "fa3" and "--scenarios" not in args  # every scenario
    assert (tmp_path / "out" / "summary.json").is_file() == (mode in ("ok", "wrong"))  # the outputs are kept
    assert not list(tmp_path.glob("scratch*"))


def test_fa_task_runs_the_real_evaluator_sealed(tmp_path):
    """The suite's own `kernelseek-suite eval`, from the sealed copy (exit 3 without a GPU)."""
    from kernelseek_suite.agents.seal import SealedEvaluator
    from kernelseek_suite.gpu import list_gpus

    task = make_task("fa-fwd-sm90")
    assert task.kernel == "attn_fwd_ref.cu" and task.goal.baseline == "fa3"
    assert task.arguments(Path("k.cu"), Path("o")) == [
        "eval",
        "k.cu",
        "--arch",
        "sm90",
        "--json",
        "--out",
        "o",
        "--baseline",
        "fa3",
    ]
    if list_gpus():
        pytest.skip("a GPU is present: the gpu test covers this")
    seal = SealedEvaluator.create(task)
    try:
        ev = task.evaluate(task.start, tmp_path / "out", 120, seal)
    finally:
        seal.close()
    assert ev.status == "no_gpu" and not ev.correct and "GPU" in ev.error, ev.error


@pytest.mark.gpu
def test_selfcheck_on_the_gpu(tmp_path):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    r = CliRunner().invoke(main, ["selfcheck", "--task", "fa-fwd-sm90", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0, r.output


@pytest.mark.gpu
def test_toolrich_check_on_the_gpu_profiles_in_the_sandbox(tmp_path):
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    r = CliRunner().invoke(main, ["toolrich-check", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0, r.output
    assert "TOOLCHECK PASS" in r.stdout and "sandbox: {'sandbox': 'landlock'" in r.stdout


def test_toolrich_check_reports_its_sandbox_and_a_tool_that_cannot_run(tmp_path):
    """Without a GPU the profiler cannot run: the check fails and says why, and, as on the GPU, it names
    the sandbox its tools ran in."""
    from click.testing import CliRunner

    from kernelseek_suite.cli import main
    from kernelseek_suite.gpu import list_gpus

    if list_gpus():
        pytest.skip("a GPU is present: the gpu test covers this")
    r = CliRunner().invoke(main, ["toolrich-check", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 1, r.output
    lines = r.stdout.splitlines()
    assert lines[-1] == "TOOLCHECK FAIL" and lines[-2] == f"trace: {tmp_path / 't.jsonl'}"
    assert lines[-3].startswith("sandbox: {'sandbox': ") and "'sandbox_detail'" in lines[-3]
    assert any(line.startswith("===== profile") for line in lines)


def test_toolrich_check_without_its_extra_says_what_to_install_and_exits_usage(tmp_path, monkeypatch):
    """On a GPU node whose wheels lacked bm25s (2026-12-05) the check ended in a traceback; a missing
    extra is a usage error with the command that installs it."""
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    monkeypatch.setitem(sys.modules, "bm25s", None)  # import bm25s now raises ImportError
    r = CliRunner().invoke(main, ["toolrich-check", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == exitcodes.USAGE, r.output
    assert "needs the 'agents' extra (bm25s): pip install 'kernelseek-suite[agents]'" in r.stderr
    assert "Traceback" not in r.output and not isinstance(r.exception, ImportError)


def test_selfcheck_on_the_cpu_task(tmp_path):
    if shutil.which("gcc") is None:
        pytest.skip("needs gcc")
    from click.testing import CliRunner

    from kernelseek_suite.cli import main

    r = CliRunner().invoke(main, ["selfcheck", "--task", "cpu-attn", "--trace", str(tmp_path / "t.jsonl")])
    assert r.exit_code == 0, r.output
    out = r.stdout
    assert "SELFCHECK PASS" in out and "correct 6/6" in out
    assert validate_trace(tmp_path / "t.jsonl").ok


# ---------------------------------------------------------------- trace validation


def _minimal_trace():
    env = {"time": "2026-01-01T00:00:00+00:00", "elapsed_s": 0.0, "step": 0}
    start = {
        "type": "run_start",
        "seq": 0,
        **env,
        "schema_version": 1,
        "run_id": "r",
        "arm": "a",
        "task": {"name": "t", "kernel": "k", "goal": {}},
        "model": {"name": "m", "base_url": None, "sampling": {}},
        "config": {},
        "suite": {"version": "0", "git_sha": None},
        "prompts": {"system_sha256": "", "task_sha256": "", "tools_sha256": ""},
        "hardware": {},
        "versions": {},
        "seed": 1,
        "sandbox": {"sandbox": "none"},
    }
    totals = {
        "steps": 0,
        "prompt_tokens": 0,
        "completion_tokens": 0,
        "total_tokens": 0,
        "cost": None,
        "evals": 0,
        "retries": 0,
        "wall_s": 0.0,
    }
    ex = {"type": "exit", "seq": 1, **env, "reason": "limit", "message": "m", "goal_met": False, "limit": "steps"}
    end = {
        "type": "run_end",
        "seq": 2,
        **env,
        "totals": totals,
        "best": None,
        "goal_met": False,
        "exit_reason": "limit",
    }
    return [start, ex, end]


def test_the_validator_accepts_a_minimal_trace_and_extensions():
    events = _minimal_trace()
    events.insert(1, {"type": "x-lesson", "seq": 1, "time": "t", "elapsed_s": 0, "step": 0, "text": "anything"})
    for i, e in enumerate(events):
        e["seq"] = i
    errors, notes = validate_events(events)
    assert errors == [] and notes == []


@pytest.mark.parametrize(
    "breakage,expected",
    [
        (lambda ev: ev[1].pop("reason"), "'reason' is a required property"),
        (lambda ev: ev[1].update(reason="bored"), "'bored' is not one of"),
        (lambda ev: ev[2].update(seq=7), "seq 7 does not follow 1"),
        (lambda ev: ev.insert(1, dict(ev[1], type="mystery")), "unknown event type 'mystery'"),
        (lambda ev: ev.append(dict(ev[1], seq=3)), "only a resume may follow run_end"),
        (lambda ev: ev.pop(0), "a trace starts with run_start"),
    ],
)
def test_the_validator_names_the_problem(breakage, expected):
    events = _minimal_trace()
    breakage(events)
    errors, _ = validate_events(events)
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize("version", [1, 2])
def test_the_trace_schema_is_itself_valid(version):
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(trace_schema(version))
