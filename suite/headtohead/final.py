"""Each run's best kernel benched on its task's full grid at the end of a comparison.

An evaluation during a run times a sample of the scenarios (10 of 182 for `fa-fwd-sm90`); the
table's last word is the full grid: `kernelseek-suite bench --kernel BEST --baseline fa3` over all
182 scenarios for `fa-fwd-sm90` (on a GPU of the task's architecture; without one it is skipped and
says how to run it where there is one), and for `cpu-attn`, whose evaluator already times all six of
its shapes, a fresh evaluation with ten times the agents' timing budget. Like every evaluation, it
runs a sealed copy of the evaluator in the sandbox (agents/seal.py). Each best kernel is benched
`repeats` times (the protocol's `control.rebench`, at least 3): the row keeps every measurement and
their median, and the interval of the difference between arms draws from them (stats.py). Rows go to
`<out>/final.jsonl` and into the table (`full grid` column).

The A/A control (`aa_control`) is here too: the task's starting kernel evaluated N times exactly as a
run evaluates a candidate, the noise band of the task on this machine (noise.py)."""

from __future__ import annotations

import json
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..agents.config import RunConfig
from ..agents.tasks import make_task
from ..contracts.traces import artifacts_dir, read_trace
from ..provenance import now_utc
from .compare import portable_options
from .noise import Repeats
from .runstats import stats_from_events

FINAL_FILE = "final.jsonl"


@dataclass
class FinalBench:
    trace: str
    run_id: str
    label: str
    seed: int | None
    candidate_sha256: str | None
    eval_index: int | None
    status: str  # ok | wrong | build_failed | crash | timeout | no_gpu | skipped | error
    geomean: float | None
    scenarios_correct: int | None
    scenarios_total: int | None
    baseline: str | None
    note: str
    out_dir: str | None
    wall_s: float
    measured_at: str
    geomeans: list = field(default_factory=list)  # every bench's geomean, in order (None: not correct)
    repeats: int = 1

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class GridResult:
    status: str
    geomean: float | None = None
    scenarios_correct: int | None = None
    scenarios_total: int | None = None
    baseline: str | None = None
    note: str = ""


def _fa_fwd_ready(task) -> GridResult | None:
    """A GridResult that says why the full grid cannot be benched here, or None."""
    from ..gpu import NoGPUError, default_gpu_index, require_gpu

    try:
        require_gpu(task.arch, default_gpu_index())
    except NoGPUError as e:
        return GridResult(
            "no_gpu",
            baseline=task.baseline,
            note=f"skipped: {e}. Bench the best kernels where there is one: kernelseek-suite compare "
            "--from-traces DIR --final-bench",
        )
    return None


def _fa_fwd(task, kernel: Path, out_dir: Path, timeout_s: float, seal) -> GridResult:
    from ..agents.seal import collect

    scratch = seal.new_scratch()
    try:
        work = scratch / "work" / Path(task.kernel).name
        work.parent.mkdir()
        (scratch / "out").mkdir()
        shutil.copyfile(kernel, work)
        args = [
            "bench",
            "--arch",
            task.arch,
            "--kernel",
            str(work),
            "--baseline",
            task.baseline,
            "--out",
            str(scratch / "out"),
        ]
        p = seal.run(seal.command("kernelseek_suite.cli", args), scratch, timeout_s)
        collect(scratch / "out", out_dir)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    if p.timed_out:
        return GridResult("timeout", baseline=task.baseline, note=f"the bench took longer than {timeout_s:.0f}s")
    summary = out_dir / "summary.json"
    if p.returncode == 2:
        return GridResult("build_failed", baseline=task.baseline, note=p.stderr.strip()[-500:])
    if p.returncode == 3:
        return GridResult("no_gpu", baseline=task.baseline, note=p.stderr.strip()[-500:])
    if p.returncode not in (0, 1) or not summary.exists():
        return GridResult("error", baseline=task.baseline, note=f"bench exited {p.returncode}: {p.stderr[-500:]}")
    s = json.loads(summary.read_text())
    return GridResult(
        "ok" if p.returncode == 0 else "wrong",
        (s.get("geomean") or {}).get(task.baseline),
        s.get("scenarios_correct"),
        s.get("scenarios_total"),
        task.baseline,
        "" if p.returncode == 0 else "not correct on every scenario of the grid",
    )


