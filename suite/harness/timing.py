"""Timing: CUDA events around each call, L2 flushed between calls, warm-up, repetitions until a time
budget; candidate and baselines interleaved in one process, each in every place of a round's order
and after each other one equally often (`round_order`), input sets rotated, so every ratio is
measured side by side.

Each call is timed on its own and followed by a synchronize of the whole device, then an "idle"
event: the time from the end of the call's work on the harness's stream to that event, less the same
gap measured for an empty call, is work the call left running elsewhere (another stream, a host
thread). It is reported beside the time (`late_ms`), and `late_work` says when there is too much of
it to be noise; the worker then rejects the kernel and reports the time with that work counted.

Hooks run before and after each call, outside the timed region, and are told which call it is
(`Call`): the worker gives the kernel new input contents before every call it counts (fresh.py),
poisons the output, counts its unwritten elements and keeps a random sample of outputs. An
implementation timed with `repeats=True` is also timed, in a few random rounds, a second time right
after its counted call without new contents (a `REPEAT`): its own time on inputs it has just seen.
Those calls are not counted; `repeat_ratio` is the median of repeat / counted call of the same round,
and `replayed` says when it is too low to be noise: a result kept by input contents and replayed."""

from __future__ import annotations

import random
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Protocol

from ..config import TimingConfig

WARMUP = "warmup"  # not timed
COUNTED = "counted"  # timed, and counted in the statistics
REPEAT = "repeat"  # timed, not counted: the same inputs as the counted call just before it


@dataclass(frozen=True)
class Call:
    """One call of the timing loop, as the hooks see it."""

    input_set: int
    round: int  # -1 in warm-up
    kind: str  # WARMUP, COUNTED or REPEAT


@dataclass
class TimingStats:
    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    reps: int
    late_ms: float = 0.0  # median work after the stream was done, beyond the calibrated gap
    repeats: int = 0  # repeat calls timed (not counted in the statistics above)
    repeat_ratio: float | None = None  # median of repeat time / counted time of the same round
    # counted calls whose host side (from the start event's record to the call's return) took longer
    # than the launch lead: their time may include host time again (EventTimer); 0 when the timer has
    # no lead to compare with
    host_over_lead: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Timed:
    """What time_interleaved calls: `call(input_set)`, and hooks around it that are not timed."""

    call: Callable[[int], object]
    before: Callable[[Call], None] | None = None
    after: Callable[[Call], None] | None = None
    repeats: bool = False  # also time repeat calls (see the module docstring)


class Timer(Protocol):
    """Times one call; `read` gives (ms, idle gap ms) once `sync` has run after the round."""

    def run(self, fn: Callable[[], object]) -> object: ...
    def sync(self) -> None: ...
    def read(self, token) -> tuple[float, float]: ...


def summarize(
    samples: list[float], late: list[float] | None = None, repeat_ratios: list[float] | None = None
) -> TimingStats:
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return TimingStats(
        statistics.median(s),
        s[0],
        s[-1],
        q[2] - q[0],
        len(s),
        statistics.median(late) if late else 0.0,
        len(repeat_ratios or []),
        statistics.median(repeat_ratios) if repeat_ratios else None,
    )


def relative_spread(samples: list[float]) -> float:
    """IQR / median of a set of timings (0 for fewer than two, or a median that is not positive)."""
    stats = summarize(samples)
    return stats.iqr_ms / stats.median_ms if stats.median_ms > 0 else 0.0


def settled(samples: dict[str, list[float]], max_noise: float | None) -> bool:
    """Whether every implementation's spread meets the noise target (always, without one)."""
    return max_noise is None or all(relative_spread(s) <= max_noise for s in samples.values())


def late_work(stats: TimingStats, cfg: TimingConfig) -> bool:
    """Work left running after the call's stream was done, beyond noise: more than
    max(late_work_abs_ms, late_work_rel x the call's own time)."""
    return stats.late_ms > max(cfg.late_work_abs_ms, cfg.late_work_rel * stats.median_ms)


def replayed(stats: TimingStats, cfg: TimingConfig) -> bool:
    """Calls on inputs the kernel has just seen are faster than calls on new inputs, beyond noise:
    the work is skipped when the contents come back (a result kept by content and replayed, paced or
    not). An honest kernel does the same work on the same shapes whatever the values."""
    return stats.repeat_ratio is not None and stats.repeat_ratio < cfg.repeat_faster


