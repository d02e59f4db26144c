"""The timing decisions that need no GPU, and the timing loop with a stand-in clock (the
measurement itself is a GPU test)."""

import math
import random
import sys

import pytest

import stand_ins
from kernelseek_suite.config import TimingConfig
from kernelseek_suite.harness import timing
from kernelseek_suite.harness.timing import (
    COUNTED,
    REPEAT,
    WARMUP,
    Call,
    EventTimer,
    L2Flusher,
    Timed,
    TimingStats,
    idle_gap_ms,
    late_work,
    relative_spread,
    repeat_rounds,
    replayed,
    round_order,
    settled,
    summarize,
    time_interleaved,
    time_interleaved_sets,
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
    clock = stand_ins.StandInClock()
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


def test_the_order_turns_and_the_budget_stops_the_rounds():
    order = []

    def impl(name, ms):
        return lambda clock: lambda t: (order.append(name), clock.took(ms))

    stats = run_loop(
        {"a": impl("a", 100.0), "b": impl("b", 100.0)}, TimingConfig(warmup=0, min_reps=3, max_reps=50, budget_s=0.25)
    )
    assert order == ["a", "b", "b", "a", "b", "a"]  # round_order, three rounds
    assert stats["a"].reps == 3  # 0.3 s spent after 3 rounds of min_reps


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5])
def test_in_2n_rounds_each_implementation_takes_each_place_twice(n):
    names = [f"k{i}" for i in range(n)]
    places = {(name, place): 0 for name in names for place in range(n)}
    for rnd in range(2 * n):
        order = round_order(names, rnd)
        assert sorted(order) == names
        for place, name in enumerate(order):
            places[name, place] += 1
    assert set(places.values()) == {2}


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7])
def test_in_2n_rounds_each_implementation_follows_each_other_twice(n):
    names = [f"k{i}" for i in range(n)]
    after = {(a, b): 0 for a in names for b in names}
    for rnd in range(2 * n):
        order = round_order(names, rnd)
        for a, b in zip(order, order[1:]):
            after[a, b] += 1
    assert all(after[a, a] == 0 for a in names)
    assert {c for (a, b), c in after.items() if a != b} == ({2} if n > 1 else set())
    assert sum(after.values()) == 2 * n * (n - 1)


def test_the_round_order_is_a_williams_square_then_its_mirror():
    names = ["a", "b", "c"]
    assert ["".join(round_order(names, r)) for r in range(6)] == ["abc", "bca", "cab", "cba", "acb", "bac"]
    names = ["a", "b", "c", "d", "e"]
    assert "".join(round_order(names, 0)) == "abecd"  # 0, 1, n-1, 2, n-2
    assert "".join(round_order(names, 1)) == "bcade"  # each index plus one
    assert "".join(round_order(names, 5)) == "dceba"  # the first row reversed
    for rnd in range(40):  # a cycle is 2 n rounds, however many rounds there are
        assert round_order(names, rnd) == round_order(names, rnd % 10)
    assert round_order([], 3) == []
    assert round_order(["x"], 7) == ["x"]


@pytest.mark.parametrize("ratio,flag", [(None, False), (1.0, False), (0.85, False), (0.79, True), (0.05, True)])
def test_replayed(ratio, flag):
    st = TimingStats(1.0, 1.0, 1.0, 0.0, 5, 0.0, 3 if ratio else 0, ratio)
    assert replayed(st, TimingConfig()) is flag


def test_late_work_reaches_the_statistics():
    stats = run_loop({"k": lambda clock: lambda t: clock.took(1.0, late_ms=0.7)})
    assert stats["k"].late_ms == pytest.approx(0.7) and late_work(stats["k"], TimingConfig())


# ---- the loop's order of operations, with a clock that records every call -------------------------


class RecordingClock:
    """A stand-in for CUDA events and the device that logs what the loop does, in order: `start` and
    `end` around a timed call, `sync` for a synchronize, `read` for an elapsed time read. A call's time
    and idle gap are what the code it runs says (`took`), else 1 ms and the empty call's gap."""

    def __init__(self, log, empty_gap=0.25):
        self.log, self.empty_gap, self._next = log, empty_gap, None

    def took(self, ms, idle_ms=None):
        self._next = (ms, self.empty_gap if idle_ms is None else idle_ms)

    def run(self, fn):
        self._next = None
        self.log.append("start")
        fn()
        self.log.append("end")
        return self._next or (1.0, self.empty_gap)

    def sync(self):
        self.log.append("sync")

    def read(self, token):
        self.log.append("read")
        return token


