"""What a run achieved and spent, read back from its trace: the numbers the head-to-head table and
plot are made of. The best is recomputed from the evaluations (so that re-measured speed-ups can
replace the recorded ones), never taken on trust from the trace's own `best` field."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..contracts.traces import question_category, read_trace

# evaluations that say nothing about the candidate: the machine could not judge it
NOT_JUDGED = ("no_gpu", "error")


@dataclass
class EvalPoint:
    index: int
    step: int
    status: str
    correct: bool
    geomean: float | None
    candidate_sha256: str
    remeasured: bool = False


@dataclass
class RunStats:
    trace: str
    run_id: str
    arm: str
    task: str
    model: str
    seed: int | None
    baseline: str | None
    steps: int
    evals: int
    wrong: int  # candidates judged incorrect (wrong, crash, timeout, build_failed)
    best: float | None  # best correct speed-up vs the baseline
    best_eval: int | None
    steps_to_best: int | None
    evals_to_best: int | None
    questions: int
    questions_by_category: dict[str, int]
    tool_calls: dict[str, int]
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cost: float | None
    wall_s: float
    exit_reason: str | None
    goal_met: bool
    remeasured: bool = False
    agent: str = ""  # the agent the arm runs (arm is its label in the comparison)
    final_geomean: float | None = None  # the best kernel on the task's full grid (final.py)
    final_status: str | None = None
    final_note: str = ""
    points: list[EvalPoint] = field(default_factory=list)
    final_geomeans: list[float] = field(default_factory=list)  # every re-bench of the best kernel (final.py)
    best_sha256: str | None = None  # the best kernel's file
    question_steps: list[tuple[int, str]] = field(default_factory=list)  # (step, category)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> RunStats:
        d = dict(d)
        d["points"] = [EvalPoint(**p) for p in d.get("points", [])]
        d["question_steps"] = [tuple(q) for q in d.get("question_steps", [])]
        if d.get("best_sha256") is None and d.get("best_eval") is not None:  # written before it was kept
            d["best_sha256"] = next((p.candidate_sha256 for p in d["points"] if p.index == d["best_eval"]), None)
        return cls(**d)

    def best_measurements(self) -> list[float]:
        """Every measurement the run made of its best kernel (re-evaluations of the same file)."""
        return [
            p.geomean
            for p in self.points
            if p.candidate_sha256 == self.best_sha256 and p.correct and p.geomean is not None
        ]

    def curve(self) -> list[tuple[int, float | None]]:
        """Best-so-far speed-up after each step that evaluated something, and at the last step."""
        out, best = [], None
        for p in self.points:
            if p.correct and p.geomean is not None and (best is None or p.geomean > best):
                best = p.geomean
            if out and out[-1][0] == p.step:
                out[-1] = (p.step, best)
            else:
                out.append((p.step, best))
        if self.steps and (not out or out[-1][0] < self.steps):
            out.append((self.steps, best))
        return out


def is_trace(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8") as f:
            first = json.loads(f.readline())
        return isinstance(first, dict) and first.get("type") == "run_start"
    except (OSError, ValueError):
        return False


def find_traces(root: Path) -> list[Path]:
    """Trace files under `root` (or `root` itself), in name order."""
    root = Path(root)
    if root.is_file():
        return [root] if is_trace(root) else []
    return sorted(p for p in root.rglob("*.jsonl") if is_trace(p))


def arm_label(start: dict) -> str:
    """The arm's name in a comparison: its label, or the agent's name."""
    return (start.get("config") or {}).get("label") or start.get("arm", "")


def stats_from_events(
    events: list[dict], trace: str, remeasured: dict[str, dict] | None = None, final: dict | None = None
) -> RunStats:
    """`remeasured` maps candidate sha256 -> {status, correct, geomean} measured again; `final` is the
    run's row of final.jsonl (its best kernel on the full grid)."""
    start = events[0]
    task = start.get("task") or {}
    points, calls, by_cat, qsteps = [], {}, {}, []
    totals, end = {}, None
    for ev in events:
        t = ev["type"]
        if t == "harness_eval":
            p = EvalPoint(
                ev["index"], ev["step"], ev["status"], ev["correct"], ev.get("geomean"), ev["candidate_sha256"]
            )
            new = (remeasured or {}).get(p.candidate_sha256)
            if new is not None:
                p.status, p.correct, p.geomean, p.remeasured = new["status"], new["correct"], new["geomean"], True
            points.append(p)
        elif t == "tool_result":
            calls[ev["tool"]] = calls.get(ev["tool"], 0) + 1
        elif t == "question":
            cat = question_category(ev)
            by_cat[cat] = by_cat.get(cat, 0) + 1
            qsteps.append((ev["step"], cat))
        elif t in ("step", "run_end"):
            totals = ev["totals"]
            if t == "run_end":
                end = ev
    best = None
    for p in points:
        if p.correct and p.geomean is not None and (best is None or p.geomean > best.geomean):
            best = p
    exit_ev = next((e for e in reversed(events) if e["type"] == "exit"), None)
    return RunStats(
        trace=str(trace),
        run_id=start.get("run_id", ""),
        arm=arm_label(start),
        agent=start.get("arm", ""),
        task=task.get("name", ""),
        model=(start.get("model") or {}).get("name", ""),
        seed=start.get("seed"),
        baseline=(task.get("goal") or {}).get("baseline"),
        steps=int(totals.get("steps", 0)),
        evals=len(points),
        wrong=sum(1 for p in points if not p.correct and p.status not in NOT_JUDGED),
        best=best.geomean if best else None,
        best_eval=best.index if best else None,
        steps_to_best=best.step if best else None,
        evals_to_best=best.index if best else None,
        questions=sum(by_cat.values()),
        questions_by_category=by_cat,
        tool_calls=dict(sorted(calls.items())),
        prompt_tokens=int(totals.get("prompt_tokens", 0)),
        completion_tokens=int(totals.get("completion_tokens", 0)),
        total_tokens=int(totals.get("total_tokens", 0)),
        cost=totals.get("cost"),
        wall_s=float(totals.get("wall_s", 0.0)),
        exit_reason=exit_ev["reason"] if exit_ev else None,
        goal_met=_goal_met(events, end, points, (task.get("goal") or {}).get("min_geomean"), bool(remeasured)),
        remeasured=bool(remeasured),
        points=points,
        question_steps=qsteps,
        best_sha256=best.candidate_sha256 if best else None,
        **_final(final, best),
    )


