"""`cpu-attn`: a small task that runs anywhere (gcc only): speed up a single-head attention forward
function written in C. The harness (in `cpu_attn_files/`) goes into the sealed evaluator's copy at the
start of a run, compiled there; an evaluation compiles the candidate, links it with those objects and
runs the result, all in the sandbox (seal.py), and checks the candidate against a double-precision
reference on six shapes and times it against a baseline (the starting code under another name),
interleaved, median of repeats.

The candidate runs in the harness's process: it can lie about its own results (this task exercises
the agent loop, it is not hardened against that), but it cannot change the harness the next
evaluation uses, nor write anywhere but its scratch folder. What the candidate can cause (a build
that fails or takes too long, a harness that crashes, wrong or slow results) is a verdict on it; an
evaluator that ends without a result (it could not start, its toolchain is gone) is `error`, the
evaluator's own failure, which ends the run (context.py)."""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from importlib import resources
from pathlib import Path

from ...contracts import exitcodes
from ...results import geomean
from ..seal import collect
from . import Evaluation, Goal, GridResult, register_task

DESCRIPTION = """\
Task: make a C function as fast as possible while it stays correct.
`{kernel}` defines
    void ks_attn_fwd_cpu(const float *q, const float *k, const float *v, float *o,
                         int n, int d, int causal, float scale);
single-head attention forward in float32, row-major n x d matrices: o[i,:] = sum_j softmax_j(scale * \
q[i,:].k[j,:]) v[j,:], and with causal != 0 row i only attends to j <= i. The evaluator compiles the \
file alone with `gcc {flags}` (it must define exactly that function, and no `main`), checks it against \
a double-precision reference on six shapes (n 64 to 256, d 32 to 64, causal or not; tolerance \
1e-4 + 1e-3*|ref| per element) and times it against the baseline, the starting code."""

# aligned functions and loops: without it the ratio of two identical functions depends on link order
CFLAGS = ("-O2", "-std=gnu11", "-fPIC", "-falign-functions=64", "-falign-loops=64")
# the harness's files in the sealed copy: name -> (the source it is, its own compiler flags); the baseline
# is the starting code (attn.c) compiled with its function renamed
HARNESS = {
    "harness.c": ("harness.c", ()),
    "baseline.c": ("attn.c", ("-Dks_attn_fwd_cpu=ks_attn_fwd_cpu_baseline",)),
}
HARNESS_FILES = tuple(HARNESS)
SCENARIOS = 6
OUTPUTS = ["candidate.c", "harness.out"]


