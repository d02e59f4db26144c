"""bench sharded over a Dask cluster, on the CPU: a LocalCluster of worker processes with the GPU
parts stood in (tests/scaleout_fakes.py). The real shard runner needs a GPU (see the gpu test)."""

from __future__ import annotations

import functools
import json
import os
import signal
import threading
import time
from pathlib import Path

import pytest

distributed = pytest.importorskip("distributed")

from kernelseek_suite import scenarios  # noqa: E402
from kernelseek_suite.bench import BenchRequest, ResumeMismatch  # noqa: E402
from kernelseek_suite.results import ScenarioResult, read_jsonl  # noqa: E402
from kernelseek_suite.scaleout.bench import ScaleOut, plan_shards, run_bench_distributed  # noqa: E402
from kernelseek_suite.scaleout.executor import NullChannel  # noqa: E402
from kernelseek_suite.scaleout.gpus import MixedGPUs, WorkerGPU  # noqa: E402
from kernelseek_suite.scaleout.shard import ShardJob, run_shard  # noqa: E402
from scaleout_fakes import fake_runner, h200_probe, late_h100_probe, mixed_probe  # noqa: E402

KERNEL = Path(__file__).resolve().parent.parent / "kernels" / "reference" / "attn_fwd_ref.cu"
WORKERS = 3
PATTERN = "d64-h32kv32-*,d128-h16kv16-*"  # 28 scenarios: enough shards for three workers


