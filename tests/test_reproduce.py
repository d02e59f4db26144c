import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelseek_suite import config
from kernelseek_suite.contracts import exitcodes
from kernelseek_suite.gpu import NoGPUError, list_gpus
from kernelseek_suite.reproduce import containers, pipeline
from kernelseek_suite.reproduce.gemm import measure_in_child
from kernelseek_suite.reproduce.pipeline import ReproduceRequest, reproduce
from synthetic_results import as_run_local, write_results

ROOT = config.REPO_ROOT


def _no_gpu(monkeypatch):
    def fail(arch, index=0, gpus=None):
        raise NoGPUError("no NVIDIA GPU found (NVML and nvidia-smi see none)")

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", fail)


def _no_nvcc(monkeypatch):
    """No build beside the first ceiling: these tests stand in for run_bench, which would use it."""
    monkeypatch.setattr("kernelseek_suite.build.nvcc_path", lambda: None)


def _checkout(tmp_path, broken_sm90=False):
    root = tmp_path / "repo"
    (root / "kernels" / "reference").mkdir(parents=True)
    shutil.copy(ROOT / config.REFERENCE_KERNEL, root / config.REFERENCE_KERNEL)
    if broken_sm90:
        k = root / config.REPRODUCE["sm90"]["kernel"]
        k.parent.mkdir(parents=True)
        k.write_text('#include <cublas_v2.h>\nextern "C" int ks_abi_version(void) { return 1; }\n')
    return root


