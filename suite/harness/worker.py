"""The child process that runs a kernel: one scenario after another, each checked (trial.py), timed
beside the baselines, checked again, and reported as one signed message on the private channel
(channel.py). Nothing the kernel prints can pass for a result.

The worker runs everything on a non-blocking stream of its own, so a kernel that launches on the
legacy default stream (or any other) runs beside the harness's work instead of being serialised
with it, and is caught. A CUDA error leaves this process's context unusable: the worker reports the
scenario and exits, and the parent starts a fresh worker for the rest. A crash, a hang or too much
memory is detected by the parent.

Everything that measures nothing comes first: torch, the CUDA context, the device state read (before
the kernel's library can change it), the baselines' imports, then the kernel's library. A worker
started while the kernel was still being built waits for its library before loading it (gate.py,
`await_build`). Where the job has a gate (gate.py: the FA4 warm-up still runs on the GPU), the worker
then waits there, and only then measures: the GEMM ceiling of its hello, then the scenarios.

Run as `python -m kernelseek_suite.harness.worker CHANNEL_FD`, with the job on stdin.
"""

from __future__ import annotations

import random
import sys
import time
import traceback
from typing import Any

from ..contracts import exitcodes
from .channel import WorkerChannel
from .gate import await_build, wait_at_gate


def _is_cuda_error(e: BaseException) -> bool:
    text = f"{type(e).__name__}: {e}"
    return (
        "CUDA error" in text
        or "AcceleratorError" in text
        or "cudaError" in text
        or "CUBLAS_STATUS" in text
        or "illegal memory access" in text
    )


class _Range:
    """nvtx range (torch's binding), so a profiler timeline reads build/check/time per scenario."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        import torch

        torch.cuda.nvtx.range_push(self.name)

    def __exit__(self, *a):
        import torch

        torch.cuda.nvtx.range_pop()


def measure_gemm_tflops(n: int = 8192, reps: int = 10) -> float:
    """The bf16 GEMM throughput of this GPU (torch/cuBLAS, random data): the roofline of the
    `implausible` status."""
    import torch

    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    best = float("inf")
    for _ in range(reps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        a @ b
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    del a, b
    return round(2.0 * n**3 / (best * 1e-3) / 1e12, 1)


def baseline_column(name: str, scn, inputs: tuple, expected, check_cfg, sync):
    """(the callable to time or None, what the baseline's column says): "ok", "ok (its output
    fails the check: ...)", or why it has no number ("not installed (...): pip install ...",
    unsupported). A baseline that is missing or raises is reported, never fatal -- except a CUDA
    error, which has poisoned the context and ends the worker."""
    from .. import baselines as bl
    from .check import check_output

    try:
        fn = bl.get(name).prepare(scn)
        out = fn(*inputs)
        sync()
        chk = check_output(out, expected.ref, expected.lowp, cfg=check_cfg)
        return fn, ("ok" if chk.ok else f"ok (its output fails the check: {chk.reason})")
    except bl.Unsupported as e:
        return None, str(e)
    except Exception as e:
        if _is_cuda_error(e):
            raise
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else ""
        return None, f"unsupported ({type(e).__name__}: {first})"


def record_times(row, scn, res, baselines: list[str]) -> None:
    """A timed row's times: every call pooled (`times_ms`, `tflops`), per input distribution
    (`*_by_distribution`), and each baseline's ratio on the distribution where it is lowest."""

    def tflops(ms: float) -> float:
        return round(scn.flops / (ms * 1e-3) / 1e12, 2)

    for name, st in res.stats.items():
        row.times_ms[name] = st.to_dict()
        row.tflops[name] = tflops(st.median_ms)
    for dist, stats in res.by_distribution.items():
        row.times_ms_by_distribution[dist] = {n: st.to_dict() for n, st in stats.items()}
        row.tflops_by_distribution[dist] = {n: tflops(st.median_ms) for n, st in stats.items()}
        if "kernel" in stats:
            row.ratio_by_distribution[dist] = {
                b: round(stats[b].median_ms / stats["kernel"].median_ms, 4) for b in baselines if b in stats
            }
    for b in baselines:
        per = [r[b] for r in row.ratio_by_distribution.values() if b in r]
        if per:
            row.ratio[b] = min(per)
        elif b in res.stats:
            row.ratio[b] = round(res.stats[b].median_ms / res.stats["kernel"].median_ms, 4)
    if res.verdict.code == "late-work":  # its time is reported with the late work counted
        kst = res.stats["kernel"]
        row.tflops["kernel"] = tflops(kst.median_ms + kst.late_ms)
        row.ratio = {}
        row.ratio_by_distribution = {}


def _new_row(scn, seed: int):
    from ..results import STATUS_OK, ScenarioResult

    return ScenarioResult.for_scenario(scn, status=STATUS_OK, seed=seed)


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    return text.splitlines()[0] if text else ""