@pytest.fixture(scope="module")
def client():
    with (
        distributed.LocalCluster(
            n_workers=WORKERS, threads_per_worker=1, processes=True, dashboard_address=":0"
        ) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


@pytest.fixture
def ready(client):
    client.wait_for_workers(WORKERS, timeout=60)
    return client


def request(out: Path, **kw) -> BenchRequest:
    kw = {"kernel": KERNEL, "seed": 1234, "scenario_filter": PATTERN, "baselines": ["fa3", "cudnn"], **kw}
    return BenchRequest(out_dir=out, **kw)


def run_sharded(req: BenchRequest, scaleout: ScaleOut | None = None, **kw) -> dict:
    return run_bench_distributed(req, scaleout=scaleout or ScaleOut(chunk=3), **kw)


def comparable(rows) -> set[str]:
    """A row without where and how long it ran."""
    return {
        json.dumps({k: v for k, v in r.to_dict().items() if k not in ("gpu", "wall_s")}, sort_keys=True) for r in rows
    }


def serial_rows(req: BenchRequest, log_dir: Path):
    """The same stand-in runner over every scenario in one shard in this process: the serial run."""
    chosen = scenarios.select(scenarios.grid(req.arch), req.scenario_filter)
    rows = []
    job = ShardJob(
        KERNEL.name,
        b"",
        "",
        req.arch,
        req.baselines,
        req.seed,
        [s.to_dict() for s in chosen],
        [s.id for s in chosen],
        runner=functools.partial(fake_runner, log_dir=str(log_dir)),
        probe=lambda: WorkerGPU("here", 0, "GPU-serial", "NVIDIA H200", (9, 0), "580.1"),
    )
    run_shard(job, NullChannel(lambda mark, data: rows.append(ScenarioResult.from_dict(data))))
    return rows


def started(log_dir: Path) -> list[str]:
    f = log_dir / "started"
    return [line.split()[0] for line in f.read_text().splitlines()] if f.exists() else []


def kill_when_blocked(log_dir: Path, timeout: float = 60.0) -> threading.Thread:
    def watch():
        t_end = time.time() + timeout
        while time.time() < t_end:
            f = log_dir / "blocked"
            if f.exists() and f.read_text().strip():
                os.kill(int(f.read_text()), signal.SIGKILL)
                return
            time.sleep(0.02)

    t = threading.Thread(target=watch, daemon=True)
    t.start()
    return t


def test_shards_cover_every_scenario_once():
    chosen = scenarios.grid("sm90")
    for workers, chunk in ((1, None), (3, None), (8, 5), (500, None)):
        shards = plan_shards(chosen, workers, chunk)
        assert [s.id for shard in shards for s in shard] == [s.id for s in chosen]
        if chunk:
            assert max(len(s) for s in shards) == chunk
    assert len(plan_shards(chosen, 4)) >= 4 * 4 - 1  # about four per worker
    assert plan_shards([], 3) == []


def test_sharded_bench_survives_a_killed_worker_and_equals_a_serial_run(ready, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    req = request(tmp_path / "out")
    chosen = scenarios.select(scenarios.grid("sm90"), PATTERN)
    victim = chosen[len(chosen) // 2 + 1].id  # the second scenario of a shard: one row of it is recorded
    watcher = kill_when_blocked(log)
    pids_before = set(ready.run(os.getpid).values())
    summary = run_sharded(
        req, client=ready, probe=h200_probe, runner=functools.partial(fake_runner, log_dir=str(log), block=victim)
    )
    watcher.join(1)
    killed = int((log / "blocked").read_text())
    assert killed in pids_before  # a worker process of the cluster was killed mid-run
    rows = read_jsonl(tmp_path / "out" / "bench.jsonl")
    assert len(rows) == len(chosen) == summary["scenarios_total"] == summary["scenarios_correct"]
    ser = serial_rows(req, tmp_path)
    assert comparable(rows) == comparable(ser)
    # the dead worker lost only the scenario it was running: nothing else ran twice
    runs = started(log)
    assert runs.count(victim) == 2
    assert sorted(s for s in runs if s != victim) == sorted(s.id for s in chosen if s.id != victim)
    # each row says where it ran; the rows were spread over the workers
    assert all(
        r.gpu
        and r.gpu["uuid"].startswith("GPU-fake-")
        and r.gpu["host"] == "node-a"
        and r.gpu["worker"].startswith("tcp://")
        for r in rows
    )
    assert len({r.gpu["uuid"] for r in rows}) >= 2
    victim_row = next(r for r in rows if r.scenario == victim)
    assert victim_row.gpu["worker"] in set(ready.scheduler_info()["workers"]) | {victim_row.gpu["worker"]}
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["executor"]["kind"] == "dask" and prov["gpu_name"] == "NVIDIA H200" and prov["seed"] == 1234
    assert {d["uuid"] for d in prov["devices"]} >= {r.gpu["uuid"] for r in rows} - {victim_row.gpu["uuid"]}
    for name in ("bench.csv", "bench.md", "summary.json"):
        assert (tmp_path / "out" / name).exists()


def test_an_interrupted_sharded_run_resumes(ready, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    out = tmp_path / "out"
    runner = functools.partial(fake_runner, log_dir=str(log), pause_s=0.05)
    seen = []

    def interrupt_after_some(row):
        seen.append(row.scenario)
        if len(seen) == 7:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sharded(request(out), on_row=interrupt_after_some, client=ready, probe=h200_probe, runner=runner)
    first = read_jsonl(out / "bench.jsonl")
    assert 7 <= len(first) < 28
    # another kernel in the same folder is refused
    other = tmp_path / "other.cu"
    other.write_text(KERNEL.read_text() + "\n// changed\n")
    with pytest.raises(ResumeMismatch):
        run_sharded(request(out, resume=True, kernel=other), client=ready, probe=h200_probe, runner=runner)
    # the seed comes from the interrupted run, whatever this request says
    req = request(out, resume=True)
    req.seed = 999
    ready.wait_for_workers(WORKERS, timeout=60)
    summary = run_sharded(req, client=ready, probe=h200_probe, runner=runner)
    rows = read_jsonl(out / "bench.jsonl")
    assert len(rows) == len({r.scenario for r in rows}) == 28 == summary["scenarios_total"]
    assert comparable(rows) == comparable(serial_rows(request(out), tmp_path))
    assert {r.scenario for r in first} <= {r.scenario for r in rows}
    prov = json.loads((out / "provenance.json").read_text())
    assert prov["seed"] == 1234 and len(prov["resumed"]) == 1


def test_mixed_gpu_classes_are_refused_unless_per_class_reports(ready, tmp_path):
    log = tmp_path / "log"
    log.mkdir()
    runner = functools.partial(fake_runner, log_dir=str(log))
    with pytest.raises(MixedGPUs, match="H100.*H200|H200.*H100"):
        run_sharded(request(tmp_path / "refused"), client=ready, probe=mixed_probe, runner=runner)
    assert not (tmp_path / "refused" / "bench.jsonl").exists()
    assert started(log) == []
    out = tmp_path / "per-class"
    res = run_sharded(
        request(out), scaleout=ScaleOut(per_class_reports=True, chunk=4), client=ready, probe=mixed_probe, runner=runner
    )
    assert set(res["per_class"]) == {"NVIDIA H200 (sm90)", "NVIDIA H100 80GB HBM3 (sm90)"}
    folders = sorted(p.name for p in out.iterdir())
    assert folders == ["nvidia-h100-80gb-hbm3-sm90", "nvidia-h200-sm90"]
    ser = comparable(serial_rows(request(out), tmp_path))
    for folder in folders:
        rows = read_jsonl(out / folder / "bench.jsonl")
        assert comparable(rows) == ser  # each class ran the whole sweep on its own GPUs
        names = {r.gpu["name"] for r in rows}
        assert len(names) == 1 and folder.startswith(names.pop().lower().replace(" ", "-")[:11])
        summary = json.loads((out / folder / "summary.json").read_text())
        assert summary["scenarios_total"] == 28


def test_a_build_error_on_the_workers_stops_the_run(ready, tmp_path):
    from kernelseek_suite.build import BuildError

    def failing(job, todo, on_row):
        raise BuildError("nvcc failed for the kernel (stand-in)")

    with pytest.raises(BuildError, match="stand-in"):
        run_sharded(request(tmp_path / "out"), client=ready, probe=h200_probe, runner=failing)


def test_a_shard_whose_workers_keep_dying_is_recorded_as_crashed(tmp_path):
    import dask

    log = tmp_path / "log"
    log.mkdir()
    chosen = scenarios.select(scenarios.grid("sm90"), PATTERN)
    victim = chosen[4].id
    with dask.config.set({"distributed.scheduler.allowed-failures": 0}):
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0"
            ) as cluster,
            distributed.Client(cluster) as c,
        ):
            watcher = kill_when_blocked(log)
            summary = run_sharded(
                request(tmp_path / "out"),
                client=c,
                probe=h200_probe,
                runner=functools.partial(fake_runner, log_dir=str(log), block=victim),
            )
            watcher.join(1)
    rows = read_jsonl(tmp_path / "out" / "bench.jsonl")
    assert len(rows) == len({r.scenario for r in rows}) == 28
    # Dask gave up on the victim's shard at once: the victim is recorded as a crash, the scenario
    # after it in the same shard still ran (as a new shard), nothing else was touched
    crashed = [r for r in rows if r.status == "crash"]
    assert [r.scenario for r in crashed] == [victim] and "died" in crashed[0].reason
    assert summary["scenarios_correct"] == 27
    runs = started(log)
    assert runs.count(victim) == 1 and sorted(runs) == sorted(s.id for s in chosen)


@pytest.mark.nvcc
def test_the_real_shard_runner_builds_once_per_worker_and_isolates_a_crash(tmp_path, monkeypatch):
    """The GPU runner itself (nvcc build per worker, the harness's isolated sweep, alarms), with the
    sweep's worker process stood in by tests/fake_worker.py: a kernel that kills its process loses
    one scenario, inside a Dask worker that lives on."""
    import sys

    kernel = Path(__file__).parent / "kernels" / "spin.cu"
    chosen = scenarios.select(scenarios.grid("sm90"), PATTERN)
    crash = chosen[5].id
    plan = tmp_path / "plan.json"
    plan.write_text(
        json.dumps(
            {
                "record": str(tmp_path / "record.jsonl"),
                "tflops": 500.0,
                "gemm_tflops": 100.0,
                "ratio": {"fa3": 0.8},
                "actions": {crash: "segv"},
            }
        )
    )
    prev = tmp_path / "prev"
    prev.mkdir()
    (prev / "bench.jsonl").write_text(
        json.dumps(
            ScenarioResult(
                chosen[0].id, chosen[0].head_config, 1, 1, 1, False, False, 1.0, "ok", ratio={"fa3": 0.2}
            ).to_dict()
        )
        + "\n"
    )
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path / "cache"))  # inherited by the workers
    from kernelseek_suite.config import HarnessConfig, SweepConfig

    req = BenchRequest(
        kernel=kernel,
        arch="sm90",
        baselines=["fa3"],
        scenario_filter=PATTERN,
        seed=5,
        out_dir=tmp_path / "out",
        previous=prev,
        sanitize=True,
        config=HarnessConfig(sweep=SweepConfig(scenario_timeout_s=30, poll_s=0.05)),
        worker_command=(sys.executable, str(Path(__file__).parent / "fake_worker.py"), str(plan)),
    )
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        summary = run_sharded(req, scaleout=ScaleOut(chunk=4), client=c, probe=h200_probe)
    rows = {r.scenario: r for r in read_jsonl(tmp_path / "out" / "bench.jsonl")}
    assert sorted(rows) == sorted(s.id for s in chosen)
    assert rows[crash].status == "crash" and summary["failures"] == {"crash": 1, "implausible": 27}
    # implausible from the GEMM ceiling the worker measured (500 > 1.1 x 100), the jump alarm from --previous
    assert all(r.status == "implausible" for s, r in rows.items() if s != crash)
    assert summary["scenarios_correct"] == 0 and summary["ceiling"]["implausible_above_tflops"] == 110.0
    assert any(f.startswith("jump") for f in rows[chosen[0].id].flags)
    # one build per device: each worker's own cache holds a single build of the kernel
    builds = sorted((tmp_path / "cache" / "scaleout").glob("GPU-fake-*/build/*/kernel.so"))
    assert 1 <= len(builds) <= 2 and len({b.parent.name for b in builds}) == 1
    assert {r.gpu["uuid"] for r in rows.values()} == {p.parts[-4] for p in builds}
    # a sweep process per shard of four, and one more for the rest of the shard after the crash
    from collections import Counter

    starts = [json.loads(line)["scenarios"] for line in (tmp_path / "record.jsonl").read_text().splitlines()]
    handed = Counter(i for st in starts for i in st)
    assert len(starts) == 7 + 1 and set(handed) == set(rows)
    assert [i for i, n in handed.items() if n > 1] == [chosen[6].id, chosen[7].id]
    prov = json.loads((tmp_path / "out" / "provenance.json").read_text())
    assert prov["gemm_tflops"] == 100.0 and prov["build"]["flags"]
    # the hello's record is the single-GPU run's (bench.py): the device-state check is said too
    assert prov["device_state"] == "checked after every call" and prov["ceiling_factor"] == 1.1
    # the sanitizer ran as one more item; on a machine without a GPU it cannot pass
    assert summary["sanitize"]["ok"] is False and (tmp_path / "out" / "sanitize.json").exists()