def repeat_rounds(cfg: TimingConfig, rng: random.Random) -> set[int]:
    """The rounds with a repeat call: random, among the rounds every scenario reaches (min_reps)."""
    n = min(cfg.repeat_calls, cfg.min_reps)
    return set(rng.sample(range(cfg.min_reps), n)) if n > 0 else set()


class L2Flusher:
    def __init__(self, nbytes: int, device="cuda"):
        import torch

        self.buf = torch.empty(nbytes, dtype=torch.int8, device=device)

    def __call__(self):
        self.buf.zero_()


class EventTimer:
    """CUDA events around the call, then a synchronize of the whole device (work left on other
    streams is waited for too) and an "idle" event.

    With `lead_ms` > 0 the stream first spins on the GPU for about that long (`torch.cuda._sleep`), and
    only then records the start event. The host enqueues the call while the GPU still spins, so the
    start event fires with the call's work already queued: the time is the GPU's, not the host's.
    Without the lead, a call whose host side (a Python wrapper, its checks and allocations) takes
    longer than the work queued before it (the L2 flush) has that host time counted as its own GPU
    time: tens of microseconds, a fifth of a baseline's time on the shortest scenarios."""

    CALIBRATE_CYCLES = 2_000_000  # about 1 ms: the spin that measures the GPU's clock once
    clock = staticmethod(time.perf_counter)  # the host's clock, for the host time of each call

    def __init__(self, lead_ms: float = 0.0):
        self.lead_ms = lead_ms
        self.cycles_per_ms: float | None = None

    def _lead(self) -> None:
        import torch

        if self.cycles_per_ms is None:
            a, b = (torch.cuda.Event(enable_timing=True) for _ in range(2))
            a.record()
            torch.cuda._sleep(self.CALIBRATE_CYCLES)
            b.record()
            torch.cuda.synchronize()
            self.cycles_per_ms = self.CALIBRATE_CYCLES / a.elapsed_time(b)
        torch.cuda._sleep(int(self.lead_ms * self.cycles_per_ms))

    def run(self, fn: Callable[[], object]):
        import torch

        if self.lead_ms > 0:
            self._lead()
        start, end, idle = (torch.cuda.Event(enable_timing=True) for _ in range(3))
        start.record()
        t0 = self.clock()
        fn()
        host_ms = (self.clock() - t0) * 1e3
        end.record()
        torch.cuda.synchronize()
        idle.record()
        return start, end, idle, host_ms

    def sync(self) -> None:
        import torch

        torch.cuda.synchronize()

    def read(self, token) -> tuple[float, float]:
        start, end, idle, _ = token
        return start.elapsed_time(end), end.elapsed_time(idle)

    def over_lead(self, token) -> bool:
        """Whether the call's host side outlasted the lead (a lead of 0: never said)."""
        return self.lead_ms > 0 and token[3] > self.lead_ms


def idle_gap_ms(reps: int = 21, timer: Timer | None = None) -> float:
    """The gap between the end of an empty call and the idle event: synchronize and launch latency."""
    timer = timer or EventTimer()
    gaps = []
    for _ in range(reps):
        token = timer.run(lambda: None)
        timer.sync()
        gaps.append(timer.read(token)[1])
    return statistics.median(gaps)


def time_interleaved(
    fns: dict[str, Callable[[int], object] | Timed],
    cfg: TimingConfig,
    flush: Callable[[], None] | None = None,
    gap_ms: float | None = None,
    rng: random.Random | None = None,
    timer: Timer | None = None,
) -> dict[str, TimingStats]:
    """Time each fn(input_set) per call (see `time_interleaved_sets`): the statistics of all calls."""
    return time_interleaved_sets(fns, cfg, flush, gap_ms, rng, timer)[0]


