"""The numbers the head-to-head table reports beside each arm's median: the spread of its runs, and a
bootstrap interval of the difference between two arms' medians.

The runs of two arms are paired by seed (each seed runs every arm once, on the same machine in
alternating order), so the interval resamples seeds: each resample draws the seeds with
replacement and takes the difference of the two arms' medians over those seeds. Runs without a
partner of the same seed are resampled on their own (an unpaired bootstrap). A percentile interval,
10,000 resamples, from a fixed seed: the same runs give the same interval."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

RESAMPLES = 10_000
CONFIDENCE = 0.95


@dataclass
class Spread:
    n: int
    median: float | None
    q1: float | None
    q3: float | None
    low: float | None
    high: float | None

    def to_dict(self) -> dict:
        return asdict(self)


def spread(values: list[float]) -> Spread:
    xs = np.asarray([v for v in values if v is not None], dtype=float)
    if not xs.size:
        return Spread(0, None, None, None, None, None)
    q1, med, q3 = np.percentile(xs, [25, 50, 75])
    return Spread(int(xs.size), float(med), float(q1), float(q3), float(xs.min()), float(xs.max()))


@dataclass
class Interval:
    """B's median minus A's, and its bootstrap interval (None when it cannot be had)."""

    a: str
    b: str
    difference: float | None
    low: float | None
    high: float | None
    paired: int  # seeds with a run of both arms
    n_a: int
    n_b: int
    note: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def median_difference(
    a: dict[int, float | None],
    b: dict[int, float | None],
    name_a: str = "a",
    name_b: str = "b",
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
) -> Interval:
    """`a`, `b`: seed -> the run's value (None: the run has none, e.g. no correct candidate)."""
    a = {s: v for s, v in a.items() if v is not None}
    b = {s: v for s, v in b.items() if v is not None}
    if not a or not b:
        return Interval(name_a, name_b, None, None, None, 0, len(a), len(b), "an arm has no run with a value")
    diff = float(np.median(list(b.values())) - np.median(list(a.values())))
    both = sorted(set(a) & set(b))
    only_a = [a[s] for s in sorted(set(a) - set(b))]
    only_b = [b[s] for s in sorted(set(b) - set(a))]
    if len(a) < 2 or len(b) < 2:
        return Interval(
            name_a, name_b, diff, None, None, len(both), len(a), len(b), "one run per arm: no interval (run more seeds)"
        )
    rng = np.random.default_rng(seed)
    pa = np.asarray([a[s] for s in both]).reshape(1, -1)
    pb = np.asarray([b[s] for s in both]).reshape(1, -1)
    parts_a, parts_b = [], []
    if both:
        idx = rng.integers(0, len(both), size=(resamples, len(both)))
        parts_a.append(pa[0][idx])
        parts_b.append(pb[0][idx])
    for only, parts in ((only_a, parts_a), (only_b, parts_b)):
        if only:
            arr = np.asarray(only)
            parts.append(arr[rng.integers(0, len(arr), size=(resamples, len(arr)))])
    draws = np.median(np.concatenate(parts_b, axis=1), axis=1) - np.median(np.concatenate(parts_a, axis=1), axis=1)
    lo, hi = np.percentile(draws, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    note = "" if not (only_a or only_b) else f"{len(only_a) + len(only_b)} run(s) without a partner of the same seed"
    return Interval(name_a, name_b, diff, float(lo), float(hi), len(both), len(a), len(b), note)