def test_a_class_whose_workers_are_all_gone_stops_the_run_instead_of_waiting(ready, tmp_path):
    """Per-class shards may only run on their class's workers; a restarted worker comes back under a
    new address, so once a class has no live worker its shards could never run: the run stops (and
    is resumed later) instead of waiting for ever."""
    from kernelseek_suite.scaleout.executor import WorkersGone

    log = tmp_path / "log"
    log.mkdir()
    chosen = scenarios.select(scenarios.grid("sm90"), PATTERN)
    watcher = kill_when_blocked(log)  # the only H100 worker (worker 1) runs the blocking scenario
    req = request(tmp_path / "out")
    with pytest.raises(WorkersGone, match="alive"):
        run_sharded(
            req,
            scaleout=ScaleOut(per_class_reports=True, chunk=4),
            client=ready,
            probe=mixed_probe,
            runner=functools.partial(
                fake_runner,
                log_dir=str(log),
                block=chosen[1].id,
                block_class="NVIDIA H100 80GB HBM3 (sm90)",
                pause_s=0.02,
            ),
        )
    watcher.join(1)
    h100 = read_jsonl(tmp_path / "out" / "nvidia-h100-80gb-hbm3-sm90" / "bench.jsonl")
    assert [r.scenario for r in h100] == [chosen[0].id]  # recorded before the kill, kept for --resume


def test_a_late_worker_of_another_class_is_refused(tmp_path, monkeypatch):
    marker = tmp_path / "late"
    monkeypatch.setenv("KS_TEST_LATE_MARKER", str(marker))
    with (
        distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as cluster,
        distributed.Client(cluster) as c,
    ):
        log = tmp_path / "log"
        log.mkdir()

        def add_worker_after_first_row(row):
            if not marker.exists():
                marker.write_text("1")
                cluster.scale(3)  # worker 2 joins, holding an H100
                c.wait_for_workers(3, timeout=60)

        with pytest.raises(MixedGPUs, match="took a shard"):
            run_sharded(
                request(tmp_path / "out"),
                scaleout=ScaleOut(chunk=1),
                client=c,
                on_row=add_worker_after_first_row,
                probe=late_h100_probe,
                runner=functools.partial(fake_runner, log_dir=str(log), pause_s=0.05),
            )
    assert all(r.gpu["name"] == "NVIDIA H200" for r in read_jsonl(tmp_path / "out" / "bench.jsonl"))