def loop(impls, cfg, log, gap_ms=0.0, flush=True, rng=None, empty_gap=0.25):
    """impls: {name: (ms, idle_ms) or Timed-making function of the clock}; every call, hook and flush logged."""
    clock = RecordingClock(log, empty_gap)

    def plain(name, ms, idle):
        def call(t):
            log.append(("call", name, t))
            clock.took(ms, idle)

        return Timed(
            call, before=lambda c: log.append(("before", name, c)), after=lambda c: log.append(("after", name, c))
        )

    fns = {n: (spec(clock) if callable(spec) else plain(n, *spec)) for n, spec in impls.items()}
    return time_interleaved(
        fns,
        cfg,
        (lambda: log.append("flush")) if flush else None,
        gap_ms=gap_ms,
        rng=rng or random.Random(0),
        timer=clock,
    )


def test_the_warm_up_calls_each_implementation_warmup_times_untimed():
    log = []
    cfg = TimingConfig(warmup=3, min_reps=1, max_reps=1, budget_s=0.0, input_sets=2)
    loop({"a": (1.0, 0.0), "b": (1.0, 0.0), "c": (1.0, 0.0)}, cfg, log)
    one = []
    for i, n in enumerate("abc"):
        c = Call(i % 2, -1, WARMUP)
        one += [("before", n, c), ("call", n, i % 2), "sync", ("after", n, c)]
    assert log[: 3 * len(one)] == one * 3 and log[3 * len(one)] == ("before", "a", Call(0, 0, COUNTED))


def test_no_warm_up():
    log = []
    loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=1, max_reps=1, budget_s=0.0), log)
    assert log[0] == ("before", "a", Call(0, 0, COUNTED))


def test_each_round_times_every_implementation_then_syncs_once_then_reads():
    log = []
    cfg = TimingConfig(warmup=0, min_reps=3, max_reps=3, budget_s=0.0, input_sets=3)
    loop({"a": (1.0, 0.0), "b": (1.0, 0.0)}, cfg, log)

    def timed(n, t, rnd):
        c = Call(t, rnd, COUNTED)
        return [("before", n, c), "flush", "start", ("call", n, t), "end", ("after", n, c)]

    want = []
    for rnd, order in enumerate([["a", "b"], ["b", "a"], ["b", "a"]]):  # round_order
        want += timed(order[0], rnd, rnd) + timed(order[1], rnd, rnd) + ["sync", "read", "read"]
    assert log == want


def test_input_sets_rotate_with_the_rounds():
    log = []
    loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=5, max_reps=5, budget_s=0.0, input_sets=2), log)
    assert [e[2] for e in log if e[0] == "call"] == [0, 1, 0, 1, 0]


def test_each_input_set_gets_the_statistics_of_its_own_calls():
    clock = RecordingClock([], 0.25)
    times = {0: [1.0, 3.0, 5.0], 1: [2.0, 4.0], 2: [7.0, 9.0]}  # per input set, in the order of its rounds

    def call(t):
        clock.took(times[t].pop(0), 0.0)

    cfg = TimingConfig(warmup=0, min_reps=7, max_reps=7, budget_s=0.0, input_sets=3)
    pooled, by_set = time_interleaved_sets({"a": call}, cfg, None, gap_ms=0.0, rng=random.Random(0), timer=clock)
    assert [s["a"].reps for s in by_set] == [3, 2, 2] and pooled["a"].reps == 7
    assert [s["a"].median_ms for s in by_set] == [3.0, 3.0, 8.0]
    assert (by_set[0]["a"].min_ms, by_set[0]["a"].max_ms) == (1.0, 5.0) and pooled["a"].median_ms == 4.0
    assert (
        time_interleaved({"a": lambda t: clock.took(1.0, 0.0)}, cfg, None, 0.0, random.Random(0), clock)["a"].reps == 7
    )
    # a set no round reached has no statistics
    _, few = time_interleaved_sets(
        {"a": lambda t: clock.took(1.0, 0.0)},
        TimingConfig(warmup=0, min_reps=2, max_reps=2, budget_s=0.0, input_sets=3),
        None,
        gap_ms=0.0,
        rng=random.Random(0),
        timer=clock,
    )
    assert [sorted(s) for s in few] == [["a"], ["a"], []]


