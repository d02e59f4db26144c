"""Tasks: a starting kernel copied into the workspace, a goal, and an evaluator that runs outside it,
from the sealed copy the run makes at its start (seal.py: `seal(dest)` puts the task's own harness
files there; `evaluate(..., seal)` runs them through it).

A task also benches a candidate on its full grid (`bench_full_grid`), the final word on a run's best
kernel at the end of a comparison (headtohead/final.py), where it can (`full_grid_unavailable`).

A task registers itself with @register_task; every module of this package is imported when the
registry is first read, so a new task is one new file here.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from ..registry import Registry
from ..workspace import Workspace

# ok, wrong, build_failed, crash and timeout are verdicts on the candidate; no_gpu and error are the
# evaluator's own failures (no suitable GPU; its machinery failed: CUDA unusable, its worker or its
# own process unable to start, no result), which end the run without a verdict (context.py)
STATUSES = ("ok", "wrong", "build_failed", "crash", "timeout", "no_gpu", "error")


@dataclass
class Evaluation:
    """One run of a task's evaluator on a candidate. `correct` only when every scenario passed."""

    status: str
    correct: bool
    baseline: str
    scenarios_total: int = 0
    scenarios_correct: int = 0
    extended_total: int = 0
    extended_correct: int = 0
    geomean: float | None = None  # baseline_time / candidate_time, geometric mean
    min_ratio: float | None = None
    min_ratio_scenario: str | None = None
    per_scenario: list[dict] = field(default_factory=list)  # {scenario, status, ratio, reason}
    error: str | None = None  # build errors, crash reasons, missing GPU ...
    wall_s: float = 0.0
    out_dir: str | None = None

    def to_dict(self) -> dict:
        return asdict(self)

    def report(self, max_lines: int = 14) -> str:
        """What the model reads."""
        if self.status in ("build_failed", "no_gpu", "error", "timeout") and not self.scenarios_total:
            return f"status: {self.status}\n{(self.error or '').strip()}"
        lines = [
            f"status: {self.status}; correct on {self.scenarios_correct}/{self.scenarios_total} scenarios"
            + (f", extended set {self.extended_correct}/{self.extended_total}" if self.extended_total else "")
        ]
        if self.geomean is not None:
            lines.append(
                f"speed vs {self.baseline}: geomean {self.geomean:.3f}x"
                + (f", slowest {self.min_ratio:.3f}x ({self.min_ratio_scenario})" if self.min_ratio is not None else "")
            )
        elif self.correct:
            lines.append(f"speed vs {self.baseline}: not measured")
        bad = [r for r in self.per_scenario if r.get("status") != "ok"]
        for r in bad[:max_lines]:
            lines.append(f"  {r['scenario']}: {r['status']} {r.get('reason', '')}".rstrip())
        if len(bad) > max_lines:
            lines.append(f"  ... and {len(bad) - max_lines} more failing")
        timed = [r for r in self.per_scenario if r.get("ratio") is not None]
        if timed:
            lines.append("timed: " + ", ".join(f"{r['scenario']} {r['ratio']:.2f}x" for r in timed[:max_lines]))
        if self.error:
            lines.append(self.error.strip()[:2000])
        return "\n".join(lines)


@dataclass(frozen=True)
class Goal:
    min_geomean: float
    baseline: str

    def met(self, ev: Evaluation | None) -> bool:
        return bool(ev and ev.correct and ev.geomean is not None and ev.geomean >= self.min_geomean)

    def text(self) -> str:
        return (
            f"correct on every scenario and a geometric-mean speed-up of at least {self.min_geomean:g}x "
            f"over {self.baseline}"
        )

    def to_dict(self) -> dict:
        return {"min_geomean": self.min_geomean, "baseline": self.baseline, "text": self.text()}


@dataclass
class GridResult:
    """One bench of a candidate on its task's full grid."""

    status: str
    geomean: float | None = None
    scenarios_correct: int | None = None
    scenarios_total: int | None = None
    baseline: str | None = None
    note: str = ""


@runtime_checkable
class Task(Protocol):
    name: str
    kernel: str  # the file in the workspace that is evaluated
    goal: Goal

    def description(self) -> str: ...
    def setup(self, ws: Workspace) -> None: ...
    def seal(self, dest: Path) -> None: ...
    def evaluate(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> Evaluation: ...
    def full_grid_unavailable(self) -> GridResult | None:
        """Why the full grid cannot be benched here (e.g. no GPU of the task's architecture), or None."""

    def bench_full_grid(self, kernel_path: Path, out_dir: Path, timeout_s: float, seal) -> GridResult: ...
    def to_dict(self) -> dict: ...


_TASKS: Registry[Callable[..., Task]] = Registry(__name__, __path__, "task")


def register_task(name: str):
    def deco(factory):
        _TASKS.add(name, factory)
        return factory

    return deco


def task_names() -> list[str]:
    return _TASKS.names()


def make_task(name: str, **options) -> Task:
    return _TASKS.get(name)(**options)