def _final(final: dict | None, best: EvalPoint | None) -> dict:
    """The final bench's numbers, when they are of the run's best candidate (a re-measurement can
    change which candidate that is: then the row is `stale`)."""
    if not final:
        return {}
    match = final.get("candidate_sha256") == (best.candidate_sha256 if best else None)
    values = final.get("geomeans")
    if values is None:  # a row written before the re-benches: its one geomean
        values = [final.get("geomean")]
    ok = final.get("status") == "ok"
    return {
        "final_geomean": final.get("geomean") if match else None,
        "final_status": final.get("status") if match else "stale",
        "final_note": final.get("note", ""),
        "final_geomeans": [v for v in values if v is not None] if match and ok else [],
    }


def _goal_met(events, end, points, min_geomean, remeasured: bool) -> bool:
    if remeasured:  # judged again on the new numbers
        return min_geomean is not None and any(
            p.correct and p.geomean is not None and p.geomean >= min_geomean for p in points
        )
    if end is not None:
        return bool(end.get("goal_met"))
    return any(e.get("goal_met") for e in events if e["type"] == "harness_eval")


def stats_from_trace(path: Path, remeasured: dict[str, dict] | None = None, final: dict | None = None) -> RunStats:
    events = read_trace(path).events
    if not events or events[0].get("type") != "run_start":
        raise ValueError(f"{path}: not a trace (no run_start)")
    return stats_from_events(events, str(path), remeasured, final)
