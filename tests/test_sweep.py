"""The isolation logic of the sweep, on the CPU: a stand-in worker (fake_worker.py, speaking the real
protocol) crashes, dies of SIGSEGV, hangs, hits a CUDA error, eats memory or forges results on
chosen scenarios; each is recorded with its status and reason and the sweep goes on."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from kernelseek_suite import scenarios as sc
from kernelseek_suite.config import HarnessConfig, SweepConfig
from kernelseek_suite.harness.sweep import SweepSpec, run_sweep
from kernelseek_suite.results import read_jsonl

FAKE = Path(__file__).parent / "fake_worker.py"
FAST = HarnessConfig(
    sweep=SweepConfig(scenario_timeout_s=3.0, worker_start_timeout_s=20.0, poll_s=0.05, memory_limit_gb=0.25)
)
SCN = sc.select(sc.grid(), "d128-h16kv4-*")[:6]


def sweep(tmp_path, plan: dict, scenarios=SCN, config=FAST, **kw):
    plan_path = tmp_path / "plan.json"
    plan.setdefault("record", str(tmp_path / "record.jsonl"))
    plan_path.write_text(json.dumps(plan))
    spec = SweepSpec(
        library="unused.so",
        scenarios=list(scenarios),
        baselines=[],
        seed=1,
        config=config,
        worker_log=tmp_path / "worker.log",
        worker_command=(sys.executable, str(FAKE), str(plan_path)),
    )
    jsonl = tmp_path / "bench.jsonl"
    rows = run_sweep(spec, jsonl, **kw)
    return rows, read_jsonl(jsonl)


def workers(tmp_path) -> list[dict]:
    return [json.loads(l) for l in (tmp_path / "record.jsonl").read_text().splitlines()]


def by_id(rows):
    assert len({r.scenario for r in rows}) == len(rows), "a scenario was recorded twice"
    return {r.scenario: r for r in rows}


def test_clean_sweep_runs_every_scenario_in_one_worker(tmp_path):
    rows, saved = sweep(tmp_path, {})
    assert [r.scenario for r in rows] == [s.id for s in SCN]
    assert all(r.status == "ok" for r in rows)
    assert [r.scenario for r in saved] == [r.scenario for r in rows]
    assert len(workers(tmp_path)) == 1


@pytest.mark.parametrize(
    "action,status,code,words",
    [
        ("exit", "crash", "crash", "exited with code 7"),
        ("segv", "crash", "crash", "SIGSEGV"),
        ("hang", "timeout", "timeout", "a hang"),
        ("cuda_error", "error", "cuda-error", "illegal memory access"),
        ("memory", "crash", "memory", "over the limit"),
    ],
)
def test_a_failing_scenario_is_recorded_and_the_sweep_goes_on(tmp_path, action, status, code, words):
    bad = SCN[2].id
    rows, saved = sweep(tmp_path, {"actions": {bad: action}})
    got = by_id(rows)
    assert set(got) == {s.id for s in SCN}
    assert got[bad].status == status and got[bad].code == code
    assert words in got[bad].reason
    assert all(r.status == "ok" for sid, r in got.items() if sid != bad)
    # a fresh worker took over the scenarios after the bad one
    ws = workers(tmp_path)
    assert len(ws) == 2 and ws[1]["scenarios"] == [s.id for s in SCN[3:]]
    assert by_id(saved)[bad].status == status


def test_two_failures_in_a_row_each_get_their_own_worker(tmp_path):
    rows, _ = sweep(tmp_path, {"actions": {SCN[0].id: "segv", SCN[1].id: "exit", SCN[5].id: "hang"}})
    got = by_id(rows)
    assert [got[s.id].status for s in SCN] == ["crash", "crash", "ok", "ok", "ok", "timeout"]
    assert len(workers(tmp_path)) == 3


def test_forged_results_are_ignored(tmp_path):
    """A kernel that prints result lines (stdout, or the channel without its key) forges nothing."""
    bad = SCN[1].id
    rows, _ = sweep(tmp_path, {"actions": {bad: "forge"}})
    got = by_id(rows)
    assert got[bad].status == "wrong" and got[bad].code == "unwritten"
    assert len(rows) == len(SCN)
    assert "@@KS" in (tmp_path / "worker.log").read_text()  # the stdout line went to the log


def test_a_worker_that_fails_before_any_scenario_fails_them_all_once(tmp_path):
    rows, _ = sweep(tmp_path, {"at_start": "fatal"})
    assert len(rows) == len(SCN)
    assert all(r.status == "crash" and r.code == "contract" and "ABI version 7" in r.reason for r in rows)
    assert len(workers(tmp_path)) == 1


def test_a_worker_that_hangs_at_start_times_out(tmp_path):
    cfg = HarnessConfig(sweep=SweepConfig(worker_start_timeout_s=1.0, poll_s=0.05))
    rows, _ = sweep(tmp_path, {"at_start": "hang"}, config=cfg)
    assert len(rows) == len(SCN) and all(r.status == "timeout" for r in rows)


def test_a_worker_that_exits_quietly_before_its_work_is_done_is_a_crash(tmp_path):
    rows, _ = sweep(tmp_path, {"at_start": "exit"})
    assert all(r.status == "crash" and "exited with code 7" in r.reason for r in rows)
    assert len(workers(tmp_path)) == 1


def test_the_crash_reason_quotes_only_the_failing_workers_log(tmp_path):
    rows, _ = sweep(tmp_path, {"actions": {SCN[1].id: "cuda_error", SCN[4].id: "exit"}})
    got = by_id(rows)
    assert "illegal" in got[SCN[1].id].reason
    assert "illegal" not in got[SCN[4].id].reason


def test_annotate_sees_each_row_before_it_is_written(tmp_path):
    def annotate(row):
        row.flags.append("roofline: test")

    _, saved = sweep(tmp_path, {}, annotate=annotate)
    assert all(r.flags == ["roofline: test"] for r in saved)


def test_an_interrupted_sweep_leaves_no_worker_behind(tmp_path):
    seen = []

    def on_row(row):
        seen.append(row)
        if len(seen) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        sweep(tmp_path, {"delay_s": 0.05}, on_row=on_row)
    pid = workers(tmp_path)[0]["pid"]
    assert not Path(f"/proc/{pid}").exists() or "zombie" in Path(f"/proc/{pid}/status").read_text().lower()


def test_the_parent_never_imports_torch(tmp_path):
    """No CUDA context in the harness's own process: it does not even import torch."""
    plan = tmp_path / "plan.json"
    plan.write_text("{}")
    code = f"""
import sys
import time
from pathlib import Path
import kernelseek_suite.cli, kernelseek_suite.bench, kernelseek_suite.evaluate
from kernelseek_suite import scenarios as sc
from kernelseek_suite.harness.sweep import SweepSpec, run_sweep
spec = SweepSpec(library="x", scenarios=sc.grid()[:2], baselines=["fa3", "cudnn"], seed=1,
                 worker_command=(sys.executable, {str(FAKE)!r}, {str(plan)!r}), worker_log=Path({str(tmp_path / "w.log")!r}))
rows = run_sweep(spec)
assert [r.status for r in rows] == ["ok", "ok"], rows
print("torch" in sys.modules)
"""
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"