class _Job:
    """One job's measuring: the settings, the stream, the device guard, the library and the GEMM
    ceiling set up once (`start`), then one scenario after another (`run_scenario`)."""

    def __init__(self, job: dict, chan: WorkerChannel):
        import torch

        from ..config import CheckConfig, PlausibilityConfig, TimingConfig

        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.job, self.chan = job, chan
        self.check_cfg = CheckConfig(**job.get("check", {}))
        self.timing_cfg = TimingConfig(**job.get("timing", {}))
        self.plaus_cfg = PlausibilityConfig(**job.get("plausibility", {}))
        self.dev = torch.device("cuda")
        self.stream = torch.cuda.Stream(device=self.dev)  # non-blocking: see the module docstring
        torch.cuda.set_stream(self.stream)
        self.guard, self.unguarded = self._device_guard()
        self.lib: Any = None  # the kernel's KernelLibrary, loaded by start()
        self.gemm: float | None = None

    def _device_guard(self):
        """The state the kernel must leave alone, read before its library is loaded (device_state.py);
        if the driver cannot be reached, every row says so in its flags."""
        from .device_state import CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CudaDriver, DeviceGuard, DeviceStateError

        try:
            streams = [self.stream.cuda_stream, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD]
            return DeviceGuard(CudaDriver(), streams), ""
        except (OSError, AttributeError, DeviceStateError) as e:
            unguarded = f"unguarded: device state not checked ({type(e).__name__}: {e})"[:300]
            sys.stderr.write(unguarded + "\n")
            return None, unguarded

    def start(self) -> bool:
        """The baselines imported, the library loaded, the gate passed, the GEMM ceiling measured and
        the hello sent: False (a fatal message sent) when the library breaks the contract."""
        import torch

        from .. import baselines as bl
        from ..contract import ContractError, KernelLibrary

        # the baselines imported now (FA4 takes seconds): nothing measured yet
        baseline_status = {b: bl.get(b).available()[1] for b in self.job["baselines"]}
        baseline_versions = {b: bl.get(b).version() for b in self.job["baselines"]}
        self.job = await_build(self.job)  # a worker started during the build waits here for its library
        try:
            self.lib = KernelLibrary(self.job["library"])
        except ContractError as e:
            self.chan.emit("fatal", error=str(e)[:1000], code="contract")
            return False
        gate = wait_at_gate(self.job.get("gate"), lambda: self.chan.emit("waiting"))
        if gate is not None and gate["timed_out"]:
            sys.stderr.write(f"the gate did not open within {gate['waited_s']:.0f} s: measuring anyway\n")
        try:
            self.gemm = measure_gemm_tflops(self.plaus_cfg.gemm_size)
        except Exception as e:  # the alarm is then off, and says so in provenance
            sys.stderr.write(f"GEMM ceiling not measured: {e}\n")
        props = torch.cuda.get_device_properties(self.dev)
        self.chan.emit(
            "hello",
            device=props.name,
            sms=props.multi_processor_count,
            torch=torch.__version__,
            cuda=torch.version.cuda,
            cudnn=torch.backends.cudnn.version(),
            gemm_tflops=self.gemm,
            device_state="checked after every call" if self.guard is not None else self.unguarded,
            baselines=baseline_status,
            baseline_versions=baseline_versions,
            gate=gate,
        )
        return True

    def run(self) -> int:
        import torch

        from ..results import STATUS_ERROR
        from ..scenarios import Scenario
        from .distributions import PRIMARY
        from .timing import L2Flusher, idle_gap_ms

        if not self.start():
            return exitcodes.WORKER_FATAL
        self.flush = L2Flusher(self.timing_cfg.l2_flush_bytes)
        self.gap = idle_gap_ms()
        self.seed = int(self.job["seed"])
        self.rng = random.Random(self.seed)
        # the input distributions every scenario is checked and timed on, the primary one first
        self.dists = list(self.job.get("distributions") or [PRIMARY])
        for item in self.job["scenarios"]:
            scn = Scenario(**item["scenario"])
            self.chan.emit("start", scenario=scn.id)
            t0 = time.time()
            row = _new_row(scn, self.seed)
            try:
                self.run_scenario(scn, bool(item.get("time", True)), row)
            except Exception as e:
                fatal = _is_cuda_error(e)
                row.status = STATUS_ERROR
                row.code = "cuda-error" if fatal else "error"
                row.reason = f"{type(e).__name__}: {_first_line(e)}"[:500]
                row.wall_s = round(time.time() - t0, 3)
                self.chan.emit("result", row=row.to_dict())
                if fatal:
                    sys.stderr.write(traceback.format_exc())
                    return exitcodes.WORKER_CUDA_LOST  # the parent restarts a fresh worker
                torch.cuda.empty_cache()
                continue
            row.wall_s = round(time.time() - t0, 3)
            self.chan.emit("result", row=row.to_dict())
            torch.cuda.empty_cache()
        self.chan.emit("done")
        return exitcodes.OK

    def sync(self) -> None:
        import torch

        torch.cuda.synchronize()

    def run_scenario(self, scn, timed: bool, row) -> None:
        from ..results import STATUS_OK, STATUS_WRONG
        from .timed import device_state_verdict

        changed: list[str] = []

        def sync_and_guard():
            # after a trial's call and its device-wide synchronize (not between the call and the copy
            # of its output: the late-work check needs that copy right after the call), before the next
            self.sync()
            if self.guard is not None:
                changed.extend(f for f in self.guard.check_and_restore() if f not in changed)

        if self.unguarded:
            row.flags.append(self.unguarded)
        with _Range(f"check:{scn.id}"):
            states = self._check(scn, row, sync_and_guard)
        if changed and row.status in (STATUS_OK, STATUS_WRONG):
            _apply(row, device_state_verdict(changed))
        if row.status != STATUS_OK or not timed:
            return
        with _Range(f"time:{scn.id}"):
            res = self._time(scn, row, states)
        record_times(row, scn, res, self.job["baselines"])
        row.recheck = res.recheck
        _apply(row, res.verdict)

    def _launch(self, scn, bufs) -> int:
        from ..contract import make_params

        p = make_params(bufs.q, bufs.k, bufs.v, bufs.out.view, bufs.lse.view, scn.causal, scn.softmax_scale)
        return self.lib.forward(p, self.stream.cuda_stream)

    def _check(self, scn, row, sync_and_guard) -> list:
        """The primary distribution checked in full, then each other one until one fails: the states
        (buffers and expected outputs) that the timing goes on with."""
        from ..results import STATUS_OK
        from . import trial
        from .inputs import scenario_seed

        def launch(bufs: trial.Buffers) -> int:
            return self._launch(scn, bufs)

        dists, seed, dev, cfg = self.dists, self.seed, self.dev, self.check_cfg
        verdict, state = trial.check_scenario(
            scn, scenario_seed(seed, scn.id, 0), launch, sync_and_guard, dev, cfg, dists[0]
        )
        _apply(row, verdict)
        row.flags += verdict.flags
        states = [state] if state is not None else []
        if verdict.check is not None:
            row.checks_by_distribution[dists[0]] = verdict.check
        for dist in dists[1:]:
            if row.status != STATUS_OK:
                break
            dist_seed = scenario_seed(seed, f"{scn.id}:{dist}", 0)
            v, st = trial.check_distribution(scn, dist, dist_seed, launch, sync_and_guard, dev, cfg, self.rng)
            if v.check is not None:
                row.checks_by_distribution[dist] = v.check
            if not v.ok:
                row.status, row.code, row.reason, row.check = v.status, v.code, v.reason, v.check or row.check
                break
            if st is not None:
                states.append(st)
        return states

    def _time(self, scn, row, states):
        from ..contract import make_params
        from .plausibility import implausible_reason
        from .timed import time_scenario

        params: dict[int, object] = {}

        def launch_set(bufs, t: int) -> int:
            if t not in params:
                params[t] = make_params(
                    bufs.q, bufs.k, bufs.v, bufs.out.view, bufs.lse.view, scn.causal, scn.softmax_scale
                )
            return self.lib.forward(params[t], self.stream.cuda_stream)

        def ceiling(tflops: float) -> str | None:
            return implausible_reason(tflops, self.gemm, self.plaus_cfg.ceiling_factor)

        state = states[0]
        fns = {}
        for b in self.job["baselines"]:
            fn, row.baselines[b] = baseline_column(
                b, scn, (state.bufs.q, state.bufs.k, state.bufs.v), state.expected, self.check_cfg, self.sync
            )
            if fn is not None:
                fns[b] = fn
        return time_scenario(
            scn,
            states,
            launch_set,
            fns,
            self.seed,
            self.rng,
            self.dev,
            self.timing_cfg,
            self.check_cfg,
            self.sync,
            self.flush,
            self.gap,
            guard=self.guard,
            ceiling=ceiling,
        )


def _apply(row, v) -> None:
    """A trial's verdict on the row: its status, code and reason, and its check where the row has none."""
    row.status, row.code, row.reason = v.status, v.code, v.reason
    if v.check is not None and row.check is None:
        row.check = v.check


def run_job(job: dict, chan: WorkerChannel) -> int:
    return _Job(job, chan).run()


def main(argv=None) -> int:
    from ..containment import no_core_dumps

    no_core_dumps()
    job, chan = WorkerChannel.open(sys.argv if argv is None else argv)
    try:
        return run_job(job, chan)
    except Exception as e:
        traceback.print_exc()
        chan.emit("fatal", error=f"{type(e).__name__}: {e}"[:1000], code="cuda-error" if _is_cuda_error(e) else "error")
        return exitcodes.WORKER_FATAL


if __name__ == "__main__":
    sys.exit(main())
