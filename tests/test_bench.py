"""bench and eval without a GPU, missing baselines, rendering saved results, and resuming an
interrupted sweep (with the stand-in worker, on the CPU)."""

import json
import signal
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner

from conftest import HAS_GPU
from kernelseek_suite import baselines as bl
from kernelseek_suite import bench, gpu, report
from kernelseek_suite import scenarios as sc
from kernelseek_suite.cli import main
from kernelseek_suite.config import HarnessConfig, SweepConfig
from kernelseek_suite.gpu import GPUInfo
from kernelseek_suite.harness import trial
from kernelseek_suite.harness.reference import reference_pair
from kernelseek_suite.harness.worker import baseline_column
from kernelseek_suite.results import ScenarioResult, read_jsonl, summarize

KERNELS = Path(__file__).parent / "kernels"
FAKE = Path(__file__).parent / "fake_worker.py"
H100 = GPUInfo(0, "NVIDIA H100 80GB HBM3", "GPU-00000000-test", (9, 0), "580.00")
A100 = GPUInfo(0, "NVIDIA A100-SXM4-80GB", "GPU-00000000-a100", (8, 0), "580.00")


# ---- no GPU -------------------------------------------------------------------------------------


@pytest.fixture
def no_gpu(monkeypatch):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [])


@pytest.mark.parametrize(
    "args",
    [
        ["bench", "--arch", "sm90", "--kernel", str(KERNELS / "spin.cu")],
        ["eval", str(KERNELS / "spin.cu")],
    ],
)
def test_bench_and_eval_say_there_is_no_gpu_and_exit_3(no_gpu, args):
    r = CliRunner().invoke(main, args)
    assert r.exit_code == 3
    assert "no NVIDIA GPU found" in r.output and "`scenarios`, `build`" in r.output


def test_eval_json_prints_one_json_line_without_a_gpu(no_gpu):
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "spin.cu"), "--json"])
    assert r.exit_code == 3
    lines = [l for l in r.output.splitlines() if l.startswith("{")]
    assert len(lines) == 1 and json.loads(lines[0])["status"] == "no_gpu"


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_without_monkeypatching_this_machine_has_no_gpu_and_says_so():
    r = CliRunner().invoke(main, ["eval", str(KERNELS / "spin.cu")])
    assert r.exit_code == 3 and "no NVIDIA GPU found" in r.output


@pytest.mark.parametrize(
    "arch,have,words", [("sm90", A100, "compute capability 9.0"), ("sm100", H100, "compute capability 10.0")]
)
def test_the_wrong_gpu_is_refused_with_exit_3(monkeypatch, arch, have, words):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [have])
    r = CliRunner().invoke(main, ["bench", "--arch", arch, "--kernel", str(KERNELS / "spin.cu")])
    assert r.exit_code == 3 and words in r.output and have.name in r.output


def test_a_missing_gpu_index_is_refused(monkeypatch):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [H100])
    r = CliRunner().invoke(main, ["bench", "--kernel", str(KERNELS / "spin.cu"), "--gpu", "3"])
    assert r.exit_code == 3 and "GPU index 3" in r.output


def test_an_unknown_baseline_is_a_usage_error(monkeypatch):
    monkeypatch.setattr(gpu, "list_gpus", lambda: [H100])
    r = CliRunner().invoke(main, ["bench", "--kernel", str(KERNELS / "spin.cu"), "--baseline", "fa9"])
    assert r.exit_code == 4 and "unknown baseline fa9" in r.output


def test_scenarios_and_env_work_without_a_gpu(no_gpu):
    r = CliRunner().invoke(main, ["scenarios", "--arch", "sm90"])
    assert r.exit_code == 0 and "182 scenarios" in r.output
    r = CliRunner().invoke(main, ["env", "--json"])
    assert r.exit_code == 0
    env = json.loads(r.output)
    assert env["gpu_name"] is None and env["baselines"]["fa3"]["status"] == "not checked (no GPU)"


