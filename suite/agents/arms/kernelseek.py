"""`kernelseek`: the general agent plus a minimal harness that enforces the goal (a stop while it is
unmet and budget remains is refused) and asks one short question at each decision point, from the
bank or from a person (--human). Questions give direction, never information or code.

Arm options (`--agent-opt KEY=VALUE`, or `run`/`compare`'s `--categories`, `--plateau`, `--repeats`,
`--spacing`): the question settings of config.QuestionConfig: `categories` (the bank categories
asked; `[information]` for the information arm), `plateau_evals` (K evaluations without a new
best), `repeated_failure` (the same failure N times), `min_steps_between` (the spacing),
`layer_dwell_steps`, `no_repeat_within`, `new_best_min_gain`, `classify_claims` (true: a claimed
limit is decided by the run's own model, a short classification call recorded in the trace as a
`classification` event and counted in the run's tokens and cost; false, or without a model: by the
patterns)."""

from __future__ import annotations

from ..bank import CATEGORIES, load_bank
from ..config import QuestionConfig
from ..context import RunContext
from ..decisions import (
    CLASSIFY_MAX_CHARS,
    DecisionDetector,
    DecisionPoint,
    classification_messages,
    parse_verdict,
)
from ..exceptions import LimitExceeded
from ..questions import AskedQuestion, BankQuestioner, HumanQuestioner
from ..tools import base_tools
from . import ArmOptionError, ArmParts, check_options, register_arm

_Q = QuestionConfig()
OPTIONS = {
    "categories": list(_Q.categories),
    "plateau_evals": _Q.plateau_evals,
    "repeated_failure": _Q.repeated_failure,
    "min_steps_between": _Q.min_steps_between,
    "layer_dwell_steps": _Q.layer_dwell_steps,
    "no_repeat_within": _Q.no_repeat_within,
    "new_best_min_gain": _Q.new_best_min_gain,
    "classify_claims": _Q.classify_claims,
}
_AT_LEAST = {
    "plateau_evals": 1,
    "repeated_failure": 1,
    "layer_dwell_steps": 1,
    "min_steps_between": 0,
    "no_repeat_within": 0,
}


def question_settings(given: dict) -> dict:
    """The question settings among `given`, checked; a bad value is an ArmOptionError."""
    out: dict = {}
    for k, v in given.items():
        if k == "categories":
            cats = [v] if isinstance(v, str) else v
            if not isinstance(cats, (list, tuple)) or not cats or any(c not in CATEGORIES for c in cats):
                raise ArmOptionError(f"categories: {v!r}; expected a non-empty list of {', '.join(CATEGORIES)}")
            out[k] = tuple(cats)
        elif k in _AT_LEAST:
            if isinstance(v, bool) or not isinstance(v, int) or v < _AT_LEAST[k]:
                raise ArmOptionError(f"{k}: {v!r}; expected a whole number >= {_AT_LEAST[k]}")
            out[k] = v
        elif k == "new_best_min_gain":
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
                raise ArmOptionError(f"{k}: {v!r}; expected a number >= 0")
            out[k] = float(v)
        elif k == "classify_claims":
            if not isinstance(v, bool):
                raise ArmOptionError(f"{k}: {v!r}; expected true or false")
            out[k] = v
    return out


ZERO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost": None}


def claim_classifier(ctx: RunContext):
    """The run's own model (ctx.model, set once the run has one) as the claimed-limit classifier
    (decisions.Classifier); None where the arm is told not to classify. Each call is a
    `classification` event; its tokens and cost count in the run's totals (not a step). With the
    token or cost budget spent, or the call failing, there is no verdict and the patterns decide."""
    if not ctx.config.questions.classify_claims:
        return None

    def classify(text: str, candidates: list[str], rules: dict | None):
        if ctx.model is None:  # an arm that brings its own model (an agent command)
            return None
        lim, t = ctx.config.limits, ctx.totals
        base = {
            "purpose": "claimed-limit",
            "text": text[-CLASSIFY_MAX_CHARS:],
            "candidates": candidates,
            "rules": rules is not None,
        }
        if (lim.max_tokens is not None and t.total_tokens >= lim.max_tokens) or (
            lim.max_cost is not None and t.cost is not None and t.cost >= lim.max_cost
        ):
            ctx.trace.emit("classification", **base, verdict="skipped", usage=ZERO_USAGE, error="budget spent")
            return None
        try:
            resp = ctx.model.query(classification_messages(text), [])
        except (LimitExceeded, KeyboardInterrupt):
            raise
        except Exception as e:  # the endpoint failed or refused: the patterns decide
            ctx.trace.emit(
                "classification", **base, verdict="error", usage=ZERO_USAGE, error=f"{type(e).__name__}: {e}"[:500]
            )
            return None
        ctx.totals.add_usage(resp.usage)
        verdict = parse_verdict(resp.content)
        ctx.trace.emit(
            "classification",
            **base,
            verdict="unreadable" if verdict is None else ("claim" if verdict[0] else "no"),
            quote=verdict[1] if verdict else None,
            request=ctx.model.request_params() if hasattr(ctx.model, "request_params") else {},
            response={"content": resp.content, "reasoning": resp.reasoning},
            usage=resp.usage,
            latency_s=resp.latency_s,
            attempts=resp.attempts,
        )
        return verdict

    return classify