def test_without_a_flush_nothing_is_flushed():
    log = []
    loop({"a": (1.0, 0.0)}, TimingConfig(warmup=1, min_reps=2, max_reps=2, budget_s=0.0), log, flush=False)
    assert "flush" not in log and log.count("start") == 2


@pytest.mark.parametrize(
    "budget_s,ms,rounds",
    [
        (0.0, 1.0, 4),  # no budget: min_reps rounds exactly
        (0.25, 100.0, 4),  # 0.4 s after min_reps rounds: done
        (0.45, 100.0, 5),  # 0.4 s < 0.45 s: one more round
        (0.5, 100.0, 5),  # exactly the budget after 5 rounds: done
        (10.0, 100.0, 9),  # the budget is never reached: max_reps
    ],
)
def test_rounds_repeat_until_the_budget_is_spent(budget_s, ms, rounds):
    log = []
    stats = loop({"a": (ms, 0.0)}, TimingConfig(warmup=0, min_reps=4, max_reps=9, budget_s=budget_s), log)
    assert stats["a"].reps == rounds and log.count("sync") == rounds


def test_the_budget_of_every_implementation_must_be_spent():
    log = []
    stats = loop(
        {"slow": (500.0, 0.0), "fast": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=2, max_reps=7, budget_s=0.2), log
    )
    assert stats["slow"].reps == stats["fast"].reps == 7


def test_the_statistics_of_the_counted_calls():
    times = iter([4.0, 1.0, 2.0, 8.0, 16.0])

    def varying(clock):
        return lambda t: clock.took(next(times), 0.0)

    stats = loop({"a": varying}, TimingConfig(warmup=0, min_reps=5, max_reps=5, budget_s=0.0), [])
    assert stats["a"] == TimingStats(4.0, 1.0, 16.0, 10.5, 5, 0.0, 0, None)


def test_late_work_is_the_idle_gap_beyond_the_empty_calls():
    idles = iter([0.75, 0.25, 1.25, 0.0, 2.25])

    def lazy(clock):
        return lambda t: clock.took(1.0, next(idles))

    stats = loop({"a": lazy}, TimingConfig(warmup=0, min_reps=5, max_reps=5, budget_s=0.0), [], gap_ms=0.25)
    # extra: 0.5, 0.0, 1.0, 0.0 (never negative), 2.0 -> median 0.5
    assert stats["a"].late_ms == 0.5


def test_the_gap_is_measured_when_not_given():
    log = []
    stats = loop({"a": (1.0, 1.25)}, TimingConfig(warmup=0, min_reps=1, max_reps=1, budget_s=0.0), log, gap_ms=None)
    assert log[: 4 * 21] == ["start", "end", "sync", "read"] * 21  # 21 empty calls first
    assert stats["a"].late_ms == 1.0  # 1.25 - the empty calls' 0.25


def test_idle_gap_is_the_median_of_the_empty_calls():
    gaps = iter([0.5, 0.25, 4.0])

    class Clock(RecordingClock):
        def run(self, fn):
            fn()
            return (0.0, next(gaps))

    assert idle_gap_ms(3, Clock([])) == 0.5


