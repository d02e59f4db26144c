"""Who asks the question at a decision point: the bank (chosen by trigger, not repeated too soon,
rotating across layers) or a person at the terminal, who may take the bank's suggestion."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass

from .bank import AskedRecord, Bank, Question, choose
from .config import QuestionConfig
from .decisions import DecisionPoint


@dataclass
class AskedQuestion:
    text: str
    source: str  # "bank" | "human"
    bank_id: str | None = None
    category: str | None = None
    layers: tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_bank(cls, q: Question) -> AskedQuestion:
        return cls(q.text, "bank", q.id, q.category, q.layers)


class BankQuestioner:
    def __init__(self, bank: Bank, config: QuestionConfig, seed: int):
        self.bank, self.config, self.seed = bank, config, seed
        self.history: list[AskedRecord] = []

    def suggest(self, decision: DecisionPoint, current_layer: str | None) -> Question | None:
        return choose(
            self.bank,
            decision.trigger,
            self.history,
            categories=tuple(self.config.categories),
            current_layer=current_layer,
            no_repeat_within=self.config.no_repeat_within,
            seed=self.seed,
        )

    def ask(self, decision: DecisionPoint, current_layer: str | None) -> AskedQuestion | None:
        q = self.suggest(decision, current_layer)
        return AskedQuestion.from_bank(q) if q else None

    def remember(self, asked: AskedQuestion) -> None:
        self.history.append(AskedRecord(asked.bank_id, tuple(asked.layers)))

    def state(self) -> list[dict]:
        return [{"bank_id": h.bank_id, "layers": list(h.layers)} for h in self.history]

    def load_state(self, items: list[dict]) -> None:
        self.history = [AskedRecord(h["bank_id"], tuple(h["layers"])) for h in items]


class HumanQuestioner(BankQuestioner):
    """A person types the question; an empty answer takes the bank's suggestion.
    `prompt(decision, suggestion) -> str` is supplied by the front end (the library never prints)."""

    def __init__(
        self,
        bank: Bank,
        config: QuestionConfig,
        seed: int,
        prompt: Callable[[DecisionPoint, Question | None], str | None],
    ):
        super().__init__(bank, config, seed)
        self.prompt = prompt

    def ask(self, decision: DecisionPoint, current_layer: str | None) -> AskedQuestion | None:
        suggestion = self.suggest(decision, current_layer)
        typed = (self.prompt(decision, suggestion) or "").strip()
        if typed:
            return AskedQuestion(typed, "human")
        return AskedQuestion.from_bank(suggestion) if suggestion else None
