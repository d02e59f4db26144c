"""Run one kernel on one scenario a few times, inside an nvtx range: the target for profilers
(`ncu`, `compute-sanitizer`) and quick manual checks. The command and its arguments are
cli/run_once.py's; this is what it runs.

    kernelseek-suite run-once KERNEL.cu SCENARIOS [--arch sm90] [--reps 3] [--check]
        [--inputs NAME ...] [--time [--beside OTHER.cu ...] [--baseline fa3 ...]]
    kernelseek-suite run-once KERNEL.cu --shape batch=4,seqlen=8192,heads=32/8,d=128,causal ...

SCENARIOS is one scenario id or several, comma-separated, each of which may be a glob
(`d128-*-s8192,d96-*`). With several, each is run in turn and `--time` ends with a table of each
entry's speed relative to KERNEL (KERNEL's time / the entry's time) per scenario, then its geometric
mean over the scenarios.
`--shape` (repeatable, instead of SCENARIOS) runs a scenario of that shape (scenarios.parse_shape).
`--inputs` names an input distribution (harness/distributions.py; `all` for every one; default
`standard`): each scenario runs on each, and the geometric means are given per distribution.

`--time` times KERNEL on the scenario with the sweep's timing (CUDA events, L2 flushed, warm-up,
interleaved), beside the `--beside` kernels and the `--baseline`s, and prints each one's median and
its time as a share of KERNEL's. The `--beside` kernels are what-if variants (a kernel with a stage
taken out, to see where the time goes): their outputs are NOT checked, so their times say nothing
about a correct kernel.
"""

from __future__ import annotations

import fnmatch
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

from ..contracts import exitcodes


def _build_all(args) -> dict | int:
    """Each kernel built (the rules, and the build where nvcc is here, checked before the GPU): the
    built kernels by path, or the exit code."""
    from ..build import BuildError, build, nvcc_path
    from ..gpu import NoGPUError, require_gpu
    from ..rules import DependencyRuleError, enforce

    kernels = list(dict.fromkeys([args.kernel, *args.beside]))

    def build_all() -> dict:  # side by side: nvcc runs are independent processes
        with ThreadPoolExecutor(max_workers=max(1, min(len(kernels), os.cpu_count() or 1))) as pool:
            results = list(pool.map(lambda path: build(path, args.arch), kernels))
        return dict(zip(kernels, results))

    built = {}
    try:  # the kernels' static checks (rules; build and exports where nvcc is here) need no GPU
        for path in kernels:
            enforce(path)
        if nvcc_path():
            built = build_all()
    except (BuildError, DependencyRuleError) as e:
        print(f"build failed: {e}", file=sys.stderr)
        return exitcodes.BUILD
    try:
        require_gpu(args.arch)
    except NoGPUError as e:
        print(f"no GPU: {e}", file=sys.stderr)
        return exitcodes.NO_GPU
    try:
        built = built or build_all()
    except BuildError as e:
        print(f"build failed: {e}", file=sys.stderr)
        return exitcodes.BUILD
    return built


def run(args, scenarios: list, dists: list[str]) -> int:
    """The kernel (and the --beside kernels) built, then run, checked and timed on each scenario and
    input distribution, as the arguments say (cli/run_once.py reads and checks them). Prints what it
    finds, as a profiler's target and a quick manual check do. Exit codes as the command line's: 2 the
    kernel breaks the rules or does not build, 3 no suitable GPU (checked after everything that needs
    none), 1 a wrong output or a kernel's error code."""
    from ..contract import KernelLibrary

    built = _build_all(args)
    if isinstance(built, int):
        return built
    lib = KernelLibrary(built[args.kernel].library)
    others = [(o, KernelLibrary(built[o].library)) for o in args.beside]
    # per distribution, per entry, per scenario: the entry's speed relative to the kernel
    speeds: dict[str, dict[str, dict[str, float]]] = {d: {} for d in dists}
    rc = exitcodes.OK
    for dist in dists:
        for scn in scenarios:
            rc = max(rc, _run_scenario(args, scn, lib, others, speeds[dist], dist))
    if args.time and (len(scenarios) > 1 or len(dists) > 1):
        for dist in dists:
            print(f"speed relative to {args.kernel} (its time / the entry's time) on {dist}, per scenario:")
            print(speed_table(speeds[dist]))
        for dist in dists:
            n = len(scenarios)
            print(f"speed relative to {args.kernel} (its time / the entry's time) on {dist}, geometric mean over {n}:")
            for name, by_scn in speeds[dist].items():
                vals = list(by_scn.values())
                print(f"  {name}: {math.exp(sum(math.log(x) for x in vals) / len(vals)):.3f} ({len(vals)} scenarios)")
    return rc


