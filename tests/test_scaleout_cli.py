"""The scale-out's command line, cluster specs, batch-job scripts and the agreement of two runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelseek_suite.cli import main
from kernelseek_suite.results import ScenarioResult, append_jsonl
from kernelseek_suite.scaleout.agreement import ratio_agreement
from kernelseek_suite.scaleout.cluster import ClusterError, ClusterSpec, batch_options, parse_scheduler

KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "reference" / "attn_fwd_ref.cu"


def test_scheduler_values_name_a_cluster(tmp_path):
    assert parse_scheduler(None) == ClusterSpec("local-cuda")
    assert parse_scheduler("local:3") == ClusterSpec("local", workers=3)
    assert parse_scheduler("tcp://10.0.0.5:8786") == ClusterSpec("address", address="tcp://10.0.0.5:8786")
    assert parse_scheduler("node7:8786").address == "tcp://node7:8786"
    spec = tmp_path / "slurm.yaml"
    spec.write_text("kind: slurm\njobs: 2\ngpus_per_job: 8\noptions: {queue: gpu, walltime: '04:00:00'}\n")
    assert parse_scheduler(str(spec)) == ClusterSpec(
        "slurm", jobs=2, gpus_per_job=8, options={"queue": "gpu", "walltime": "04:00:00"}
    )
    spec.write_text("kind: slurm\ngpus: 8\n")
    with pytest.raises(ClusterError, match="unknown keys gpus"):
        parse_scheduler(str(spec))
    spec.write_text("kind: kubernetes\n")
    with pytest.raises(ClusterError, match="unknown cluster kind"):
        parse_scheduler(str(spec))
    with pytest.raises(ClusterError, match="not found"):
        parse_scheduler(str(tmp_path / "missing.yaml"))


@pytest.mark.parametrize("kind", ["slurm", "pbs"])
def test_batch_jobs_start_one_pinned_worker_per_gpu(kind):
    jobqueue = pytest.importorskip("dask_jobqueue")
    spec = ClusterSpec(kind, jobs=2, gpus_per_job=4, options={"walltime": "02:00:00"})
    cls = jobqueue.SLURMCluster if kind == "slurm" else jobqueue.PBSCluster
    with cls(**batch_options(spec), scheduler_options={"dashboard_address": ":0"}) as cluster:
        script = cluster.job_script()
    assert "-m dask_cuda.cli worker" in script and "--nthreads 1" in script
    assert ("#SBATCH --gres=gpu:4" in script) if kind == "slurm" else ("ngpus=4" in script)
    assert "02:00:00" in script


def test_cluster_options_go_with_the_dask_executor_only():
    r = CliRunner().invoke(main, ["bench", "--kernel", str(KERNEL), "--chunk", "4"])
    assert r.exit_code == 4 and "go with --executor dask" in r.output
    r = CliRunner().invoke(main, ["bench", "--kernel", str(KERNEL), "--executor", "dask", "--scheduler", "nowhere"])
    assert r.exit_code == 4 and "--scheduler" in r.output


def test_bench_on_a_cluster_without_gpus_says_so(tmp_path):
    """The whole command on the Dask path: a LocalCluster of CPU workers is started, each worker is
    asked for its GPU, and the sweep is refused before anything is built or written."""
    pytest.importorskip("distributed")
    out = tmp_path / "out"
    r = CliRunner().invoke(
        main,
        [
            "bench",
            "--kernel",
            str(KERNEL),
            "--scheduler",
            "local:2",
            "--out",
            str(out),
            "--scenarios",
            "d64-h32kv32-s512",
        ],
    )
    assert r.exit_code == 3, r.output
    assert "workers see no GPU" in r.output
    assert not (out / "bench.jsonl").exists()


def _row(sid: str, ratio: float, gpu: dict | None) -> ScenarioResult:
    return ScenarioResult(
        sid, "d64-h32kv32", 1, 512, 512, False, False, 1e9, status="ok", ratio={"fa3": ratio}, gpu=gpu
    )


def test_agreement_of_two_runs_per_gpu(tmp_path):
    ref, run = tmp_path / "one-gpu", tmp_path / "four-gpus"
    ref.mkdir()
    run.mkdir()
    quotients = {"GPU-a": [1.0, 1.02], "GPU-b": [0.98, 0.96]}
    i = 0
    for uuid, qs in quotients.items():
        for q in qs:
            append_jsonl(ref / "bench.jsonl", _row(f"s{i}", 1.25, None))
            append_jsonl(run / "bench.jsonl", _row(f"s{i}", 1.25 * q, {"uuid": uuid, "host": "n1", "index": i}))
            i += 1
    append_jsonl(run / "bench.jsonl", _row("only-in-run", 2.0, {"uuid": "GPU-a"}))
    for folder, (t0, t1) in (
        (ref, ("2026-01-01T00:00:00+00:00", "2026-01-01T00:40:00+00:00")),
        (run, ("2026-01-01T01:00:00+00:00", "2026-01-01T01:10:00+00:00")),
    ):
        (folder / "provenance.json").write_text(json.dumps({"date": t0, "date_end": t1}))
    ag = ratio_agreement(ref, run)
    assert ag.baseline == "fa3" and ag.scenarios == 4
    a, b = ag.per_gpu
    assert (a.gpu, a.scenarios, a.min_quotient, a.max_quotient) == ("GPU-a", 2, 1.0, 1.02)
    assert a.geomean_quotient == pytest.approx((1.02) ** 0.5, abs=1e-4)
    assert b.max_abs_dev == pytest.approx(0.04, abs=1e-4)
    assert ag.max_abs_dev == pytest.approx(0.04, abs=1e-4)
    assert ag.gpu_spread == pytest.approx(a.geomean_quotient / b.geomean_quotient - 1, abs=1e-3)
    assert ag.wall_s == {"reference": 2400.0, "run": 600.0}
    r = CliRunner().invoke(main, ["agreement", str(ref), str(run)])
    assert r.exit_code == 0, r.output
    assert "GPU-a" in r.output and "GPU-b" in r.output and "reference 2400 s, run 600 s" in r.output
    with pytest.raises(ValueError, match="cudnn"):
        ratio_agreement(ref, run, "cudnn")


def test_the_single_gpu_path_needs_no_dask():
    """Without --executor nothing of Dask is imported: the command line, bench and its request."""
    import subprocess
    import sys

    code = (
        "import sys; import kernelseek_suite.cli, kernelseek_suite.bench; "
        "from kernelseek_suite.bench import BenchRequest; BenchRequest(kernel='k.cu'); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('dask', 'distributed', 'dask_jobqueue', "
        "'dask_cuda') or m.startswith('kernelseek_suite.scaleout.')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_reproduce_on_a_cluster_runs_natively(monkeypatch):
    from kernelseek_suite.reproduce import pipeline
    from kernelseek_suite.scaleout.bench import Dask, ScaleOut

    seen = {}
    monkeypatch.setattr("kernelseek_suite.gpu.require_gpu", lambda arch, index=0, gpus=None: None)
    monkeypatch.setattr(
        pipeline,
        "run_native",
        lambda req, notify, on_row=None, on_start=None: (
            seen.setdefault("req", req) and pipeline.Outcome(req.arch, "measured", 0)
        ),
    )
    so = ScaleOut(ClusterSpec("address", address="tcp://head:8786"))
    dask = Dask(so)
    out = pipeline.reproduce(pipeline.ReproduceRequest(arch="sm90", runtime="auto", executor=dask))
    assert out.exit_code == 0 and seen["req"].executor is dask
    r = CliRunner().invoke(main, ["reproduce", "--executor", "dask", "--per-class-reports"])
    assert r.exit_code == 4 and "one GPU class" in r.output


def test_the_public_names_of_the_scaleout_resolve():
    import kernelseek_suite.scaleout as so

    for name in so.__all__:
        assert getattr(so, name) is not None
    assert {"run_items", "WorkItem", "run_bench_distributed", "run_agent_items", "ClusterSpec"} <= set(so.__all__)