def test_the_real_worker_without_a_gpu_fails_each_scenario_once_with_its_reason(tmp_path):
    from conftest import HAS_GPU

    if HAS_GPU:
        pytest.skip("this machine has a GPU")
    spec = SweepSpec(
        library=str(tmp_path / "missing.so"),
        scenarios=SCN[:3],
        baselines=["fa3"],
        seed=1,
        config=FAST,
        worker_log=tmp_path / "worker.log",
    )
    rows = run_sweep(spec)
    assert [r.scenario for r in rows] == [s.id for s in SCN[:3]]
    assert all(r.status == "crash" and "CUDA" in r.reason for r in rows)


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_a_killed_sweep_process_leaves_no_worker_running(tmp_path, sig):
    """`timeout` (SIGTERM) or SIGKILL on the sweep's process: its worker, in a session of its own,
    must not go on running a kernel on the GPU."""
    plan = tmp_path / "plan.json"
    record = tmp_path / "record.jsonl"
    plan.write_text(json.dumps({"at_start": "hang", "record": str(record)}))
    code = f"""
import sys
import time
from pathlib import Path
from kernelseek_suite.cli import common as cli
from kernelseek_suite import scenarios as sc
from kernelseek_suite.harness.sweep import SweepSpec, run_sweep
import signal
signal.signal(signal.SIGTERM, cli._terminate)
spec = SweepSpec(library="x", scenarios=sc.grid()[:2], baselines=[], seed=1,
                 worker_command=(sys.executable, {str(FAKE)!r}, {str(plan)!r}), worker_log=Path({str(tmp_path / "w.log")!r}))
run_sweep(spec)
"""
    parent = subprocess.Popen(
        [sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)}
    )
    deadline = time.time() + 60
    while not (record.exists() and record.read_text().strip()) and time.time() < deadline:
        time.sleep(0.1)
    pid = workers(tmp_path)[0]["pid"]
    parent.send_signal(sig)
    parent.wait(timeout=30)

    def alive(p):
        status = Path(f"/proc/{p}/status")
        return status.exists() and "zombie" not in status.read_text().lower()

    deadline = time.time() + 10
    while alive(pid) and time.time() < deadline:
        time.sleep(0.1)
    assert not alive(pid)
