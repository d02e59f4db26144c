"""Where a kernel's warps wait, instruction by instruction: Nsight Compute's warp-state sampling (the
SourceCounters section) on one scenario, read back per SASS instruction, the instructions with the most
samples printed with their share of all samples and the stall reasons ncu gives each.

    python3 scripts/profile-source.py d128-h16kv1-s1024-causal [--kernel K.cu] [--fa3] [--top 40] [--out DIR]

Our kernel is profiled on one call inside run-once's NVTX range (`kernel:<scenario>`); with --fa3, FA3's
third launch of run-once's timing too. The report (`.ncu-rep`) and the per-instruction CSV of each are kept
in --out. Needs `ncu` and a GPU; clocks stay as they are (`--clock-control none`).
"""

from __future__ import annotations

import argparse
import csv
import io
import shutil
import subprocess
import sys
from pathlib import Path

FA3_KERNEL = "device_kernel"  # FA3's kernels are cutlass::device_kernel<...> instances


def collect(exe: str, scenario: str, kernel: str, fa3: bool, rep: Path) -> subprocess.CompletedProcess:
    """ncu's SourceCounters and WarpStateStats on one launch, into the report `rep`."""
    cmd = [
        exe,
        "--clock-control",
        "none",
        "--target-processes",
        "all",
        "--import-source",
        "no",
        "-f",
        "-o",
        str(rep.with_suffix("")),
        "--section",
        "SourceCounters",
        "--section",
        "WarpStateStats",
    ]
    run_once = [sys.executable, "-m", "kernelseek_suite.cli", "run-once", kernel, scenario, "--reps", "1"]
    if fa3:
        cmd += ["-k", f"regex:{FA3_KERNEL}", "--launch-skip", "2", "--launch-count", "1"]
        run_once += ["--time", "--baseline", "fa3"]
    else:
        cmd += ["--nvtx", "--nvtx-include", f"kernel:{scenario}/"]
    return subprocess.run(cmd + run_once, capture_output=True, text=True)


def source_page(exe: str, rep: Path) -> str:
    """The report's source page, SASS, as CSV."""
    cmd = [exe, "--import", str(rep), "--page", "source", "--csv", "--print-source", "sass"]
    return subprocess.run(cmd, capture_output=True, text=True).stdout


def number(text: str) -> float:
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return 0.0


def rows_of(page: str) -> tuple[list[str], list[dict[str, str]]]:
    """The CSV's columns and rows (the lines before its header, ncu's notes, left out)."""
    lines = page.splitlines()
    start = next((i for i, line in enumerate(lines) if "Source" in line and "," in line), None)
    if start is None:
        return [], []
    reader = csv.DictReader(io.StringIO("\n".join(lines[start:])))
    return list(reader.fieldnames or []), list(reader)


def samples_column(columns: list[str]) -> str | None:
    """The column of all warp-state samples per instruction."""
    for want in ("Warp Stall Sampling (All Samples)", "Warp Stall Sampling (All Cycles)"):
        if want in columns:
            return want
    return next((c for c in columns if "Sampling" in c and "All" in c), None)


def summary(page: str, top: int) -> str:
    """The `top` instructions by samples: each one's share of all samples, its address and SASS, the stall
    reasons ncu sampled it in, and, for the branch after an mbarrier try-wait, the barrier it waits on."""
    columns, rows = rows_of(page)
    col = samples_column(columns)
    if col is None:
        return "no per-instruction samples in the page; its columns: " + ", ".join(columns)
    total = sum(number(r[col]) for r in rows) or 1.0
    reasons = [c for c in columns if c.startswith("stall_") and not c.endswith("(Not Issued)")]
    out = [f"{len(rows)} instructions, {total:.0f} samples"]
    ranked = sorted(range(len(rows)), key=lambda i: -number(rows[i][col]))
    for i in ranked[:top]:
        r = rows[i]
        why = ", ".join(f"{c[len('stall_') :]} {number(r[c]):.0f}" for c in reasons if number(r[c]) > 0)
        source = " ".join(r.get("Source", "").split())
        # (the try-wait is at most three instructions before its branch)
        waits = (" ".join(rows[k].get("Source", "").split()) for k in range(i - 1, max(i - 4, -1), -1))
        before = next((w for w in waits if "TRYWAIT" in w), "")
        if before and "BRA" in source:
            source += "  <- " + before[before.find("[") :]
        addr = r.get("Address") or r.get("# Address") or ""
        out.append(f"{100 * number(r[col]) / total:5.1f}%  {addr}  {source[:110]}  ({why})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenario")
    ap.add_argument("--kernel", default="kernels/hopper/flash_fwd_sm90.cu")
    ap.add_argument("--fa3", action="store_true", help="FA3 on the same scenario too")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--out", type=Path, default=Path("/tmp/profile-source"))
    args = ap.parse_args(argv)
    exe = shutil.which("ncu")
    if exe is None:
        print("ncu not found: install Nsight Compute or put it on the PATH", file=sys.stderr)
        return 3
    args.out.mkdir(parents=True, exist_ok=True)
    rc = 0
    for fa3 in (False, True) if args.fa3 else (False,):
        name = f"{args.scenario}-{'fa3' if fa3 else Path(args.kernel).stem}"
        rep = args.out / f"{name}.ncu-rep"
        ran = collect(exe, args.scenario, args.kernel, fa3, rep)
        (args.out / f"{name}.log").write_text(ran.stdout + ran.stderr)
        if not rep.exists():
            print(f"{name}: no report (ncu exit {ran.returncode}; {args.out / (name + '.log')})")
            rc = 1
            continue
        page = source_page(exe, rep)
        (args.out / f"{name}-sass.csv").write_text(page)
        print(f"== {name}\n{summary(page, args.top)}\n", flush=True)
    return rc


if __name__ == "__main__":
    sys.exit(main())
