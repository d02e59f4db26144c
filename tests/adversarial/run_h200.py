"""Run every adversarial kernel of this folder, and the honest one, through the harness on a GPU, and
print the table attack / defence / expected / observed / pass.

    python tests/adversarial/run_h200.py [--arch sm90] [--out DIR] [--only a,b] [--no-sanitize]

Each kernel runs through `bench` (its own worker, all defences on) on a handful of small scenarios
chosen for its cheat; five are refused at build time, and one of those (persisting_l2) is also built
with plain nvcc and run through the sweep, to show the run-time defence under the build's refusal.
The compute-sanitizer part runs memcheck on the out-of-bounds kernel and on the honest one. Last, what
the new defences cost per call is measured (fresh inputs, the device-state check, a sampled
reference). The table, and every row, go to DIR (adversarial.md, adversarial.json, one bench folder
per kernel). Exit code 0 when every line passes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
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
    # refused at build: what the run-time defence under that rule must say when the kernel is built
    # without it (plain nvcc) and run anyway, or None
    unchecked: str | None = None


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
    Attack(
        "replay_by_content",
        "replays outputs kept by a hash of the contents of q, k and v",
        "new contents before every counted call; repeat calls on seen contents timed apart",
        "cached",
        GRID[:1],
    ),
    Attack(
        "replay_by_content_paced",
        "the same replay, paced to 650 TFLOP/s (about 1.3x FA3): no alarm on speed",
        "new contents before every counted call; repeat calls on seen contents timed apart",
        "cached",
        GRID[:1],
    ),
    Attack(
        "above_ceiling",
        "after the checks, a copy of V (finite, cheap): faster than a GEMM",
        "above 1.10x the GEMM ceiling measured on the GPU: implausible, not correct",
        "implausible",
        GRID[:1],
    ),
    Attack(
        "reads_process",
        "reads environ, /proc/self/cmdline (fopen64) and puts a callback on the stream",
        "allow-list of what the compiled code imports",
        "rules",
        (),
    ),
    Attack(
        "static_constructor",
        "a global object's constructor runs at load and keeps the GPU busy",
        "no .init_array entry but nvcc's own registration",
        "rules",
        (),
    ),
    Attack(
        "persisting_l2",
        "persisting-L2 set-aside and an access-policy window over K, never reset",
        "allow-list of imports; under it, limits and stream windows checked and put back after every call",
        "rules",
        (),
        unchecked="device-state",
    ),
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


def build_unchecked(a: Attack, arch: str, out: Path) -> tuple[Path | None, str | None]:
    """The kernel compiled by nvcc with the suite's flags and none of its checks (no rules, no
    allow-list): the only way to show the run-time defence under a build-time refusal."""
    import subprocess

    from kernelseek_suite import config
    from kernelseek_suite.build import nvcc_path

    lib = out / "unchecked" / f"{a.kernel}.so"
    lib.parent.mkdir(parents=True, exist_ok=True)
    cmd = [nvcc_path() or "nvcc", *config.NVCC_FLAGS, config.ARCHES[arch]["gencode"], "-o", str(lib)]
    p = subprocess.run([*cmd, str(HERE / f"{a.kernel}.cu")], capture_output=True, text=True)
    return (lib, None) if p.returncode == 0 else (None, (p.stdout + p.stderr)[-400:])


def run_unchecked(a: Attack, arch: str, out: Path, library: Path, gpu_uuid: str | None):
    """The library straight through the sweep (the worker and all its run-time defences)."""
    import secrets

    from kernelseek_suite import scenarios as sc
    from kernelseek_suite.config import HarnessConfig, SweepConfig
    from kernelseek_suite.harness.sweep import SweepSpec, run_sweep

    folder = out / f"{a.kernel}-unchecked"
    folder.mkdir(parents=True, exist_ok=True)
    ids = sc.by_id(arch)
    spec = SweepSpec(
        library=str(library),
        scenarios=[ids[s] for s in a.scenarios],
        baselines=[],
        seed=secrets.randbits(48),
        config=HarnessConfig(sweep=SweepConfig(scenario_timeout_s=a.timeout_s, worker_start_timeout_s=180.0)),
        worker_log=folder / "worker.log",
        gpu_uuid=gpu_uuid,
    )
    return run_sweep(spec, folder / "bench.jsonl")


def unchecked_attack(a: Attack) -> Attack:
    return replace(
        a,
        kernel=f"{a.kernel} (built without the allow-list)",
        defence="device state read after every call of the kernel, put back, persisting L2 lines reset",
        expect=a.unchecked,
        scenarios=GRID[:1],
    )


def measure_costs(arch: str) -> dict:
    """What the new defences cost per call of the kernel, on this GPU, in a child process (this one
    keeps no CUDA context): new input contents (GPU time and the CPU time to enqueue them) for the
    largest and the smallest inputs of the grid, the device-state check (CPU), and the fp32 reference
    of one sampled (batch, head) of the longest sequence."""
    import subprocess

    p = subprocess.run([sys.executable, __file__, "--costs-json", "--arch", arch], capture_output=True, text=True)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {"error": (p.stderr or p.stdout)[-400:]}


def _costs_json(arch: str) -> dict:
    import random
    import statistics

    import torch

    from kernelseek_suite import scenarios as sc
    from kernelseek_suite.config import TimingConfig
    from kernelseek_suite.harness.device_state import CU_STREAM_LEGACY, CudaDriver, DeviceGuard
    from kernelseek_suite.harness.fresh import FreshContent, take_sample
    from kernelseek_suite.harness.inputs import make_inputs
    from kernelseek_suite.harness.reference import reference_pair

    def gpu_ms(fn, n=20):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(n):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / n

    def cpu_us(fn, n=20):
        t = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            t.append((time.perf_counter() - t0) * 1e6)
            torch.cuda.synchronize()
        return statistics.median(t)

    ids = sc.by_id(arch)
    costs: dict = {"fresh": {}}
    for sid in ("d192v128-h16kv16-s32768", "d64-h32kv1-s32768"):
        scn = ids[sid]
        q, k, v = make_inputs(scn, 1, "cuda")
        f = FreshContent((q, k, v), 200, seed=2)
        mib = sum(t.numel() * t.element_size() for t in (q, k, v)) / (1 << 20)
        costs["fresh"][sid] = {
            "inputs_mib": round(mib),
            "gpu_ms": round(gpu_ms(f.next), 4),
            "cpu_us": round(cpu_us(f.next), 1),
        }
        if sid.startswith("d192"):
            out = torch.zeros(scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v, dtype=torch.bfloat16, device="cuda")
            lse = torch.zeros(scn.batch, scn.heads_q, scn.seqlen_q, device="cuda")
            rows = TimingConfig().checked_rows
            sample = take_sample(0, 0, q, k, v, out, lse, random.Random(0), rows=rows)
            t0 = time.perf_counter()
            reference_pair(
                sample.q, sample.k, sample.v, scn.causal, scn.softmax_scale, rows=sample.rows, seqlen_q=sample.seqlen_q
            )
            torch.cuda.synchronize()
            costs["sampled_reference_ms"] = {sid: round((time.perf_counter() - t0) * 1e3, 1)}
        del q, k, v, f
    s = torch.cuda.Stream()
    guard = DeviceGuard(CudaDriver(), [s.cuda_stream, CU_STREAM_LEGACY])
    costs["device_state_check"] = {
        "cpu_us": round(cpu_us(guard.check_and_restore, 200), 1),
        "gpu_ms": round(gpu_ms(guard.check_and_restore), 4),
    }
    return costs


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
    ap.add_argument("--costs-json", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.costs_json:
        print(json.dumps(_costs_json(args.arch)))
        return 0

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
    with ThreadPoolExecutor(2) as ex:
        unchecked = {a.kernel: ex.submit(build_unchecked, a, args.arch, args.out) for a in attacks if a.unchecked}
        libs = build_all(attacks, args.arch)
        unchecked = {k: f.result() for k, f in unchecked.items()}
    print(f"built {len(libs) + len(unchecked)} kernels in {time.time() - t0:.0f} s", file=sys.stderr, flush=True)
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
        if a.unchecked:
            t, u = time.time(), unchecked_attack(a)
            lib, why = unchecked[a.kernel]
            try:
                o = (
                    judge(u, run_unchecked(u, args.arch, args.out, lib, gpu.uuid or None), None)
                    if lib
                    else Outcome(u.kernel, u.attack, u.defence, u.expect, f"nvcc failed: {why}", False)
                )
            except Exception as e:
                o = Outcome(u.kernel, u.attack, u.defence, u.expect, f"harness error: {e}"[:200], False)
            o.wall_s = round(time.time() - t, 1)
            outcomes.append(o)
            print(f"{u.kernel}: {o.observed} ({'pass' if o.passed else 'FAIL'}, {o.wall_s} s)", file=sys.stderr)
    if honest_rows:
        outcomes.append(alarm_path(honest_rows))
    if not args.no_sanitize:
        outcomes += sanitizer_checks(libs, args.out)

    costs = measure_costs(args.arch)
    total = time.time() - t0
    table = [[o.kernel, o.attack, o.defence, o.expected, o.observed, "pass" if o.passed else "FAIL"] for o in outcomes]
    text = tabulate(table, headers=["kernel", "attack", "defence", "expected", "observed", "result"], tablefmt="github")
    head = (
        f"Adversarial kernels on {gpu.name} (driver {gpu.driver}), commit {git_sha()}, {now_utc()}, "
        f"{total:.0f} s: {sum(o.passed for o in outcomes)}/{len(outcomes)} pass"
    )
    cost_line = "costs per call of the kernel: " + json.dumps(costs)
    print(cost_line)
    print(head)
    print(text)
    (args.out / "adversarial.md").write_text(head + "\n\n" + text + "\n\n" + cost_line + "\n")
    (args.out / "adversarial.json").write_text(
        json.dumps(
            {
                "gpu": gpu.name,
                "commit": git_sha(),
                "date": now_utc(),
                "wall_s": round(total, 1),
                "costs": costs,
                "outcomes": [asdict(o) for o in outcomes],
            },
            indent=1,
        )
    )
    return 0 if all(o.passed for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