def test_repeat_calls_follow_their_counted_call_in_the_chosen_rounds_and_give_a_ratio():
    log = []
    cfg = TimingConfig(warmup=1, min_reps=5, max_reps=6, budget_s=0.0, input_sets=2, repeat_calls=2)
    probes = repeat_rounds(cfg, random.Random(7))

    def kernel(clock):
        seen = []

        def call(t):
            log.append(("call", "k", t))
            clock.took(2.0 if seen[-1] == COUNTED else 1.0)  # a repeat takes half

        def before(c):
            seen.append(c.kind)
            log.append(("before", "k", c))

        return Timed(call, before=before, repeats=True)

    stats = loop({"k": kernel, "b": (1.0, 0.0)}, cfg, log, rng=random.Random(7))
    befores = [e[2] for e in log if e[0] == "before" and e[1] == "k"]
    assert befores[0].kind == WARMUP
    for c in befores[1:]:
        if c.kind == REPEAT:
            i = befores.index(c)
            assert befores[i - 1] == Call(c.input_set, c.round, COUNTED) and c.round in probes
    assert sorted(c.round for c in befores if c.kind == REPEAT) == sorted(probes)
    # the repeat is flushed and timed like any call, before the round's sync
    rnd = min(probes)
    start = log.index(("before", "k", Call(rnd % 2, rnd, REPEAT)))
    assert log[start + 1 : start + 3] == ["flush", "start"]
    assert stats["k"].reps == 5 and stats["k"].repeats == 2 and stats["k"].repeat_ratio == 0.5
    assert stats["k"].median_ms == 2.0 and stats["b"].repeats == 0


def test_a_repeat_after_a_zero_time_counted_call_gives_no_ratio():
    cfg = TimingConfig(warmup=0, min_reps=3, max_reps=3, budget_s=0.0, repeat_calls=3)

    def kernel(clock):
        return Timed(lambda t: clock.took(0.0, 0.0), repeats=True)

    stats = loop({"k": kernel}, cfg, [])
    assert stats["k"].repeats == 0 and stats["k"].repeat_ratio is None


class _NoRandom:
    def sample(self, *a):
        raise AssertionError("no repeat rounds are drawn when nothing repeats")


def test_no_repeat_rounds_are_drawn_without_a_repeating_implementation():
    stats = loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=2, max_reps=2, budget_s=0.0), [], rng=_NoRandom())
    assert stats["a"].reps == 2


def test_a_fresh_random_source_when_none_is_given():
    cfg = TimingConfig(warmup=0, min_reps=4, max_reps=4, budget_s=0.0, repeat_calls=2)
    clock = stand_ins.StandInClock()
    stats = time_interleaved({"k": Timed(lambda t: None, repeats=True)}, cfg, gap_ms=0.0, timer=clock)
    assert stats["k"].repeats == 2


# ---- statistics on known samples ------------------------------------------------------------------


@pytest.mark.parametrize(
    "samples,median,iqr",
    [
        ([1.0, 2.0, 3.0, 4.0], 2.5, 2.5),
        ([3.0, 1.0], 2.0, 3.0),
        ([8.0, 2.0, 4.0], 4.0, 6.0),
        ([16.0, 8.0, 4.0, 2.0, 1.0], 4.0, 10.5),
        ([7.0], 7.0, 0.0),
    ],
)
def test_summarize_on_known_samples(samples, median, iqr):
    st = summarize(samples)
    assert (st.median_ms, st.min_ms, st.max_ms, st.iqr_ms, st.reps) == (
        median,
        min(samples),
        max(samples),
        iqr,
        len(samples),
    )
    assert (st.late_ms, st.repeats, st.repeat_ratio) == (0.0, 0, None)


def test_summarize_late_work_and_repeats():
    st = summarize([1.0, 2.0, 3.0], [0.0, 0.5, 0.25], [2.0, 1.0, 4.0, 8.0])
    assert (st.late_ms, st.repeats, st.repeat_ratio) == (0.25, 4, 3.0)
    assert summarize([1.0], [], []).late_ms == 0.0 and summarize([1.0], [], []).repeat_ratio is None
    assert st.to_dict() == {
        "median_ms": 2.0,
        "min_ms": 1.0,
        "max_ms": 3.0,
        "iqr_ms": 2.0,
        "reps": 3,
        "late_ms": 0.25,
        "repeats": 4,
        "repeat_ratio": 3.0,
        "host_over_lead": 0,
    }


def test_late_work_at_its_threshold():
    cfg = TimingConfig(late_work_abs_ms=0.25, late_work_rel=0.5)

    def stats(median, late):
        return TimingStats(median, median, median, 0.0, 5, late)

    assert not late_work(stats(1.0, 0.5), cfg)  # exactly 0.5 x the call
    assert late_work(stats(1.0, math.nextafter(0.5, 1)), cfg)
    assert not late_work(stats(0.125, 0.25), cfg)  # exactly the floor
    assert late_work(stats(0.125, math.nextafter(0.25, 1)), cfg)


