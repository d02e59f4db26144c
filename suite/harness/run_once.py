"""Run one kernel on one scenario a few times, inside an nvtx range: the target for profilers
(`ncu`, `compute-sanitizer`) and quick manual checks.

    python -m kernelseek_suite.harness.run_once KERNEL.cu SCENARIO_ID [--arch sm90] [--reps 3] [--check]
"""
from __future__ import annotations

import argparse
import sys


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="run_once")
    ap.add_argument("kernel")
    ap.add_argument("scenario")
    ap.add_argument("--arch", default="sm90")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="also check the output against the reference")
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args(argv)

    import torch

    from ..build import build
    from ..contract import KernelLibrary, make_params
    from ..scenarios import by_id
    from .check import check_output
    from .inputs import make_inputs
    from .reference import reference_pair

    scn = by_id(args.arch).get(args.scenario)
    if scn is None:
        print(f"unknown scenario {args.scenario}", file=sys.stderr)
        return 4
    lib = KernelLibrary(build(args.kernel, args.arch).library)
    q, k, v = make_inputs(scn, args.seed)
    out = torch.full((scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v), float("nan"), device="cuda",
                     dtype=torch.bfloat16)
    lse = torch.full((scn.batch, scn.heads_q, scn.seqlen_q), float("nan"), device="cuda")
    params = make_params(q, k, v, out, lse, scn.causal, scn.softmax_scale)
    stream = torch.cuda.current_stream().cuda_stream
    torch.cuda.nvtx.range_push(f"kernel:{scn.id}")
    for _ in range(args.reps):
        rc = lib.forward(params, stream)
        if rc != 0:
            print(f"kernel returned {rc}", file=sys.stderr)
            return 1
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    if args.check:
        ref, ref_lse, lowp = reference_pair(q, k, v, scn.causal, scn.softmax_scale)
        res = check_output(out, ref, lowp, lse, ref_lse)
        print(f"{scn.id}: {'ok' if res.ok else 'WRONG: ' + res.reason} (max err {res.max_err:.3g}, tol {res.tol:.3g})")
        return 0 if res.ok else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
