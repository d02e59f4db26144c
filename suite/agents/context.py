"""The state of one run that the loop, the tools and the supervisor share: the workspace, the task,
the trace, the sealed evaluator, the totals against the limits, the evaluations and the best
candidate so far. Every evaluation goes through RunContext.evaluate, which enforces the budget,
checks the sealed evaluator before and after (a change during an evaluation voids it), stores the
candidate, redacts the evaluator's outputs and records a `harness_eval` event. An evaluation that the
evaluator's own machinery failed (MACHINERY_STATUSES) is recorded and then ends the run
(EvaluatorFailed): it is no verdict on the kernel, and the model is never told its kernel is wrong."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from .config import RunConfig
from .exceptions import BudgetSpent, EvaluatorFailed, HarnessTampered, LimitExceeded, Terminate
from .seal import SealedEvaluator
from .tasks import Evaluation, Task
from .trace import TraceWriter
from .workspace import Workspace

# an Evaluation's status that is the evaluator's failure, not the kernel's (tasks/__init__.py says
# which failures each task reports so)
MACHINERY_STATUSES = ("error", "no_gpu")


@dataclass
class Totals:
    steps: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost: float | None = None  # None while no call reported or priced a cost
    evals: int = 0
    retries: int = 0
    questions: int = 0
    tool_call_errors: int = 0  # calls the model got wrong (bad JSON, no such tool, bad arguments)
    compactions: int = 0  # times the conversation was compacted to fit the context window
    wall_s: float = 0.0

    def add_usage(self, usage: dict) -> None:
        self.prompt_tokens += int(usage.get("prompt_tokens") or 0)
        self.completion_tokens += int(usage.get("completion_tokens") or 0)
        self.total_tokens += int(usage.get("total_tokens") or 0)
        if usage.get("cost") is not None:
            self.cost = (self.cost or 0.0) + float(usage["cost"])

    def to_dict(self) -> dict:
        d = asdict(self)
        d["wall_s"] = round(d["wall_s"], 3)
        return d


@dataclass
class Best:
    geomean: float
    eval_index: int
    candidate_sha256: str

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class EvalRecord:
    index: int
    evaluation: Evaluation
    candidate_sha256: str
    new_best: bool
    goal_met: bool
    step: int


@dataclass
class RunContext:
    config: RunConfig
    task: Task
    workspace: Workspace
    trace: TraceWriter
    seal: SealedEvaluator
    totals: Totals = field(default_factory=Totals)
    best: Best | None = None
    goal_met: bool = False
    evals: list[EvalRecord] = field(default_factory=list)
    # set by a front end that has a person at the terminal (--human): (decision, suggestion) -> typed text
    ask_human: Callable | None = None
    # called once when the run ends (an arm's tools close their stores here)
    finalizers: list[Callable[[], None]] = field(default_factory=list)
    # the run's model (None for an arm that brings its own, e.g. an agent command): an arm may ask it
    # short side questions (the KernelSeek arm's claimed-limit classification), counted in the totals
    model: Any = None

    # ---- limits ----
    def check_limits(self) -> None:
        """Raises LimitExceeded when any limit is spent. Called before every model call."""
        lim, t = self.config.limits, self.totals
        t.wall_s = self.trace.elapsed()
        checks = (
            ("steps", t.steps, lim.max_steps),
            ("tokens", t.total_tokens, lim.max_tokens),
            ("cost", t.cost, lim.max_cost),
            ("wall", t.wall_s, lim.max_wall_s),
            ("evals", t.evals, lim.max_evals),
        )
        for name, used, limit in checks:
            if limit is not None and used is not None and used >= limit:
                raise LimitExceeded(
                    f"the {name} limit is reached ({_fmt(used)} of {_fmt(limit)})", limit=name, used=used, max=limit
                )

    def wall_left(self) -> float | None:
        """Seconds of wall time left (None: no wall limit); raises LimitExceeded when none is left.
        The model client calls it between retries and to cap a request's time-out."""
        lim = self.config.limits.max_wall_s
        if lim is None:
            return None
        used = self.totals.wall_s = self.trace.elapsed()
        if used >= lim:
            raise LimitExceeded(
                f"the wall limit is reached ({_fmt(used)} of {_fmt(lim)})", limit="wall", used=used, max=lim
            )
        return lim - used

    def budget_left(self) -> dict:
        lim, t = self.config.limits, self.totals
        t.wall_s = self.trace.elapsed()
        left = {}
        for name, used, limit in (
            ("steps", t.steps, lim.max_steps),
            ("evals", t.evals, lim.max_evals),
            ("tokens", t.total_tokens, lim.max_tokens),
            ("cost", t.cost or 0.0, lim.max_cost),
            ("wall_s", t.wall_s, lim.max_wall_s),
        ):
            if limit is not None:
                left[name] = max(0, limit - used)
        return left

    def budget_text(self) -> str:
        lim = self.config.limits
        parts = []
        if lim.max_steps is not None:
            parts.append(f"{lim.max_steps} steps")
        if lim.max_evals is not None:
            parts.append(f"{lim.max_evals} evaluations")
        if lim.max_wall_s is not None:
            parts.append(f"{lim.max_wall_s / 60:.0f} minutes")
        if lim.max_tokens is not None:
            parts.append(f"{lim.max_tokens} tokens")
        if lim.max_cost is not None:
            parts.append(f"${lim.max_cost:g}")
        return ", ".join(parts) or "no limit"

    def verify_at_end(self, stop: Terminate) -> Terminate:
        """The run's last check of the sealed evaluator: a change since the last evaluation makes the
        run end as harness_tampered, whatever ended it."""
        if isinstance(stop, HarnessTampered):
            return stop
        try:
            self.seal.check("at the end of the run")
        except HarnessTampered as e:
            return e
        return stop

    # ---- evaluations ----
    def evaluate(self, kernel: str | None = None, meta: dict | None = None) -> EvalRecord:
        lim = self.config.limits
        if lim.max_evals is not None and self.totals.evals >= lim.max_evals:
            raise BudgetSpent(f"no evaluations left (limit {lim.max_evals})")
        self.seal.check("before an evaluation")
        path = self.workspace.resolve(kernel or self.task.kernel, must_exist=True)
        data = path.read_bytes()
        sha = self.trace.put_blob(data)
        self.totals.evals += 1
        index = self.totals.evals
        out_dir = self.trace.artifacts / "evals" / f"{index:04d}"
        ev = self.task.evaluate(path, out_dir, self.config.tools.eval_timeout_s, self.seal)
        self.trace.redact_tree(out_dir)
        self.seal.check(f"during evaluation {index}")
        new_best = bool(ev.correct and ev.geomean is not None and (self.best is None or ev.geomean > self.best.geomean))
        if new_best:
            self.best = Best(ev.geomean, index, sha)
        met = self.task.goal.met(ev)
        self.goal_met = self.goal_met or met
        rec = EvalRecord(index, ev, sha, new_best, met, self.trace.step)
        self.evals.append(rec)
        fields = {k: v for k, v in ev.to_dict().items() if k not in ("status", "correct")}
        self.trace.emit(
            "harness_eval",
            index=index,
            kernel=self.workspace.relative(path),
            candidate_sha256=sha,
            candidate_blob=f"blobs/{sha}",
            status=ev.status,
            correct=ev.correct,
            **fields,
            new_best=new_best,
            best=self.best.to_dict() if self.best else None,
            goal_met=met,
            meta=meta,
        )
        if ev.status in MACHINERY_STATUSES:
            what = "no suitable GPU" if ev.status == "no_gpu" else "the evaluator failed"
            raise EvaluatorFailed(
                f"{what} in evaluation {index}, before any verdict on the kernel (not the kernel's fault; the "
                f"run stops here): {(ev.error or '').strip()[:1500]}",
                evaluator_status=ev.status,
                eval_index=index,
            )
        return rec


def _fmt(x) -> str:
    return f"{x:.4g}" if isinstance(x, float) else str(x)


def record_retry(ctx: RunContext, info: dict) -> None:
    """The model client's retry callback: count it, charge its tokens, trace it."""
    ctx.totals.retries += 1
    ctx.totals.add_usage(info.get("usage") or {})
    ctx.trace.emit("retry", **{k: v for k, v in info.items() if k != "usage"})
