"""Run a kernel over scenarios in an isolated worker process: a crash, an illegal address or a hang
marks that scenario failed with its reason and the sweep goes on in a fresh worker. Rows are
appended to JSONL as they come, so nothing measured is lost; a sweep can be resumed."""
from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable

from ..config import HarnessConfig
from ..results import (STATUS_CRASH, STATUS_TIMEOUT, ScenarioResult, append_jsonl)
from ..scenarios import Scenario
from .worker import MARK


@dataclass
class SweepSpec:
    library: str
    scenarios: list[Scenario]
    baselines: list[str]
    seed: int
    timed: Callable[[Scenario], bool] = lambda s: not s.extended
    config: HarnessConfig = field(default_factory=HarnessConfig)
    gpu_index: int = 0
    worker_log: Path | None = None


@dataclass
class WorkerEvent:
    kind: str
    payload: dict


def _reader(stream, q: "queue.Queue[WorkerEvent | None]"):
    for line in iter(stream.readline, ""):
        if line.startswith(MARK):
            try:
                msg = json.loads(line[len(MARK):])
            except json.JSONDecodeError:
                continue
            q.put(WorkerEvent(msg.pop("kind"), msg))
    q.put(None)


def _tail(path: Path | None, n: int = 12) -> str:
    if not path or not path.exists():
        return ""
    lines = path.read_text(errors="replace").splitlines()
    interesting = [l for l in lines if "error" in l.lower() or "illegal" in l.lower()]
    return " | ".join((interesting or lines)[-n:])[-800:]


def _start_worker(spec: SweepSpec, todo: list[Scenario], log) -> tuple[subprocess.Popen, str]:
    job = {
        "library": spec.library,
        "baselines": spec.baselines,
        "seed": spec.seed,
        "check": asdict(spec.config.check),
        "timing": asdict(spec.config.timing),
        "scenarios": [{"scenario": s.to_dict(), "time": spec.timed(s)} for s in todo],
    }
    fd, job_path = tempfile.mkstemp(prefix="ks-job-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(job, f)
    env = dict(os.environ)
    env.setdefault("CUDA_VISIBLE_DEVICES", str(spec.gpu_index))
    env["PYTHONUNBUFFERED"] = "1"
    proc = subprocess.Popen([sys.executable, "-m", "kernelseek_suite.harness.worker", job_path],
                            stdout=subprocess.PIPE, stderr=log, text=True, env=env,
                            start_new_session=True)
    return proc, job_path


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def run_sweep(spec: SweepSpec, jsonl: Path | None = None,
              on_row: Callable[[ScenarioResult], None] | None = None,
              on_hello: Callable[[dict], None] | None = None) -> list[ScenarioResult]:
    """Run every scenario of the spec; returns the rows in the order they finished."""
    rows: list[ScenarioResult] = []
    todo = list(spec.scenarios)
    log_path = spec.worker_log or Path(tempfile.mkstemp(prefix="ks-worker-", suffix=".log")[1])
    restarts = 0

    def record(row: ScenarioResult):
        rows.append(row)
        if jsonl is not None:
            append_jsonl(jsonl, row)
        if on_row:
            on_row(row)

    while todo:
        with open(log_path, "a") as log:
            log.write(f"\n=== worker start, {len(todo)} scenarios to go, {time.ctime()}\n")
            log.flush()
            proc, job_path = _start_worker(spec, todo, log)
        q: queue.Queue = queue.Queue()
        threading.Thread(target=_reader, args=(proc.stdout, q), daemon=True).start()
        current: Scenario | None = None
        by_id = {s.id: s for s in todo}
        done_ids: set[str] = set()
        timeout = spec.config.sweep.worker_start_timeout_s
        failure: tuple[str, str] | None = None
        t_start = time.time()
        while True:
            try:
                ev = q.get(timeout=timeout)
            except queue.Empty:
                failure = (STATUS_TIMEOUT, f"no answer within {timeout:.0f} s (a hang); worker killed")
                _kill(proc)
                break
            if ev is None:  # the worker's stdout closed: it exited
                proc.wait()
                rc = proc.returncode
                if current is not None or rc not in (0,):
                    sig = -rc if rc and rc < 0 else None
                    why = f"worker died (signal {sig})" if sig else f"worker exited with code {rc}"
                    failure = (STATUS_CRASH, f"{why}: {_tail(log_path)}")
                break
            if ev.kind == "hello":
                if on_hello:
                    on_hello(ev.payload)
                timeout = spec.config.sweep.scenario_timeout_s
            elif ev.kind == "start":
                current = by_id.get(ev.payload["scenario"])
                t_start = time.time()
            elif ev.kind == "result":
                row = ScenarioResult.from_dict(ev.payload["row"])
                done_ids.add(row.scenario)
                record(row)
                current = None
            elif ev.kind == "fatal":
                failure = (STATUS_CRASH, f"worker failed: {ev.payload.get('error')}")
            elif ev.kind == "done":
                pass
        try:
            os.unlink(job_path)
        except OSError:
            pass
        todo = [s for s in todo if s.id not in done_ids]
        if failure is not None and current is not None:
            record(_failed_row(current, spec.seed, failure[0], failure[1], time.time() - t_start))
            todo = [s for s in todo if s.id != current.id]
        elif failure is not None and not done_ids and todo:
            # the worker failed before it finished any scenario (the library does not load, the
            # GPU is unusable, it hung at start): a fresh worker would fail the same way
            for s in todo:
                record(_failed_row(s, spec.seed, *failure))
            break
        restarts += 1
        if restarts > spec.config.sweep.max_restarts:
            for s in todo:
                record(_failed_row(s, spec.seed, STATUS_CRASH, "too many worker restarts"))
            break
    return rows


def _failed_row(s: Scenario, seed: int, status: str, reason: str, wall: float = 0.0) -> ScenarioResult:
    return ScenarioResult(s.id, s.head_config, s.batch, s.seqlen_q, s.seqlen_k, s.causal, s.extended, s.flops,
                          status=status, reason=reason, seed=seed, wall_s=round(wall, 3))