class KernelSeekSupervisor:
    def __init__(self, ctx: RunContext, questioner: BankQuestioner):
        self.config = ctx.config.questions
        self.detector = DecisionDetector(self.config, claim_classifier(ctx))
        self.questioner = questioner
        self.last_question_step: int | None = None

    # ---- the goal gate ----
    def on_stop(self, ctx: RunContext, response) -> str | None:
        if ctx.goal_met:
            return None
        best = f"{ctx.best.geomean:.3f}x" if ctx.best else "no correct evaluation yet"
        evidence = {
            "text": " ".join((response.content or "").split())[:300],
            "best": best,
            "goal": ctx.task.goal.text(),
            "budget_left": ctx.budget_left(),
        }
        claim = self.detector.claim(response.content)
        stop = DecisionPoint("early-stop", evidence)
        asked_for = DecisionPoint("claimed-limit", {**claim, "stop_attempt": True}) if claim else stop
        if claim:
            self._record(ctx, stop, asked=False, reason="the stop also claims a limit; that question is asked")
        asked = self._ask(ctx, asked_for)
        refusal = (
            f"The run is not over: the goal ({ctx.task.goal.text()}) is not met yet (best so far: {best}) "
            "and budget remains."
        )
        return f"{refusal} {asked.text}" if asked else f"{refusal} Continue."

    # ---- decision points after a step ----
    def after_step(self, ctx: RunContext, step) -> list[str]:
        points = self.detector.observe(step)
        if not points:
            return []
        first, rest = points[0], points[1:]
        gap = self.config.min_steps_between
        if self.last_question_step is not None and step.step - self.last_question_step < gap:
            for d in points:
                self._record(ctx, d, asked=False, reason=f"fewer than {gap} steps since the last question")
            return []
        for d in rest:
            self._record(ctx, d, asked=False, reason=f"{first.trigger} was answered this step")
        asked = self._ask(ctx, first)
        return [asked.text] if asked else []

    def _ask(self, ctx: RunContext, d: DecisionPoint) -> AskedQuestion | None:
        asked = self.questioner.ask(d, self.detector.current_layer)
        if asked is None:
            self._record(ctx, d, asked=False, reason="no question in the bank for this trigger")
            return None
        self.questioner.remember(asked)
        self.detector.answered(d.trigger)
        self.last_question_step = ctx.trace.step
        ctx.totals.questions += 1
        ctx.trace.emit(
            "question",
            trigger=d.trigger,
            evidence=d.evidence,
            source=asked.source,
            bank_id=asked.bank_id,
            category=asked.category,
            layers=list(asked.layers),
            text=asked.text,
        )
        return asked

    @staticmethod
    def _record(ctx: RunContext, d: DecisionPoint, asked: bool, reason: str) -> None:
        ctx.trace.emit("decision", trigger=d.trigger, evidence=d.evidence, asked=asked, reason=reason)

    # ---- resume ----
    def state(self) -> dict:
        return {
            "detector": self.detector.state(),
            "asked": self.questioner.state(),
            "last_question_step": self.last_question_step,
        }

    def load_state(self, state: dict) -> None:
        if state:
            self.detector.load_state(state["detector"])
            self.questioner.load_state(state["asked"])
            self.last_question_step = state["last_question_step"]


def questions_for(ctx: RunContext) -> tuple[BankQuestioner, dict]:
    """The arm's question settings (among its options) put into the run's config, the questioner
    that asks from the bank (or a person at the terminal, with --human), and the bank as run_start
    records it."""
    given = {k: v for k, v in ctx.config.arm_options.items() if k in OPTIONS}
    for k, v in question_settings(given).items():
        setattr(ctx.config.questions, k, v)
    cfg = ctx.config.questions
    bank = load_bank(cfg.bank_path)
    questioner: BankQuestioner
    if ctx.config.human:
        if ctx.ask_human is None:
            raise ValueError("--human needs a terminal front end to type the questions")
        questioner = HumanQuestioner(bank, cfg, ctx.config.seed, ctx.ask_human)
    else:
        questioner = BankQuestioner(bank, cfg, ctx.config.seed)
    described = {"path": bank.path, "sha256": bank.sha256, "questions": len(bank.questions)}
    return questioner, {**described, "categories": list(cfg.categories)}


@register_arm("kernelseek", options=OPTIONS)
def build(ctx: RunContext) -> ArmParts:
    check_options("kernelseek", dict(ctx.config.arm_options))
    questioner, bank = questions_for(ctx)
    return ArmParts(base_tools(), KernelSeekSupervisor(ctx, questioner), {"bank": bank})