# ---- missing baselines --------------------------------------------------------------------------


def test_a_missing_baseline_says_how_to_install_it():
    missing = bl.Baseline(
        "ghost",
        "a baseline that is not installed",
        "pip install ghost-attn==1.0",
        probe=lambda: __import__("ghost_attn_module"),
        prepare_fn=lambda m, s: None,
    )
    ok, msg = missing.available()
    assert not ok and msg.startswith("not installed") and msg.endswith("pip install ghost-attn==1.0")
    with pytest.raises(bl.Unsupported) as e:
        missing.prepare(sc.grid()[0])
    assert "pip install ghost-attn" in str(e.value)


def test_a_baseline_whose_import_breaks_is_reported_not_raised():
    def broken():
        raise OSError("libcudart.so.13: cannot open shared object file")

    b = bl.Baseline("broken", "", "pip install broken", probe=broken, prepare_fn=lambda m, s: None)
    assert b.available() == (
        False,
        "not installed (OSError: libcudart.so.13: cannot open shared object file): pip install broken",
    )


@pytest.mark.skipif(HAS_GPU, reason="this machine has a GPU")
def test_the_registered_baselines_are_missing_here_with_their_install_hints():
    assert "pip install fa3-fwd" in bl.get("fa3").available()[1]
    assert "pip install flash-attn-4" in bl.get("fa4").available()[1]
    assert "CUDA build of torch" in bl.get("cudnn").available()[1]


def test_the_worker_fills_a_baselines_column_and_never_raises(monkeypatch):
    """baseline_column is what the worker runs per baseline: on the CPU with baselines that are
    missing, that raise, and one that works."""
    s = sc.Scenario("t", 1, 32, 32, 2, 1, 16, 16, False)
    q, k, v = trial.make_inputs(s, 3, "cpu")
    ref, ref_lse, lowp = reference_pair(q, k, v, False)
    exp = trial.Expected(q, k, v, ref, ref_lse, lowp)

    def attn(q, k, v):
        return ref.to(torch.bfloat16)

    fake = {
        "absent": bl.Baseline("absent", "", "pip install absent", lambda: __import__("absent_mod"), lambda m, x: None),
        "raises": bl.Baseline("raises", "", "", lambda: object(), lambda m, x: lambda *a: 1 / 0),
        "works": bl.Baseline("works", "", "", lambda: object(), lambda m, x: attn),
        "wrong": bl.Baseline("wrong", "", "", lambda: object(), lambda m, x: lambda *a: torch.zeros_like(ref)),
    }
    monkeypatch.setattr(bl, "REGISTRY", fake)
    monkeypatch.setattr(bl.registry, "REGISTRY", fake)  # what get() reads
    cols = {n: baseline_column(n, s, (q, k, v), exp, trial.CheckConfig(), lambda: None) for n in fake}
    assert cols["absent"][0] is None and "pip install absent" in cols["absent"][1]
    assert cols["raises"][0] is None and cols["raises"][1].startswith("unsupported (ZeroDivisionError")
    assert cols["works"][0] is attn and cols["works"][1] == "ok"
    assert cols["wrong"][1].startswith("ok (its output fails the check")


def test_the_report_shows_the_missing_baseline_once_for_its_column(tmp_path):
    import dataclasses

    row = ScenarioResult(
        "d128-h16kv16-s512",
        "d128-h16kv16",
        64,
        512,
        512,
        False,
        False,
        1e12,
        "ok",
        tflops={"kernel": 300.0},
        baselines={"fa3": "not installed (ModuleNotFoundError): pip install fa3-fwd==0.0.3"},
    )
    rows = [row, dataclasses.replace(row, scenario="d128-h16kv16-s1024", seqlen_q=1024, seqlen_k=1024)]
    summary = summarize(rows, "bench", "sm90", {"path": "k.cu", "sha256": "0" * 64}, {}, ["fa3"])
    md = report.markdown(rows, ["fa3"], summary)
    table = md[md.index("## Per scenario") :]
    assert table.count("pip install fa3-fwd==0.0.3") == 1  # once for the column, not on every row
    assert "- fa3: no number in any row: not installed (ModuleNotFoundError): pip install fa3-fwd==0.0.3" in table
    assert "vs fa3: no ratio measured" in md
    report.write_csv(tmp_path / "b.csv", rows, ["fa3"])  # the CSV keeps each row whole
    assert (tmp_path / "b.csv").read_text().count("pip install fa3-fwd") == 2


