"""The gate a sweep's worker waits at before it measures anything (harness/gate.py), on the CPU: the
wait itself, the sweep's side with the stand-in worker (fake_worker.py, which waits as the real one
does), and the real worker's order of start-up, wait and measurements with its GPU parts stood in."""

import json
import os
import signal
import sys
import threading
import time
import types
from pathlib import Path

import pytest

from kernelseek_suite import scenarios as sc
from kernelseek_suite.config import HarnessConfig, SweepConfig
from kernelseek_suite.harness.gate import BuildNotDone, Gate, await_build, wait_at_gate
from kernelseek_suite.harness.sweep import SweepSpec, run_sweep, start_early

FAKE = Path(__file__).parent / "fake_worker.py"
FAST = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=5.0, worker_start_timeout_s=20.0, poll_s=0.05))
SCN = sc.select(sc.grid(), "d128-h16kv4-*")[:4]


@pytest.fixture
def gate():
    g = Gate(timeout_s=20.0)
    yield g
    g.remove()


def open_after(g: Gate, seconds: float) -> threading.Timer:
    t = threading.Timer(seconds, g.open)
    t.start()
    return t


# ---- the wait -------------------------------------------------------------------------------------


def test_no_gate_no_wait():
    called = []
    assert wait_at_gate(None, lambda: called.append(1)) is None and called == []


def test_an_open_gate_is_passed_at_once_without_saying_waiting(gate):
    gate.open()
    called = []
    got = wait_at_gate(gate.job(), lambda: called.append(1))
    assert got == {"waited_s": 0.0, "timed_out": False} and called == []


def test_the_wait_ends_when_the_gate_opens(gate):
    called = []
    t0 = time.monotonic()
    open_after(gate, 0.4)
    got = wait_at_gate(gate.job(), lambda: called.append(1))
    assert called == [1] and not got["timed_out"] and gate.path.exists()
    assert 0.3 <= got["waited_s"] <= time.monotonic() - t0 + 0.01 < 5


def test_a_gate_that_never_opens_is_passed_after_its_timeout(tmp_path):
    g = Gate(timeout_s=0.3)
    try:
        t0 = time.monotonic()
        got = wait_at_gate(g.job())
        assert got["timed_out"] and 0.3 <= got["waited_s"] < 2 and time.monotonic() - t0 < 2
        assert not g.is_open()
    finally:
        g.remove()
    assert not g.folder.exists()


def test_the_gate_timeout_is_the_warm_ups_own_plus_a_margin():
    cfg = SweepConfig(fa4_warm_timeout_s=100.0, fa4_warm_gate_margin_s=25.0)
    assert cfg.fa4_warm_gate_timeout_s == 125.0
    default = SweepConfig()
    assert default.fa4_warm_gate_timeout_s > default.fa4_warm_timeout_s


# ---- the sweep's side, with the stand-in worker ----------------------------------------------------


def sweep(tmp_path, gate, plan=None, config=FAST):
    plan = dict(plan or {})
    plan["record"] = str(tmp_path / "record.jsonl")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    hellos = []
    spec = SweepSpec(
        library="unused.so",
        scenarios=list(SCN),
        baselines=[],
        seed=1,
        config=config,
        worker_log=tmp_path / "worker.log",
        worker_command=(sys.executable, str(FAKE), str(tmp_path / "plan.json")),
        gate=gate,
    )
    rows = run_sweep(spec, on_hello=hellos.append)
    workers = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    return rows, workers, hellos


def test_the_worker_starts_at_once_and_measures_only_once_the_gate_is_open(tmp_path, gate):
    opener = open_after(gate, 1.0)
    rows, workers, hellos = sweep(tmp_path, gate)
    opener.join()
    assert [r.status for r in rows] == ["ok"] * len(SCN)
    (w,) = workers
    assert w["gate"] == gate.job()
    assert w["started"] < gate.opened_at <= w["measured"] and w["open_when_measured"]
    assert w["waited"]["waited_s"] > 0.3 and not w["waited"]["timed_out"]
    # the parent's own record beside the worker's
    assert hellos[0]["gate"] == {**w["waited"], "open_at_hello": True}


