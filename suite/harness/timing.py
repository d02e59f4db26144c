"""Timing: CUDA events around each call, L2 flushed between calls, warm-up, repetitions until a time
budget; candidate and baselines interleaved in one process with the order alternated and input sets
rotated, so every ratio is measured side by side.

Each call is timed on its own and followed by a synchronize of the whole device, then an "idle"
event: the time from the end of the call's work on the harness's stream to that event, less the same
gap measured for an empty call, is work the call left running elsewhere (another stream, a host
thread). It is reported beside the time (`late_ms`), and `late_work` says when there is too much of
it to be noise; the worker then rejects the kernel and reports the time with that work counted. Hooks run before and after each call, outside the timed region (poison the output, count its
unwritten elements, keep a copy)."""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass
from typing import Callable

from ..config import TimingConfig


@dataclass
class TimingStats:
    median_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    reps: int
    late_ms: float = 0.0        # median work after the stream was done, beyond the calibrated gap

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Timed:
    """What time_interleaved calls: `call(input_set)`, and hooks around it that are not timed."""
    call: Callable[[int], object]
    before: Callable[[int], None] | None = None
    after: Callable[[int, int], None] | None = None     # (input_set, round; -1 in warm-up)


def summarize(samples: list[float], late: list[float] | None = None) -> TimingStats:
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return TimingStats(statistics.median(s), s[0], s[-1], q[2] - q[0], len(s),
                       statistics.median(late) if late else 0.0)


def late_work(stats: TimingStats, cfg: TimingConfig) -> bool:
    """Work left running after the call's stream was done, beyond noise: more than
    max(late_work_abs_ms, late_work_rel x the call's own time)."""
    return stats.late_ms > max(cfg.late_work_abs_ms, cfg.late_work_rel * stats.median_ms)


class L2Flusher:
    def __init__(self, nbytes: int, device="cuda"):
        import torch

        self.buf = torch.empty(nbytes, dtype=torch.int8, device=device)

    def __call__(self):
        self.buf.zero_()


def _timed_call(fn: Callable[[], object]):
    import torch

    start, end, idle = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    start.record()
    fn()
    end.record()
    torch.cuda.synchronize()      # the whole device: work left on other streams is waited for too
    idle.record()
    return start, end, idle


def idle_gap_ms(reps: int = 21) -> float:
    """The gap between the end of an empty call and the idle event: synchronize and launch latency."""
    gaps = []
    for _ in range(reps):
        _, end, idle = _timed_call(lambda: None)
        idle.synchronize()
        gaps.append(end.elapsed_time(idle))
    return statistics.median(gaps)


def time_interleaved(fns: dict[str, Callable[[int], object] | Timed], cfg: TimingConfig,
                     flush: Callable[[], None] | None = None, gap_ms: float | None = None) -> dict[str, TimingStats]:
    """Time each fn(input_set) per call with CUDA events. Rounds go over all fns, the order
    reversed every other round; stops at max_reps or when the budget of every fn is spent
    (after min_reps)."""
    import torch

    impls = {n: f if isinstance(f, Timed) else Timed(f) for n, f in fns.items()}
    names = list(impls)
    gap = idle_gap_ms() if gap_ms is None else gap_ms
    for _ in range(cfg.warmup):
        for i, n in enumerate(names):
            t = i % cfg.input_sets
            if impls[n].before:
                impls[n].before(t)
            impls[n].call(t)
            torch.cuda.synchronize()
            if impls[n].after:
                impls[n].after(t, -1)
    samples: dict[str, list[float]] = {n: [] for n in names}
    late: dict[str, list[float]] = {n: [] for n in names}
    spent = {n: 0.0 for n in names}
    rnd = 0
    while rnd < cfg.max_reps:
        order = names if rnd % 2 == 0 else names[::-1]
        t = rnd % cfg.input_sets
        events = []
        for n in order:
            impl = impls[n]
            if impl.before:
                impl.before(t)
            if flush is not None:
                flush()
            events.append((n, *_timed_call(lambda: impl.call(t))))
            if impl.after:
                impl.after(t, rnd)
        torch.cuda.synchronize()
        for n, start, end, idle in events:
            extra = max(0.0, end.elapsed_time(idle) - gap)
            ms = start.elapsed_time(end)
            samples[n].append(ms)
            late[n].append(extra)
            spent[n] += ms / 1000.0
        rnd += 1
        if rnd >= cfg.min_reps and all(spent[n] >= cfg.budget_s for n in names):
            break
    return {n: summarize(samples[n], late[n]) for n in names}