# ---- rendering saved results --------------------------------------------------------------------


def test_report_rerenders_a_saved_folder_without_a_gpu(tmp_path, no_gpu):
    rows = [
        ScenarioResult.for_scenario(
            s,
            "ok",
            ratio={"fa3": 0.5 + i / 10},
            tflops={"kernel": 100.0},
        )
        for i, s in enumerate(sc.grid()[:4])
    ]
    rows[1].status, rows[1].code, rows[1].reason = "rejected", "late-work", "work left running"
    rows[2].flags = ["jump: too fast"]
    (tmp_path / "bench.jsonl").write_text("".join(json.dumps(r.to_dict()) + "\n" for r in rows) + '{"cut sh')
    (tmp_path / "provenance.json").write_text(json.dumps({"baselines": ["fa3"], "arch": "sm90", "kernel": "k.cu"}))
    r = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert r.exit_code == 0, r.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["scenarios_total"] == 4 and summary["scenarios_correct"] == 3
    assert summary["failures"] == {"late-work": 1} and summary["flagged"] == {rows[2].scenario: ["jump"]}
    assert "not correct: 1 late-work" in r.output and "flagged for a look: 1 scenarios (jump)" in r.output
    md = (tmp_path / "bench.md").read_text()
    assert "rejected (late-work)" in md and "ALARM jump: too fast" in md


# ---- resume ------------------------------------------------------------------------------------


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    monkeypatch.setattr(bench, "require_gpu", lambda arch, index=0: H100)
    monkeypatch.setattr(gpu, "require_gpu", lambda arch, index=0: H100)
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))


def request(tmp_path, kernel="spin.cu", resume=False, **kw):
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps({"record": str(tmp_path / "record.jsonl"), "delay_s": 0.02, "tflops": 50.0, "ratio": {"fa3": 0.8}})
    )
    cfg = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=5, poll_s=0.05))
    return bench.BenchRequest(
        kernel=KERNELS / kernel,
        arch="sm90",
        baselines=["fa3"],
        scenario_filter="d64-h32kv8-*",
        out_dir=tmp_path / "out",
        resume=resume,
        config=cfg,
        worker_command=(sys.executable, str(FAKE), str(plan)),
        **kw,
    )


@pytest.mark.nvcc
def test_an_interrupted_sweep_resumes_where_it_stopped_and_refuses_another_kernel(tmp_path, fake_gpu):
    seen = []

    def stop_after_five(row):
        seen.append(row.scenario)
        if len(seen) == 5:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bench.run_bench(request(tmp_path), on_row=stop_after_five)
    out = tmp_path / "out"
    assert len(read_jsonl(out / "bench.jsonl")) == 5
    seed = json.loads((out / "provenance.json").read_text())["seed"]

    summary = bench.run_bench(request(tmp_path, resume=True))
    rows = read_jsonl(out / "bench.jsonl")
    ids = [s.id for s in sc.select(sc.grid(), "d64-h32kv8-*")]
    assert sorted(r.scenario for r in rows) == sorted(ids) and len(rows) == 14
    workers = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert workers[-1]["scenarios"] == [i for i in ids if i not in seen]
    assert summary["scenarios_total"] == 14 and summary["scenarios_correct"] == 14
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["seed"] == seed and prov["resumed"] and prov["gemm_tflops"] == 100.0
    assert {r.seed for r in rows} == {seed}

    with pytest.raises(bench.ResumeMismatch):
        bench.run_bench(request(tmp_path, kernel="illegal_address.cu", resume=True))
    r = CliRunner().invoke(
        main, ["bench", "--kernel", str(KERNELS / "illegal_address.cu"), "--out", str(out), "--resume"]
    )
    assert r.exit_code == 4 and "another kernel" in r.output