def test_waiting_at_the_gate_is_not_a_hang_at_start(tmp_path, gate):
    """The worker's start-up limit counts up to the gate; the wait has the gate's own limit."""
    cfg = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=5.0, worker_start_timeout_s=1.0, poll_s=0.05))
    opener = open_after(gate, 2.5)
    rows, workers, _ = sweep(tmp_path, gate, config=cfg)
    opener.join()
    assert [r.status for r in rows] == ["ok"] * len(SCN) and len(workers) == 1
    assert workers[0]["waited"]["waited_s"] > 1.5


def test_a_gate_that_does_not_open_in_time_is_passed_and_said(tmp_path):
    g = Gate(timeout_s=0.5)
    try:
        rows, workers, hellos = sweep(tmp_path, g)
    finally:
        g.remove()
    assert [r.status for r in rows] == ["ok"] * len(SCN)
    (w,) = workers
    assert w["waited"]["timed_out"] and w["waited"]["waited_s"] >= 0.5 and not w["open_when_measured"]
    assert hellos[0]["gate"]["timed_out"] and hellos[0]["gate"]["open_at_hello"] is False


@pytest.mark.parametrize("opens", [True, False])
def test_a_worker_started_after_a_crash_does_not_wait_again(tmp_path, opens):
    """Once a worker has passed the gate (open, or past its timeout), the next one gets none."""
    g = Gate(timeout_s=1.0)
    opener = open_after(g, 0.3) if opens else None
    try:
        rows, workers, hellos = sweep(tmp_path, g, {"actions": {SCN[1].id: "segv"}})
    finally:
        if opener:
            opener.join()
        g.remove()
    assert [r.status for r in rows] == ["ok", "crash", "ok", "ok"]
    first, second = workers
    assert first["gate"] == g.job() and first["waited"]["timed_out"] is (not opens)
    assert second["gate"] is None and second["waited"] is None
    assert second["measured"] - second["started"] < 0.9  # no second wait
    assert len(hellos) == 2 and "gate" in hellos[0] and hellos[1].get("gate") is None


def test_a_sweep_without_a_gate_sends_none(tmp_path):
    rows, workers, hellos = sweep(tmp_path, None)
    assert [r.status for r in rows] == ["ok"] * len(SCN)
    assert workers[0]["gate"] is None and workers[0]["waited"] is None and hellos[0].get("gate") is None


# ---- the real worker: nothing measured before the gate ------------------------------------------


class Chan:
    def __init__(self, log):
        self.log = log

    def emit(self, kind, **payload):
        self.log.append((kind, payload))


@pytest.fixture
def stood_in_worker(monkeypatch):
    """The real worker's run_job with its GPU parts stood in: what it measures is logged with the
    gate's state at that moment."""
    torch = pytest.importorskip("torch")
    from kernelseek_suite import baselines as bl
    from kernelseek_suite import contract
    from kernelseek_suite.harness import device_state, timing, trial, worker
    from kernelseek_suite.results import STATUS_WRONG

    log = []
    state = {"gate": None, "build_gate": None}

    def gate_open():
        return state["gate"] is not None and state["gate"].path.exists()

    def built():
        return state["build_gate"] is None or state["build_gate"].path.exists()

    def no_driver():  # the device state is read here, then found unreachable
        log.append(("device state", built()))
        raise OSError("no driver here")

    def library(path):
        log.append(("library", gate_open()))
        state["library"] = (path, built())
        return object()

    monkeypatch.setattr(torch.cuda, "Stream", lambda device=None: types.SimpleNamespace(cuda_stream=0))
    monkeypatch.setattr(torch.cuda, "set_stream", lambda s: None)
    monkeypatch.setattr(
        torch.cuda, "get_device_properties", lambda d: types.SimpleNamespace(name="stand-in", multi_processor_count=1)
    )
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_push", lambda name: None)
    monkeypatch.setattr(torch.cuda.nvtx, "range_pop", lambda: None)
    monkeypatch.setattr(device_state, "CudaDriver", no_driver)
    monkeypatch.setattr(contract, "KernelLibrary", library)

    def gemm(n):
        log.append(("gemm", gate_open()))
        return 100.0

    def check(scn, seed, launch, sync, dev, cfg, dist="standard"):
        log.append(("scenario", gate_open()))
        return trial.Verdict(STATUS_WRONG, "stand-in", "not run"), None

    monkeypatch.setattr(worker, "measure_gemm_tflops", gemm)
    monkeypatch.setattr(trial, "check_scenario", check)
    monkeypatch.setattr(timing, "L2Flusher", lambda nbytes: lambda: None)
    monkeypatch.setattr(timing, "idle_gap_ms", lambda: log.append(("idle gap", gate_open())) or 0.0)
    stand_in = bl.Baseline("stand-in", "", "", lambda: log.append(("import", gate_open())) or object(), None)
    monkeypatch.setitem(bl.REGISTRY, "stand-in", stand_in)

    def run(g: Gate, baselines=(), build_gate: Gate | None = None):
        """With `build_gate`: a worker started during the build, whose job comes through that gate."""
        state["gate"], state["build_gate"] = g, build_gate
        built_job = {
            "library": "stand-in.so",
            "seed": 1,
            "scenarios": [{"scenario": s.to_dict(), "time": True} for s in SCN[:2]],
        }
        job = {"baselines": list(baselines), "gate": g.job()}
        job.update({"build_gate": build_gate.job()} if build_gate is not None else built_job)
        rc = worker.run_job(job, Chan(log))
        return rc, log

    run.built_job = lambda: {"library": "built.so", "seed": 1, "scenarios": [{"scenario": SCN[0].to_dict()}]}
    run.state, run.log = state, log
    return run


