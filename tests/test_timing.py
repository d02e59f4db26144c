"""The timing decisions that need no GPU, and the timing loop with a stand-in clock (the
measurement itself is a GPU test)."""

import random

import pytest

import fakes
from kernelseek_suite.config import TimingConfig
from kernelseek_suite.harness.timing import (
    COUNTED,
    REPEAT,
    WARMUP,
    Timed,
    TimingStats,
    late_work,
    repeat_rounds,
    replayed,
    summarize,
    time_interleaved,
)


def test_summarize():
    st = summarize([3.0, 1.0, 2.0, 4.0, 10.0], [0.0, 0.01, 0.0, 0.02, 0.0])
    assert (st.median_ms, st.min_ms, st.max_ms, st.reps) == (3.0, 1.0, 10.0, 5)
    assert st.iqr_ms > 0 and st.late_ms == 0.0
    assert summarize([2.0]).iqr_ms == 0.0


@pytest.mark.parametrize(
    "median,late,flag",
    [
        (1.0, 0.01, False),  # noise after an honest call
        (1.0, 0.2, False),  # under 25% of the call: not enough to tell
        (1.0, 0.3, True),  # work left running after the call
        (0.005, 0.9, True),  # a call that returns at once and leaves all its work behind
        (0.1, 0.04, False),  # under the absolute floor
    ],
)
def test_late_work(median, late, flag):
    assert late_work(TimingStats(median, median, median, 0.0, 5, late), TimingConfig()) is flag


# ---- the loop, on the CPU with a stand-in clock ---------------------------------------------------


CFG = TimingConfig(warmup=2, min_reps=5, max_reps=12, budget_s=1.0, input_sets=2)


def run_loop(fns, cfg=CFG, seed=0):
    clock = fakes.StandInClock()
    made = {n: f(clock) for n, f in fns.items()}
    return time_interleaved(made, cfg, gap_ms=0.0, rng=random.Random(seed), timer=clock)


def test_the_loop_tells_the_hooks_which_call_it_is_and_counts_only_counted_calls():
    log = []

    def kernel(clock):
        def call(t):
            clock.took(2.0 if log and log[-1][0] == "before" and log[-1][1].kind == REPEAT else 1.0)

        return Timed(
            call, before=lambda c: log.append(("before", c)), after=lambda c: log.append(("after", c)), repeats=True
        )

    stats = run_loop({"kernel": kernel, "base": lambda clock: lambda t: clock.took(3.0)})
    calls = [c for what, c in log if what == "before"]
    assert [c.kind for c in calls[:2]] == [WARMUP, WARMUP] and [c.input_set for c in calls[:2]] == [0, 0]
    counted = [c for c in calls if c.kind == COUNTED]
    repeats = [c for c in calls if c.kind == REPEAT]
    assert [c.round for c in counted] == list(range(12))  # budget 1 s: max_reps rounds
    assert all(c.input_set == c.round % 2 for c in counted)
    assert len(repeats) == CFG.repeat_calls and all(r.round < CFG.min_reps for r in repeats)
    for r in repeats:  # right after the counted call of its round, on the same set
        i = calls.index(r)
        assert calls[i - 1] == type(r)(r.input_set, r.round, COUNTED)
    st = stats["kernel"]
    assert (st.reps, st.median_ms, st.repeats, st.repeat_ratio) == (12, 1.0, 3, 2.0)
    assert stats["base"].reps == 12 and stats["base"].repeats == 0 and stats["base"].repeat_ratio is None


def test_repeat_rounds_are_random_and_within_the_rounds_every_scenario_reaches():
    seen = set()
    for seed in range(40):
        r = repeat_rounds(CFG, random.Random(seed))
        assert len(r) == 3 and r <= set(range(CFG.min_reps))
        seen.add(frozenset(r))
    assert len(seen) > 5
    assert repeat_rounds(TimingConfig(repeat_calls=0), random.Random(0)) == set()
    assert len(repeat_rounds(TimingConfig(repeat_calls=9, min_reps=4), random.Random(0))) == 4


def test_the_order_alternates_and_the_budget_stops_the_rounds():
    order = []

    def impl(name, ms):
        return lambda clock: lambda t: (order.append(name), clock.took(ms))

    stats = run_loop(
        {"a": impl("a", 100.0), "b": impl("b", 100.0)}, TimingConfig(warmup=0, min_reps=3, max_reps=50, budget_s=0.25)
    )
    assert order[:6] == ["a", "b", "b", "a", "a", "b"]
    assert stats["a"].reps == 3  # 0.3 s spent after 3 rounds of min_reps


@pytest.mark.parametrize("ratio,flag", [(None, False), (1.0, False), (0.85, False), (0.79, True), (0.05, True)])
def test_replayed(ratio, flag):
    st = TimingStats(1.0, 1.0, 1.0, 0.0, 5, 0.0, 3 if ratio else 0, ratio)
    assert replayed(st, TimingConfig()) is flag


def test_late_work_reaches_the_statistics():
    stats = run_loop({"k": lambda clock: lambda t: clock.took(1.0, late_ms=0.7)})
    assert stats["k"].late_ms == pytest.approx(0.7) and late_work(stats["k"], TimingConfig())
