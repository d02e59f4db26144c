"""Decision points, detected from the run itself: an attempt to stop early, a plateau, a claimed
limit, the same failure repeated, many steps in one layer. Each comes with its evidence."""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING

from .config import QuestionConfig

if TYPE_CHECKING:
    from .agent import StepRecord

# checked in this order; one question per step at most
PRIORITY = ("early-stop", "claimed-limit", "repeated-failure", "plateau", "layer-dwell")


@dataclass
class DecisionPoint:
    trigger: str
    evidence: dict

    def to_dict(self) -> dict:
        return asdict(self)


# a sentence ends at . ! ? followed by a space, or at a line break ("1.5x" stays whole)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
# a clause starts after punctuation or a conjunction; denials and conditions are looked for in the clause
_CLAUSE_BREAK = re.compile(
    r"[,;:()\u2013\u2014]|\s-\s|\b(?:but|so|because|since|although|though|while|whereas|"
    r"and|then)\b",
    re.IGNORECASE,
)
# the claim is denied: "not memory-bound", "far from the roofline", "nowhere near peak", "isn't ..."
_DENIAL = re.compile(
    r"\b(?:not|never|no|nothing|nowhere|neither|nor|without|hardly|far from|cannot|no longer)\b|"
    r"n't\b",
    re.IGNORECASE,
)
# the claim is a condition, a possibility to test or a goal: "if", "whether", "might", "to reach"
_NOT_ASSERTED = re.compile(
    r"\b(?:if|whether|when|once|until|unless|before|might|may|could|would|should|aim|aiming|"
    r"goal|target|want|wants|try|trying|hope|expect|need|needs|plan|see|check|test|verify|"
    r"confirm|determine)\b|\bto\s*$",
    re.IGNORECASE,
)


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE_END.split(text) if s.strip()]


def _asserted(sentence: str, m: re.Match) -> bool:
    """Whether the match is asserted: not in a question, and not denied, conditional or a goal in its
    clause (the words before it, and the match's own words before its named `claim` group)."""
    if sentence.rstrip().endswith("?"):
        return False
    breaks = [b.end() for b in _CLAUSE_BREAK.finditer(sentence, 0, m.start())]
    lead = sentence[breaks[-1] if breaks else 0 : m.start()]
    inner = sentence[m.start() : m.start("claim")] if "claim" in m.re.groupindex else ""
    return not (_DENIAL.search(lead + " " + inner) or _NOT_ASSERTED.search(lead) or _NOT_ASSERTED.search(inner))


def claimed_limit(text: str | None, patterns: tuple[str, ...]) -> dict | None:
    """The first claim of a limit in `text` (an asserted one: see _asserted): the phrase, its sentence
    and the pattern that found it."""
    if not text:
        return None
    for sentence in _sentences(text):
        found = [
            (m.start(), m, pat)
            for pat in patterns
            for m in re.finditer(pat, sentence, re.IGNORECASE)
            if _asserted(sentence, m)
        ]
        if found:
            _, m, pat = min(found, key=lambda f: f[0])
            return {"phrase": m.group(0), "sentence": " ".join(sentence.split())[:300], "pattern": pat}
    return None


_NUMBERS = re.compile(r"0x[0-9a-f]+|\d+(\.\d+)?", re.IGNORECASE)
_PATHS = re.compile(r"(/[\w.+-]+)+")


def failure_signature(kind: str, text: str) -> str:
    """A failure with numbers and paths taken out, so that repeats compare equal."""
    text = _PATHS.sub("<path>", text or "")
    text = _NUMBERS.sub("N", text)
    return f"{kind}: {' '.join(text.split())[:160]}"


@dataclass
class DetectorState:
    plateau_best: float | None = None
    evals_since_best: int = 0
    recent_geomeans: list = field(default_factory=list)
    failure_sig: str | None = None
    failure_streak: int = 0
    dwell_layer: str | None = None
    dwell_steps: int = 0
    dwell_from: int = 0


class DecisionDetector:
    def __init__(self, config: QuestionConfig):
        self.config = config
        self.s = DetectorState()

    def observe(self, step: StepRecord) -> list[DecisionPoint]:
        """Updates the counters with one step and returns the decision points it reached."""
        cfg, s, found = self.config, self.s, []
        claim = claimed_limit(step.response.content, cfg.claimed_limit_patterns)
        if claim:
            found.append(DecisionPoint("claimed-limit", claim))
        for rec in step.evals:
            ev = rec.evaluation
            s.recent_geomeans = (s.recent_geomeans + [ev.geomean if ev.correct else None])[-8:]
            if (
                ev.correct
                and ev.geomean is not None
                and (s.plateau_best is None or ev.geomean > s.plateau_best * (1 + cfg.new_best_min_gain))
            ):
                s.plateau_best, s.evals_since_best = ev.geomean, 0
            else:
                s.evals_since_best += 1
            if not ev.correct:
                first = next((r for r in ev.per_scenario if r.get("status") != "ok"), {})
                self._failure(failure_signature(f"eval {ev.status}", ev.error or first.get("reason", "")), found)
        for call, result in step.results:
            if call.name == "shell" and result.is_error:
                last = next((l for l in reversed(result.output.splitlines()) if l.strip()), "")
                self._failure(failure_signature("shell", last), found)
        if s.evals_since_best >= cfg.plateau_evals:
            found.append(
                DecisionPoint(
                    "plateau",
                    {
                        "evals_without_new_best": s.evals_since_best,
                        "best_geomean": s.plateau_best,
                        "recent_geomeans": list(s.recent_geomeans),
                        "min_gain": cfg.new_best_min_gain,
                    },
                )
            )
        if step.dominant_layer:
            if step.dominant_layer == s.dwell_layer:
                s.dwell_steps += 1
            else:
                s.dwell_layer, s.dwell_steps, s.dwell_from = step.dominant_layer, 1, step.step
            if s.dwell_steps >= cfg.layer_dwell_steps:
                found.append(
                    DecisionPoint(
                        "layer-dwell", {"layer": s.dwell_layer, "steps": s.dwell_steps, "from_step": s.dwell_from}
                    )
                )
        return sorted(found, key=lambda d: PRIORITY.index(d.trigger))

    def _failure(self, sig: str, found: list[DecisionPoint]) -> None:
        s = self.s
        s.failure_streak = s.failure_streak + 1 if sig == s.failure_sig else 1
        s.failure_sig = sig
        if s.failure_streak >= self.config.repeated_failure and not any(d.trigger == "repeated-failure" for d in found):
            found.append(DecisionPoint("repeated-failure", {"signature": sig, "count": s.failure_streak}))

    def answered(self, trigger: str) -> None:
        """A question was asked for `trigger`: start its count again."""
        s = self.s
        if trigger == "plateau":
            s.evals_since_best = 0
        elif trigger == "repeated-failure":
            s.failure_streak = 0
        elif trigger == "layer-dwell":
            s.dwell_steps = 0

    @property
    def current_layer(self) -> str | None:
        return self.s.dwell_layer

    def state(self) -> dict:
        return asdict(self.s)

    def load_state(self, state: dict) -> None:
        self.s = DetectorState(**state)