def test_the_real_worker_loads_its_library_and_baselines_first_and_measures_only_after_the_gate(stood_in_worker, gate):
    opener = open_after(gate, 0.5)
    rc, log = stood_in_worker(gate, baselines=["stand-in"])
    opener.join()
    assert rc == 0
    kinds = [k for k, _ in log]
    assert kinds[:5] == ["device state", "import", "library", "waiting", "gemm"] and kinds.count("scenario") == 2
    assert kinds[-1] == "done"
    assert log[1] == ("import", False) and log[2] == ("library", False)  # before the gate opened
    measured = [(k, v) for k, v in log if k in ("gemm", "idle gap", "scenario")]
    assert measured and all(v is True for _, v in measured), measured
    hello = next(p for k, p in log if k == "hello")
    assert hello["gemm_tflops"] == 100.0 and hello["gate"]["waited_s"] >= 0.4 and not hello["gate"]["timed_out"]


def test_the_real_worker_goes_on_when_the_gate_times_out(stood_in_worker):
    g = Gate(timeout_s=0.3)
    try:
        rc, log = stood_in_worker(g)
    finally:
        g.remove()
    assert rc == 0
    hello = next(p for k, p in log if k == "hello")
    assert hello["gate"]["timed_out"] and hello["gate"]["waited_s"] >= 0.3 and hello["gemm_tflops"] == 100.0
    assert [k for k, _ in log].count("scenario") == 2


def test_the_real_worker_started_during_the_build_imports_then_waits_for_its_library(stood_in_worker, gate):
    """The device state is read and the baselines imported while the kernel builds; the library is
    loaded only once the build gate has opened, with the library, seed and scenarios it brings."""
    build_gate = Gate(timeout_s=20.0)
    try:
        build_done = threading.Timer(0.4, lambda: build_gate.open(stood_in_worker.built_job()))
        build_done.start()
        open_after(gate, 0.6)
        rc, log = stood_in_worker(gate, baselines=["stand-in"], build_gate=build_gate)
        build_done.join()
    finally:
        build_gate.remove()
    assert rc == 0
    assert log[:3] == [("device state", False), ("import", False), ("library", False)]
    assert stood_in_worker.state["library"] == ("built.so", True)  # loaded after the build gate opened
    kinds = [k for k, _ in log]
    assert kinds[3:5] == ["waiting", "gemm"] and kinds.count("scenario") == 1 and kinds[-1] == "done"


