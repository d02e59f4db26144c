"""What `reproduce` overlaps: the kernel's build beside the first GEMM ceiling, and the second
ceiling's child started during the sweep, held at a gate off the GPU until the sweep has ended."""

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from kernelseek_suite import build, config, run
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.reproduce import gemm, pipeline
from kernelseek_suite.reproduce.gemm import CeilingError, GatedChild, GateTimedOut, GemmCeiling, measure_in_child
from kernelseek_suite.reproduce.pipeline import ReproduceRequest
from synthetic_results import as_run_local

ROOT = config.REPO_ROOT


def _checkout(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "kernels" / "reference").mkdir(parents=True)
    (root / config.REFERENCE_KERNEL).write_bytes((ROOT / config.REFERENCE_KERNEL).read_bytes())
    return root


def _gone(pid: int, within_s: float = 20) -> bool:
    """The process has exited (a zombie not yet reaped by its new parent counts as exited)."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state in ("Z", "X"):
            return True
        time.sleep(0.05)
    return False


def _ceiling(tflops: float, reps: int = 3) -> GemmCeiling:
    return GemmCeiling(tflops, 1.6, 1.5, 1.7, 8192, reps, "H200", "2.11.0")


def test_the_gated_child_measures_only_once_its_gate_is_open():
    # how long a child takes to import torch and measure, without a gate: the gated one must still be
    # waiting well past that
    t0 = time.monotonic()
    measure_in_child(n=64, reps=2, device="cpu", timeout_s=120)
    alone_s = time.monotonic() - t0
    child = GatedChild(n=64, reps=2, device="cpu", gate_timeout_s=600)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            child.proc.wait(timeout=2 * alone_s + 1)
        assert not child.gate.path.exists()
        c = child.measure(timeout_s=120)
    finally:
        child.kill()
    assert c.device == "cpu" and c.n == 64 and c.reps == 2 and c.tflops > 0
    assert child.proc.returncode == 0 and not child.gate.folder.exists()  # the gate's folder is gone too


def test_a_killed_gated_child_is_reaped():
    child = GatedChild(n=64, reps=2, device="cpu", gate_timeout_s=600)
    child.kill()
    assert child.proc.returncode is not None and _gone(child.proc.pid, within_s=1)
    assert not child.gate.folder.exists()


def test_the_gated_child_dies_with_its_parent(tmp_path):
    """PDEATHSIG: a parent killed outright (SIGKILL, no cleanup of its own) leaves no child waiting."""
    script = (
        "import sys, time\n"
        "from kernelseek_suite.reproduce.gemm import GatedChild\n"
        "c = GatedChild(n=64, reps=2, device='cpu', gate_timeout_s=600)\n"
        "print(c.proc.pid, flush=True)\n"
        "time.sleep(600)\n"
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        pid = int(parent.stdout.readline())
        assert not _gone(pid, within_s=0.5)
    finally:
        parent.kill()
        parent.wait()
    assert _gone(pid)


def test_a_gate_that_never_opens_ends_the_child_without_measuring():
    child = GatedChild(n=64, reps=2, device="cpu", gate_timeout_s=0.2)
    child.proc.wait(timeout=120)
    assert child.proc.returncode == gemm.GATE_TIMED_OUT
    with pytest.raises(GateTimedOut):
        child.measure()
    assert child.proc.stdout is not None and child.proc.stdout.closed


def test_a_failed_gated_child_is_a_ceiling_error():
    child = GatedChild(n=64, reps=2, device="no-such-device", gate_timeout_s=600)
    with pytest.raises(CeilingError, match="exited with 1"):
        child.measure(timeout_s=120)


class _Child:
    """Stands in for GatedChild in the pipeline tests."""

    made: list["_Child"] = []

    def __init__(self, idx, reps, gate_timeout_s, result=None):
        self.result, self.killed, self.measured = result, False, False
        _Child.made.append(self)

    def measure(self):
        self.measured = True
        if isinstance(self.result, Exception):
            raise self.result
        return self.result

    def kill(self):
        self.killed = True


def _stand_in(monkeypatch, result, events: list) -> None:
    _Child.made = []
    monkeypatch.setattr(gemm, "GatedChild", lambda idx, reps, gate_timeout_s: _Child(idx, reps, gate_timeout_s, result))

    def fresh(idx=0, reps=3):
        events.append("fresh")
        return _ceiling(640.0, reps)

    monkeypatch.setattr(gemm, "measure_in_child", fresh)


def test_the_second_ceiling_child_starts_at_the_first_worker_and_only_once(monkeypatch):
    events: list = []
    _stand_in(monkeypatch, _ceiling(655.0), events)
    after = pipeline.CeilingAfter(ReproduceRequest(), events.append)
    for name in ("build_done", "fa4_warm_done"):
        after.on_phase(name)
    assert _Child.made == []
    after.on_phase("worker_ready")
    after.on_phase("worker_ready")  # a fresh worker after a crash
    assert len(_Child.made) == 1
    assert after.measure()["tflops"] == 655.0 and "fresh" not in events
    assert _Child.made[0].measured and _Child.made[0].killed


@pytest.mark.parametrize(
    "result, expect",
    [
        (
            CeilingError("the GEMM ceiling child exited with 1: boom"),
            {"error": "the GEMM ceiling child exited with 1: boom"},
        ),
        (GateTimedOut("gave up"), {"tflops": 640.0}),  # then a fresh child measures
    ],
)
def test_the_second_ceiling_child_failing(monkeypatch, result, expect):
    events: list = []
    _stand_in(monkeypatch, result, events)
    after = pipeline.CeilingAfter(ReproduceRequest(), lambda msg: None)
    after.on_phase("worker_ready")
    got = after.measure()
    assert {k: got.get(k) for k in expect} == expect
    assert events == (["fresh"] if isinstance(result, GateTimedOut) else [])


def test_without_a_worker_a_fresh_child_measures_the_second_ceiling(monkeypatch):
    events: list = []
    _stand_in(monkeypatch, _ceiling(655.0), events)
    got = pipeline.CeilingAfter(ReproduceRequest(), lambda msg: None).measure()
    assert got["tflops"] == 640.0 and events == ["fresh"] and _Child.made == []


def _stand_in_run(monkeypatch, run_bench) -> None:
    from kernelseek_suite import bench

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    monkeypatch.setattr(bench, "start_fa4_warm", lambda req: None)
    monkeypatch.setattr(gemm, "measure_in_child", lambda idx=0, reps=3: _ceiling(650.0, reps))
    monkeypatch.setattr(bench, "run_local", as_run_local(run_bench))


@pytest.mark.parametrize("failure", [KeyboardInterrupt, RuntimeError])
def test_a_sweep_cut_short_leaves_no_ceiling_child(tmp_path, monkeypatch, failure):
    """The real child, held at its gate: the run's failure kills it before it touches the GPU."""
    started: list[GatedChild] = []

    def child(idx, reps, gate_timeout_s):
        started.append(GatedChild(idx, n=64, reps=2, device="cpu", gate_timeout_s=gate_timeout_s))
        return started[-1]

    def cut(req, on_row=None, on_start=None, warming=None, on_phase=None):
        on_phase("worker_ready")
        raise failure

    _stand_in_run(monkeypatch, cut)
    monkeypatch.setattr(gemm, "GatedChild", child)
    root = _checkout(tmp_path)
    with pytest.raises(failure):
        pipeline.run_native(ReproduceRequest(arch="sm90", root=root))
    assert len(started) == 1 and _gone(started[0].proc.pid, within_s=1)
    assert not started[0].gate.path.exists()  # never opened
    assert json.loads((root / "results" / "sm90" / "gemm_ceiling.json").read_text())["before"]["tflops"] == 650.0