def test_replayed_at_its_threshold():
    cfg = TimingConfig(repeat_faster=0.75)
    assert not replayed(TimingStats(1.0, 1.0, 1.0, 0.0, 5, 0.0, 3, 0.75), cfg)
    assert replayed(TimingStats(1.0, 1.0, 1.0, 0.0, 5, 0.0, 3, math.nextafter(0.75, 0)), cfg)


def test_repeat_rounds_at_their_edges():
    assert repeat_rounds(TimingConfig(repeat_calls=1, min_reps=5), random.Random(0)) <= set(range(5))
    assert len(repeat_rounds(TimingConfig(repeat_calls=1, min_reps=5), random.Random(0))) == 1
    assert repeat_rounds(TimingConfig(repeat_calls=5, min_reps=5), random.Random(0)) == set(range(5))
    assert repeat_rounds(TimingConfig(repeat_calls=3, min_reps=0), random.Random(0)) == set()


# ---- the CUDA side, with stand-ins for events and the device -----------------------------------------


class _FakeCuda:
    def __init__(self, log):
        self.log, self.n = log, 0

    def Event(self, enable_timing=False):  # noqa: N802 (torch's name)
        assert enable_timing
        self.n += 1
        log, name = self.log, f"ev{self.n}"

        class Ev:
            def record(self):
                log.append(("record", name))

            def elapsed_time(self, other):
                return float(int(other.name[2:]) * 10 + int(name[2:]))

            def __init__(self):
                self.name = name

        return Ev()

    def synchronize(self):
        self.log.append("synchronize")

    def _sleep(self, cycles):
        self.log.append(("sleep", cycles))


class _FakeTorch:
    """torch as far as timing.py uses it: CUDA events, the device's synchronize, an int8 buffer."""

    int8 = "int8"

    def __init__(self, log):
        self.cuda = _FakeCuda(log)
        self.log = log

    def empty(self, n, dtype=None, device=None):
        log = self.log
        log.append(("empty", n, dtype, device))

        class Buf:
            def zero_(self):
                log.append("zero_")

        return Buf()


def test_the_event_timer_records_around_the_call_then_waits_for_the_device(monkeypatch):
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    timer = EventTimer()
    token = timer.run(lambda: log.append("call"))
    assert log == [("record", "ev1"), "call", ("record", "ev2"), "synchronize", ("record", "ev3")]
    assert timer.read(token) == (21.0, 32.0)  # (start -> end, end -> idle)
    timer.sync()
    assert log[-1] == "synchronize"


def test_a_lead_spins_the_gpu_before_the_start_event_and_calibrates_the_clock_once(monkeypatch):
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    timer = EventTimer(lead_ms=0.5)
    token = timer.run(lambda: log.append("call"))
    cal = 2_000_000  # the calibration's spin: about 1 ms of an H200's clock
    # the fake's ev1 -> ev2 reads 21 ms: cal / 21 cycles per ms, so the lead is 0.5 ms of them
    lead = ("sleep", int(0.5 * cal / 21.0))
    assert log == [
        ("record", "ev1"),
        ("sleep", cal),
        ("record", "ev2"),
        "synchronize",  # calibration
        lead,
        ("record", "ev3"),
        "call",
        ("record", "ev4"),
        "synchronize",
        ("record", "ev5"),
    ]
    assert timer.read(token) == (43.0, 54.0)
    assert not timer.over_lead(token)  # the fake's call returns at once
    log.clear()
    timer.run(lambda: log.append("call"))  # calibrated once: the lead alone before the start event
    assert log[:3] == [lead, ("record", "ev6"), "call"]


def test_the_clock_rate_is_the_spins_cycles_over_its_time_unrounded(monkeypatch):
    """2,000,000 cycles in the fake's 21 ms: 95238.095... cycles per ms, not 95238 (a lead of 100 ms is
    9,523,809 cycles; a rate rounded down would give 9,523,800)."""
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    timer = EventTimer(lead_ms=100.0)
    timer.run(lambda: None)
    assert timer.cycles_per_ms == 2_000_000 / 21.0 and timer.cycles_per_ms != 2_000_000 // 21.0
    assert [e for e in log if isinstance(e, tuple) and e[0] == "sleep"] == [("sleep", 2_000_000), ("sleep", 9_523_809)]


