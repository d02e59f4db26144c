"""Decision points, detected from the run itself: an attempt to stop early, a plateau, a claimed
limit, the same failure repeated, many steps in one layer. Each comes with its evidence.

A claimed limit is decided by the run's own model where it has one: a short classification call
(`classification_messages`, answered CLAIM or NO and recorded in the trace by the arm), made only for
a text with a sentence that could claim one (`claim_candidates`, a cheap word filter). Where there is
no model, or it cannot say (an error, an answer that is neither), the rules decide (`claimed_limit`:
patterns, each match checked for a denial, a condition or a question in its clause)."""

from __future__ import annotations

import re
from collections.abc import Callable
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
    r"confirm|determine|how|let's|let us|let me)\b|\bto\s*$",
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


# ---- the run's own model decides; a word filter decides what it is asked; the rules stand in

# a sentence with none of these words claims no limit, and is not sent to the model
_LIMIT_WORDS = re.compile(
    r"\b(?:limit\w*|bound\w*|bottleneck\w*|peak\w*|roofline|ceiling|floor|maximum|max\w*|minimum|optimal\w*|"
    r"optimi[sz]\w*|saturat\w*|faster|fastest|quicker|speed\w*|improv\w*|gains?|headroom|room|slack|physic\w*|"
    r"hardware\w*|silicon|device|gpu|amdahl\w*|best|achievab\w*|attainab\w*|possible|impossible|close|near\w*|"
    r"balanced|busy|full\w*|pegged|flat out|tilt|theoretical|fundamental|bandwidth|throughput|utili[sz]\w*|"
    r"squeez\w*|extract\w*|exhaust\w*|nothing|noise|negligible|marginal|diminishing|wall|done|final|"
    r"can't|cannot|won't|efficien\w*|capacity|dominat\w*|unavoidable|fast\w*|no amount)\b|"
    r"\bas \w+ as (?:it|this|we|one)\b",
    re.IGNORECASE,
)
CLASSIFY_MAX_CHARS = 2000  # the end of a longer text is classified
CLASSIFY_INSTRUCTIONS = """\
You label one message written by an agent that is optimizing a GPU kernel. Answer CLAIM if the \
message asserts, even hedged ("probably", "I think"), that the kernel is at or near a performance \
limit (of the hardware, memory bandwidth, compute, physics, Amdahl's law, a roofline, the best \
achievable) or that it cannot be made meaningfully faster. Answer NO if it does not: a question, a \
plan, a goal, a denial ("not memory-bound"), a condition ("if it were compute-bound"), a limit of \
another kernel, or the same words in another sense ("the loop is bound by n"). Reply with one word, \
CLAIM or NO, on the first line; after CLAIM, quote the sentence that makes the claim on the second \
line."""
_VERDICT = re.compile(r"^\W*(?:(?P<claim>claim)|no)\b", re.IGNORECASE)

# (text, candidate sentences, the rules' finding) -> (claim?, the sentence quoted), or None: no verdict
Classifier = Callable[[str, list[str], "dict | None"], "tuple[bool, str | None] | None"]


def claim_candidates(text: str | None) -> list[str]:
    """The sentences of `text` that could claim a limit (a word of _LIMIT_WORDS, not a question),
    whitespace-normalized: what the model is asked about."""
    if not text:
        return []
    return [
        " ".join(s.split())[:300] for s in _sentences(text) if not s.rstrip().endswith("?") and _LIMIT_WORDS.search(s)
    ]


def classification_messages(text: str) -> list[dict]:
    """The classification call's conversation: the instructions, then the text (its last
    CLASSIFY_MAX_CHARS characters)."""
    return [
        {"role": "system", "content": CLASSIFY_INSTRUCTIONS},
        {"role": "user", "content": text[-CLASSIFY_MAX_CHARS:]},
    ]


def parse_verdict(content: str | None) -> tuple[bool, str | None] | None:
    """(claim?, the sentence quoted after CLAIM) from the model's answer, read on its first line (or
    its last, after a preamble); None when it answers neither CLAIM nor NO."""
    lines = [l.strip() for l in (content or "").splitlines() if l.strip()]
    if not lines:
        return None
    first = _VERDICT.match(lines[0])
    if first:
        claim = first.group("claim") is not None
        quote = lines[1].strip(" \"'\u201c\u201d`*>") if claim and len(lines) > 1 else ""
        return claim, quote or None
    last = _VERDICT.match(lines[-1])
    return None if last is None else (last.group("claim") is not None, None)


def _quoted(candidates: list[str], quote: str | None) -> str | None:
    """The candidate sentence the model quoted (one holding the other, case and spacing aside)."""
    if not quote:
        return None
    q = " ".join(quote.split()).lower()
    return next((c for c in candidates if q in c.lower() or c.lower() in q), None)


def decide_claim(text: str | None, patterns: tuple[str, ...], classify: Classifier | None = None) -> dict | None:
    """A claimed limit in `text`, with its evidence and who decided (`decided_by`): the model through
    `classify` where given and it gives a verdict, else the rules."""
    candidates = claim_candidates(text)
    rules = claimed_limit(text, patterns)
    if not text or (not candidates and rules is None):
        return None
    if classify is not None:
        verdict = classify(text, candidates, rules)
        if verdict is not None:
            claim, quote = verdict
            if not claim:
                return None
            sentence = _quoted(candidates, quote) or (rules["sentence"] if rules else candidates[0])
            return {
                "phrase": quote or sentence,
                "sentence": sentence,
                "pattern": None,
                "decided_by": "model",
                "rules_agree": rules is not None,
            }
    return {**rules, "decided_by": "rules"} if rules else None


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
    def __init__(self, config: QuestionConfig, classify: Classifier | None = None):
        self.config = config
        self.classify = classify  # the run's own model, where it has one
        self.s = DetectorState()

    def claim(self, text: str | None) -> dict | None:
        return decide_claim(text, self.config.claimed_limit_patterns, self.classify)

    def observe(self, step: StepRecord) -> list[DecisionPoint]:
        """Updates the counters with one step and returns the decision points it reached."""
        cfg, s, found = self.config, self.s, []
        claim = self.claim(step.response.content)
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
