"""Run a kernel over scenarios in an isolated worker process: a crash, an illegal address, a hang or
too much host memory marks that scenario failed with its reason and the sweep goes on in a fresh
worker. Rows are appended to JSONL as they come, so nothing measured is lost; a sweep can be resumed.

The parent never creates a CUDA context (it does not even import torch), so no kernel can poison
it. Results come back over the worker's private, signed channel (channel.py), never its stdout.

The first worker may be started before the kernel's library is built (`start_early`), so that its
imports overlap the build; the sweep then takes it over and gives it the rest of its job.
"""

from __future__ import annotations

import os
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..config import HarnessConfig
from ..containment import die_with_parent, rss_bytes
from ..contracts import exitcodes
from ..results import STATUS_CRASH, STATUS_TIMEOUT, ScenarioResult, append_jsonl
from ..scenarios import Scenario
from .channel import Message, ParentChannel
from .gate import Gate

WORKER_COMMAND = (sys.executable, "-m", "kernelseek_suite.harness.worker")


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
    gpu_uuid: str | None = None  # pins the worker to this GPU (CUDA_VISIBLE_DEVICES)
    # the command that starts a worker; the channel's fd is appended. Tests put a stand-in here.
    worker_command: tuple[str, ...] | None = None
    # where other work still runs on the GPU: the worker starts, and waits here before it measures
    # anything (gate.py). The caller opens it; None: nothing to wait for
    gate: Gate | None = None
    # the first worker, started during the build with the same baselines, config, GPU, command and
    # gate (`start_early`); the sweep takes it over, and the caller stops it at the end (`stop`)
    early: EarlyWorker | None = None


@dataclass
class _Failure:
    status: str
    code: str
    reason: str


def _reader(chan: ParentChannel, q: queue.Queue[Message | None]):
    for line in chan.lines():
        msg = chan.verify(line)
        if msg is not None:
            q.put(msg)
    q.put(None)


def _tail(path: Path | None, offset: int = 0, n: int = 12) -> str:
    """The interesting lines a worker wrote to the log since `offset` (this worker's own)."""
    if not path or not path.exists():
        return ""
    with open(path, "rb") as f:
        f.seek(offset)
        lines = f.read().decode(errors="replace").splitlines()
    interesting = [l for l in lines if "error" in l.lower() or "illegal" in l.lower()]
    return " | ".join((interesting or lines)[-n:])[-800:]


def gpu_env(gpu_index: int, gpu_uuid: str | None) -> dict:
    """This process's environment with the one GPU a child may see (by UUID where known)."""
    env = dict(os.environ)
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"  # the order NVML (and --gpu) uses
    if gpu_uuid:
        env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
    else:
        env.setdefault("CUDA_VISIBLE_DEVICES", str(gpu_index))
    return env


def _setup_job(baselines: list[str], config: HarnessConfig, gate: Gate | None) -> dict:
    """The part of a worker's job that is known before the kernel is built."""
    from .distributions import DISTRIBUTIONS

    return {
        "baselines": baselines,
        "distributions": list(config.distributions or DISTRIBUTIONS),
        "check": asdict(config.check),
        "timing": asdict(config.timing),
        "plausibility": asdict(config.plausibility),
        "gate": gate.job() if gate is not None else None,
    }


def _built_job(spec: SweepSpec, todo: list[Scenario]) -> dict:
    """The rest, known once the library is built and the run's folder is there."""
    return {
        "library": spec.library,
        "seed": spec.seed,
        "scenarios": [{"scenario": s.to_dict(), "time": spec.timed(s)} for s in todo],
    }


def _spawn(command: tuple[str, ...] | None, env: dict, job: dict, log) -> tuple[subprocess.Popen, ParentChannel]:
    env = {**env, "PYTHONUNBUFFERED": "1"}
    chan = ParentChannel()
    cmd = [*(command or WORKER_COMMAND), str(chan.write_fd)]
    proc = subprocess.Popen(
        cmd,
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=log,
        env=env,
        pass_fds=(chan.write_fd,),
        start_new_session=True,
        preexec_fn=die_with_parent,
    )
    chan.after_spawn()
    try:
        proc.stdin.write(chan.handshake(job))
        proc.stdin.close()
    except (BrokenPipeError, OSError):
        pass  # it died at once; the event loop sees it exit
    return proc, chan


def _start_worker(
    spec: SweepSpec, todo: list[Scenario], log, gate: Gate | None
) -> tuple[subprocess.Popen, ParentChannel]:
    job = {**_setup_job(spec.baselines, spec.config, gate), **_built_job(spec, todo)}
    return _spawn(spec.worker_command, gpu_env(spec.gpu_index, spec.gpu_uuid), job, log)