def test_a_worker_whose_build_never_ends_loads_nothing_and_measures_nothing(stood_in_worker, gate):
    build_gate = Gate(timeout_s=0.3)
    try:
        with pytest.raises(BuildNotDone):
            stood_in_worker(gate, baselines=["stand-in"], build_gate=build_gate)
    finally:
        build_gate.remove()
    assert [k for k, _ in stood_in_worker.log] == ["device state", "import"]  # nothing loaded or measured
    assert "library" not in stood_in_worker.state


def test_the_build_gate_brings_the_rest_of_the_job_whole(tmp_path):
    g = Gate(timeout_s=5.0)
    try:
        job = {"baselines": ["fa3"], "build_gate": g.job()}
        threading.Timer(0.2, lambda: g.open({"library": "k.so", "seed": 7, "scenarios": []})).start()
        got = await_build(job)
        assert got == {**job, "library": "k.so", "seed": 7, "scenarios": []}
        assert not (g.folder / "open.tmp").exists()  # written under another name, then renamed
    finally:
        g.remove()
    assert await_build({"library": "k.so"}) == {"library": "k.so"}  # a job without one is whole


# ---- the sweep's first worker, started during the build (sweep.start_early) ------------------------


def early_sweep(tmp_path, gate, plan=None, build_s=0.5):
    """A worker started early, the build stood in by a wait, then the sweep that takes it over."""
    plan = dict(plan or {})
    plan["record"] = str(tmp_path / "record.jsonl")
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    command = (sys.executable, str(FAKE), str(tmp_path / "plan.json"))
    early = start_early([], FAST, 0, None, command, gate)
    try:
        time.sleep(build_s)
        alive_during_build = early.proc.poll() is None
        built_at = time.time()
        spec = SweepSpec(
            library="built.so",
            scenarios=list(SCN),
            baselines=[],
            seed=1,
            config=FAST,
            worker_log=tmp_path / "worker.log",
            worker_command=command,
            gate=gate,
            early=early,
        )
        rows = run_sweep(spec)
    finally:
        early.stop()
    workers = [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]
    return rows, workers, early, alive_during_build, built_at


def test_an_early_worker_gets_its_library_from_the_sweep_and_its_log_joins_the_runs(tmp_path, gate):
    gate.open()
    rows, workers, early, alive, built_at = early_sweep(tmp_path, gate)
    assert alive and [r.status for r in rows] == ["ok"] * len(SCN)
    (w,) = workers
    assert w["started"] < built_at <= w["built"] and w["library"] == "built.so"
    assert w["build_gate"] is not None and w["gate"] == gate.job() and w["scenarios"] == [s.id for s in SCN]
    assert "during the kernel's build" in (tmp_path / "worker.log").read_text()
    assert not early.log.exists() and not early.build_gate.folder.exists()


def test_a_worker_started_after_an_early_one_crashed_gets_the_library_and_no_gate(tmp_path, gate):
    gate.open()
    rows, workers, _, _, _ = early_sweep(tmp_path, gate, {"actions": {SCN[1].id: "segv"}})
    assert [r.status for r in rows] == ["ok", "crash", "ok", "ok"]
    first, second = workers
    assert first["build_gate"] is not None and first["gate"] == gate.job()
    assert second["build_gate"] is None and second["gate"] is None and second["library"] == "built.so"
    assert second["scenarios"] == [s.id for s in SCN[2:]]
    log = (tmp_path / "worker.log").read_text()
    assert log.index("during the kernel's build") < log.index("2 scenarios to go")  # in the order they ran


def test_an_early_worker_that_is_not_taken_over_is_stopped_whole(tmp_path, gate):
    (tmp_path / "plan.json").write_text(json.dumps({"record": str(tmp_path / "record.jsonl")}))
    command = (sys.executable, str(FAKE), str(tmp_path / "plan.json"))
    early = start_early([], FAST, 0, None, command, gate)
    time.sleep(0.3)
    assert early.proc.poll() is None and early.log.exists()
    early.stop()
    assert early.proc.returncode == -signal.SIGKILL
    assert not early.log.exists() and not early.build_gate.folder.exists()
    with pytest.raises(OSError):
        os.fstat(early.chan.read_fd)  # its channel closed
    early.stop()  # twice is harmless
    assert not (tmp_path / "record.jsonl").exists()  # it never got past its build gate
