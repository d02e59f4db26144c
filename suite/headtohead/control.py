"""A control for gain attribution. That a large gain came after a question says little by itself: a
run that asks often has a question before most of its gains whatever the questions do. Two
baselines say what to expect without an effect:

- **chance**: the same gains, with the run's question times shuffled (each run's questions moved to
  steps drawn at random among its steps, categories kept, `shuffles` times from a fixed seed). The
  gains a category is credited with on average is what its timing alone gives; `p` is the share of
  shuffles that credit it with at least as many as observed.
- **the other arms' rate**: large gains per evaluation in the arms without questions, applied to the
  evaluations that followed each category's questions (up to the next question, or the run's end).
  Questions that work should be followed by more gains than that.

The rule is analysis.py's: a gain is credited to the nearest question asked after the previous best
(questions come after the evaluations of their step, so a question at step q counts for a gain at
step g whose previous best was at step b when b <= q < g)."""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass

import numpy as np

SHUFFLES = 2000


def credited(gains: list[tuple[int, int]], questions: list[tuple[int, str]]) -> list[str]:
    """For each gain (previous best's step, gain's step), the category of the nearest question at a
    step q with b <= q < g ('none' without one). `questions`: (step, category), in the run's order."""
    out = []
    for b, g in gains:
        cat = "none"
        for q, c in questions:  # the last qualifying question in order is the nearest
            if b <= q < g:
                cat = c
        out.append(cat)
    return out


@dataclass
class CategoryControl:
    arm: str
    category: str
    questions: int
    credited: int  # large gains credited to the category, as observed
    chance_mean: float  # ... on average with the question times shuffled
    chance_low: float  # 2.5th and 97.5th percentiles over the shuffles
    chance_high: float
    p: float  # share of shuffles crediting at least as many
    evals_after: int  # evaluations in the windows after its questions
    at_other_rate: float | None  # gains those evaluations give at the other arms' rate


@dataclass
class ArmRate:
    arm: str
    runs: int
    steps: int
    evaluations: int
    gains: int

    @property
    def per_eval(self) -> float | None:
        return self.gains / self.evaluations if self.evaluations else None

    def to_dict(self) -> dict:
        return {**asdict(self), "per_eval": self.per_eval}


@dataclass
class Control:
    shuffles: int
    rates: list[ArmRate]
    categories: list[CategoryControl]


def _seed(run_id: str, seed: int) -> int:
    return int.from_bytes(hashlib.sha256(f"{seed}:{run_id}".encode()).digest()[:8], "little")


def _windows(points_steps: list[int], questions: list[tuple[int, str]], steps: int) -> dict[str, int]:
    """Evaluations after each question (steps q < s <= the next question's step, or the run's end)."""
    out: dict[str, int] = {}
    for n, (q, cat) in enumerate(questions):
        end = questions[n + 1][0] if n + 1 < len(questions) else max(steps, q)
        out[cat] = out.get(cat, 0) + sum(1 for s in points_steps if q < s <= end)
    return out


def control(runs, shuffles: int = SHUFFLES, seed: int = 0) -> Control:
    """`runs`: analysis.RunAnalysis objects (their arm, steps, points, questions and gains)."""
    arms = sorted({r.arm for r in runs})
    rates = [
        ArmRate(
            a,
            sum(r.arm == a for r in runs),
            sum(r.steps for r in runs if r.arm == a),
            sum(r.evaluations for r in runs if r.arm == a),
            sum(len(r.gains) for r in runs if r.arm == a),
        )
        for a in arms
    ]
    asking = {r.arm for r in runs if r.questions}
    out: list[CategoryControl] = []
    for arm in arms:
        if arm not in asking:
            continue
        others = [x for x in rates if x.arm not in asking]
        o_evals = sum(x.evaluations for x in others)
        other_rate = (sum(x.gains for x in others) / o_evals) if o_evals else None
        mine = [r for r in runs if r.arm == arm]
        cats = sorted({c for r in mine for _, c in r.questions})
        observed = {c: 0 for c in cats}
        draws = {c: np.zeros(shuffles, dtype=int) for c in cats}
        asked = {c: 0 for c in cats}
        after = {c: 0 for c in cats}
        for r in mine:
            sites = [(g.prev_best_step, g.step) for g in r.gains]
            for c in credited(sites, r.questions):
                if c in observed:
                    observed[c] += 1
            for _, c in r.questions:
                asked[c] += 1
            for c, n in _windows([p.step for p in r.points], r.questions, r.steps).items():
                after[c] += n
            if not sites or not r.questions:
                continue
            rng = np.random.default_rng(_seed(r.run_id or r.trace, seed))
            cats_r = [c for _, c in r.questions]
            k, n_steps = len(cats_r), max(r.steps, max(s for s, _ in r.questions))
            for i in range(shuffles):
                at = np.sort(rng.choice(np.arange(1, n_steps + 1), size=min(k, n_steps), replace=False))
                order = rng.permutation(k)[: len(at)]
                for c in credited(sites, [(int(s), cats_r[j]) for s, j in zip(at, order)]):
                    if c in draws:
                        draws[c][i] += 1
        for c in cats:
            d = draws[c]
            out.append(
                CategoryControl(
                    arm,
                    c,
                    asked[c],
                    observed[c],
                    float(d.mean()),
                    float(np.percentile(d, 2.5)),
                    float(np.percentile(d, 97.5)),
                    float((d >= observed[c]).mean()),
                    after[c],
                    None if other_rate is None else other_rate * after[c],
                )
            )
    return Control(shuffles, rates, out)
