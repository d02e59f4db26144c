"""Nsight Compute on our kernel and on FA3, side by side, one scenario at a time: where each one's time
goes (issue slots, the tensor, MUFU, FMA and ALU pipes, the top stall reasons), to tell an issue-bound
loop from a tensor-bound one before a change is made for either.

    python3 scripts/profile-beside.py d64-h32kv8-s8192,d256-h8kv8-s1024-causal [--kernel K.cu ...] \
        [--no-fa3] [--out DIR]

Each kernel is profiled on one call inside run-once's NVTX range (`kernel:<scenario>`); FA3 on its
third launch in run-once's timing (`--baseline fa3`), by its kernel's name. Needs `ncu` and a GPU;
clocks stay as they are (`--clock-control none`). The raw CSV of every profile is kept in --out.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from pathlib import Path

from kernelseek_suite.profiling import ncu

# what the sections do not print: the issue slots and the pipes a softmax runs on
PIPE_METRICS = (
    "sm__inst_issued.avg.pct_of_peak_sustained_active",  # issue slots busy
    "sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active",  # MUFU: the exponentials
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_active",
)
FA3_KERNEL = "device_kernel"  # FA3's kernels are cutlass::device_kernel<...> instances
COLUMNS = ("scenario", "kernel", "time", "tensor", "issue", "MUFU", "FMA", "ALU", "top stalls (cycles per issue)")


def command(exe: str, scenario: str, kernel: str, fa3: bool, extra: bool = True) -> list[str]:
    """ncu on run-once: our kernel inside its NVTX range, or FA3's third launch of the timing."""
    run_once = [sys.executable, "-m", "kernelseek_suite.cli", "run-once", kernel, scenario, "--reps", "1"]
    if fa3:
        cmd = ncu.ncu_command(exe, [], kernel_regex=FA3_KERNEL, extra_metrics=extra)
        cmd += ["--launch-skip", "2", "--launch-count", "1"]
        target = [*run_once, "--time", "--baseline", "fa3"]
    else:
        cmd = ncu.ncu_command(exe, [], nvtx_range=f"kernel:{scenario}", extra_metrics=extra)
        target = run_once
    if extra:
        i = cmd.index("--metrics") + 1
        cmd[i] = ",".join([cmd[i], *PIPE_METRICS])
    return cmd + target


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}%"


def row_of(scenario: str, who: str, k: ncu.KernelProfile) -> tuple[str, ...]:
    s = ncu.summarize(k)
    time = "-" if s.duration_s is None else f"{s.duration_s * 1e3:.3f} ms"
    stalls = ", ".join(f"{x.reason} {x.cycles_per_issue:.2f}" for x in s.stalls[:3]) or "-"
    issue, xu, fma, alu = (k.value(m) for m in PIPE_METRICS)
    return (scenario, who, time, _pct(s.tensor_pipe_pct), _pct(issue), _pct(xu), _pct(fma), _pct(alu), stalls)


def profile(exe: str, scenario: str, kernel: str, fa3: bool, out: Path) -> ncu.KernelProfile | str:
    """The profile of one kernel on one scenario, or why there is none."""
    name = f"{scenario}-{'fa3' if fa3 else Path(kernel).stem}"
    for extra in (True, False):  # an ncu that refuses a metric profiles again with the sections alone
        ran = subprocess.run(command(exe, scenario, kernel, fa3, extra), capture_output=True, text=True)
        (out / f"{name}.csv").write_text(ran.stdout)
        (out / f"{name}.log").write_text(ran.stderr)
        found = ncu.parse(ran.stdout)
        if found:
            return found[-1]
        said = (ran.stdout + ran.stderr).lower()
        if not (extra and "metric" in said and "error" in said):
            break
    return f"no profile (ncu exit {ran.returncode}; {out / (name + '.log')})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", help="scenario ids, comma-separated")
    ap.add_argument("--kernel", action="append", help="a kernel to profile (default: the Hopper kernel)")
    ap.add_argument("--no-fa3", action="store_true", help="leave FA3 out")
    ap.add_argument("--out", type=Path, default=Path("/tmp/profile-beside"))
    args = ap.parse_args(argv)
    exe = shutil.which("ncu")
    if exe is None:
        print("ncu not found: install Nsight Compute or put it on the PATH", file=sys.stderr)
        return 3
    kernels = args.kernel or ["kernels/hopper/flash_fwd_sm90.cu"]
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for scenario in [s for s in args.scenarios.split(",") if s]:
        jobs = [(k, False, Path(k).stem) for k in kernels] + ([] if args.no_fa3 else [(kernels[0], True, "fa3")])
        for kernel, fa3, who in jobs:
            got = profile(exe, scenario, kernel, fa3, args.out)
            rows.append(row_of(scenario, who, got) if isinstance(got, ncu.KernelProfile) else (scenario, who, got))
            print(" | ".join(rows[-1]), flush=True)
    widths = [max([len(c)] + [len(r[i]) for r in rows if i < len(r)]) for i, c in enumerate(COLUMNS)]
    print("\n" + " | ".join(c.ljust(w) for c, w in zip(COLUMNS, widths)))
    for r in rows:
        print(" | ".join(x.ljust(w) for x, w in zip(r, widths)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