def _cpu_attn(task, kernel: Path, out_dir: Path, timeout_s: float, seal) -> GridResult:
    opts = {"budget_ms": max(task.budget_ms * 10, 20.0), "goal": task.goal.min_geomean, "seed": task.seed}
    ev = make_task("cpu-attn", **opts).evaluate(kernel, out_dir, timeout_s, seal)
    return GridResult(
        ev.status,
        ev.geomean if ev.correct else None,
        ev.scenarios_correct,
        ev.scenarios_total,
        ev.baseline,
        f"all {ev.scenarios_total} shapes, {opts['budget_ms']:g} ms timing budget",
    )


# task name -> (ready: task -> GridResult or None, bench: (task, kernel, out_dir, timeout_s, seal) -> GridResult)
FULL_GRID: dict[str, tuple[Callable, Callable]] = {
    "fa-fwd-sm90": (_fa_fwd_ready, _fa_fwd),
    "cpu-attn": (lambda task: None, _cpu_attn),
}


DEFAULT_REBENCH = 3


def bench_best(
    trace: Path,
    out_dir: Path,
    timeout_s: float = 3600.0,
    remeasured: dict | None = None,
    sandbox: str = "auto",
    repeats: int = DEFAULT_REBENCH,
) -> FinalBench:
    """The run's best candidate (re-measured numbers when given) benched `repeats` times on its task's
    full grid, by a sealed evaluator in the sandbox (`sandbox`: auto, landlock or none). The row's
    geomean is the median of the benches' (a bench that is not correct makes the row's status its own
    and gives no geomean)."""
    from ..agents.seal import SealedEvaluator

    t0 = time.monotonic()
    events = read_trace(trace).events
    start = events[0]
    stats = stats_from_events(events, str(trace), remeasured)
    row: dict = dict(
        trace=str(trace),
        run_id=stats.run_id,
        label=stats.arm,
        seed=stats.seed,
        candidate_sha256=None,
        eval_index=stats.best_eval,
        baseline=stats.baseline,
        scenarios_correct=None,
        scenarios_total=None,
        geomean=None,
        out_dir=None,
        measured_at=now_utc(),
    )
    if stats.best_eval is None:
        return FinalBench(
            **row, status="skipped", note="no correct candidate in this run", wall_s=round(time.monotonic() - t0, 3)
        )
    sha = next(p.candidate_sha256 for p in stats.points if p.index == stats.best_eval)
    row["candidate_sha256"] = sha
    cfg = RunConfig.from_dict(start["config"])
    grid = FULL_GRID.get(cfg.task)
    if grid is None:
        return FinalBench(
            **row,
            status="skipped",
            note=f"no full grid known for task {cfg.task}",
            wall_s=round(time.monotonic() - t0, 3),
        )
    ready, bench = grid
    run_dir = Path(out_dir) / "final" / Path(trace).stem
    work = Path(tempfile.mkdtemp(prefix="ks-final-"))
    results: list[GridResult] = []
    try:
        task = make_task(cfg.task, **portable_options(cfg.task_options, start, trace, work))
        res = ready(task)
        if res is None:
            kernel = work / Path(task.kernel).name
            shutil.copyfile(artifacts_dir(trace) / "blobs" / sha, kernel)
            if run_dir.exists():
                shutil.rmtree(run_dir)
            run_dir.mkdir(parents=True)
            seal = SealedEvaluator.create(
                task, sandbox=sandbox, deny=[Path(trace).resolve().parent, Path(out_dir).resolve()]
            )
            try:
                for n in range(1, max(1, repeats) + 1):
                    seal.check("before the final bench")
                    where = run_dir / f"bench-{n}"
                    where.mkdir()
                    results.append(bench(task, kernel, where, timeout_s, seal))
                    seal.check("after the final bench")
                    if results[-1].status != "ok":
                        break  # a bench that is not correct (or could not run) ends the repeats
            finally:
                seal.close()
            res = next((r for r in results if r.status != "ok"), results[0])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    values = [r.geomean for r in results]
    ok = [v for v in values if v is not None]
    row.update(
        baseline=res.baseline or stats.baseline,
        scenarios_correct=res.scenarios_correct,
        scenarios_total=res.scenarios_total,
        geomean=_median(ok) if res.status == "ok" and ok else None,
        out_dir=str(run_dir) if run_dir.exists() else None,
        geomeans=values,
        repeats=len(results),
    )
    note = res.note + (f"; {len(results)} benches, the median" if len(results) > 1 and res.status == "ok" else "")
    return FinalBench(**row, status=res.status, note=note, wall_s=round(time.monotonic() - t0, 3))


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def aa_control(trace: Path, out_dir: Path, repeats: int, timeout_s: float = 3600.0, sandbox: str = "auto") -> Repeats:
    """The A/A control: the task's starting kernel (as the trace keeps it) evaluated `repeats` times
    exactly as a run evaluates a candidate (the run's task and options, a sealed evaluator in the
    sandbox). An evaluation that is not correct (e.g. no GPU of the task's architecture) ends it."""
    from ..agents.seal import SealedEvaluator

    events = read_trace(trace).events
    start = events[0]
    cfg = RunConfig.from_dict(start["config"])
    rel = (start.get("task") or {}).get("kernel")
    sha = (start.get("workspace") or {}).get(rel) if rel else None
    out = Repeats(cfg.task, "evaluation", "the starting kernel, evaluated as in a run (A/A control)", sha)
    if not sha:
        out.status, out.note = "skipped", "the trace keeps no starting kernel"
        return out
    run_dir = Path(out_dir) / "aa" / cfg.task
    if run_dir.exists():
        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    work = Path(tempfile.mkdtemp(prefix="ks-aa-"))
    try:
        task = make_task(cfg.task, **portable_options(cfg.task_options, start, trace, work))
        kernel = work / Path(task.kernel).name
        shutil.copyfile(artifacts_dir(trace) / "blobs" / sha, kernel)
        seal = SealedEvaluator.create(
            task, sandbox=sandbox, deny=[Path(trace).resolve().parent, Path(out_dir).resolve()]
        )
        try:
            for n in range(1, repeats + 1):
                seal.check("before the A/A control")
                ev = task.evaluate(kernel, run_dir / f"{n:02d}", timeout_s, seal)
                seal.check("after the A/A control")
                if not ev.correct or ev.geomean is None:
                    out.status, out.note = ev.status, (ev.error or "")[:300]
                    break
                out.values.append(float(ev.geomean))
        finally:
            seal.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def bench_all(
    traces: list[Path],
    out_dir: Path,
    timeout_s: float = 3600.0,
    remeasured: dict | None = None,
    on_result: Callable[[FinalBench], None] | None = None,
    sandbox: str = "auto",
    repeats: int = DEFAULT_REBENCH,
) -> list[FinalBench]:
    rows = []
    for t in traces:
        r = bench_best(t, out_dir, timeout_s, (remeasured or {}).get(str(t)), sandbox, repeats)
        rows.append(r)
        if on_result:
            on_result(r)
    write_rows(rows, Path(out_dir) / FINAL_FILE)
    return rows


def write_rows(rows: list[FinalBench], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r.to_dict()) + "\n")


def read_rows(path: Path) -> dict[str, dict]:
    """trace -> its final bench row, from `final.jsonl` (empty when there is none)."""
    path = Path(path)
    if not path.exists():
        return {}
    rows = [json.loads(l) for l in path.read_text(encoding="utf-8").splitlines() if l.strip()]
    return {r["trace"]: r for r in rows}


def full_grid_repeats(rows: dict[str, dict], tasks: dict[str, str]) -> list[Repeats]:
    """The final bench's re-benches as noise sets (`tasks`: trace -> its task)."""
    out = []
    for trace, r in rows.items():
        vals = [v for v in (r.get("geomeans") or []) if v is not None]
        if r.get("status") == "ok" and len(vals) >= 2:
            out.append(
                Repeats(
                    tasks.get(trace, ""),
                    "full_grid",
                    "each run's best kernel, re-benched",
                    r.get("candidate_sha256"),
                    vals,
                    source="rebench",
                )
            )
    return out