@pytest.mark.nvcc
def test_implausible_rows_and_jump_alarms_reach_the_rows_the_summary_and_the_exit_code(tmp_path, fake_gpu):
    prev = tmp_path / "prev"
    prev.mkdir()
    s = sc.select(sc.grid(), "d64-h32kv8-*")
    (prev / "bench.jsonl").write_text(
        "".join(
            json.dumps(
                ScenarioResult(
                    x.id,
                    x.head_config,
                    x.batch,
                    x.seqlen_q,
                    x.seqlen_k,
                    x.causal,
                    False,
                    x.flops,
                    "ok",
                    ratio={"fa3": 0.4},
                ).to_dict()
            )
            + "\n"
            for x in s[:3]
        )
    )
    req = request(tmp_path, previous=prev)
    req.config = HarnessConfig(
        sweep=req.config.sweep, plausibility=bench.config.PlausibilityConfig(ceiling_factor=0.25)
    )
    summary = bench.run_bench(req)
    rows = read_jsonl(tmp_path / "out" / "bench.jsonl")
    assert all(r.status == r.code == "implausible" and "0.25 x the bf16 GEMM" in r.reason for r in rows)  # 50 > 25
    assert all(any(f.startswith("jump:") for f in r.flags) == (r.scenario in {x.id for x in s[:3]}) for r in rows)
    assert summary["flagged"][s[0].id] == ["jump"] and summary["scenarios_correct"] == 0
    assert summary["failures"] == {"implausible": 14} and summary["geomean"] == {"fa3": None}
    assert summary["ceiling"] == {"gemm_tflops": 100.0, "factor": 0.25, "implausible_above_tflops": 25.0}
    assert summary["schema_version"] == 3
    from kernelseek_suite.evaluate import passed

    assert not passed(summary)  # bench and eval exit 1 on it
    req.config = HarnessConfig(sweep=req.config.sweep)  # the default margin: 50 < 1.1 x 100
    req.out_dir = tmp_path / "out2"
    summary = bench.run_bench(req)
    assert summary["scenarios_correct"] == 14 and summary["geomean"]["fa3"] and "implausible" not in summary["failures"]


class FakeWarming:
    """What fa4_warm.start returns, recorded: the order of events goes to `events`."""

    def __init__(self, events, log):
        self.events, self.log = events, log

    def finish(self):
        from kernelseek_suite.baselines import fa4_warm

        self.events.append("finish")
        return fa4_warm.WarmResult(scenarios=14, called=14, seconds=1.5, jobs=3)

    def stop(self):
        self.events.append("stop")


def fake_fa4_start(monkeypatch, req, events, calls):
    from kernelseek_suite.baselines import fa4_warm

    def start(scns, env, log=None, **kw):
        calls.append(([s.id for s in scns], env.get("CUDA_VISIBLE_DEVICES"), kw))
        events.append("start")
        log.write_text("compiling d64\n")  # what the processes print lands in the run's folder
        return FakeWarming(events, log)

    monkeypatch.setattr(fa4_warm, "start", start)
    real_build = bench._build.build

    def build(*a, **k):
        events.append("build")
        return real_build(*a, **k)

    monkeypatch.setattr(bench._build, "build", build)


