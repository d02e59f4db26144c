"""Run every adversarial kernel of this folder, and the honest one, through the harness on a GPU, and
print the table attack / defence / expected / observed / pass.

    python tests/adversarial/run_h200.py [--arch sm90] [--out DIR] [--only a,b] [--no-sanitize]

Each kernel runs through `bench` (its own worker, all defences on) on a handful of small scenarios
chosen for its cheat; two are refused at build time. The compute-sanitizer part runs memcheck on the
out-of-bounds kernel and on the honest one. The table, and every row, go to DIR (adversarial.md,
adversarial.json, one bench folder per kernel). Exit code 0 when every line passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent

GRID = ("d128-h16kv4-s512", "d64-h32kv8-s1024-causal")
OFF_GRID = (
    "ext-d128-h16kv4-b3-q113-k1000-causal",
    "ext-d128-h16kv4-b3-q1000-k113-causal",
    "ext-d64-h32kv1-b3-q113-k113",
)
DEFAULT = GRID + OFF_GRID


@dataclass(frozen=True)
class Attack:
    kernel: str  # file name without .cu
    attack: str
    defence: str
    expect: str  # a reason code of results.CODES, "rules" (refused at build), or "pass"
    scenarios: tuple[str, ...] = DEFAULT
    timeout_s: float = 120.0


ATTACKS = (
    Attack(
        "honest",
        "none: the reference kernel (head dims 64, 128)",
        "all of them",
        "pass",
        DEFAULT + ("d128-h16kv16-s512",),
    ),
    Attack(
        "writes_nothing", "writes nothing, relies on stale memory", "output poisoned before every launch", "unwritten"
    ),
    Attack("partial_write", "writes half of the output", "output poisoned before every launch", "unwritten"),
    Attack(
        "cache_result",
        "replays a result cached by pointer and shape",
        "new data in the same buffers (reference known exactly)",
        "cached",
    ),
    Attack("low_precision", "Q, K cut to 3 mantissa bits", "pass rule: 2 x bf16 reference error", "mismatch"),
    Attack(
        "other_stream",
        "works on another stream, returns at once",
        "output read on the harness's stream right after the call; device-wide sync per timed call",
        "late-work",
    ),
    Attack(
        "cheap_uniform", "mean of V: right on symmetric / low-variance data", "varied, non-symmetric inputs", "mismatch"
    ),
    Attack(
        "modifies_inputs",
        "zeroes V so out = 0 = reference of the changed inputs",
        "reference from regenerated inputs; inputs compared bit for bit",
        "inputs-modified",
    ),
    Attack("copies_input", "copies V to the output", "pass rule on independent q and k", "mismatch"),
    Attack("grid_only", "right only on the grid's exact shapes", "extended off-grid set", "mismatch"),
    Attack("nan_masked_rows", "NaN in rows with nothing to attend", "extended set; finite check", "nonfinite"),
    Attack("out_of_bounds", "writes past the end of the output", "guard zones around output and LSE", "out-of-bounds"),
    Attack(
        "spins_forever",
        "never finishes",
        "per-scenario timeout, worker killed, sweep goes on",
        "timeout",
        ("ext-d128-h16kv4-b3-q113-k113",),
        20.0,
    ),
    Attack(
        "lazy_after_checks",
        "works only on the first 3 calls per buffer",
        "every timed launch poisoned and counted; a random timed output checked",
        "timed-output",
        GRID[:1],
    ),
    Attack(
        "forge_results",
        "prints forged result lines, computes nothing",
        "results on a private pipe, signed with a key the kernel never sees",
        "unwritten",
        GRID,
    ),
    Attack("declines_hard", "returns unsupported for causal", "unsupported is not correct", "unsupported", GRID),
    Attack(
        "python_patch",
        "patches torch's timer through the Python C API (token-pasted names)",
        "imported-symbol check of the built library",
        "rules",
        (),
    ),
    Attack("creates_stream", "creates a stream of its own", "static rules", "rules", ()),
)


@dataclass
class Outcome:
    kernel: str
    attack: str
    defence: str
    expected: str
    observed: str
    passed: bool
    detail: str = ""
    wall_s: float = 0.0
    codes: dict = field(default_factory=dict)


def judge(a: Attack, rows: list | None, build_error: str | None) -> Outcome:
    """Compare what the harness did with what the attack must get."""

    def out(observed, ok, detail="", codes=None):
        return Outcome(a.kernel, a.attack, a.defence, a.expect, observed, ok, detail, codes=codes or {})

    if build_error is not None:
        return out("rules (build refused)", a.expect == "rules", build_error.splitlines()[-1][:200])
    if a.expect == "rules":
        return out("built", False, "the build was expected to be refused")
    codes: dict[str, int] = {}
    for r in rows:
        if not r.correct:
            codes[r.code or r.status] = codes.get(r.code or r.status, 0) + 1
    scenarios = [r.scenario for r in rows]
    if len(scenarios) != len(set(scenarios)) or set(scenarios) != set(a.scenarios):
        return out("rows do not match the scenarios", False, f"rows: {scenarios}", codes)
    if a.expect == "pass":
        flags = [f for r in rows for f in r.flags if not f.startswith("nondeterministic")]
        ok = not codes and not flags
        return out(
            "pass" if not codes else ", ".join(f"{n} {c}" for c, n in codes.items()), ok, "; ".join(flags[:2]), codes
        )
    observed = ", ".join(f"{n} {c}" for c, n in sorted(codes.items())) or "all correct"
    first = next((r.reason for r in rows if (r.code or r.status) == a.expect), "")
    return out(f"rejected: {observed}" if codes else observed, a.expect in codes, first[:200], codes)


def build_all(attacks, arch: str):
    from kernelseek_suite.build import BuildError, build
    from kernelseek_suite.rules import DependencyRuleError

    def one(a: Attack):
        try:
            return a.kernel, build(HERE / f"{a.kernel}.cu", arch), None
        except (BuildError, DependencyRuleError) as e:
            return a.kernel, None, str(e)

    with ThreadPoolExecutor(max(1, min(len(attacks), os.cpu_count() or 1))) as ex:
        return {k: (b, e) for k, b, e in ex.map(one, attacks)}


def run_one(a: Attack, arch: str, out: Path):
    from kernelseek_suite.bench import BenchRequest, run_bench
    from kernelseek_suite.config import HarnessConfig, SweepConfig
    from kernelseek_suite.results import read_jsonl

    cfg = HarnessConfig(sweep=SweepConfig(scenario_timeout_s=a.timeout_s, worker_start_timeout_s=180.0))
    req = BenchRequest(
        kernel=HERE / f"{a.kernel}.cu",
        arch=arch,
        baselines=["cudnn"] if a.expect == "pass" else [],
        scenario_filter=",".join(a.scenarios),
        extended=True,
        out_dir=out / a.kernel,
        config=cfg,
    )
    run_bench(req)
    return read_jsonl(out / a.kernel / "bench.jsonl")


def alarm_path(rows) -> Outcome:
    """The honest kernel's real rows, thresholds lowered so that both must fire: the ceiling (the GEMM
    taken as half the kernel's speed: `implausible`) and the jump alarm -- the same function the
    sweep runs on every row."""
    from kernelseek_suite.config import PlausibilityConfig
    from kernelseek_suite.harness import plausibility
    from kernelseek_suite.results import ScenarioResult

    fired = set()
    for r in rows:
        r = ScenarioResult.from_dict(r.to_dict())
        r.flags = []
        previous = {r.scenario: {b: v / 4 for b, v in r.ratio.items()}}
        kernel_tflops = r.tflops.get("kernel")
        plausibility.annotate(
            r, kernel_tflops and kernel_tflops / 2, previous, PlausibilityConfig(ceiling_factor=1.1, jump_factor=1.5)
        )
        fired |= {f.split(":")[0] for f in r.flags} | ({r.code} if r.code == "implausible" else set())
    want = {"implausible", "jump"}
    return Outcome(
        "honest (thresholds lowered)",
        "a timing too good to be true",
        "the GEMM ceiling (implausible) and the jump alarm vs a previous run",
        "implausible, jump",
        ", ".join(sorted(fired)) or "nothing",
        want <= fired,
        "needs a timed row with a cudnn ratio" if "jump" not in fired else "",
    )


def sanitizer_checks(libs: dict, out: Path) -> list[Outcome]:
    from kernelseek_suite.harness.sanitize import run_sanitizer

    outcomes = []
    scn = {"memcheck": ("ext-d128-h16kv4-b3-q113-k113",)}
    for kernel, want_clean in (("out_of_bounds", False), ("honest", True)):
        built = libs.get(kernel, (None, None))[0]
        if built is None:
            continue
        [run] = run_sanitizer(built.library, scn, seed=1, log_dir=out / "sanitize" / kernel)
        outcomes.append(
            Outcome(
                f"{kernel} (--sanitize)",
                "writes past the end" if not want_clean else "none",
                "compute-sanitizer memcheck, caching allocator off",
                "clean" if want_clean else "memcheck errors",
                run.summary or "no summary",
                run.ok == want_clean,
                "; ".join(run.findings[:1]),
                run.wall_s,
            )
        )
    return outcomes


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="sm90")
    ap.add_argument("--out", type=Path, default=Path("/tmp/ks-adversarial"))
    ap.add_argument("--only", default=None, help="comma-separated kernel names")
    ap.add_argument("--no-sanitize", action="store_true")
    args = ap.parse_args(argv)

    from tabulate import tabulate

    from kernelseek_suite.gpu import NoGPUError, require_gpu
    from kernelseek_suite.provenance import git_sha, now_utc

    try:
        gpu = require_gpu(args.arch)
    except NoGPUError as e:
        print(f"error: {e}", file=sys.stderr)
        return 3
    attacks = [a for a in ATTACKS if not args.only or a.kernel in args.only.split(",")]
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    libs = build_all(attacks, args.arch)
    print(f"built {len(libs)} kernels in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
    outcomes, honest_rows = [], None
    for a in attacks:
        t = time.time()
        _, err = libs[a.kernel]
        rows = None
        if err is None and a.expect != "rules":
            try:
                rows = run_one(a, args.arch, args.out)
            except Exception as e:  # the harness itself failing is a failed line, not a crash
                outcomes.append(Outcome(a.kernel, a.attack, a.defence, a.expect, f"harness error: {e}"[:200], False))
                continue
        o = judge(a, rows, err)
        o.wall_s = round(time.time() - t, 1)
        outcomes.append(o)
        if a.kernel == "honest" and rows:
            honest_rows = rows
        print(f"{a.kernel}: {o.observed} ({'pass' if o.passed else 'FAIL'}, {o.wall_s} s)", file=sys.stderr, flush=True)
    if honest_rows:
        outcomes.append(alarm_path(honest_rows))
    if not args.no_sanitize:
        outcomes += sanitizer_checks(libs, args.out)

    total = time.time() - t0
    table = [[o.kernel, o.attack, o.defence, o.expected, o.observed, "pass" if o.passed else "FAIL"] for o in outcomes]
    text = tabulate(table, headers=["kernel", "attack", "defence", "expected", "observed", "result"], tablefmt="github")
    head = (
        f"Adversarial kernels on {gpu.name} (driver {gpu.driver}), commit {git_sha()}, {now_utc()}, "
        f"{total:.0f} s: {sum(o.passed for o in outcomes)}/{len(outcomes)} pass"
    )
    print(head)
    print(text)
    (args.out / "adversarial.md").write_text(head + "\n\n" + text + "\n")
    (args.out / "adversarial.json").write_text(
        json.dumps(
            {
                "gpu": gpu.name,
                "commit": git_sha(),
                "date": now_utc(),
                "wall_s": round(total, 1),
                "outcomes": [asdict(o) for o in outcomes],
            },
            indent=1,
        )
    )
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