class EarlyWorker:
    """A sweep's first worker, started while the kernel is still being built: it imports torch and the
    baselines meanwhile, then waits at its build gate (gate.py, `await_build`) until the sweep takes
    it over (`take`). Its output goes to a file of its own until the run's folder exists; the sweep
    moves it into the worker log when the worker has ended."""

    def __init__(self, proc: subprocess.Popen, chan: ParentChannel, log: Path, offset: int, build_gate: Gate):
        self.proc, self.chan, self.log, self.offset, self.build_gate = proc, chan, log, offset, build_gate
        self.taken = False

    def take(self, spec: SweepSpec, todo: list[Scenario]) -> tuple[subprocess.Popen, ParentChannel]:
        """The build has passed: the gate opens with the rest of the job."""
        self.build_gate.open(_built_job(spec, todo))
        self.taken = True  # from here on the sweep ends it, and reads its channel
        return self.proc, self.chan

    def stop(self) -> None:
        """Ends a worker the sweep has not taken over (the build failed, or nothing was left to run),
        with its channel; drops its gate and, where the sweep has not moved it, its log."""
        if not self.taken:
            self.taken = True
            if self.proc.poll() is None:
                _kill(self.proc)
            os.close(self.chan.read_fd)
        self.build_gate.remove()
        self.log.unlink(missing_ok=True)


def start_early(
    baselines: list[str],
    config: HarnessConfig,
    gpu_index: int,
    gpu_uuid: str | None,
    worker_command: tuple[str, ...] | None,
    gate: Gate | None,
) -> EarlyWorker:
    """The first worker of a sweep whose spec will carry these same values, started before the
    kernel's build. The caller passes it in the spec (`early`) or stops it."""
    build_gate = Gate(config.sweep.build_gate_timeout_s)
    fd, name = tempfile.mkstemp(prefix="ks-worker-early-", suffix=".log")
    with os.fdopen(fd, "a") as log:
        log.write(f"\n=== worker start, during the kernel's build, {time.ctime()}\n")
        log.flush()
        offset = log.tell()
        job = {**_setup_job(baselines, config, gate), "build_gate": build_gate.job()}
        proc, chan = _spawn(worker_command, gpu_env(gpu_index, gpu_uuid), job, log)
    return EarlyWorker(proc, chan, Path(name), offset, build_gate)


def _move_log(src: Path, dst: Path) -> None:
    """An early worker's output appended to the sweep's worker log."""
    with open(dst, "ab") as out:
        out.write(src.read_bytes())
    src.unlink()


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        pass


def _exit_failure(rc: int | None, log_path: Path, offset: int) -> _Failure:
    sig = -rc if rc is not None and rc < 0 else None
    if sig:
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = "unknown"
        why = f"worker died (signal {sig}, {name})"
    else:
        why = f"worker exited with code {rc} before it was done"
    tail = _tail(log_path, offset)
    code = (
        "cuda-error"
        if rc == exitcodes.WORKER_CUDA_LOST or "illegal" in tail.lower() or "CUDA error" in tail
        else "crash"
    )
    return _Failure(STATUS_CRASH, code, f"{why}: {tail}" if tail else why)


@dataclass
class _Watch:
    """What the parent saw of one worker: the scenario it said it started, the rows it reported,
    whether it said it was done, and why it failed (None: it did not)."""

    by_id: dict[str, Scenario]
    gate: Gate | None
    gate_passed: bool
    timeout: float
    current: Scenario | None = None
    done_ids: set[str] = field(default_factory=set)
    failure: _Failure | None = None
    finished: bool = False
    t_start: float = field(default_factory=time.time)


def _watch_worker(proc, chan, w: _Watch, cfg, record, on_hello, log: tuple[Path, int]) -> _Watch:
    """Reads the worker's messages until its channel closes or it is killed (over the memory limit,
    or silent past its deadline)."""
    q: queue.Queue = queue.Queue()
    threading.Thread(target=_reader, args=(chan, q), daemon=True).start()
    deadline = time.monotonic() + w.timeout
    limit = int(cfg.memory_limit_gb * (1 << 30))
    while True:
        try:
            ev = q.get(timeout=cfg.poll_s)
        except queue.Empty:
            w.failure = _over_limits(proc, rss_bytes(proc.pid), limit, deadline, w.timeout, cfg)
            if w.failure is not None:
                _kill(proc)
                return w
            continue
        if ev is None:  # the channel closed: the worker exited
            proc.wait()
            if w.failure is None and (w.current is not None or not w.finished or proc.returncode != exitcodes.OK):
                w.failure = _exit_failure(proc.returncode, *log)
            return w
        _on_message(ev, w, cfg, record, on_hello)
        deadline = time.monotonic() + w.timeout