@pytest.mark.nvcc
@pytest.mark.parametrize("warm", [True, False])
def test_fa4_is_compiled_while_the_kernel_builds_on_the_timed_scenarios(tmp_path, fake_gpu, monkeypatch, warm):
    events, calls = [], []
    req = request(tmp_path, warm_fa4=warm, extended=True)
    req.baselines = ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)
    bench.run_bench(req)
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    if not warm:
        assert calls == [] and "fa4_warm" not in prov and "start" not in events
        return
    ids = [s.id for s in sc.select(sc.grid(), "d64-h32kv8-*")]
    assert len(calls) == 1 and calls[0][0] == ids  # the timed grid rows only, not the extended cases
    sweep_cfg = req.config.sweep
    assert calls[0][1] == H100.uuid
    assert calls[0][2] == {"jobs": sweep_cfg.fa4_warm_jobs, "timeout_s": sweep_cfg.fa4_warm_timeout_s}
    assert events[:2] == ["start", "build"] and events.count("finish") == 1 and "stop" not in events
    assert prov["fa4_warm"] == {"scenarios": 14, "called": 14, "failed": [], "seconds": 1.5, "jobs": 3}
    assert (tmp_path / "out" / "fa4-warm.log").read_text() == "compiling d64\n"


def test_a_kernel_that_breaks_the_rules_starts_no_fa4_warm_up(tmp_path, fake_gpu, monkeypatch):
    events, calls = [], []
    bad = tmp_path / "bad.cu"
    bad.write_text("#include <cublas_v2.h>\n" + (KERNELS / "spin.cu").read_text())
    req = request(tmp_path)
    req.kernel, req.baselines = bad, ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)
    with pytest.raises(bench.rules.DependencyRuleError):
        bench.run_bench(req)
    assert events == [] and not (tmp_path / "out").exists()


def test_a_build_that_fails_stops_the_fa4_warm_up_and_writes_nothing(tmp_path, fake_gpu, monkeypatch):
    events, calls = [], []
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)

    def broken(*a, **k):
        events.append("build")
        raise bench._build.BuildError("nvcc said no")

    monkeypatch.setattr(bench._build, "build", broken)
    monkeypatch.setattr(bench._build, "nvcc_path", lambda: "/usr/bin/nvcc")
    with pytest.raises(bench._build.BuildError):
        bench.run_bench(req)
    assert events == ["start", "build", "stop"] and not (tmp_path / "out").exists()


def test_without_a_gpu_no_fa4_warm_up_starts_and_the_gpu_error_comes_after_the_build(tmp_path, monkeypatch):
    events, calls = [], []
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)

    def no_gpu(arch, index=0):
        events.append("gpu?")
        raise gpu.NoGPUError("no NVIDIA GPU found")

    monkeypatch.setattr(bench, "require_gpu", no_gpu)
    monkeypatch.setattr(bench._build, "build", lambda *a, **k: events.append("build") or None)
    monkeypatch.setattr(bench._build, "nvcc_path", lambda: "/usr/bin/nvcc")
    with pytest.raises(gpu.NoGPUError):
        bench.run_bench(req)
    assert events == ["gpu?", "build", "gpu?"] and calls == []


def test_a_warm_up_started_ahead_is_finished_by_run_bench_and_none_started_again(tmp_path, fake_gpu, monkeypatch):
    events, calls = [], []
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)
    warming = bench.start_fa4_warm(req)  # as reproduce does, before its GEMM ceiling
    assert events == ["start"] and len(calls) == 1
    bench.run_bench(req, warming=warming)
    assert len(calls) == 1 and events[:2] == ["start", "build"] and events.count("finish") == 1
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["fa4_warm"]["called"] == 14 and (tmp_path / "out" / "fa4-warm.log").read_text() == "compiling d64\n"


