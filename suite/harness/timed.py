"""The timed phase of one scenario: the kernel beside its baselines, with new input contents before
every call of the kernel (fresh.py), then the checks of what it did while it was timed.

In order, the first failure being the verdict:
  1. late work: work left running after the call's stream was done (timing.late_work);
  2. device or stream state the kernel changed (device_state.py; put back after every call, before
     anything else ran) -> `device-state`;
  3. unwritten or non-finite elements in any timed output (every call is poisoned first);
  4. a time no attention kernel can reach: above the GEMM ceiling x its margin -> `implausible`;
  5. a replay: calls on inputs the kernel had just seen are faster than calls on new ones
     (timing.replayed) -> `cached`;
  6. the inputs, with the new contents undone, must be the ones before timing, bit for bit;
  7. a random sample of timed calls, each checked on one random (batch, head) against the reference
     of the inputs that call saw;
  8. a re-check on another input set after timing.
The timing's own validity (1-5) comes before what the outputs say (6-8): a kernel that writes a
cheap, finite stand-in once the checks are past is `implausible` for certain, and `timed-output`
only when the sample happens to hit it.

Device-agnostic: the launch, the baselines, the timer, the flush, `sync`, the device-state guard and
the ceiling are passed in; the worker runs it on the GPU, the tests on the CPU with kernels written
in Python and a stand-in timer.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from ..config import CheckConfig, TimingConfig
from ..results import STATUS_IMPLAUSIBLE, STATUS_REJECTED
from ..scenarios import Scenario
from . import trial
from .fresh import FreshContent, Reservoir, take_sample
from .inputs import scenario_seed
from .timing import COUNTED, REPEAT, Call, Timed, Timer, TimingStats, late_work, replayed, time_interleaved


@dataclass
class TimedOutcome:
    stats: dict[str, TimingStats]
    verdict: trial.Verdict
    recheck: dict | None = None  # the re-check's CheckResult, when it ran


def time_scenario(
    scn: Scenario,
    state: trial.ScenarioState,
    launch: Callable[[trial.Buffers, int], int],
    baselines: dict[str, Callable],
    seed: int,
    rng: random.Random,
    device,
    timing_cfg: TimingConfig,
    check_cfg: CheckConfig,
    sync: Callable[[], None],
    flush: Callable[[], None] | None = None,
    gap_ms: float | None = None,
    timer: Timer | None = None,
    guard: StateGuard | None = None,
    ceiling: Callable[[float], str | None] | None = None,
) -> TimedOutcome:
    """`launch(bufs, input_set)` runs the kernel once on the buffers; `baselines` maps a name to a
    callable on (q, k, v). The first input set is the one the trials left in `state`; the others are
    drawn from the scenario's seed. `guard.check_and_restore()` runs after every call of the kernel,
    outside the timed region; `ceiling(tflops)` says why a kernel's TFLOP/s is implausible, or None."""
    sets = [state.bufs] + [
        trial.new_buffers(scn, scenario_seed(seed, scn.id, t), device, check_cfg)
        for t in range(1, timing_cfg.input_sets)
    ]
    fresh = [FreshContent((b.q, b.k, b.v), timing_cfg.warmup + timing_cfg.max_reps, rng.getrandbits(63)) for b in sets]
    bad = [0 for _ in sets]  # device scalars on a GPU: read once, after timing
    reservoir = Reservoir(timing_cfg.checked_calls, rng)
    samples: list = [None] * timing_cfg.checked_calls

    def before(c: Call):
        if c.kind != REPEAT:
            fresh[c.input_set].next()
        sets[c.input_set].out.poison()
        sets[c.input_set].lse.poison()

    changed: list[str] = []

    def after(c: Call):
        if guard is not None:
            changed.extend(f for f in guard.check_and_restore() if f not in changed)
        b = sets[c.input_set]
        bad[c.input_set] = bad[c.input_set] + b.out.count_nonfinite() + b.lse.count_nonfinite()
        if c.kind == COUNTED:
            slot = reservoir.offer()
            if slot is not None:
                samples[slot] = take_sample(
                    c.round, c.input_set, b.q, b.k, b.v, b.out.view, b.lse.view, rng, rows=timing_cfg.checked_rows
                )

    fns: dict = {"kernel": Timed(lambda t: launch(sets[t], t), before, after, repeats=True)}
    for name, fn in baselines.items():
        fns[name] = (lambda f: lambda t: f(sets[t].q, sets[t].k, sets[t].v))(fn)
    stats = time_interleaved(fns, timing_cfg, flush, gap_ms=gap_ms, rng=rng, timer=timer)
    for f in fresh:
        f.restore()

    kst = stats["kernel"]
    if late_work(kst, timing_cfg):
        return TimedOutcome(
            stats,
            trial.Verdict(
                STATUS_REJECTED,
                "late-work",
                f"each call left {kst.late_ms:.3f} ms of work running after its stream was done (the call itself: "
                f"{kst.median_ms:.3f} ms): work on another stream or a host thread",
            ),
        )
    if changed:
        return TimedOutcome(stats, device_state_verdict(changed))
    unwritten = trial.timed_unwritten({t: int(n) for t, n in enumerate(bad)})
    if not unwritten.ok:
        return TimedOutcome(stats, unwritten)
    why = ceiling(flops_rate(scn.flops, kst.median_ms)) if ceiling is not None else None
    if why:
        return TimedOutcome(stats, trial.Verdict(STATUS_IMPLAUSIBLE, "implausible", why))
    if replayed(kst, timing_cfg):
        return TimedOutcome(
            stats,
            trial.Verdict(
                STATUS_REJECTED,
                "cached",
                f"calls on inputs the kernel had just seen took {kst.repeat_ratio:.2f}x the time of calls on new "
                "inputs "
                f"(median of {kst.repeats}; below {timing_cfg.repeat_faster:g}x is not noise): a result kept by input "
                "contents and replayed",
            ),
        )
    expected = [state.expected] + [
        trial.expected_for(scn, scenario_seed(seed, scn.id, t), device) for t in range(1, len(sets))
    ]
    v = trial.check_timed_outputs([s for s in samples if s is not None], list(zip(sets, expected)), scn, check_cfg)
    if not v.ok:
        return TimedOutcome(stats, v)
    v = trial.recheck(lambda b: launch(b, len(sets) - 1), sets[-1], expected[-1], sync, check_cfg)
    after_recheck = guard.check_and_restore() if guard is not None else []
    if v.ok and after_recheck:
        return TimedOutcome(stats, device_state_verdict(after_recheck), v.check)
    return TimedOutcome(stats, v, v.check)


class StateGuard(Protocol):
    def check_and_restore(self) -> list[str]: ...


def flops_rate(flops: float, ms: float) -> float:
    """TFLOP/s of `flops` done in `ms` milliseconds."""
    return flops / (ms * 1e-3) / 1e12


def device_state_verdict(changed: list[str]) -> trial.Verdict:
    return trial.Verdict(
        STATUS_REJECTED,
        "device-state",
        "the kernel changed device or stream state that belongs to the harness (put back after each of its calls, "
        "before anything else ran): " + "; ".join(changed[:4]),
    )