def _over_limits(proc, rss: int | None, limit: int, deadline: float, timeout: float, cfg) -> _Failure | None:
    if rss is not None and rss > limit:
        return _Failure(
            STATUS_CRASH,
            "memory",
            f"worker used {rss / (1 << 30):.1f} GiB of host memory, over the limit "
            f"of {cfg.memory_limit_gb:g} GiB; worker killed",
        )
    if time.monotonic() > deadline:
        return _Failure(STATUS_TIMEOUT, "timeout", f"no answer within {timeout:.0f} s (a hang); worker killed")
    return None


def _on_message(ev: Message, w: _Watch, cfg, record, on_hello) -> None:
    """One message of the worker; a message sets the next deadline (w.timeout from now)."""
    if ev.kind == "waiting" and w.gate is not None and not w.gate_passed:
        w.timeout = w.gate.timeout_s + cfg.worker_start_timeout_s  # at the gate: it may wait that long, then start
    elif ev.kind == "hello":
        w.gate_passed = True
        hello = dict(ev.payload)
        if w.gate is not None:
            hello["gate"] = {**(hello.get("gate") or {}), "open_at_hello": w.gate.is_open()}
        if on_hello:
            on_hello(hello)
        w.timeout = cfg.scenario_timeout_s
    elif ev.kind == "start":
        w.current = w.by_id.get(str(ev.payload.get("scenario")))
        w.t_start = time.time()
    elif ev.kind == "result":
        row = ScenarioResult.from_dict(ev.payload["row"])
        if w.current is None or row.scenario != w.current.id or row.scenario in w.done_ids:
            return  # only the scenario the worker said it started, once
        w.done_ids.add(row.scenario)
        record(row)
        w.current = None
    elif ev.kind == "done":
        w.finished = True
    elif ev.kind == "fatal":
        w.failure = _Failure(
            STATUS_CRASH, ev.payload.get("code") or "crash", f"worker failed: {ev.payload.get('error')}"
        )


def run_sweep(
    spec: SweepSpec,
    jsonl: Path | None = None,
    on_row: Callable[[ScenarioResult], None] | None = None,
    on_hello: Callable[[dict], None] | None = None,
    annotate: Callable[[ScenarioResult], None] | None = None,
) -> list[ScenarioResult]:
    """Run every scenario of the spec; returns the rows in the order they finished. `annotate` sees
    each row before it is written (the plausibility alarms). With `spec.gate`, a worker's hello
    carries `gate`: how long it waited (its word) and whether the gate was open (the parent's)."""
    rows: list[ScenarioResult] = []
    todo = list(spec.scenarios)
    log_path = spec.worker_log or Path(tempfile.mkstemp(prefix="ks-worker-", suffix=".log")[1])
    sweep_cfg = spec.config.sweep
    restarts = 0
    gate_passed = False  # a worker has said hello: no later worker waits at the gate
    early = spec.early  # the first worker, already started

    def record(row: ScenarioResult):
        if annotate:
            annotate(row)
        rows.append(row)
        if jsonl is not None:
            append_jsonl(jsonl, row)
        if on_row:
            on_row(row)

    while todo:
        gate = None if gate_passed else spec.gate
        if early is not None:
            proc, chan = early.take(spec, todo)
            this_log, offset, early = early.log, early.offset, None
        else:
            this_log = log_path
            with open(log_path, "a") as log:
                log.write(f"\n=== worker start, {len(todo)} scenarios to go, {time.ctime()}\n")
                log.flush()
                offset = log.tell()
                proc, chan = _start_worker(spec, todo, log, gate)
        w = _Watch({s.id: s for s in todo}, gate, gate_passed, sweep_cfg.worker_start_timeout_s)
        try:
            w = _watch_worker(proc, chan, w, sweep_cfg, record, on_hello, (this_log, offset))
        finally:
            if proc.poll() is None:
                _kill(proc)
            if proc.stdin and not proc.stdin.closed:
                proc.stdin.close()
            if this_log != log_path:
                _move_log(this_log, log_path)
        gate_passed = w.gate_passed
        todo = [s for s in todo if s.id not in w.done_ids]
        if w.failure is not None and w.current is not None:
            record(_failed_row(w.current, spec.seed, w.failure, time.time() - w.t_start))
            todo = [s for s in todo if s.id != w.current.id]
        elif w.failure is not None and not w.done_ids and todo:
            # the worker failed before it finished any scenario (the library does not load, the
            # GPU is unusable, it hung at start): a fresh worker would fail the same way
            for s in todo:
                record(_failed_row(s, spec.seed, w.failure))
            break
        restarts += 1
        if restarts > sweep_cfg.max_restarts:
            for s in todo:
                record(_failed_row(s, spec.seed, _Failure(STATUS_CRASH, "crash", "too many worker restarts")))
            break
    return rows


def _failed_row(s: Scenario, seed: int, failure: _Failure, wall: float = 0.0) -> ScenarioResult:
    return ScenarioResult.for_scenario(
        s, failure.status, reason=failure.reason, code=failure.code, seed=seed, wall_s=round(wall, 3)
    )