def test_a_failed_second_ceiling_is_recorded_as_before(tmp_path, monkeypatch):
    from synthetic_results import stand_in_bench_outputs

    def sweep(req, on_row=None, on_start=None, warming=None, on_phase=None):
        on_phase("worker_ready")
        return stand_in_bench_outputs(req)

    _stand_in_run(monkeypatch, sweep)
    _Child.made = []
    error = CeilingError("the GEMM ceiling child exited with 1: CUDA error")
    monkeypatch.setattr(gemm, "GatedChild", lambda idx, reps, gate_timeout_s: _Child(idx, reps, gate_timeout_s, error))
    root = _checkout(tmp_path)
    out = pipeline.run_native(ReproduceRequest(arch="sm90", root=root))
    assert out.status == "measured" and _Child.made[0].measured
    c = json.loads((root / "results" / "sm90" / "gemm_ceiling.json").read_text())
    assert (c["tflops"], c["before_tflops"], c["after_tflops"], c["errors"]) == (650.0, 650.0, None, [str(error)])


def test_a_build_that_fails_beside_the_ceiling_fails_the_run_as_before(tmp_path, monkeypatch):
    """The real run_bench: the background build's error is dropped, run_bench's own build raises it,
    and reproduce turns it into the same outcome (exit code and message) as without the overlap."""
    from kernelseek_suite import bench

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    monkeypatch.setattr(bench, "start_fa4_warm", lambda req: None)
    monkeypatch.setattr(bench, "_start_fa4_warm", lambda req, chosen: None)
    monkeypatch.setattr(build, "nvcc_path", lambda: "/usr/local/cuda/bin/nvcc")
    building = threading.Event()
    calls = []

    def fails(kernel, arch):
        calls.append(threading.current_thread().name)
        building.set()
        raise build.BuildError(f"nvcc failed for {Path(kernel).name} ({arch}):\nerror: expected a ';'")

    def ceiling(idx=0, reps=3):
        assert building.wait(30), "the build did not start beside the ceiling"
        return _ceiling(650.0, reps)

    monkeypatch.setattr(build, "build", fails)
    monkeypatch.setattr(gemm, "measure_in_child", ceiling)
    out = pipeline.reproduce(ReproduceRequest(arch="sm90", runtime="native", root=_checkout(tmp_path)))
    assert out.status == "failed" and out.exit_code == exitcodes.BUILD
    assert out.messages == ["build failed: nvcc failed for attn_fwd_ref.cu (sm90):\nerror: expected a ';'"]
    assert calls == ["kernel-build", threading.current_thread().name]