def _compile(args: list[str], cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["gcc", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


@register_task("cpu-attn")
class CpuAttention:
    name = "cpu-attn"
    kernel = "attn.c"

    def __init__(self, kernel: str | None = None, goal: float = 2.0, budget_ms: float = 20.0, seed: int = 12345):
        files = resources.files(__package__).joinpath("cpu_attn_files")
        self.start = Path(kernel).resolve() if kernel else Path(str(files.joinpath("attn.c")))
        if not self.start.is_file():
            raise FileNotFoundError(f"starting kernel {self.start} not found")
        self.goal = Goal(float(goal), "baseline")
        self.budget_ms = float(budget_ms)
        self.seed = int(seed)

    def to_dict(self) -> dict:
        return {
            "name": self.name,
            "kernel": self.kernel,
            "start": str(self.start),
            "goal": self.goal.to_dict(),
            "budget_ms": self.budget_ms,
            "seed": self.seed,
            "cflags": list(CFLAGS),
        }

    def description(self) -> str:
        return DESCRIPTION.format(kernel=self.kernel, flags=" ".join(CFLAGS))

    def setup(self, ws) -> None:
        shutil.copyfile(self.start, ws.root / self.kernel)

    def seal(self, dest: Path) -> None:
        """The harness's sources and their objects, built here once."""
        files = resources.files(__package__).joinpath("cpu_attn_files")
        dest.mkdir(parents=True, exist_ok=True)
        for name, (source, flags) in HARNESS.items():
            shutil.copyfile(str(files.joinpath(source)), dest / name)
            r = _compile([*CFLAGS, *flags, "-c", name, "-o", name[:-2] + ".o"], dest)
            if r.returncode != 0:
                raise RuntimeError(f"the task's harness does not build: {r.stderr[-2000:]}")

    def evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> Evaluation:
        return self._evaluate(kernel_path, out_dir, timeout_s, seal, self.budget_ms)

    def full_grid_unavailable(self) -> GridResult | None:
        return None  # gcc is all it needs

    def bench_full_grid(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> GridResult:
        """Its evaluator already times all six shapes: a fresh evaluation with ten times the agents'
        timing budget (at least 20 ms)."""
        budget_ms = max(self.budget_ms * 10, 20.0)
        ev = self._evaluate(kernel_path, out_dir, timeout_s, seal, budget_ms)
        return GridResult(
            ev.status,
            ev.geomean if ev.correct else None,
            ev.scenarios_correct,
            ev.scenarios_total,
            ev.baseline,
            f"all {ev.scenarios_total} shapes, {budget_ms:g} ms timing budget",
        )

    def _evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal, budget_ms: float) -> Evaluation:
        t0 = time.monotonic()
        scratch = seal.new_scratch()
        work = scratch / "work"
        work.mkdir()
        shutil.copyfile(kernel_path, work / "candidate.c")
        args = [
            "--harness",
            str(seal.path("task")),
            "--work",
            str(work),
            "--seed",
            str(self.seed),
            "--budget-ms",
            str(budget_ms),
            "--timeout",
            str(timeout_s),
        ]
        ran = seal.run(seal.command(__name__, args), scratch, timeout_s + 300)
        left = collect(work, out_dir, [n for n in OUTPUTS if (work / n).is_file()])
        try:
            ev = Evaluation(**json.loads(ran.stdout.strip().splitlines()[-1]))
        except (IndexError, ValueError, TypeError):
            why = "timed out" if ran.timed_out else f"exited with {ran.returncode}"
            ev = Evaluation(
                "error", False, "baseline", error=f"the evaluator {why} without a result: {ran.stderr.strip()[-2000:]}"
            )
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
        ev.wall_s, ev.out_dir = time.monotonic() - t0, str(out_dir)
        if left:
            ev.error = ((ev.error or "") + f"\noutputs not kept: {', '.join(left)}").strip()
        return ev


# ---------------------------------------------------------------- inside the sealed evaluator


def evaluate_here(harness: Path, work: Path, seed: int, budget_ms: float, timeout_s: float) -> Evaluation:
    """Compiles work/candidate.c, links it with the harness's objects and runs it (in the sandbox)."""
    t0 = time.monotonic()

    def done(status, error=None, **kw):
        return Evaluation(status, status == "ok", "baseline", error=error, wall_s=time.monotonic() - t0, **kw)

    try:  # the candidate's source can keep the compiler busy: that is its own build failure
        r = _compile([*CFLAGS, "-c", "candidate.c", "-o", "candidate.o"], work)
        if r.returncode != 0:
            return done("build_failed", f"gcc failed:\n{r.stderr[-3000:]}")
        objects = [str(harness / (n[:-2] + ".o")) for n in HARNESS_FILES]
        r = _compile(["-o", "harness", *objects, "candidate.o", "-lm"], work)
        if r.returncode != 0:
            return done("build_failed", f"linking failed:\n{r.stderr[-3000:]}")
    except subprocess.TimeoutExpired as e:
        return done("build_failed", f"gcc took longer than {e.timeout:.0f}s")
    try:
        run = subprocess.run(
            [str(work / "harness"), str(seed), str(budget_ms)],
            cwd=work,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            stdin=subprocess.DEVNULL,
        )
        stdout, rc, timed_out = run.stdout, run.returncode, False
    except subprocess.TimeoutExpired as e:
        stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
        rc, timed_out = None, True
    (work / "harness.out").write_text(stdout)
    return parse(stdout, rc, timed_out, timeout_s, done)


def parse(stdout: str, rc: int | None, timed_out: bool, timeout_s: float, done) -> Evaluation:
    rows, finished = [], False
    for line in stdout.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if not isinstance(obj, dict):
            continue
        if obj.get("done"):
            finished = True
        elif "scenario" in obj:
            ratio = None
            if obj["status"] == "ok" and obj.get("candidate_ms", 0) > 0:
                ratio = round(obj["baseline_ms"] / obj["candidate_ms"], 4)
            rows.append(
                {"scenario": obj["scenario"], "status": obj["status"], "ratio": ratio, "reason": obj.get("reason", "")}
            )
    if not finished:
        reason = f"timed out after {timeout_s:.0f}s" if timed_out else f"the harness died (exit {rc})"
        rows.append(
            {
                "scenario": f"scenario {len(rows) + 1}",
                "status": "timeout" if timed_out else "crash",
                "ratio": None,
                "reason": reason,
            }
        )
    n_ok = sum(r["status"] == "ok" for r in rows)
    ratios = [(r["ratio"], r["scenario"]) for r in rows if r["ratio"]]
    gm = geomean([x for x, _ in ratios])
    lo = min(ratios) if ratios else (None, None)
    status = (
        "ok" if finished and n_ok == SCENARIOS else ("timeout" if timed_out else "crash" if not finished else "wrong")
    )
    return done(
        status,
        None if finished else rows[-1]["reason"],
        scenarios_total=SCENARIOS,
        scenarios_correct=n_ok,
        geomean=round(gm, 4) if gm else None,
        min_ratio=lo[0],
        min_ratio_scenario=lo[1],
        per_scenario=rows,
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="evaluate a cpu-attn candidate (run by the sealed evaluator)")
    ap.add_argument("--harness", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--seed", type=int, required=True)
    ap.add_argument("--budget-ms", type=float, required=True)
    ap.add_argument("--timeout", type=float, required=True)
    a = ap.parse_args(argv)
    ev = evaluate_here(a.harness, a.work, a.seed, a.budget_ms, a.timeout)
    print(json.dumps(ev.to_dict()))
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main())