def round_order(names: list[str], rnd: int) -> list[str]:
    """The order of round `rnd`: a Williams design over the n names. Round r takes row r % n of the
    square whose first row is 0, 1, n-1, 2, n-2, ... (row i: each index plus i, mod n), reversed in
    rounds n to 2 n - 1 of each cycle of 2 n. In 2 n rounds each implementation takes each place in
    the round twice and follows each other implementation twice (none follows itself).

    Where a call sits can change its time, and so can what ran just before it, for a few calls (each
    call synchronized and the L2 flushed before it: some state of the GPU carries over, not
    identified). With each name following only two neighbours (the list turned and reversed), the
    two identical kernels next to FA3 read about 1% below two others on short rows (H100,
    kernels/hopper/NOTES.md, runs 49-50); here every name follows every other equally often: three
    copies read within 0.6% of each other (run 51)."""
    if not names:
        return []
    n = len(names)
    first = [j // 2 + 1 if j % 2 else n - j // 2 for j in range(n)]  # 0 (as n), 1, n-1, 2, n-2, ...
    row = [names[(j + rnd) % n] for j in first]
    return row[::-1] if (rnd // n) % 2 else row


def time_interleaved_sets(
    fns: dict[str, Callable[[int], object] | Timed],
    cfg: TimingConfig,
    flush: Callable[[], None] | None = None,
    gap_ms: float | None = None,
    rng: random.Random | None = None,
    timer: Timer | None = None,
) -> tuple[dict[str, TimingStats], list[dict[str, TimingStats]]]:
    """Time each fn(input_set) per call. Rounds go over all fns in `round_order`, round r on input
    set r % cfg.input_sets; stops at max_reps or when the budget of every fn
    is spent (after min_reps) and, with a noise target (max_noise), every fn's spread meets it. A
    `Timed` with `repeats` gets a repeat call after its counted call in `repeat_rounds` (chosen with
    `rng`). Returns the statistics of all counted calls, and per input set those of its own calls (a
    set with no counted call has none)."""
    timer = timer or EventTimer(cfg.launch_lead_ms)
    rng = rng or random.Random()
    impls = {n: f if isinstance(f, Timed) else Timed(f) for n, f in fns.items()}
    names = list(impls)
    gap = idle_gap_ms(timer=timer) if gap_ms is None else gap_ms
    for _ in range(cfg.warmup):
        for i, n in enumerate(names):
            c = Call(i % cfg.input_sets, -1, WARMUP)
            if impls[n].before:
                impls[n].before(c)
            impls[n].call(c.input_set)
            timer.sync()
            if impls[n].after:
                impls[n].after(c)
    probes = repeat_rounds(cfg, rng) if any(i.repeats for i in impls.values()) else set()
    samples: dict[str, list[float]] = {n: [] for n in names}
    per_set: list[dict[str, list[float]]] = [{n: [] for n in names} for _ in range(cfg.input_sets)]
    late: dict[str, list[float]] = {n: [] for n in names}
    ratios: dict[str, list[float]] = {n: [] for n in names}
    spent = {n: 0.0 for n in names}
    over = {n: 0 for n in names}
    over_lead = getattr(timer, "over_lead", None)  # EventTimer's; stand-in timers have none
    rnd = 0
    while rnd < cfg.max_reps:
        order = round_order(names, rnd)
        t = rnd % cfg.input_sets
        tokens = []
        for n in order:
            impl = impls[n]
            kinds = (COUNTED, REPEAT) if impl.repeats and rnd in probes else (COUNTED,)
            for kind in kinds:
                c = Call(t, rnd, kind)
                if impl.before:
                    impl.before(c)
                if flush is not None:
                    flush()
                tokens.append((n, kind, timer.run(lambda impl=impl, t=t: impl.call(t))))
                if impl.after:
                    impl.after(c)
        timer.sync()
        counted: dict[str, float] = {}
        for n, kind, token in tokens:
            ms, idle = timer.read(token)
            if kind == REPEAT:
                if counted.get(n):
                    ratios[n].append(ms / counted[n])
                continue
            counted[n] = ms
            if over_lead is not None and over_lead(token):
                over[n] += 1
            samples[n].append(ms)
            per_set[t][n].append(ms)
            late[n].append(max(0.0, idle - gap))
            spent[n] += ms / 1000.0
        rnd += 1
        if rnd >= cfg.min_reps and all(spent[n] >= cfg.budget_s for n in names) and settled(samples, cfg.max_noise):
            break
    stats = {n: summarize(samples[n], late[n], ratios[n]) for n in names}
    for n in names:
        stats[n].host_over_lead = over[n]
    by_set = [{n: summarize(ms[n]) for n in names if ms[n]} for ms in per_set]
    return stats, by_set