def test_the_sweep_starts_while_the_background_build_still_runs(tmp_path, monkeypatch):
    """run_bench is not held back until the build ends: it starts the sweep's worker first, and its
    own build waits for the background one (the next test)."""
    events: list = []
    release = threading.Event()

    def slow_build(kernel, arch):
        assert release.wait(30)
        events.append("built")

    def sweep(req, on_row=None, on_start=None, warming=None, on_phase=None):
        events.append("bench")
        release.set()
        raise KeyboardInterrupt

    _stand_in_run(monkeypatch, sweep)
    monkeypatch.setattr(build, "nvcc_path", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr(build, "build", slow_build)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_native(ReproduceRequest(arch="sm90", root=_checkout(tmp_path)))
    deadline = time.monotonic() + 30
    while "built" not in events and time.monotonic() < deadline:
        time.sleep(0.01)
    assert events == ["bench", "built"]


@pytest.mark.nvcc
def test_a_build_asked_for_during_the_same_build_waits_and_finds_it_cached(tmp_path):
    cache = tmp_path / "cache"
    results: list = []
    background = threading.Thread(
        target=lambda: results.append(build.build(ROOT / config.REFERENCE_KERNEL, "sm90", cache=cache))
    )
    background.start()
    time.sleep(0.2)  # the background build holds the lock by now
    second = build.build(ROOT / config.REFERENCE_KERNEL, "sm90", cache=cache)
    background.join()
    assert [r.cached for r in results] == [False] and second.cached and second.library == results[0].library
    assert len(list(cache.iterdir())) == 1


def test_no_build_beside_the_ceiling_without_nvcc(monkeypatch):
    monkeypatch.setattr(build, "nvcc_path", lambda: None)
    monkeypatch.setattr(build, "build", lambda *a: pytest.fail("built without nvcc"))
    assert run.build_beside(ROOT / config.REFERENCE_KERNEL, "sm90") is None


@pytest.mark.nvcc
def test_a_failed_build_leaves_nothing_in_the_cache(tmp_path):
    """What the overlap relies on: run_bench's build after a failed one compiles again."""
    bad = tmp_path / "bad.cu"
    bad.write_text((ROOT / config.REFERENCE_KERNEL).read_text() + "\nint broken(\n")
    cache = tmp_path / "cache"
    for _ in range(2):
        with pytest.raises(build.BuildError, match="nvcc failed"):
            build.build(bad, "sm90", cache=cache)
        assert list(cache.iterdir()) == []


def test_the_gated_child_imports_torch_but_starts_no_cuda_before_its_gate(tmp_path):
    """What the child has done when it reaches the gate, seen by a stand-in for the gate that reports
    it and gives up: torch is imported, CUDA is not initialised, nothing is measured."""
    script = (
        "import json, sys\n"
        "import kernelseek_suite.reproduce.gemm as g\n"
        "def at_gate(gate, on_wait=None):\n"
        "    torch = sys.modules.get('torch')\n"
        "    seen = {'torch': torch is not None, 'cuda': bool(torch and torch.cuda.is_initialized())}\n"
        "    print(json.dumps(seen), flush=True)\n"
        "    return {'waited_s': 0.0, 'timed_out': True}\n"
        "g.wait_at_gate = at_gate\n"
        "sys.exit(g.main(['64', '2', 'cuda', sys.argv[1]]))\n"
    )
    gate = json.dumps({"path": str(tmp_path / "open"), "timeout_s": 600})
    p = subprocess.run([sys.executable, "-c", script, gate], capture_output=True, text=True, timeout=120)
    assert p.returncode == gemm.GATE_TIMED_OUT, p.stderr
    assert json.loads(p.stdout) == {"torch": True, "cuda": False} and gemm.MARK not in p.stdout