def speed_table(speeds: dict[str, dict[str, float]]) -> str:
    """A table of `speeds` ({entry: {scenario id: speed}}): a row per scenario in the order first
    seen, a column per entry (a file by its name, a baseline as `fa3`), '-' where an entry has no time."""
    from tabulate import tabulate

    names = list(speeds)
    rows: list[str] = []
    for by_scn in speeds.values():
        rows += [r for r in by_scn if r not in rows]
    headers = ["scenario", *[n.removeprefix("baseline ").rsplit("/", 1)[-1] for n in names]]
    body = [[r, *[f"{speeds[n][r]:.3f}" if r in speeds[n] else "-" for n in names]] for r in rows]
    return tabulate(body, headers=headers, disable_numparse=True)


def select_scenarios(spec: str, known: dict) -> list:
    """The scenarios named by comma-separated ids or globs, in the order given, each once; [] when
    any part matches nothing."""
    out: list = []
    for part in (p.strip() for p in spec.split(",")):
        hits = [known[i] for i in known if fnmatch.fnmatchcase(i, part)] if part else []
        if not hits:
            return []
        out += [s for s in hits if s not in out]
    return out


def _run_scenario(args, scn, lib, others, speeds: dict, dist: str = "standard") -> int:
    import torch

    from ..contract import make_params
    from .check import check_output
    from .distributions import get
    from .reference import reference_pair

    q, k, v = get(dist).make(scn, args.seed, "cuda")
    out = torch.full((scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((scn.batch, scn.heads_q, scn.seqlen_q), float("nan"), device="cuda")
    params = make_params(q, k, v, out, lse, scn.causal, scn.softmax_scale)
    stream = torch.cuda.current_stream().cuda_stream
    torch.cuda.nvtx.range_push(f"kernel:{scn.id}")
    for _ in range(args.reps):
        rc = lib.forward(params, stream)
        if rc != 0:
            print(f"kernel returned {rc}", file=sys.stderr)
            return exitcodes.FAIL
    torch.cuda.synchronize()
    torch.cuda.nvtx.range_pop()
    rc = exitcodes.OK
    if args.check:
        ref, ref_lse, lowp = reference_pair(q, k, v, scn.causal, scn.softmax_scale)
        checked = [("", out, lse)]
        if args.check_beside:
            for other, other_lib in others:
                o2, l2 = torch.full_like(out, float("nan")), torch.full_like(lse, float("nan"))
                if other_lib.forward(make_params(q, k, v, o2, l2, scn.causal, scn.softmax_scale), stream) != 0:
                    print(f"{scn.id}: {other} returned an error")
                    rc = exitcodes.FAIL
                    continue
                torch.cuda.synchronize()
                checked.append((f" {other}", o2, l2))
        for who, o, lo in checked:  # the kernel, then each --beside kernel by its path
            res = check_output(o, ref, lowp, lo, ref_lse)
            verdict = "ok" if res.ok else "WRONG: " + res.reason
            print(f"{scn.id}{who} [{dist}]: {verdict} (max err {res.max_err:.3g}, tol {res.tol:.3g})")
            rc = max(rc, exitcodes.OK if res.ok else exitcodes.FAIL)
    if args.time:
        first = ("checked: ok" if rc == exitcodes.OK else "checked: WRONG") if args.check else "not checked"
        entries = [(args.kernel, _kernel_call(lib, params, stream), first)]
        for other, other_lib in others:
            name = other
            while name in [e[0] for e in entries]:  # the same file twice: the timing's own spread
                name += "'"
            entries.append((name, _kernel_call(other_lib, params, stream), "not checked"))
        for b in args.baseline:
            call, why = _baseline_call(b, scn, (q, k, v))
            if call is None:
                print(f"baseline {b}: not timed ({why})")
            else:
                entries.append((f"baseline {b}", call, "baseline"))
        lines, medians = time_side_by_side(entries, scn, dist)
        for line in lines:
            print(line)
        for name, ms in medians.items():
            if name != args.kernel and ms > 0:
                speeds.setdefault(name, {})[scn.id] = medians[args.kernel] / ms
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


def time_side_by_side(entries: list, scn, dist: str = "standard") -> tuple[list[str], dict[str, float]]:
    """Time each entry (name, call, what its output is) with the sweep's timing, interleaved; the
    first is the one the others are compared with. A call that returns a non-zero code (a kernel's
    error) is marked. Returns the lines of a table and each entry's median in ms (a failed one is
    left out)."""
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
            f"returned {failed[n]}" if n in failed else label,
            round(stats[n].median_ms, 4),
            round(stats[n].iqr_ms, 4),
            stats[n].reps,
            round(scn.flops / (stats[n].median_ms * 1e-3) / 1e12, 1),
            round(stats[n].median_ms / base, 3),
        ]
        for n, _, label in entries
    ]
    medians = {n: stats[n].median_ms for n in names if n not in failed}
    return [
        f"{scn.id} [{dist}]: median of each call, timed interleaved (L2 flushed before each call)",
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
    ], medians
