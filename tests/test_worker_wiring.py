"""The real worker's wiring on the CPU (harness/worker.py, run_job), its GPU parts stood in: the L2
flush it builds and hands to the timing loop, the timing settings (the launch lead) it passes on,
and the input distributions it checks and times in the job's order."""

import random
import types

import pytest

import fakes
from kernelseek_suite.config import CheckConfig, TimingConfig
from kernelseek_suite.scenarios import Scenario

torch = pytest.importorskip("torch")

SCN = Scenario("wired", 2, 64, 64, 4, 2, 32, 32, False)
CFG = CheckConfig(red_zone_bytes=4096)
H100_H200_L2_BYTES = 50 << 20


class Chan:
    def __init__(self):
        self.log = []

    def emit(self, kind, **payload):
        self.log.append((kind, payload))

    def rows(self):
        return [p["row"] for k, p in self.log if k == "result"]


@pytest.fixture
def worker_run(monkeypatch):
    """run(job) -> (rc, channel, seen): the real run_job, with CUDA, the driver, the library, the GEMM
    and the timing loop stood in; `seen` holds what reached the stand-ins."""
    from kernelseek_suite import contract
    from kernelseek_suite.harness import device_state, timed, timing, trial, worker
    from kernelseek_suite.harness.timing import TimingStats

    seen = {"flushers": [], "timed": [], "checked": []}
    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(torch.cuda, "set_stream", lambda s: None)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(name="stand-in", multi_processor_count=1)
    )
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)
    monkeypatch.setattr(device_state, "CudaDriver", lambda: (_ for _ in ()).throw(OSError("no driver here")))
    monkeypatch.setattr(contract, "KernelLibrary", lambda path: object())
    monkeypatch.setattr(worker, "measure_gemm_tflops", lambda n: 1000.0)
    monkeypatch.setattr(timing, "idle_gap_ms", lambda: 0.0)

    class Flusher:
        def __init__(self, nbytes):
            self.nbytes = nbytes
            seen["flushers"].append(self)

    monkeypatch.setattr(timing, "L2Flusher", Flusher)
    honest = fakes.honest(SCN)
    bad_on = set()

    def check_scenario(scn, seed, launch, sync, dev, cfg, dist):
        seen["checked"].append(dist)
        return trial.check_scenario.__wrapped__(scn, seed, honest, sync, "cpu", CFG, dist)

    def check_distribution(scn, dist, seed, launch, sync, dev, cfg, rng):
        seen["checked"].append(dist)
        kernel = fakes.writes_nothing(scn) if dist in bad_on else honest
        return real_check_distribution(scn, dist, seed, kernel, sync, "cpu", CFG, random.Random(0))

    real_check_distribution = trial.check_distribution
    check_scenario.__wrapped__ = trial.check_scenario  # type: ignore[attr-defined]
    monkeypatch.setattr(trial, "check_scenario", check_scenario)
    monkeypatch.setattr(trial, "check_distribution", check_distribution)

    def time_scenario(scn, states, launch, baselines, seed, rng, dev, timing_cfg, check_cfg, sync, flush, gap, **kw):
        seen["timed"].append({"states": states, "flush": flush, "timing": timing_cfg, "gap": gap})
        st = TimingStats(1.0, 1.0, 1.0, 0.0, 5)
        return timed.TimedOutcome(
            {"kernel": st}, trial.Verdict(), None, {s.distribution: {"kernel": st} for s in states}
        )

    monkeypatch.setattr(timed, "time_scenario", time_scenario)

    def run(job_extra: dict, fail_on=()):
        bad_on.clear()
        bad_on.update(fail_on)
        chan = Chan()
        job = {
            "baselines": [],
            "gate": None,
            "library": "stand-in.so",
            "seed": 5,
            "scenarios": [{"scenario": SCN.to_dict(), "time": True}],
            "timing": {"launch_lead_ms": 0.75},
        }
        job.update(job_extra)
        seen["checked"].clear()
        seen["timed"].clear()
        return worker.run_job(job, chan), chan, seen

    return run


def test_the_sweep_flushes_more_than_twice_the_l2_behind_a_half_millisecond_lead():
    cfg = TimingConfig()
    assert cfg.l2_flush_bytes == 256 << 20 and cfg.l2_flush_bytes >= 2 * H100_H200_L2_BYTES
    assert cfg.launch_lead_ms == 0.5


def test_the_worker_builds_the_flush_of_its_timing_settings_and_hands_it_to_the_timing_loop(worker_run):
    rc, chan, seen = worker_run({"distributions": ["standard"], "timing": {"l2_flush_bytes": 12345}})
    assert rc == 0 and chan.rows()[0]["status"] == "ok"
    (flusher,) = seen["flushers"]
    assert flusher.nbytes == 12345
    (call,) = seen["timed"]
    assert call["flush"] is flusher and call["gap"] == 0.0
    rc, chan, seen = worker_run({"distributions": ["standard"]})
    assert seen["flushers"][-1].nbytes == TimingConfig().l2_flush_bytes


def test_the_launch_lead_of_the_job_reaches_the_timing_loop(worker_run):
    rc, chan, seen = worker_run({"distributions": ["standard"], "timing": {"launch_lead_ms": 0.75}})
    assert seen["timed"][0]["timing"].launch_lead_ms == 0.75
    rc, chan, seen = worker_run({"distributions": ["standard"], "timing": {}})
    assert seen["timed"][0]["timing"].launch_lead_ms == TimingConfig().launch_lead_ms


def test_every_distribution_is_checked_then_timed_in_the_jobs_order(worker_run):
    order = ["standard", "rising", "wide", "llm"]
    rc, chan, seen = worker_run({"distributions": order})
    assert rc == 0 and seen["checked"] == order
    assert [s.distribution for s in seen["timed"][0]["states"]] == order
    row = chan.rows()[0]
    assert list(row["checks_by_distribution"]) == order and row["status"] == "ok"
    assert list(row["times_ms_by_distribution"]) == order


def test_a_kernel_wrong_on_one_distribution_is_wrong_there_and_not_timed(worker_run):
    rc, chan, seen = worker_run({"distributions": ["standard", "wide", "llm", "rising"]}, fail_on={"llm"})
    row = chan.rows()[0]
    assert row["status"] == "wrong" and row["code"] == "unwritten" and row["reason"].startswith("on llm inputs: ")
    assert seen["checked"] == ["standard", "wide", "llm"] and seen["timed"] == []
    assert list(row["checks_by_distribution"]) == ["standard", "wide"]


def test_a_job_without_distributions_checks_and_times_the_primary_one(worker_run):
    rc, chan, seen = worker_run({})
    assert seen["checked"] == ["standard"] and [s.distribution for s in seen["timed"][0]["states"]] == ["standard"]