def test_without_a_gpu_the_partial_run_renders_shipped_results(tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    root = _checkout(tmp_path)
    shipped = write_results(root / "results" / "sm90")
    before = sorted(p.name for p in shipped.rglob("*"))
    notes = []
    out = reproduce(ReproduceRequest(arch="sm90", root=root), notes.append)
    assert out.exit_code == exitcodes.NO_GPU and out.status == "partial"
    assert out.out == root / "build" / "reproduce" / "sm90"
    assert notes[0].startswith("cannot measure sm90 here: no NVIDIA GPU found")
    assert "nothing is measured" in notes[1]
    assert any(
        "kernels/hopper/flash_fwd_sm90.cu" in m and "kernels/blackwell/flash_fwd_sm100.cu" in m for m in out.messages
    )
    # static checks of the reference kernel for both architectures
    static = json.loads((out.out / "static.json").read_text())
    assert {(c["kernel"], c["arch"]) for c in static} == {
        (config.REFERENCE_KERNEL, "sm90"),
        (config.REFERENCE_KERNEL, "sm100"),
    }
    assert all(c["ok"] for c in static)
    report = (out.out / "REPORT.md").read_text()
    assert "shipped, not re-measured" in report and "## Static checks on this machine" in report
    page = (out.out / "REPORT.html").read_text()  # and the same as a page, by default
    assert "shipped, not re-measured" in page and "<h2>Static checks on this machine (no GPU needed)</h2>" in page
    assert sorted(p.name for p in shipped.rglob("*")) == before  # the shipped folder is untouched


def test_a_kernel_that_breaks_the_rule_fails_the_partial_run(tmp_path, monkeypatch):
    _no_gpu(monkeypatch)
    root = _checkout(tmp_path, broken_sm90=True)
    out = reproduce(ReproduceRequest(arch="sm100", root=root))
    assert out.exit_code == exitcodes.BUILD
    assert any(
        "static check failed: kernels/hopper/flash_fwd_sm90.cu (sm90)" in m and "cublas_v2.h" in m for m in out.messages
    )
    assert any("no shipped results to render" in m for m in out.messages)


class _Recorder:
    def __init__(self):
        self.calls = []

    def native(self, req, notify, on_row=None, on_start=None):
        self.calls.append("native")
        return pipeline.Outcome(req.arch, "measured", 0, runtime="native")

    def docker(self, req, notify):
        self.calls.append("docker")
        return pipeline.Outcome(req.arch, "measured", 0, runtime="docker")


@pytest.mark.parametrize(
    "runtime, ready, expect",
    [
        ("auto", True, "docker"),
        ("auto", False, "native"),
        ("native", True, "native"),
        ("docker", True, "docker"),
        ("docker", False, None),
    ],
)
def test_runtime_choice(monkeypatch, runtime, ready, expect):
    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    monkeypatch.setattr(containers, "docker_ready", lambda: (ready, "ok" if ready else "the engine is not reachable"))
    rec = _Recorder()
    monkeypatch.setattr(pipeline, "run_native", rec.native)
    monkeypatch.setattr(containers, "run_in_container", rec.docker)
    notes = []
    out = reproduce(ReproduceRequest(arch="sm90", runtime=runtime), notes.append)
    if expect is None:
        assert out.exit_code == exitcodes.RUNTIME and rec.calls == []
        assert "doctor" in " ".join(out.messages)
    else:
        assert rec.calls == [expect] and out.runtime == expect
        assert any(n.startswith(f"runtime: {expect}") for n in notes)
        if runtime == "auto" and not ready:
            assert "not usable here: the engine is not reachable" in notes[0]


def test_unknown_arch_is_a_usage_error():
    assert reproduce(ReproduceRequest(arch="sm80")).exit_code == exitcodes.USAGE


def test_ceiling_record_takes_the_higher_median():
    rec = pipeline.ceiling_record({"tflops": 660.0, "n": 8192, "reps": 30}, {"tflops": 672.5, "n": 8192, "reps": 30})
    assert rec["tflops"] == 672.5 and rec["before_tflops"] == 660.0 and rec["n"] == 8192 and rec["errors"] == []
    rec = pipeline.ceiling_record({"error": "timeout"}, {"tflops": 650.0, "n": 8192})
    assert rec["tflops"] == 650.0 and rec["errors"] == ["timeout"]
    assert pipeline.ceiling_record({"error": "a"}, {"error": "b"})["tflops"] is None


def test_head_to_head_needs_traces_and_runs_the_compare_command(tmp_path):
    assert pipeline.head_to_head(tmp_path)["status"].startswith("skipped: no agent traces")
    (tmp_path / "results" / "compare").mkdir(parents=True)
    (tmp_path / "results" / "compare" / "trace.jsonl").write_text("{}\n")
    h2h = pipeline.head_to_head(tmp_path)
    assert h2h["status"] == "ok" or h2h["status"].startswith("failed (exit "), h2h
    assert "No such command" not in "\n".join(h2h["output"])


def test_gemm_ceiling_runs_in_a_child_process():
    c = measure_in_child(n=128, reps=3, device="cpu", timeout_s=120)
    assert c.device == "cpu" and c.n == 128 and c.reps == 3
    assert c.tflops > 0 and c.min_ms <= c.median_ms <= c.max_ms
    assert c.tflops == pytest.approx(2 * 128**3 / (c.median_ms * 1e-3) / 1e12, rel=1e-2)


def test_make_reproduce_without_a_gpu(tmp_path):
    """`make reproduce ARCH=sm90` on this machine: the message names what is missing, the partial run
    happens, and the command's own code (3) is in make's error line."""
    if list_gpus():
        pytest.skip("a GPU is here")
    venv = Path(sys.prefix)
    out = tmp_path / "partial"
    # -o: the environment running these tests is already set up (`make test` made it)
    p = subprocess.run(
        ["make", "-o", str(venv / ".ready"), "reproduce", "ARCH=sm90", f"VENV={venv}", f"OUT={out}"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    text = p.stdout + p.stderr
    assert p.returncode == 2, text  # make's own code for a failed recipe
    assert "Error 3" in text, text  # ... naming the command's: nothing measured
    assert "cannot measure sm90 here: no NVIDIA GPU found" in text
    assert "H100 / H200" in text
    assert "reproduce sm90: partial run, nothing measured (no suitable GPU)" in text
    static = json.loads((out / "static.json").read_text())
    assert {c["arch"] for c in static} == {"sm90", "sm100"} and all(c["ok"] for c in static)


@pytest.mark.gpu
def test_reproduce_natively_on_the_gpu(tmp_path):
    """On the H200: a small slice of the sweep end to end, with the GEMM ceiling and the report."""
    arch = next((a for a in config.REPRODUCE if _has(a)), None)
    if arch is None:
        pytest.skip("no sm90/sm100 GPU")
    out = pipeline.run_native(
        ReproduceRequest(
            arch=arch,
            runtime="native",
            out=tmp_path / arch,
            scenario_filter="d128-h16kv16-s1024*",
            extended=False,
            ceiling_reps=5,
        )
    )
    assert out.status == "measured" and out.report.exists()
    ceiling = json.loads((tmp_path / arch / "gemm_ceiling.json").read_text())
    assert ceiling["tflops"] > 100
    assert "kernel % of GEMM" in out.report.read_text()


def _has(arch):
    try:
        from kernelseek_suite.gpu import require_gpu

        require_gpu(arch)
        return True
    except NoGPUError:
        return False


def test_run_native_end_to_end_with_the_gpu_parts_stood_in(tmp_path, monkeypatch):
    """The CPU-side counterpart of the GPU test: bench and the GEMM child replaced by stand-ins that
    write what they would; everything else (records, provenance of the image, report) is real."""
    from kernelseek_suite import bench
    from kernelseek_suite.reproduce.gemm import GemmCeiling
    from synthetic_results import make_rows

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    ceilings = iter([650.0, 672.0])
    events = []

    def measure(idx=0, reps=3):
        events.append("ceiling")
        return GemmCeiling(next(ceilings), 1.6, 1.5, 1.7, 8192, reps, "H200", "2.11.0")

    class Child:  # the second ceiling's child: started when the worker is ready, measured after the sweep
        def __init__(self, idx, reps, gate_timeout_s):
            events.append("child")
            self.reps = reps

        def measure(self):
            return measure(reps=self.reps)

        def kill(self):
            pass

    monkeypatch.setattr("kernelseek_suite.reproduce.gemm.measure_in_child", measure)
    monkeypatch.setattr("kernelseek_suite.reproduce.gemm.GatedChild", Child)
    built = []
    monkeypatch.setattr("kernelseek_suite.build.nvcc_path", lambda: "/usr/local/cuda/bin/nvcc")
    monkeypatch.setattr("kernelseek_suite.build.build", lambda kernel, arch: built.append((kernel, arch, events[:])))
    warm = object()  # what start_fa4_warm returns: handed to run_bench, which finishes it
    monkeypatch.setattr(bench, "start_fa4_warm", lambda req: events.append("warm") or warm)
    seen = {}

    def fake_run_bench(req, on_row=None, on_start=None, warming=None, on_phase=None):
        seen["req"], seen["warming"] = req, warming
        events.append("bench")
        out = Path(req.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        rows = make_rows()
        for name in ("build_done", "fa4_warm_done", "worker_ready"):  # each a step later than the one before
            time.sleep(0.15)
            on_phase(name)
        with open(out / "bench.jsonl", "w") as f:
            for r in rows:
                if r is rows[0] or r is rows[-1]:
                    time.sleep(0.15)
                f.write(json.dumps(r.to_dict()) + "\n")
                on_row(r)
        time.sleep(0.15)
        prov = {
            "gpu_name": "NVIDIA H200",
            "arch": req.arch,
            "baselines": req.baselines,
            "kernel": str(req.kernel),
            "fa4_warm": {"scenarios": 14, "called": 14, "failed": [], "seconds": 41.5, "jobs": 8},
        }
        (out / "provenance.json").write_text(json.dumps(prov))
        return bench.write_outputs(out, rows, req.baselines, req.arch, "bench", str(req.kernel), "f" * 64, prov)

    monkeypatch.setattr(bench, "run_local", as_run_local(fake_run_bench))
    image = {"tag": "kernelseek-suite:sm90-abc", "id": "sha256:" + "1" * 64, "base": "nvidia/cuda:13.0.1@sha256:x"}
    monkeypatch.setenv(pipeline.IMAGE_ENV, json.dumps(image))

    root = _checkout(tmp_path)
    out = pipeline.run_native(ReproduceRequest(arch="sm90", root=root, seed=11))
    res_dir = root / "results" / "sm90"
    assert out.exit_code == 0 and out.status == "measured" and out.out == res_dir and out.runtime == "docker"
    req = seen["req"]
    # FA4 compiles while the first GEMM ceiling is measured, and the sweep gets that warm-up; the
    # second ceiling's child starts during the sweep, at the worker's hello
    assert events == ["warm", "ceiling", "bench", "child", "ceiling"] and seen["warming"] is warm
    # the kernel was built once beside the first ceiling, before bench (which finds it in the cache)
    assert [(k, a) for k, a, _ in built] == [(req.kernel, "sm90")] and "bench" not in built[0][2]
    # the reference kernel stands in for the missing sm90 kernel, beside every sm90 baseline
    assert req.kernel == root / config.REFERENCE_KERNEL and req.baselines == ["fa3", "fa4", "cudnn"]
    assert req.extended and req.grid and req.seed == 11 and req.out_dir == res_dir / "attn_fwd_ref"
    record = json.loads((res_dir / "reproduce.json").read_text())
    assert record["status"] == "measured" and record["run"] == "attn_fwd_ref" and record["runtime"] == "docker"
    assert "is not in this checkout" in record["stand_in"] and record["wall_s"] >= 0
    # when each step ended, in seconds from the start, in the order they run
    phases = record["phases"]
    assert list(phases) == list(pipeline.PHASES) and phases["fa4_warm_s"] == 41.5
    order = [phases[k] for k in pipeline.PHASES if k != "fa4_warm_s"]
    assert all(isinstance(t, float) for t in order) and order == sorted(order) and len(set(order)) == len(order)
    assert phases["last_row"] <= record["wall_s"] <= phases["report_done"]
    assert record["head_to_head"]["status"].startswith("skipped")
    assert record["image"]["tag"] == image["tag"]
    ceiling = json.loads((res_dir / "gemm_ceiling.json").read_text())
    assert (ceiling["tflops"], ceiling["before_tflops"], ceiling["after_tflops"]) == (672.0, 650.0, 672.0)
    # the image is in the provenance of the numbers, and in the re-rendered summary
    prov = json.loads((res_dir / "attn_fwd_ref" / "provenance.json").read_text())
    summary = json.loads((res_dir / "attn_fwd_ref" / "summary.json").read_text())
    assert prov["container"]["id"] == image["id"] and summary["provenance"]["container"]["id"] == image["id"]
    report = out.report.read_text()
    assert "672 TFLOP/s" in report and "kernelseek-suite:sm90-abc" in report and "stands in" not in report
    assert "the reference kernel" in report and "benched in its place" in report


def test_an_interrupted_run_resumes(tmp_path, monkeypatch):
    """A run cut short (a time limit, a lost session) continues with --resume: the rows and the
    first GEMM ceiling already measured are kept, the restart is recorded."""
    from kernelseek_suite import bench
    from kernelseek_suite.reproduce.gemm import GemmCeiling
    from synthetic_results import stand_in_bench_outputs

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    _no_nvcc(monkeypatch)
    measured = []

    def ceiling(idx, reps):
        measured.append(1)
        return GemmCeiling(600.0 + len(measured), 1.6, 1.5, 1.7, 8192, reps, "H200", "2.11.0")

    monkeypatch.setattr("kernelseek_suite.reproduce.gemm.measure_in_child", ceiling)
    asked = []

    def interrupted(req, on_row=None, on_start=None, warming=None, on_phase=None):
        asked.append(req.resume)
        raise KeyboardInterrupt

    monkeypatch.setattr(bench, "run_local", as_run_local(interrupted))
    root = _checkout(tmp_path)
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_native(ReproduceRequest(arch="sm90", root=root))
    res = root / "results" / "sm90"
    first = json.loads((res / "reproduce.json").read_text())
    assert first["status"] == "running" and measured == [1]

    def finish(req, on_row=None, on_start=None, warming=None, on_phase=None):
        asked.append(req.resume)
        return stand_in_bench_outputs(req)

    monkeypatch.setattr(bench, "run_local", as_run_local(finish))
    (res / "attn_fwd_ref").mkdir()
    (res / "attn_fwd_ref" / "bench.jsonl").write_text("")  # what the cut-short sweep left
    out = pipeline.run_native(ReproduceRequest(arch="sm90", root=root, resume=True))
    assert asked == [False, True] and measured == [1, 1]  # the "before" ceiling was not measured again
    rec = json.loads((res / "reproduce.json").read_text())
    assert rec["date_start"] == first["date_start"] and len(rec["resumed"]) == 1 and rec["status"] == "measured"
    c = json.loads((res / "gemm_ceiling.json").read_text())
    assert (c["before_tflops"], c["after_tflops"], c["tflops"]) == (601.0, 602.0, 602.0)
    assert "resumed 1 time(s)" in out.report.read_text()


def test_a_run_cut_short_during_the_first_ceiling_stops_the_fa4_warm_up(tmp_path, monkeypatch):
    from kernelseek_suite import bench

    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    _no_nvcc(monkeypatch)
    events = []

    class Warm:
        log = None

        def stop(self):
            events.append("stop")

    monkeypatch.setattr(bench, "start_fa4_warm", lambda req: events.append("warm") or Warm())

    def cut(idx, reps):
        events.append("ceiling")
        raise KeyboardInterrupt

    monkeypatch.setattr("kernelseek_suite.reproduce.gemm.measure_in_child", cut)
    monkeypatch.setattr(bench, "run_local", as_run_local(lambda *a, **k: events.append("bench")))
    with pytest.raises(KeyboardInterrupt):
        pipeline.run_native(ReproduceRequest(arch="sm90", root=_checkout(tmp_path)))
    assert events == ["warm", "ceiling", "stop"]
