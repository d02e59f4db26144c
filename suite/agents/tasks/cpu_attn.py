"""`cpu-attn`: a small task that runs anywhere (gcc only): speed up a single-head attention forward
function written in C. The harness (in `cpu_attn_files/`) is copied at set-up into a private folder
outside the workspace; it checks the candidate against a double-precision reference on six shapes and
times it against a baseline (the starting code under another name), interleaved, median of repeats.

This task exercises the agent loop; it is not hardened against a candidate that attacks its harness
(the candidate runs in the harness's process)."""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from importlib import resources
from pathlib import Path

from ...results import geomean
from ..workspace import Workspace
from . import Evaluation, Goal, register_task

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
        # the harness lives in a private folder outside any workspace
        self.harness_dir = Path(tempfile.mkdtemp(prefix="ks-cpu-harness-"))
        for name in ("harness.c", "baseline.c"):
            shutil.copyfile(str(files.joinpath(name)), self.harness_dir / name)
        self._objects: list[Path] | None = None

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

    def setup(self, ws: Workspace) -> None:
        shutil.copyfile(self.start, ws.root / self.kernel)

    def protected_paths(self) -> list[Path]:
        return [Path(__file__).parent, self.harness_dir]

    def close(self) -> None:
        shutil.rmtree(self.harness_dir, ignore_errors=True)

    def _harness_objects(self) -> list[Path]:
        if self._objects is None:
            objs = []
            for name in ("harness.c", "baseline.c"):
                obj = self.harness_dir / (name[:-2] + ".o")
                r = _compile([*CFLAGS, "-c", name, "-o", obj.name], self.harness_dir)
                if r.returncode != 0:
                    raise RuntimeError(f"the task's harness does not build: {r.stderr[-2000:]}")
                objs.append(obj)
            self._objects = objs
        return self._objects

    def evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float) -> Evaluation:
        out_dir.mkdir(parents=True, exist_ok=True)
        t0 = time.monotonic()
        shutil.copyfile(kernel_path, out_dir / "candidate.c")

        def done(status, error=None, **kw):
            return Evaluation(
                status,
                status == "ok",
                "baseline",
                error=error,
                wall_s=time.monotonic() - t0,
                out_dir=str(out_dir),
                **kw,
            )

        r = _compile([*CFLAGS, "-c", "candidate.c", "-o", "candidate.o"], out_dir)
        if r.returncode != 0:
            return done("build_failed", f"gcc failed:\n{r.stderr[-3000:]}")
        r = _compile(["-o", "harness", *map(str, self._harness_objects()), "candidate.o", "-lm"], out_dir)
        if r.returncode != 0:
            return done("build_failed", f"linking failed:\n{r.stderr[-3000:]}")
        try:
            run = subprocess.run(
                [str(out_dir / "harness"), str(self.seed), str(self.budget_ms)],
                cwd=out_dir,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                stdin=subprocess.DEVNULL,
            )
            stdout, rc, timed_out = run.stdout, run.returncode, False
        except subprocess.TimeoutExpired as e:
            stdout = (e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
            rc, timed_out = None, True
        (out_dir / "harness.out").write_text(stdout)
        return self._parse(stdout, rc, timed_out, timeout_s, done)

    def _parse(self, stdout: str, rc: int | None, timed_out: bool, timeout_s: float, done) -> Evaluation:
        rows, finished = [], False
        for line in stdout.splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if obj.get("done"):
                finished = True
            elif "scenario" in obj:
                ratio = None
                if obj["status"] == "ok" and obj.get("candidate_ms", 0) > 0:
                    ratio = round(obj["baseline_ms"] / obj["candidate_ms"], 4)
                rows.append(
                    {
                        "scenario": obj["scenario"],
                        "status": obj["status"],
                        "ratio": ratio,
                        "reason": obj.get("reason", ""),
                    }
                )
        total = 6
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
            "ok" if finished and n_ok == total else ("timeout" if timed_out else "crash" if not finished else "wrong")
        )
        return done(
            status,
            None if finished else rows[-1]["reason"],
            scenarios_total=total,
            scenarios_correct=n_ok,
            geomean=round(gm, 4) if gm else None,
            min_ratio=lo[0],
            min_ratio_scenario=lo[1],
            per_scenario=rows,
        )