def test_a_warm_up_started_ahead_is_stopped_when_the_request_is_refused(tmp_path, fake_gpu, monkeypatch):
    events, calls = [], []
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    fake_fa4_start(monkeypatch, req, events, calls)
    warming = bench.start_fa4_warm(req)
    req.baselines = ["fa3", "fa9"]  # refused by run_bench's own check, after the warm-up started
    with pytest.raises(bench.RequestError):
        bench.run_bench(req, warming=warming)
    assert events == ["start", "stop"] and not warming.log.exists() and not (tmp_path / "out").exists()


# ---- the sweep's worker and the FA4 warm-up ----------------------------------------------------


class SlowWarming(FakeWarming):
    """A warm-up that takes `seconds` to finish, and says when it did."""

    def __init__(self, events, log, seconds):
        super().__init__(events, log)
        self.seconds, self.finished_at = seconds, None

    def finish(self):
        time.sleep(self.seconds)
        res = super().finish()
        self.finished_at = time.time()
        return res

    def kill(self):
        self.events.append("kill")


def stood_in_build(monkeypatch, nvcc=False, seconds=0.0):
    """The kernel's build stood in (the stand-in worker loads no library): no nvcc needed. With
    `nvcc`, the build is said to be here (the sweep's first worker then starts before it) and takes
    `seconds`; returns when it ended."""
    from kernelseek_suite.build import BuildResult

    built = BuildResult("spin.cu", "a" * 64, "sm90", "unused.so", None, "stand-in", [], True)
    ended = {}

    def build(*a, **k):
        time.sleep(seconds)
        ended["at"] = time.time()
        return built

    monkeypatch.setattr(bench._build, "nvcc_path", lambda: "/usr/bin/nvcc" if nvcc else None)
    monkeypatch.setattr(bench._build, "build", build)
    return ended


def spy_early(monkeypatch) -> list:
    """The early workers run_bench starts, kept to look at."""
    started = []
    real = bench.start_early
    monkeypatch.setattr(bench, "start_early", lambda *a, **k: started.append(real(*a, **k)) or started[-1])
    return started


def test_the_worker_starts_during_the_fa4_warm_up_and_measures_after_it(tmp_path, fake_gpu, monkeypatch):
    from kernelseek_suite.baselines import fa4_warm

    stood_in_build(monkeypatch)
    events, warmings = [], []

    def start(scns, env, log=None, **kw):
        log.write_text("compiling d64\n")
        warmings.append(SlowWarming(events, log, 2.0))
        return warmings[0]

    monkeypatch.setattr(fa4_warm, "start", start)
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    phases = []
    bench.run_bench(req, on_phase=lambda name: phases.append((name, time.time())))
    warming = warmings[0]
    (w,) = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    # started while the warm-up ran; the hello's ceiling (and every row after it) only once it ended
    assert w["started"] < warming.finished_at <= w["measured"] and w["open_when_measured"]
    assert w["gate"]["timeout_s"] == req.config.sweep.fa4_warm_gate_timeout_s
    assert not Path(w["gate"]["path"]).parent.exists()  # the gate's folder goes with the run
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["worker_gate"]["waited_s"] > 0.5 and prov["worker_gate"]["timed_out"] is False
    assert prov["worker_gate"]["open_at_hello"] is True
    assert prov["fa4_warm"]["called"] == 14 and (tmp_path / "out" / "fa4-warm.log").read_text() == "compiling d64\n"
    assert [n for n, _ in phases] == ["build_done", "fa4_warm_done", "worker_ready"]
    assert phases[1][1] <= phases[2][1] and events == ["finish"]
    assert len(read_jsonl(tmp_path / "out" / "bench.jsonl")) == 14


def test_without_fa4_the_worker_gets_no_gate(tmp_path, fake_gpu, monkeypatch):
    stood_in_build(monkeypatch)
    phases = []
    bench.run_bench(request(tmp_path), on_phase=phases.append)
    (w,) = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert w["gate"] is None and w["waited"] is None
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert "worker_gate" not in prov and "fa4_warm" not in prov
    assert phases == ["build_done", "worker_ready"]


