"""The numbers the head-to-head table reports beside each arm's median: the spread of its runs, and a
bootstrap interval of the difference between two arms' medians that knows the measurements are noisy.

Each run's value is a measurement of one kernel (its best kernel: the sha256 of its file). A kernel's
speed is a property of the kernel, not of the run that found it: every measurement of the same file,
in any run of either arm (re-evaluations in the traces, the final bench's re-benches, the A/A
control's repeats), is pooled, and each run is given its kernel's median. Two arms whose best kernels
are the same file therefore differ by exactly 0, whatever the measurements' noise.

The interval is a percentile bootstrap (10,000 resamples from a fixed seed) over two sources of
variation at once:
- the seeds: the runs of two arms are paired by seed (each seed runs every arm once, on the same
  machine, in alternating order); each resample draws the seeds with replacement (runs without a
  partner of the same seed are resampled on their own);
- the measurements: in each resample every kernel measured several times gets the median of its
  measurements drawn with replacement, and a kernel measured once is scaled by a factor drawn from
  the relative deviations (measurement / its kernel's median) of the kernels measured several times,
  the noise of this task on this machine.

With fewer runs with a value than the minimum (the protocol's `control.min_runs`) in either arm there
is no interval: the verdict is `insufficient runs`."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

RESAMPLES = 10_000
CONFIDENCE = 0.95
DEFAULT_MIN_RUNS = 3

NO_DIFFERENCE = "no significant difference"
INSUFFICIENT = "insufficient runs"


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
class Sample:
    """One run's value of a metric: the kernel measured (sha256; None: not known, the run's own) and
    the run's measurements of it."""

    kernel: str | None
    values: list[float] = field(default_factory=list)


@dataclass
class Interval:
    """B's median minus A's, its bootstrap interval (None when there is none) and what it says."""

    a: str
    b: str
    difference: float | None
    low: float | None
    high: float | None
    paired: int  # seeds with a run of both arms
    n_a: int
    n_b: int
    note: str = ""
    verdict: str = ""  # no significant difference | <arm> higher | insufficient runs | no value
    min_runs: int = DEFAULT_MIN_RUNS
    measurements: int = 0  # measurements the values are medians of, both arms
    identical_kernels: bool = False  # every run of both arms has the same best kernel
    kind: str = "arms"  # arms | aa (an A/A pair: the same arm twice)

    def to_dict(self) -> dict:
        return asdict(self)


def _sample(v) -> Sample | None:
    if v is None:
        return None
    if isinstance(v, Sample):
        vals = [float(x) for x in v.values if x is not None]
        return Sample(v.kernel, vals) if vals else None
    return Sample(None, [float(v)])


def relative_deviations(sets: list[list[float]]) -> list[float]:
    """Each measurement over the median of its set, for the sets of two measurements or more."""
    out: list[float] = []
    for values in sets:
        vals = [float(x) for x in values if x is not None and x > 0]
        if len(vals) >= 2:
            med = float(np.median(vals))
            out += [x / med for x in vals]
    return out


def median_difference(
    a: dict[int, Sample | float | None],
    b: dict[int, Sample | float | None],
    name_a: str = "a",
    name_b: str = "b",
    min_runs: int = DEFAULT_MIN_RUNS,
    extra: dict[str, list[float]] | None = None,
    resamples: int = RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    kind: str = "arms",
    noise_sets: list[list[float]] | None = None,
) -> Interval:
    """`a`, `b`: seed -> the run's Sample (a float: one measurement of a kernel of its own; None: the
    run has no value, e.g. no correct candidate). `extra`: kernel sha256 -> more measurements of it
    made outside the runs (the A/A control's). `noise_sets`: other sets of repeated measurements of
    one kernel each (the A/A control), whose deviations join those of the pooled kernels."""
    sa, sb = _samples(a), _samples(b)
    base = Interval(name_a, name_b, None, None, None, 0, len(sa), len(sb), min_runs=min_runs, kind=kind)
    if not sa or not sb:
        base.note, base.verdict = "an arm has no run with a value", "no value"
        return base
    kp = _KernelPools.of(sa, sb, extra)
    diff = float(np.median([kp.value("b", s) for s in sb]) - np.median([kp.value("a", s) for s in sa]))
    kernels = {kp.keys[("a", s)] for s in sa} | {kp.keys[("b", s)] for s in sb}
    identical = len(kernels) == 1 and not next(iter(kernels)).startswith("run:")
    pairing = _Pairing(sorted(set(sa) & set(sb)), sorted(set(sa) - set(sb)), sorted(set(sb) - set(sa)))
    out = Interval(
        name_a,
        name_b,
        diff,
        None,
        None,
        len(pairing.both),
        len(sa),
        len(sb),
        min_runs=min_runs,
        measurements=sum(len(kp.pools[k]) for k in kp.names),
        identical_kernels=identical,
        kind=kind,
    )
    notes = []
    if identical:
        notes.append(f"identical best kernels (sha256 {next(iter(kernels))[:12]}) in every run: the difference is 0")
    if len(sa) < min_runs or len(sb) < min_runs:
        out.verdict = INSUFFICIENT
        notes.insert(0, f"insufficient runs: {len(sa)} and {len(sb)} with a value, fewer than {min_runs} per arm")
        out.note = "; ".join(notes)
        return out
    out.low, out.high = _bootstrap(kp, pairing, resamples, confidence, np.random.default_rng(seed), noise_sets)
    if identical:
        out.low = out.high = 0.0
    if pairing.only_a or pairing.only_b:
        notes.append(f"{len(pairing.only_a) + len(pairing.only_b)} run(s) without a partner of the same seed")
    out.verdict = NO_DIFFERENCE if out.low <= 0.0 <= out.high else f"{name_b if out.low > 0 else name_a} higher"
    out.note = "; ".join(notes)
    return out