def test_the_host_time_of_a_call_is_in_milliseconds(monkeypatch):
    """Host seconds times 1000, exactly enough that a call 0.1% longer than the lead outlasts it and
    one 0.1% shorter does not."""
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    ticks = iter([10.0, 10.25, 0.0, 0.0005005, 0.0, 0.0004995])
    monkeypatch.setattr(EventTimer, "clock", staticmethod(lambda: next(ticks)))
    timer = EventTimer(lead_ms=0.5)
    assert timer.run(lambda: None)[3] == 250.0
    assert timer.over_lead(timer.run(lambda: None))
    assert not timer.over_lead(timer.run(lambda: None))


def test_a_call_whose_host_side_outlasts_the_lead_is_said_so(monkeypatch):
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    ticks = iter([0.0, 0.0003, 0.0, 0.0005, 1.0, 1.0007])  # host seconds: 0.3, 0.5 and 0.7 ms calls
    monkeypatch.setattr(EventTimer, "clock", staticmethod(lambda: next(ticks)))
    timer = EventTimer(lead_ms=0.5)
    assert not timer.over_lead(timer.run(lambda: None))
    assert not timer.over_lead(timer.run(lambda: None))  # as long as the lead: still under it
    assert timer.over_lead(timer.run(lambda: None))
    # without a lead, or with a negative one: no spin, and nothing to outlast (the call takes 5 s)
    for no_lead in (EventTimer(), EventTimer(lead_ms=-1.0)):
        slow = iter([0.0, 5.0])
        monkeypatch.setattr(EventTimer, "clock", staticmethod(lambda slow=slow: next(slow)))
        log.clear()
        token = no_lead.run(lambda: None)
        assert not no_lead.over_lead(token)
        assert not [e for e in log if isinstance(e, tuple) and e[0] == "sleep"]


def test_the_loop_counts_the_calls_that_outlast_the_lead_per_implementation():
    class Clock(stand_ins.StandInClock):
        def over_lead(self, token):
            return token[0] > 1.5  # a stand-in rule: the slow calls

    clock = Clock()
    cfg = TimingConfig(warmup=0, min_reps=4, max_reps=4, budget_s=0.0)
    stats = time_interleaved(
        {"slow": lambda t: clock.took(2.0), "fast": lambda t: clock.took(1.0)}, cfg, gap_ms=0.0, timer=clock
    )
    assert (stats["slow"].host_over_lead, stats["fast"].host_over_lead) == (4, 0)
    assert stats["slow"].to_dict()["host_over_lead"] == 4  # recorded with the row's times


def test_the_l2_flusher_writes_its_whole_buffer_on_every_call(monkeypatch):
    log = []
    monkeypatch.setitem(sys.modules, "torch", _FakeTorch(log))
    f = L2Flusher(4096, device="cuda:1")
    assert log == [("empty", 4096, "int8", "cuda:1")]
    f()
    f()
    assert log[1:] == ["zero_", "zero_"]
    L2Flusher(8)
    assert log[-1] == ("empty", 8, "int8", "cuda")


def test_the_loop_uses_cuda_events_when_no_timer_is_given(monkeypatch):
    made = []
    monkeypatch.setattr(timing, "EventTimer", lambda lead_ms: made.append(lead_ms) or stand_ins.StandInClock())
    cfg = TimingConfig(warmup=0, min_reps=1, max_reps=1, launch_lead_ms=0.25)
    stats = time_interleaved({"a": lambda t: None}, cfg, gap_ms=0.0)
    assert made == [0.25] and stats["a"].reps == 1
    assert TimingConfig().launch_lead_ms > 0  # the sweep's calls start behind a lead by default
    assert sys.modules["kernelseek_suite.harness.timing"] is timing


def test_an_idle_gap_shorter_than_the_empty_calls_is_no_late_work():
    stats = loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=3, max_reps=3, budget_s=0.0), [], gap_ms=0.25)
    assert stats["a"].late_ms == 0.0