def test_a_sweep_cut_short_kills_the_fa4_warm_up_and_waits_for_it(tmp_path, fake_gpu, monkeypatch):
    from kernelseek_suite.baselines import fa4_warm

    stood_in_build(monkeypatch)
    events = []
    monkeypatch.setattr(fa4_warm, "start", lambda scns, env, log=None, **kw: SlowWarming(events, log, 0.5))
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]

    def cut(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_sweep", cut)
    with pytest.raises(KeyboardInterrupt):
        bench.run_bench(req)
    assert events == ["kill", "finish"]  # killed, then its thread had ended before run_bench returned
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["fa4_warm"]["called"] == 14


# ---- the sweep's first worker, started before the kernel's build -----------------------------------


def fa4_request(tmp_path, monkeypatch, seconds=0.3):
    from kernelseek_suite.baselines import fa4_warm

    monkeypatch.setattr(fa4_warm, "start", lambda scns, env, log=None, **kw: SlowWarming([], log, seconds))
    req = request(tmp_path)
    req.baselines = ["fa3", "fa4"]
    return req


def test_with_nvcc_the_worker_imports_during_the_build_and_loads_the_library_after_it(tmp_path, fake_gpu, monkeypatch):
    build = stood_in_build(monkeypatch, nvcc=True, seconds=1.0)
    early = spy_early(monkeypatch)
    req = fa4_request(tmp_path, monkeypatch)
    phases = []
    bench.run_bench(req, on_phase=lambda name: phases.append((name, time.time())))
    (w,) = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert len(early) == 1 and w["pid"] == early[0].proc.pid
    # started before the build ended, its library only after, and measured after the FA4 warm-up
    assert w["started"] < build["at"] <= w["built"] <= w["measured"] and w["library"] == "unused.so"
    assert w["open_when_measured"] and w["gate"]["timeout_s"] == req.config.sweep.fa4_warm_gate_timeout_s
    assert [n for n, _ in phases] == ["build_done", "fa4_warm_done", "worker_ready"]
    assert len(read_jsonl(tmp_path / "out" / "bench.jsonl")) == 14
    assert "during the kernel's build" in (tmp_path / "out" / "worker.log").read_text()
    assert not early[0].log.exists() and not early[0].build_gate.folder.exists()


def test_a_build_that_fails_kills_the_early_worker_and_writes_nothing(tmp_path, fake_gpu, monkeypatch):
    early = spy_early(monkeypatch)
    req = fa4_request(tmp_path, monkeypatch)
    alive = []

    def broken(*a, **k):
        time.sleep(0.3)
        alive.append(early[0].proc.poll() is None)
        raise bench._build.BuildError("nvcc said no")

    monkeypatch.setattr(bench._build, "build", broken)
    monkeypatch.setattr(bench._build, "nvcc_path", lambda: "/usr/bin/nvcc")
    with pytest.raises(bench._build.BuildError, match="nvcc said no"):
        bench.run_bench(req)
    (worker,) = early
    assert alive == [True] and worker.proc.returncode == -signal.SIGKILL  # killed and reaped
    assert not (tmp_path / "out").exists() and not (tmp_path / "record.jsonl").exists()
    assert not worker.log.exists() and not worker.build_gate.folder.exists()
    assert not Path(worker.build_gate.job()["path"]).exists()


def test_without_nvcc_or_without_the_warm_up_no_worker_starts_before_the_build(tmp_path, fake_gpu, monkeypatch):
    early = spy_early(monkeypatch)
    stood_in_build(monkeypatch, nvcc=False)
    bench.run_bench(fa4_request(tmp_path, monkeypatch))
    stood_in_build(monkeypatch, nvcc=True)
    req = request(tmp_path)
    req.out_dir = tmp_path / "out2"
    bench.run_bench(req)
    assert early == []
    workers = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    assert len(workers) == 2 and all(w["build_gate"] is None and w["library"] == "unused.so" for w in workers)
