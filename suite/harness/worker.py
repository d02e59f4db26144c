"""The child process that runs a kernel: one scenario after another, each built, checked, timed
beside the baselines and reported as one line on stdout (`@@KS {json}`).

A CUDA error leaves this process's context unusable: the worker reports the scenario and exits,
and the parent starts a fresh worker for the rest. A crash or a hang is detected by the parent.

Run as `python -m kernelseek_suite.harness.worker JOB.json`.
"""
from __future__ import annotations

import json
import sys
import time
import traceback

MARK = "@@KS "


def emit(kind: str, **payload) -> None:
    sys.stdout.write(MARK + json.dumps({"kind": kind, **payload}) + "\n")
    sys.stdout.flush()


def _is_cuda_error(e: BaseException) -> bool:
    text = f"{type(e).__name__}: {e}"
    return "CUDA error" in text or "AcceleratorError" in text or "cudaError" in text or \
        "CUBLAS_STATUS" in text or "illegal memory access" in text


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


def run_job(job: dict) -> int:
    import torch

    from .. import baselines as bl
    from ..config import CheckConfig, TimingConfig
    from ..contract import ERROR_NAMES, KS_ERR_UNSUPPORTED, KS_OK, KernelLibrary, make_params
    from ..results import (STATUS_ERROR, STATUS_OK, STATUS_UNSUPPORTED, STATUS_WRONG, ScenarioResult)
    from ..scenarios import Scenario
    from .check import check_output
    from .inputs import make_inputs, poison_like, scenario_seed
    from .reference import reference_pair
    from .timing import L2Flusher, time_interleaved

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    check_cfg = CheckConfig(**job.get("check", {}))
    timing_cfg = TimingConfig(**job.get("timing", {}))
    dev = torch.device("cuda")
    props = torch.cuda.get_device_properties(dev)
    lib = KernelLibrary(job["library"])
    emit("hello", device=props.name, sms=props.multi_processor_count, torch=torch.__version__,
         cuda=torch.version.cuda, cudnn=torch.backends.cudnn.version(),
         baselines={b: bl.get(b).available()[1] for b in job["baselines"]},
         baseline_versions={b: bl.get(b).version() for b in job["baselines"]})
    flush = L2Flusher(timing_cfg.l2_flush_bytes)
    stream = torch.cuda.current_stream()
    seed = int(job["seed"])

    for item in job["scenarios"]:
        scn = Scenario(**item["scenario"])
        timed = bool(item.get("time", True))
        emit("start", scenario=scn.id)
        t0 = time.time()
        row = ScenarioResult(scn.id, scn.head_config, scn.batch, scn.seqlen_q, scn.seqlen_k, scn.causal,
                             scn.extended, scn.flops, status=STATUS_OK, seed=seed)
        try:
            nsets = timing_cfg.input_sets if timed else 1
            sets = [make_inputs(scn, scenario_seed(seed, scn.id, t)) for t in range(nsets)]
            outs = [torch.empty(scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v, device=dev,
                                dtype=torch.bfloat16) for _ in range(nsets)]
            lses = [torch.empty(scn.batch, scn.heads_q, scn.seqlen_q, device=dev, dtype=torch.float32)
                    for _ in range(nsets)]
            params = [make_params(*sets[t], outs[t], lses[t], scn.causal, scn.softmax_scale)
                      for t in range(nsets)]

            def run_candidate(t: int) -> int:
                return lib.forward(params[t], stream.cuda_stream)

            def checked_run(t: int):
                outs[t].fill_(float("nan"))
                lses[t].fill_(float("nan"))
                rc = run_candidate(t)
                torch.cuda.synchronize()
                return rc

            with _Range(f"check:{scn.id}"):
                ref, ref_lse, lowp = reference_pair(*sets[0], scn.causal, scn.softmax_scale)
                rc = checked_run(0)
                if rc == KS_ERR_UNSUPPORTED:
                    row.status, row.reason = STATUS_UNSUPPORTED, "the kernel returned KS_ERR_UNSUPPORTED"
                elif rc != KS_OK:
                    row.status = STATUS_ERROR
                    row.reason = f"the kernel returned {rc} ({ERROR_NAMES.get(rc, 'unknown code')})"
                else:
                    chk = check_output(outs[0], ref, lowp, lses[0], ref_lse, check_cfg)
                    row.check = chk.to_dict()
                    if not chk.ok:
                        row.status, row.reason = STATUS_WRONG, chk.reason

            if row.status == STATUS_OK and timed:
                with _Range(f"time:{scn.id}"):
                    fns = {"kernel": lambda t: run_candidate(t)}
                    for b in job["baselines"]:
                        try:
                            fn = bl.get(b).prepare(scn)
                            o = fn(*sets[0])
                            torch.cuda.synchronize()
                            bchk = check_output(o, ref, lowp, cfg=check_cfg)
                            row.baselines[b] = "ok" if bchk.ok else f"ok (its output fails the check: {bchk.reason})"
                            fns[b] = (lambda f: (lambda t: f(*sets[t])))(fn)
                        except bl.Unsupported as e:
                            row.baselines[b] = str(e)
                        except Exception as e:  # a baseline that raises is reported, never fatal
                            if _is_cuda_error(e):
                                raise
                            row.baselines[b] = f"unsupported ({type(e).__name__}: {str(e).splitlines()[0][:200]})"
                    del ref, lowp
                    stats = time_interleaved(fns, timing_cfg, flush)
                    for name, st in stats.items():
                        row.times_ms[name] = st.to_dict()
                        row.tflops[name] = round(scn.flops / (st.median_ms * 1e-3) / 1e12, 2)
                    for b in job["baselines"]:
                        if b in stats:
                            row.ratio[b] = round(stats[b].median_ms / stats["kernel"].median_ms, 4)
                # correctness again after timing, on another input set
                t = nsets - 1
                ref2, ref2_lse, lowp2 = reference_pair(*sets[t], scn.causal, scn.softmax_scale)
                checked_run(t)
                chk2 = check_output(outs[t], ref2, lowp2, lses[t], ref2_lse, check_cfg)
                row.recheck = chk2.to_dict()
                if not chk2.ok:
                    row.status, row.reason = STATUS_WRONG, f"failed the re-check after timing: {chk2.reason}"
        except Exception as e:
            fatal = _is_cuda_error(e)
            row.status = STATUS_ERROR
            row.reason = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"[:500]
            row.wall_s = round(time.time() - t0, 3)
            emit("result", row=row.to_dict())
            if fatal:
                sys.stderr.write(traceback.format_exc())
                return 3  # the context is gone: the parent restarts a fresh worker
            continue
        row.wall_s = round(time.time() - t0, 3)
        emit("result", row=row.to_dict())
        del sets, outs, lses, params
        torch.cuda.empty_cache()
    emit("done")
    return 0


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    with open(argv[0]) as f:
        job = json.load(f)
    try:
        return run_job(job)
    except Exception as e:
        traceback.print_exc()
        emit("fatal", error=f"{type(e).__name__}: {e}"[:1000])
        return 2


if __name__ == "__main__":
    sys.exit(main())
