"""The timed phase of one scenario: the kernel beside its baselines, with new input contents before
every call of the kernel (fresh.py), then the checks of what it did while it was timed.

Every input distribution the scenario was checked on (trial.py) is an input set of its own, the
rounds going over them in turn, so the kernel and every baseline are timed on each, side by side;
the statistics come per distribution and pooled. A scenario checked on one distribution only gets
further input sets of it, drawn from the seed (TimingConfig.input_sets).

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
from dataclasses import dataclass, field, replace
from typing import Protocol

from ..config import CheckConfig, TimingConfig
from ..results import STATUS_IMPLAUSIBLE, STATUS_REJECTED
from ..scenarios import Scenario
from . import trial
from .distributions import DISTRIBUTIONS
from .fresh import FreshContent, Reservoir, take_sample
from .inputs import scenario_seed
from .timing import COUNTED, REPEAT, Call, Timed, Timer, TimingStats, late_work, replayed, time_interleaved_sets


@dataclass
class TimedOutcome:
    stats: dict[str, TimingStats]  # every counted call
    verdict: trial.Verdict
    recheck: dict | None = None  # the re-check's CheckResult, when it ran
    # {distribution: {impl: the statistics of its calls on that distribution's inputs}}
    by_distribution: dict[str, dict[str, TimingStats]] = field(default_factory=dict)


def rounds_for(cfg: TimingConfig, distributions: int) -> TimingConfig:
    """The timing settings for `distributions` input distributions: one input set each, and rounds
    enough for each to get `min_reps_per_distribution` to `max_reps_per_distribution` calls (one
    distribution keeps the settings as they are)."""
    if distributions <= 1:
        return cfg
    return replace(
        cfg,
        input_sets=distributions,
        min_reps=cfg.min_reps_per_distribution * distributions,
        max_reps=cfg.max_reps_per_distribution * distributions,
    )


def time_scenario(
    scn: Scenario,
    states: trial.ScenarioState | list[trial.ScenarioState],
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
    callable on (q, k, v). The input sets are the states the checks left, one per input
    distribution; with a single state, the others are drawn from the scenario's seed (their
    reference after timing). `guard.check_and_restore()` runs after every call of the kernel,
    outside the timed region; `ceiling(tflops)` says why a kernel's TFLOP/s is implausible, or None."""
    states = [states] if isinstance(states, trial.ScenarioState) else list(states)
    dists = [st.distribution for st in states]
    cfg = rounds_for(timing_cfg, len(states))
    extra = range(1, cfg.input_sets) if len(states) == 1 else range(0)
    sets = [st.bufs for st in states] + [
        trial.new_buffers(scn, scenario_seed(seed, scn.id, t), device, check_cfg, dists[0]) for t in extra
    ]
    calls = _Calls(sets, dists + [dists[0] for _ in extra], cfg, rng, guard)
    fns: dict = {"kernel": Timed(lambda t: launch(sets[t], t), calls.before, calls.after, repeats=True)}
    for name, fn in baselines.items():
        fns[name] = (lambda f: lambda t: f(sets[t].q, sets[t].k, sets[t].v))(fn)
    stats, by_set = time_interleaved_sets(fns, cfg, flush, gap_ms=gap_ms, rng=rng, timer=timer)
    for f in calls.fresh:
        f.restore()
    by_dist = {d: by_set[i] for i, d in enumerate(dists)} if len(states) > 1 else {dists[0]: stats}

    def outcome(v: trial.Verdict, recheck: dict | None = None) -> TimedOutcome:
        return TimedOutcome(stats, v, recheck, by_dist)

    v = _timing_verdict(scn, stats, by_dist, calls, cfg, ceiling)
    if v is not None:
        return outcome(v)
    expected = [st.expected for st in states] + [
        trial.expected_for(scn, scenario_seed(seed, scn.id, t), device, dists[0]) for t in extra
    ]
    kept = [s for per in calls.samples for s in per if s is not None]
    v = trial.check_timed_outputs(kept, list(zip(sets, expected)), scn, check_cfg)
    if not v.ok:
        return outcome(v)
    if len(states) > 1:  # new data in the last distribution's buffers: contents the kernel has not seen
        v = trial.recheck_new_data(scn, lambda b: launch(b, len(sets) - 1), states[-1], sync, check_cfg)
    else:
        v = trial.recheck(lambda b: launch(b, len(sets) - 1), sets[-1], expected[-1], sync, check_cfg)
    after_recheck = guard.check_and_restore() if guard is not None else []
    if v.ok and after_recheck:
        return outcome(device_state_verdict(after_recheck), v.check)
    return outcome(v, v.check)