def test_the_budget_is_counted_in_seconds_to_the_millisecond():
    # 4 rounds of 100 ms are 0.4 s, just short of 0.4004 s: a fifth round
    stats = loop({"a": (100.0, 0.0)}, TimingConfig(warmup=0, min_reps=4, max_reps=9, budget_s=0.4004), [])
    assert stats["a"].reps == 5


def test_a_negative_repeat_count_means_no_repeats():
    assert repeat_rounds(TimingConfig(repeat_calls=-1, min_reps=5), random.Random(0)) == set()


def test_the_hooks_cannot_change_the_call_they_are_told_about():
    import dataclasses

    with pytest.raises(dataclasses.FrozenInstanceError):
        Call(0, 0, COUNTED).round = 3


def test_many_rounds_stop_at_max_reps():
    stats = loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=1, max_reps=300, budget_s=10.0), [])
    assert stats["a"].reps == 300


def test_late_work_scales_with_the_calls_own_time():
    cfg = TimingConfig(late_work_abs_ms=0.25, late_work_rel=0.5)
    assert not late_work(TimingStats(3.0, 3.0, 3.0, 0.0, 5, 1.5), cfg)  # 0.5 x 3 ms
    assert late_work(TimingStats(3.0, 3.0, 3.0, 0.0, 5, math.nextafter(1.5, 2)), cfg)


def test_the_statistics_default_to_no_late_work_and_no_repeats():
    st = TimingStats(1.0, 1.0, 1.0, 0.0, 5)
    assert (st.late_ms, st.repeats, st.repeat_ratio) == (0.0, 0, None)


def test_the_gap_takes_21_empty_calls_and_no_more():
    log = []
    loop({"a": (1.0, 0.0)}, TimingConfig(warmup=0, min_reps=1, max_reps=1, budget_s=0.0), log, gap_ms=None)
    assert log[4 * 21] == ("before", "a", Call(0, 0, COUNTED))


def test_relative_spread_is_the_iqr_over_the_median():
    assert relative_spread([4.0, 1.0, 2.0, 8.0, 16.0]) == 10.5 / 4.0
    assert relative_spread([3.0]) == 0.0
    assert relative_spread([0.0, 0.0]) == 0.0
    assert relative_spread([-2.0, -1.0, -3.0]) == 0.0  # no spread is read from a median that is not positive
    assert settled({"a": [2.0, 2.0, 2.5]}, 0.25)  # exactly at the target (IQR 0.5 over a median of 2) meets it
    assert settled({"a": [1.0, 1.0, 1.0], "b": [1.0, 2.0, 9.0]}, None)
    assert settled({"a": [1.0, 1.0, 1.0], "b": [2.0, 2.0, 2.05]}, 0.05)
    assert not settled({"a": [1.0, 1.0, 1.0], "b": [1.0, 2.0, 9.0]}, 0.05)


def _noisy_then_steady(noisy_rounds: int):
    """A call that takes 1, 5, 1, 5 ... ms for its first rounds, then 2 ms from then on."""
    times = iter([1.0, 5.0] * (noisy_rounds // 2) + [2.0] * 1000)

    def make(clock):
        return lambda t: clock.took(next(times), 0.0)

    return make


@pytest.mark.parametrize(
    "max_noise, noisy_rounds, rounds",
    [
        (None, 4, 4),  # the budget alone: it is spent once min_reps are done
        # 1/5/1/5 for 4 rounds, then 2 ms: the quartiles (statistics.quantiles) reach 2 and 2 at 11 calls
        (0.10, 4, 11),
        (0.60, 4, 10),  # a looser target is met sooner: IQR 1 over a median of 2 at 10 calls
        (0.10, 100, 30),  # never met: max_reps ends it
    ],
)
def test_a_noise_target_keeps_timing_past_the_budget_until_it_is_met(max_noise, noisy_rounds, rounds):
    cfg = TimingConfig(warmup=0, min_reps=4, max_reps=30, budget_s=0.0, max_noise=max_noise)
    stats = loop({"a": _noisy_then_steady(noisy_rounds)}, cfg, [])
    assert stats["a"].reps == rounds
    if max_noise is not None and rounds < cfg.max_reps:
        assert stats["a"].iqr_ms / stats["a"].median_ms <= max_noise
