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


def run_job(job: dict, chan: WorkerChannel) -> int:
    import torch

    from .. import baselines as bl
    from ..config import CheckConfig, PlausibilityConfig, TimingConfig
    from ..contract import ContractError, KernelLibrary, make_params
    from ..results import STATUS_ERROR, STATUS_OK, STATUS_WRONG, ScenarioResult
    from ..scenarios import Scenario
    from . import trial
    from .device_state import CU_STREAM_LEGACY, CU_STREAM_PER_THREAD, CudaDriver, DeviceGuard, DeviceStateError
    from .distributions import PRIMARY
    from .inputs import scenario_seed
    from .plausibility import implausible_reason
    from .timed import device_state_verdict, time_scenario
    from .timing import L2Flusher, idle_gap_ms

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    check_cfg = CheckConfig(**job.get("check", {}))
    timing_cfg = TimingConfig(**job.get("timing", {}))
    plaus_cfg = PlausibilityConfig(**job.get("plausibility", {}))
    dev = torch.device("cuda")
    stream = torch.cuda.Stream(device=dev)  # non-blocking: see the module docstring
    torch.cuda.set_stream(stream)
    props = torch.cuda.get_device_properties(dev)
    # the state the kernel must leave alone, read before its library is loaded (device_state.py); if
    # the driver cannot be reached, every row says so in its flags
    try:
        guard = DeviceGuard(CudaDriver(), [stream.cuda_stream, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD])
        unguarded = ""
    except (OSError, AttributeError, DeviceStateError) as e:
        guard = None
        unguarded = f"unguarded: device state not checked ({type(e).__name__}: {e})"[:300]
        sys.stderr.write(unguarded + "\n")
    # the baselines imported now (FA4 takes seconds): nothing measured yet
    baseline_status = {b: bl.get(b).available()[1] for b in job["baselines"]}
    baseline_versions = {b: bl.get(b).version() for b in job["baselines"]}
    job = await_build(job)  # a worker started during the build waits here for its library
    try:
        lib = KernelLibrary(job["library"])
    except ContractError as e:
        chan.emit("fatal", error=str(e)[:1000], code="contract")
        return exitcodes.WORKER_FATAL
    gate = wait_at_gate(job.get("gate"), lambda: chan.emit("waiting"))
    if gate is not None and gate["timed_out"]:
        sys.stderr.write(f"the gate did not open within {gate['waited_s']:.0f} s: measuring anyway\n")
    try:
        gemm = measure_gemm_tflops(plaus_cfg.gemm_size)
    except Exception as e:  # the alarm is then off, and says so in provenance
        sys.stderr.write(f"GEMM ceiling not measured: {e}\n")
        gemm = None
    chan.emit(
        "hello",
        device=props.name,
        sms=props.multi_processor_count,
        torch=torch.__version__,
        cuda=torch.version.cuda,
        cudnn=torch.backends.cudnn.version(),
        gemm_tflops=gemm,
        device_state="checked after every call" if guard is not None else unguarded,
        baselines=baseline_status,
        baseline_versions=baseline_versions,
        gate=gate,
    )
    flush = L2Flusher(timing_cfg.l2_flush_bytes)
    gap = idle_gap_ms()
    seed = int(job["seed"])
    rng = random.Random(seed)
    # the input distributions every scenario is checked and timed on, the primary one first
    dists = list(job.get("distributions") or [PRIMARY])

    def sync():
        torch.cuda.synchronize()

    def ceiling(tflops: float) -> str | None:
        return implausible_reason(tflops, gemm, plaus_cfg.ceiling_factor)

    def run_scenario(scn: Scenario, timed: bool, row: ScenarioResult) -> None:
        changed: list[str] = []

        def launch(bufs: trial.Buffers) -> int:
            p = make_params(bufs.q, bufs.k, bufs.v, bufs.out.view, bufs.lse.view, scn.causal, scn.softmax_scale)
            return lib.forward(p, stream.cuda_stream)

        def sync_and_guard():
            # after a trial's call and its device-wide synchronize (not between the call and the copy
            # of its output: the late-work check needs that copy right after the call), before the next
            sync()
            if guard is not None:
                changed.extend(f for f in guard.check_and_restore() if f not in changed)

        def apply(v: trial.Verdict):
            row.status, row.code, row.reason = v.status, v.code, v.reason
            if v.check is not None and row.check is None:
                row.check = v.check

        if unguarded:
            row.flags.append(unguarded)
        with _Range(f"check:{scn.id}"):
            verdict, state = trial.check_scenario(
                scn, scenario_seed(seed, scn.id, 0), launch, sync_and_guard, dev, check_cfg, dists[0]
            )
            apply(verdict)
            row.flags += verdict.flags
            states = [state] if state is not None else []
            if verdict.check is not None:
                row.checks_by_distribution[dists[0]] = verdict.check
            for dist in dists[1:]:
                if row.status != STATUS_OK:
                    break
                v, st = trial.check_distribution(
                    scn, dist, scenario_seed(seed, f"{scn.id}:{dist}", 0), launch, sync_and_guard, dev, check_cfg, rng
                )
                if v.check is not None:
                    row.checks_by_distribution[dist] = v.check
                if not v.ok:
                    row.status, row.code, row.reason, row.check = v.status, v.code, v.reason, v.check or row.check
                    break
                if st is not None:
                    states.append(st)
        if changed and row.status in (STATUS_OK, STATUS_WRONG):
            apply(device_state_verdict(changed))
        if row.status != STATUS_OK or not timed:
            return

        with _Range(f"time:{scn.id}"):
            params: dict[int, object] = {}

            def launch_set(bufs: trial.Buffers, t: int) -> int:
                if t not in params:
                    params[t] = make_params(
                        bufs.q, bufs.k, bufs.v, bufs.out.view, bufs.lse.view, scn.causal, scn.softmax_scale
                    )
                return lib.forward(params[t], stream.cuda_stream)

            fns = {}
            for b in job["baselines"]:
                fn, row.baselines[b] = baseline_column(
                    b, scn, (state.bufs.q, state.bufs.k, state.bufs.v), state.expected, check_cfg, sync
                )
                if fn is not None:
                    fns[b] = fn
            res = time_scenario(
                scn,
                states,
                launch_set,
                fns,
                seed,
                rng,
                dev,
                timing_cfg,
                check_cfg,
                sync,
                flush,
                gap,
                guard=guard,
                ceiling=ceiling,
            )
        record_times(row, scn, res, job["baselines"])
        row.recheck = res.recheck
        apply(res.verdict)

    for item in job["scenarios"]:
        scn = Scenario(**item["scenario"])
        chan.emit("start", scenario=scn.id)
        t0 = time.time()
        row = ScenarioResult(
            scn.id,
            scn.head_config,
            scn.batch,
            scn.seqlen_q,
            scn.seqlen_k,
            scn.causal,
            scn.extended,
            scn.flops,
            status=STATUS_OK,
            seed=seed,
        )
        try:
            run_scenario(scn, bool(item.get("time", True)), row)
        except Exception as e:
            fatal = _is_cuda_error(e)
            row.status = STATUS_ERROR
            row.code = "cuda-error" if fatal else "error"
            row.reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:500]
            row.wall_s = round(time.time() - t0, 3)
            chan.emit("result", row=row.to_dict())
            if fatal:
                sys.stderr.write(traceback.format_exc())
                return exitcodes.WORKER_CUDA_LOST  # the parent restarts a fresh worker
            torch.cuda.empty_cache()
            continue
        row.wall_s = round(time.time() - t0, 3)
        chan.emit("result", row=row.to_dict())
        torch.cuda.empty_cache()
    chan.emit("done")
    return exitcodes.OK


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
