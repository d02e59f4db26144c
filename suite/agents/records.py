"""What a run's driver produces: a step's record (what the supervisor and the decision detector
read) and the run's result. A module of its own, so that the seams (protocols.py) and the drivers
(agent.py, external.py) both name them without importing each other."""

from __future__ import annotations

from dataclasses import dataclass, field

from .context import EvalRecord
from .model import ModelResponse, ToolCall
from .tools import ToolResult


@dataclass
class StepRecord:
    step: int
    response: ModelResponse
    results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    evals: list[EvalRecord] = field(default_factory=list)
    layer_scores: dict[str, int] = field(default_factory=dict)
    dominant_layer: str | None = None


@dataclass
class RunResult:
    exit_reason: str
    limit: str | None
    message: str
    goal_met: bool
    best: dict | None
    totals: dict
    trace_path: str
    details: dict = field(default_factory=dict)  # the exit event's details (e.g. evaluator_status)
