"""Timing: CUDA events around each call, L2 flushed between calls, warm-up, repetitions until a time
budget; candidate and baselines interleaved in one process with the order alternated and input sets
rotated, so every ratio is measured side by side."""
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

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(samples: list[float]) -> TimingStats:
    s = sorted(samples)
    q = statistics.quantiles(s, n=4) if len(s) >= 2 else [s[0]] * 3
    return TimingStats(statistics.median(s), s[0], s[-1], q[2] - q[0], len(s))


class L2Flusher:
    def __init__(self, nbytes: int, device="cuda"):
        import torch

        self.buf = torch.empty(nbytes, dtype=torch.int8, device=device)

    def __call__(self):
        self.buf.zero_()


def time_interleaved(fns: dict[str, Callable[[int], None]], cfg: TimingConfig,
                     flush: Callable[[], None] | None = None) -> dict[str, TimingStats]:
    """Time each fn(input_set) per call with CUDA events. Rounds go over all fns, the order
    reversed every other round; stops at max_reps or when the budget of every fn is spent
    (after min_reps)."""
    import torch

    names = list(fns)
    for _ in range(cfg.warmup):
        for i, n in enumerate(names):
            fns[n](i % cfg.input_sets)
    torch.cuda.synchronize()
    samples: dict[str, list[float]] = {n: [] for n in names}
    spent = {n: 0.0 for n in names}
    rnd = 0
    while rnd < cfg.max_reps:
        order = names if rnd % 2 == 0 else names[::-1]
        events = []
        for n in order:
            if flush is not None:
                flush()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fns[n](rnd % cfg.input_sets)
            end.record()
            events.append((n, start, end))
        torch.cuda.synchronize()   # the whole device: work left on other streams is waited for too
        for n, start, end in events:
            ms = start.elapsed_time(end)
            samples[n].append(ms)
            spent[n] += ms / 1000.0
        rnd += 1
        if rnd >= cfg.min_reps and all(spent[n] >= cfg.budget_s for n in names):
            break
    return {n: summarize(samples[n]) for n in names}
