"""The question bank: loading, validation, and choosing a question for a decision point.

The bank is a YAML file (default `bank/questions.yaml` in the repository) validated against
`schemas/bank-v1.schema.json`; docs/question-bank.md describes it. A malformed bank raises
BankError naming the file, the entry and the problem.
"""

from __future__ import annotations

import hashlib
import json
import random
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path

from .. import config as suite_config
from ..contracts.yamlfile import load_yaml_document

DEFAULT_BANK = suite_config.REPO_ROOT / "bank" / "questions.yaml"
CATEGORIES = ("layer-shift", "limit-rejection", "information")
TRIGGERS = ("early-stop", "plateau", "claimed-limit", "repeated-failure", "layer-dwell")


class BankError(ValueError):
    """The bank file is missing, not YAML, or breaks the schema."""


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    category: str
    triggers: tuple[str, ...]
    layers: tuple[str, ...]

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class Bank:
    path: str
    sha256: str
    questions: tuple[Question, ...]

    def by_id(self, qid: str) -> Question:
        return next(q for q in self.questions if q.id == qid)


def bank_schema() -> dict:
    return json.loads(resources.files(__package__).joinpath("schemas/bank-v1.schema.json").read_text())


def _where(data, path) -> str:
    """'questions[3] (id 'x'), field 'category'' for an error path."""
    parts = list(path)
    if len(parts) >= 2 and parts[0] == "questions" and isinstance(parts[1], int):
        idx = parts[1]
        entry = data["questions"][idx]
        qid = entry.get("id") if isinstance(entry, dict) else None
        where = f"entry questions[{idx}]" + (f" (id {qid!r})" if qid else "")
        rest = [str(p) for p in parts[2:]]
        return where + (f", field {'.'.join(rest)!r}" if rest else "")
    return "top level" + (f", field {'.'.join(map(str, parts))!r}" if parts else "")


def load_bank(path: Path | str | None = None) -> Bank:
    path = Path(path) if path else DEFAULT_BANK
    raw, data = load_yaml_document(
        path,
        bank_schema(),
        BankError,
        what="the question bank",
        not_a_mapping="top level: expected a mapping with 'version' and 'questions'",
        where=_where,
    )
    seen: dict[str, int] = {}
    for i, q in enumerate(data["questions"]):
        if q["id"] in seen:
            raise BankError(
                f"{path}: entry questions[{i}] (id {q['id']!r}): duplicate id "
                f"(first used by questions[{seen[q['id']]}])"
            )
        seen[q["id"]] = i
    qs = tuple(
        Question(q["id"], " ".join(q["text"].split()), q["category"], tuple(q["triggers"]), tuple(q["layers"]))
        for q in data["questions"]
    )
    return Bank(str(path), hashlib.sha256(raw).hexdigest(), qs)


@dataclass
class AskedRecord:
    """A question asked earlier in the run (what the chooser needs to avoid repeats)."""

    bank_id: str | None
    layers: tuple[str, ...]


def choose(
    bank: Bank,
    trigger: str,
    history: list[AskedRecord],
    *,
    categories: tuple[str, ...],
    current_layer: str | None,
    no_repeat_within: int,
    seed: int,
) -> Question | None:
    """A question for `trigger`: from the allowed categories, not among the last `no_repeat_within`
    asked (relaxed when nothing else is left), preferring layers away from the agent's current one and
    least recently asked about. Deterministic for a given seed and history."""
    pool = [q for q in bank.questions if trigger in q.triggers and q.category in categories]
    if not pool:
        return None
    recent = {h.bank_id for h in history[-no_repeat_within:] if h.bank_id} if no_repeat_within > 0 else set()
    fresh = [q for q in pool if q.id not in recent]
    if not fresh:
        asked_at = {h.bank_id: i for i, h in enumerate(history) if h.bank_id}
        oldest = min(asked_at.get(q.id, -1) for q in pool)
        fresh = [q for q in pool if asked_at.get(q.id, -1) == oldest]

    last_asked = {}
    for i, h in enumerate(history):
        for layer in h.layers:
            last_asked[layer] = i

    def staleness(q: Question) -> tuple:
        away = current_layer is None or current_layer not in q.layers
        # the most recent time any of its layers was asked about; never asked = -1 (best)
        recency = max((last_asked.get(layer, -1) for layer in q.layers), default=-1)
        return (not away, recency)

    best = min(staleness(q) for q in fresh)
    top = [q for q in fresh if staleness(q) == best]
    rng = random.Random(f"{seed}:{len(history)}:{trigger}")
    return rng.choice(sorted(top, key=lambda q: q.id))
