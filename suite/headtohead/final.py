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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..agents.config import RunConfig
from ..agents.tasks import GridResult, Task, make_task, task_names
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
    full grid (the task's `bench_full_grid`), by a sealed evaluator in the sandbox (`sandbox`: auto,
    landlock or none). The row's geomean is the median of the benches' (a bench that is not correct
    makes the row's status its own and gives no geomean)."""
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

    def done(status: str, note: str) -> FinalBench:
        return FinalBench(**row, status=status, note=note, wall_s=round(time.monotonic() - t0, 3))

    if stats.best_eval is None:
        return done("skipped", "no correct candidate in this run")
    sha = row["candidate_sha256"] = next(p.candidate_sha256 for p in stats.points if p.index == stats.best_eval)
    task_name = RunConfig.from_dict(start["config"]).task
    if task_name not in task_names():
        return done("skipped", f"no full grid known for task {task_name}")
    run_dir = Path(out_dir) / "final" / Path(trace).stem
    results: list[GridResult] = []
    with _run_task(trace, start, "ks-final-") as (task, work):
        res = task.full_grid_unavailable()
        if res is None:
            kernel = _copy_blob(trace, sha, work / Path(task.kernel).name)
            _fresh(run_dir)
            with _sealed(task, trace, out_dir, sandbox) as seal:
                results = _rebench(task, kernel, run_dir, seal, timeout_s, repeats)
            res = next((r for r in results if r.status != "ok"), results[0])
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
    median = f"; {len(results)} benches, the median" if len(results) > 1 and res.status == "ok" else ""
    return done(res.status, res.note + median)


def _rebench(task: Task, kernel: Path, run_dir: Path, seal, timeout_s: float, repeats: int) -> list[GridResult]:
    """`kernel` benched on the task's full grid up to `repeats` times (into run_dir/bench-N), the
    sealed evaluator checked before and after each; a bench that is not correct (or could not run)
    ends the repeats."""
    results: list[GridResult] = []
    for n in range(1, max(1, repeats) + 1):
        seal.check("before the final bench")
        where = run_dir / f"bench-{n}"
        where.mkdir()
        results.append(task.bench_full_grid(kernel, where, timeout_s, seal))
        seal.check("after the final bench")
        if results[-1].status != "ok":
            break
    return results


@contextmanager
def _run_task(trace: Path, start: dict, prefix: str) -> Iterator[tuple[Task, Path]]:
    """The run's task, made with its options (a starting kernel not on this machine taken from the
    trace), and a temporary folder, removed afterwards."""
    cfg = RunConfig.from_dict(start["config"])
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield make_task(cfg.task, **portable_options(cfg.task_options, start, trace, work)), work
    finally:
        shutil.rmtree(work, ignore_errors=True)


@contextmanager
def _sealed(task: Task, trace: Path, out_dir: Path, sandbox: str) -> Iterator:
    """A sealed evaluator for the task that reads neither the traces nor the comparison's folder."""
    from ..agents.seal import SealedEvaluator

    seal = SealedEvaluator.create(task, sandbox=sandbox, deny=[Path(trace).resolve().parent, Path(out_dir).resolve()])
    try:
        yield seal
    finally:
        seal.close()


def _copy_blob(trace: Path, sha: str, dest: Path) -> Path:
    shutil.copyfile(artifacts_dir(trace) / "blobs" / sha, dest)
    return dest


def _fresh(folder: Path) -> None:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    m = len(s) // 2
    return s[m] if len(s) % 2 else (s[m - 1] + s[m]) / 2


def aa_control(trace: Path, out_dir: Path, repeats: int, timeout_s: float = 3600.0, sandbox: str = "auto") -> Repeats:
    """The A/A control: the task's starting kernel (as the trace keeps it) evaluated `repeats` times
    exactly as a run evaluates a candidate (the run's task and options, a sealed evaluator in the
    sandbox). An evaluation that is not correct (e.g. no GPU of the task's architecture) ends it."""
    events = read_trace(trace).events
    start = events[0]
    task_name = RunConfig.from_dict(start["config"]).task
    rel = (start.get("task") or {}).get("kernel")
    sha = (start.get("workspace") or {}).get(rel) if rel else None
    out = Repeats(task_name, "evaluation", "the starting kernel, evaluated as in a run (A/A control)", sha)
    if not sha:
        out.status, out.note = "skipped", "the trace keeps no starting kernel"
        return out
    run_dir = Path(out_dir) / "aa" / task_name
    _fresh(run_dir)
    with _run_task(trace, start, "ks-aa-") as (task, work):
        kernel = _copy_blob(trace, sha, work / Path(task.kernel).name)
        with _sealed(task, trace, out_dir, sandbox) as seal:
            for n in range(1, repeats + 1):
                seal.check("before the A/A control")
                ev = task.evaluate(kernel, run_dir / f"{n:02d}", timeout_s, seal)
                seal.check("after the A/A control")
                if not ev.correct or ev.geomean is None:
                    out.status, out.note = ev.status, (ev.error or "")[:300]
                    break
                out.values.append(float(ev.geomean))
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
