"""Run one kernel on one scenario a few times, inside an nvtx range: the target for profilers
(`ncu`, `compute-sanitizer`) and quick manual checks.

    python -m kernelseek_suite.harness.run_once KERNEL.cu SCENARIO_ID [--arch sm90] [--reps 3] [--check]
        [--time [--beside OTHER.cu ...] [--baseline fa3 ...]]

`--time` times KERNEL on the scenario with the sweep's timing (CUDA events, L2 flushed, warm-up,
interleaved), beside the `--beside` kernels and the `--baseline`s, and prints each one's median and
its time as a share of KERNEL's. The `--beside` kernels are what-if variants (a kernel with a stage
taken out, to see where the time goes): their outputs are NOT checked, so their times say nothing
about a correct kernel.
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
    ap.add_argument("--time", action="store_true", help="time the kernel (and the --beside kernels)")
    ap.add_argument(
        "--beside",
        action="append",
        default=[],
        metavar="OTHER.cu",
        help="with --time: also time this kernel, interleaved (its output is not checked)",
    )
    ap.add_argument(
        "--baseline",
        action="append",
        default=[],
        metavar="NAME",
        help="with --time: also time this baseline (fa3, fa4, cudnn, sdpa-flash), interleaved",
    )
    args = ap.parse_args(argv)
    if (args.beside or args.baseline) and not args.time:
        ap.error("--beside and --baseline need --time")
    from ..baselines import REGISTRY

    unknown = [b for b in args.baseline if b not in REGISTRY]
    if unknown:
        ap.error(f"unknown baseline {', '.join(unknown)}; known: {', '.join(sorted(REGISTRY))}")

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
    out = torch.full((scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v), float("nan"), device="cuda", dtype=torch.bfloat16)
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
    rc = 0
    if args.check:
        ref, ref_lse, lowp = reference_pair(q, k, v, scn.causal, scn.softmax_scale)
        res = check_output(out, ref, lowp, lse, ref_lse)
        print(f"{scn.id}: {'ok' if res.ok else 'WRONG: ' + res.reason} (max err {res.max_err:.3g}, tol {res.tol:.3g})")
        rc = 0 if res.ok else 1
    if args.time:
        first = ("checked: ok" if rc == 0 else "checked: WRONG") if args.check else "not checked"
        entries = [(args.kernel, _kernel_call(lib, params, stream), first)]
        for other in args.beside:
            name = other
            while name in [e[0] for e in entries]:  # the same file twice: the timing's own spread
                name += "'"
            entries.append(
                (name, _kernel_call(KernelLibrary(build(other, args.arch).library), params, stream), "not checked")
            )
        for b in args.baseline:
            call, why = _baseline_call(b, scn, (q, k, v))
            if call is None:
                print(f"baseline {b}: not timed ({why})")
            else:
                entries.append((f"baseline {b}", call, "baseline"))
        for line in time_side_by_side(entries, scn):
            print(line)
    return rc


def _kernel_call(lib, params, stream):
    return lambda: lib.forward(params, stream)


def _baseline_call(name: str, scn, inputs: tuple):
    """(a call that runs the baseline once, None) or (None, why it cannot run here)."""
    from .. import baselines as bl

    try:
        fn = bl.get(name).prepare(scn)
    except (bl.Unsupported, KeyError) as e:
        return None, str(e).strip("'\"")
    return (lambda: fn(*inputs)), None


def time_side_by_side(entries: list, scn) -> list[str]:
    """Time each entry (name, call, what its output is) with the sweep's timing, interleaved; the
    first is the one the others are compared with. A call that returns a non-zero code (a kernel's
    error) is marked. Returns the lines of a table."""
    from tabulate import tabulate

    from ..config import TimingConfig
    from .timing import L2Flusher, time_interleaved

    cfg = TimingConfig()
    failed = {}

    def timed(name, call):
        def run(_input_set):
            rc = call()
            if isinstance(rc, int) and rc != 0:
                failed[name] = rc

        return run

    stats = time_interleaved({n: timed(n, c) for n, c, _ in entries}, cfg, L2Flusher(cfg.l2_flush_bytes))
    names = [n for n, _, _ in entries]
    base = stats[names[0]].median_ms
    rows = [
        [
            n,
            "returned %d" % failed[n] if n in failed else label,
            round(stats[n].median_ms, 4),
            round(stats[n].iqr_ms, 4),
            stats[n].reps,
            round(scn.flops / (stats[n].median_ms * 1e-3) / 1e12, 1),
            round(stats[n].median_ms / base, 3),
        ]
        for n, _, label in entries
    ]
    return [
        f"{scn.id}: median of each call, timed interleaved (L2 flushed before each call)",
        tabulate(
            rows,
            headers=[
                "kernel",
                "output",
                "median ms",
                "IQR ms",
                "reps",
                "TFLOP/s",
                f"time / {names[0].rsplit('/', 1)[-1]}",
            ],
        ),
    ]


if __name__ == "__main__":
    sys.exit(main())
