"""Check kernels on many input seeds: how often each fails the check, and how close to its tolerance
each comes (the largest max error / tolerance over the seeds), per scenario and input distribution.
A failure that one run's seed shows may be a kernel's error or a seed that lands near the tolerance:
several kernels side by side on the same seeds tell which.

    python scripts/check-seeds.py KERNEL.cu [OTHER.cu ...] --scenarios 'ext-*-q1-k1000*' \
        [--inputs llm --inputs wide] [--seeds 50] [--first-seed 1] [--show-seed RUN_SEED] \
        [--baseline fa3] [--detail]

A seed here is a run's seed (the `seed` of its provenance.json, and of each row of its bench.jsonl):
`--show-seed` with a run's seed draws exactly what that run checked.

Each draw is the sweep's for a distribution other than its primary one (`scenario_seed(seed,
"ID:DIST")`) and each check is the sweep's per (batch, head) rule. A baseline's output is checked
beside (without its LSE). Needs a GPU and the built kernels (the build cache, as run-once builds
them). Exit 0 when every entry passed every check, 1 otherwise.
"""

from __future__ import annotations

import argparse
import pathlib
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels", nargs="+", type=pathlib.Path)
    ap.add_argument("--scenarios", required=True, help="comma-separated scenario ids or globs")
    ap.add_argument("--inputs", action="append", help="an input distribution (repeatable; default llm)")
    ap.add_argument("--seeds", type=int, default=50, help="how many seeds, from --first-seed on")
    ap.add_argument("--first-seed", type=int, default=1)
    ap.add_argument(
        "--show-seed", type=int, action="append", default=[], help="a further seed (a run's: its provenance.json's)"
    )
    ap.add_argument("--arch", default="sm90")
    ap.add_argument("--baseline", action="append", default=[], help="a baseline checked beside (fa3, fa4, ...)")
    ap.add_argument("--detail", action="store_true", help="print the element of each failed check's largest error")
    args = ap.parse_args(argv)

    from kernelseek_suite import baselines as bl
    from kernelseek_suite.build import build
    from kernelseek_suite.contract import KernelLibrary, forward_fresh
    from kernelseek_suite.harness.check import CheckConfig
    from kernelseek_suite.harness.distributions import get
    from kernelseek_suite.harness.inputs import scenario_seed
    from kernelseek_suite.harness.reference import reference_pair
    from kernelseek_suite.harness.run_once import select_scenarios
    from kernelseek_suite.harness.trial import check_per_head, per_head_error_and_tolerance
    from kernelseek_suite.scenarios import by_id

    scenarios = select_scenarios(args.scenarios, by_id(args.arch))
    if not scenarios:
        ap.error(f"no scenario matches {args.scenarios}")
    libs = [(k.name, KernelLibrary(build(k, args.arch).library)) for k in args.kernels]
    dists = args.inputs or ["llm"]
    seeds = [*args.show_seed, *range(args.first_seed, args.first_seed + args.seeds)]
    cfg = CheckConfig()
    # (entry, scenario, dist) -> [fails, the largest (batch, head) error / its tolerance, its seed]
    stats: dict[tuple, list] = {}

    def kernel_call(lib, scn):
        def call(q, k, v):
            rc, out, lse = forward_fresh(lib, q, k, v, scn.causal, scn.softmax_scale)
            return (out, lse) if rc == 0 else None

        return call

    for scn in scenarios:
        entries = [(name, kernel_call(lib, scn)) for name, lib in libs]
        for b in args.baseline:  # a baseline's output is checked without its LSE
            fn = bl.get(b).prepare(scn)
            entries.append((b, lambda q, k, v, fn=fn: (fn(q, k, v), None)))
        for dist in dists:
            for seed in seeds:
                # as the sweep draws a distribution other than the primary one from the run's seed
                q, k, v = get(dist).make(scn, scenario_seed(seed, f"{scn.id}:{dist}"), "cuda")
                ref, ref_lse, lowp = reference_pair(q, k, v, scn.causal, scn.softmax_scale)
                for name, call in entries:
                    st = stats.setdefault((name, scn.id, dist), [0, 0.0, None])
                    got = call(q, k, v)
                    if got is None:
                        st[0] += 1
                        continue
                    out, lse = got
                    res = check_per_head(out, ref, lowp, lse, None if lse is None else ref_lse, cfg)
                    st[0] += not res.ok
                    if not res.ok and args.detail:  # the element of the largest error
                        i = int((out.float() - ref).abs().argmax())
                        print(
                            f"{name} {scn.id} {dist} seed {seed}: {res.reason}; at its largest error the "
                            f"reference {ref.flatten()[i].item():.6g}, the output {out.flatten()[i].item():.6g}, "
                            f"the bf16 reference {lowp.flatten()[i].item():.6g}",
                            flush=True,
                        )
                    err, tol = per_head_error_and_tolerance(out, ref, lowp, cfg)
                    ratio = float((err / tol).max())
                    if ratio > st[1]:
                        st[1], st[2] = ratio, seed
    print(
        f"{len(seeds)} seeds; per kernel, scenario and distribution: failed checks, the largest max error "
        "/ its tolerance over the (batch, head)s (its seed)"
    )
    failed = 0
    for (name, sid, dist), (fails, worst, seed) in stats.items():
        failed += fails
        print(f"{name:24s} {sid:48s} {dist:9s} fails {fails:3d}  worst {worst:.3f} (seed {seed})")
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