def _samples(runs: dict[int, Sample | float | None]) -> dict[int, Sample]:
    """seed -> Sample, for the runs with a value."""
    return {s: x for s, x in ((s, _sample(v)) for s, v in runs.items()) if x is not None}


@dataclass
class _KernelPools:
    """One pool of measurements per kernel, across both arms (and the A/A control's)."""

    keys: dict[tuple[str, int], str]  # (arm, seed) -> the run's kernel (`run:<arm>:<seed>` when not known)
    pools: dict[str, list[float]]  # kernel -> its measurements, in the order the runs came
    names: list[str]  # the kernels, sorted: the columns of the bootstrap's draws
    point: np.ndarray  # each kernel's median, by column

    @classmethod
    def of(cls, sa: dict[int, Sample], sb: dict[int, Sample], extra: dict[str, list[float]] | None) -> _KernelPools:
        keys: dict[tuple[str, int], str] = {}
        pools: dict[str, list[float]] = {}
        for arm, samples in (("a", sa), ("b", sb)):
            for s, x in samples.items():
                key = x.kernel if x.kernel else f"run:{arm}:{s}"
                keys[(arm, s)] = key
                pools.setdefault(key, []).extend(x.values)
        for key, more in (extra or {}).items():
            if key in pools:
                pools[key].extend(float(v) for v in more if v is not None)
        names = sorted(pools)
        return cls(keys, pools, names, np.asarray([float(np.median(pools[k])) for k in names]))

    def column(self, arm: str, seed: int) -> int:
        return self.names.index(self.keys[(arm, seed)])

    def value(self, arm: str, seed: int) -> float:
        return self.point[self.column(arm, seed)]

    def columns(self, arm: str, seeds: list[int]) -> np.ndarray:
        return np.asarray([self.column(arm, s) for s in seeds])


@dataclass
class _Pairing:
    both: list[int]  # seeds with a run of both arms
    only_a: list[int]
    only_b: list[int]


def _bootstrap(
    kp: _KernelPools,
    pairing: _Pairing,
    resamples: int,
    confidence: float,
    rng: np.random.Generator,
    noise_sets: list[list[float]] | None,
) -> tuple[float, float]:
    """The percentile interval of B's median minus A's, over the seeds and the measurements."""
    factors = relative_deviations([*kp.pools.values(), *(noise_sets or [])])
    draws = _kernel_draws(rng, [kp.pools[k] for k in kp.names], kp.point, resamples, factors)
    cols_a, cols_b = [], []
    if pairing.both:
        idx = rng.integers(0, len(pairing.both), size=(resamples, len(pairing.both)))
        cols_a.append(kp.columns("a", pairing.both)[idx])
        cols_b.append(kp.columns("b", pairing.both)[idx])
    for arm, only, cols in (("a", pairing.only_a, cols_a), ("b", pairing.only_b, cols_b)):
        if only:
            cols.append(kp.columns(arm, only)[rng.integers(0, len(only), size=(resamples, len(only)))])
    pick_a = np.take_along_axis(draws, np.concatenate(cols_a, axis=1), axis=1)
    pick_b = np.take_along_axis(draws, np.concatenate(cols_b, axis=1), axis=1)
    dist = np.median(pick_b, axis=1) - np.median(pick_a, axis=1)
    lo, hi = np.percentile(dist, [(1 - confidence) / 2 * 100, (1 + confidence) / 2 * 100])
    return float(lo), float(hi)


def _kernel_draws(rng, pools: list[list[float]], point, resamples: int, factors: list[float]) -> np.ndarray:
    """(resamples, kernels): each kernel's value in each resample."""
    out = np.empty((resamples, len(pools)))
    noise = np.asarray(factors) if factors else None
    for k, values in enumerate(pools):
        vals = np.asarray(values, dtype=float)
        if vals.size >= 2:
            out[:, k] = np.median(vals[rng.integers(0, vals.size, size=(resamples, vals.size))], axis=1)
        elif noise is not None:
            out[:, k] = point[k] * noise[rng.integers(0, noise.size, size=resamples)]
        else:
            out[:, k] = point[k]
    return out