class _Calls:
    """What happens around each timed call of the kernel: fresh contents before it (flipping the
    distribution's tied columns together) and poisoned outputs; after it, the device state checked,
    the non-finite outputs counted on the device, and a uniform random sample of each input set's
    counted calls kept, to be checked after timing."""

    def __init__(self, sets: list, set_dist: list[str], cfg: TimingConfig, rng: random.Random, guard):
        calls = cfg.warmup + cfg.max_reps
        self.sets, self.cfg, self.rng, self.guard = sets, cfg, rng, guard
        self.fresh = [
            FreshContent(
                (b.q, b.k, b.v), calls, rng.getrandbits(63), DISTRIBUTIONS[d].tied if d in DISTRIBUTIONS else ()
            )
            for b, d in zip(sets, set_dist)
        ]
        self.bad = [0 for _ in sets]  # device scalars on a GPU: read once, after timing
        self.reservoirs = [Reservoir(cfg.checked_calls, rng) for _ in sets]
        self.samples: list[list] = [[None] * cfg.checked_calls for _ in sets]
        self.changed: list[str] = []

    def before(self, c: Call) -> None:
        if c.kind != REPEAT:
            self.fresh[c.input_set].next()
        self.sets[c.input_set].out.poison()
        self.sets[c.input_set].lse.poison()

    def after(self, c: Call) -> None:
        if self.guard is not None:
            self.changed.extend(f for f in self.guard.check_and_restore() if f not in self.changed)
        b = self.sets[c.input_set]
        self.bad[c.input_set] = self.bad[c.input_set] + b.out.count_nonfinite() + b.lse.count_nonfinite()
        if c.kind == COUNTED:
            slot = self.reservoirs[c.input_set].offer()
            if slot is not None:
                self.samples[c.input_set][slot] = take_sample(
                    c.round, c.input_set, b.q, b.k, b.v, b.out.view, b.lse.view, self.rng, rows=self.cfg.checked_rows
                )


def _timing_verdict(scn: Scenario, stats: dict, by_dist: dict, calls: _Calls, cfg: TimingConfig, ceiling):
    """What the timing itself shows against the kernel, before its sampled outputs are checked: work
    left running after the call, a changed device state, outputs left unwritten, a speed above the
    ceiling on any distribution, results replayed from a cache. None: nothing."""
    kst = stats["kernel"]
    if late_work(kst, cfg):
        return trial.Verdict(
            STATUS_REJECTED,
            "late-work",
            f"each call left {kst.late_ms:.3f} ms of work running after its stream was done (the call itself: "
            f"{kst.median_ms:.3f} ms): work on another stream or a host thread",
        )
    if calls.changed:
        return device_state_verdict(calls.changed)
    unwritten = trial.timed_unwritten({t: int(n) for t, n in enumerate(calls.bad)})
    if not unwritten.ok:
        return unwritten
    # the fastest distribution's median: a kernel too fast on any of them is implausible
    fastest = min([kst.median_ms] + [d["kernel"].median_ms for d in by_dist.values() if "kernel" in d])
    why = ceiling(flops_rate(scn.flops, fastest)) if ceiling is not None else None
    if why:
        return trial.Verdict(STATUS_IMPLAUSIBLE, "implausible", why)
    if replayed(kst, cfg):
        return trial.Verdict(
            STATUS_REJECTED,
            "cached",
            f"calls on inputs the kernel had just seen took {kst.repeat_ratio:.2f}x the time of calls on new "
            "inputs "
            f"(median of {kst.repeats}; below {cfg.repeat_faster:g}x is not noise): a result kept by input "
            "contents and replayed",
        )
    return None


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
