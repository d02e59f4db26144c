"""The timed phase of a scenario (harness/timed.py) on the CPU: kernels written in Python, a
stand-in clock, the real fresh contents, repeat calls and sampled checks."""

import random

import torch

import fakes
from kernelseek_suite.config import CheckConfig, TimingConfig
from kernelseek_suite.harness import trial
from kernelseek_suite.harness.timed import time_scenario
from kernelseek_suite.scenarios import Scenario

CFG = CheckConfig(red_zone_bytes=4096)
TCFG = TimingConfig(warmup=2, min_reps=5, max_reps=10, budget_s=1.0, input_sets=2)
SCN = Scenario("grid-like", 2, 64, 64, 4, 2, 32, 32, True)
SEED = 99


def time_on(state, launch, clock, baselines=None, seed=SEED, tcfg=TCFG, scn=SCN, **kw):
    """time_scenario on the trials' state, with this module's scenario, settings and stand-in clock."""
    return time_scenario(
        scn, state, launch, baselines or {}, seed, random.Random(seed), "cpu", tcfg, CFG, lambda: None,
        gap_ms=0.0, timer=clock, **kw,
    )  # fmt: skip


def timed(launch, clock=None, baselines=None, seed=SEED, tcfg=TCFG, check_launch=None):
    """The trials (as the worker runs them), then the timed phase."""
    clock = clock or fakes.StandInClock()
    v, state = trial.check_scenario(SCN, SEED, check_launch or (lambda b: launch(b, 0)), lambda: None, "cpu", CFG)
    assert v.ok, v.reason
    return time_on(state, launch, clock, baselines, seed, tcfg)


def test_an_honest_kernel_passes_with_its_time_and_a_repeat_ratio_of_one():
    full = fakes.honest(SCN)
    clock = fakes.StandInClock()
    res = timed(lambda b, t: (full(b), clock.took(1.0))[0], clock, {"base": lambda q, k, v: clock.took(2.0)})
    assert res.verdict.ok, res.verdict.reason
    k = res.stats["kernel"]
    assert (k.median_ms, k.reps, k.repeats, k.repeat_ratio) == (1.0, 10, 3, 1.0)
    assert res.stats["base"].median_ms == 2.0 and res.recheck["ok"]


def test_content_replay_never_hits_a_counted_call_and_is_caught_on_the_repeats():
    for replay_ms in (0.05, 0.6):  # as fast as a copy, and paced to look like work
        k = fakes.ContentReplay(SCN, compute_ms=1.0, replay_ms=replay_ms)
        res = timed(k.launch, k.clock)
        assert (res.verdict.status, res.verdict.code) == ("rejected", "cached"), res.verdict.reason
        st = res.stats["kernel"]
        assert st.median_ms == 1.0  # every counted call computed: nothing to gain
        assert st.repeat_ratio == replay_ms and "just seen" in res.verdict.reason
        # the trials' second run on the same inputs, and the 3 repeat calls: the only replays
        assert k.replays == 1 + TCFG.repeat_calls


def test_without_new_contents_the_same_kernel_would_have_replayed_every_timed_call():
    """What the defence stops: the input sets' contents as they were before each call repeat."""
    k = fakes.ContentReplay(SCN, compute_ms=1.0, replay_ms=0.05)
    v, state = trial.check_scenario(SCN, SEED, lambda b: k.launch(b), lambda: None, "cpu", CFG)
    second = trial.new_buffers(SCN, 5, "cpu", CFG)
    for rnd in range(10):
        k.launch(state.bufs if rnd % 2 == 0 else second)
    assert v.ok and k.replays >= 1 + 8


def test_a_replay_keyed_without_the_signs_replays_stale_outputs_and_fails_the_sampled_check():
    k = fakes.ContentReplay(SCN, compute_ms=1.0, replay_ms=1.0, signs=False)
    res = timed(k.launch, k.clock)
    assert (res.verdict.status, res.verdict.code) == ("rejected", "timed-output"), res.verdict.reason
    assert "reference of its inputs" in res.verdict.reason


def test_a_replay_keyed_on_a_few_elements_is_caught():
    k = fakes.ContentReplay(SCN, compute_ms=1.0, replay_ms=0.05, sample=1)
    res = timed(k.launch, k.clock)
    assert res.verdict.code in ("cached", "timed-output"), res.verdict.reason


SMALL = Scenario("small", 1, 32, 32, 2, 1, 16, 16, False)


def test_the_sampled_calls_are_drawn_over_the_whole_run(monkeypatch):
    from kernelseek_suite.harness import timed as timed_module

    drawn = []
    real = timed_module.take_sample

    def spy(rnd, *a, **kw):
        drawn.append(rnd)
        assert kw == {"rows": TCFG.checked_rows}  # the configured number of rows
        return real(rnd, *a, **kw)

    monkeypatch.setattr(timed_module, "take_sample", spy)
    kept = []
    for seed in range(30):
        drawn.clear()
        full = fakes.honest(SMALL)
        v, state = trial.check_scenario(SMALL, SEED, full, lambda: None, "cpu", CFG)
        res = time_on(state, lambda b, t: full(b), fakes.StandInClock(), seed=seed, scn=SMALL)
        assert res.verdict.ok
        # the first checked_calls are always offered a slot; later ones replace them at random
        assert drawn[: TCFG.checked_calls] == list(range(TCFG.checked_calls))
        kept.append(sorted(drawn[TCFG.checked_calls :]))
    late = [r for rounds in kept for r in rounds]
    assert late and max(late) == TCFG.max_reps - 1 and len({tuple(k) for k in kept}) > 10


def test_stale_but_finite_outputs_in_late_rounds_are_caught_by_the_sampled_check():
    """Right while the repeat calls can happen (rounds < min_reps), then the last output of the
    input set, finite, from round 6 on: the sample is drawn over all counted calls."""
    caught = 0
    for seed in range(20):
        full = fakes.honest(SMALL)
        memo = {}

        def launch(b, t, rnd=[0]):
            rnd[0] += 1
            if rnd[0] > 3 + 2 + 6 + TCFG.repeat_calls and t in memo:  # trials, warm-up, 6 rounds
                b.out.view.copy_(memo[t][0])
                b.lse.view.copy_(memo[t][1])
                return 0
            full(b)
            memo[t] = (b.out.view.clone(), b.lse.view.clone())
            return 0

        v, state = trial.check_scenario(SMALL, SEED, lambda b: launch(b, 0), lambda: None, "cpu", CFG)
        res = time_on(state, launch, fakes.StandInClock(), seed=seed, scn=SMALL)
        caught += res.verdict.code == "timed-output"
    # 3 of 10 counted calls are checked, 4 of them stale: all 3 miss them with probability 1/6
    assert caught >= 12, caught


def test_inputs_changed_during_timing_are_found_once_the_new_contents_are_undone():
    full = fakes.honest(SCN)
    n = [0]

    def launch(b, t):
        n[0] += 1
        if n[0] == 9:
            b.v.view(torch.int16)[0, 0, 0, 0] ^= 1
        return full(b)

    res = timed(launch)
    assert res.verdict.code == "inputs-modified"


def test_late_work_comes_first():
    full = fakes.honest(SCN)
    clock = fakes.StandInClock()
    res = timed(lambda b, t: (full(b), clock.took(1.0, late_ms=2.0))[0], clock)
    assert res.verdict.code == "late-work"


def cheap_after_checks(scn, clock, honest_ms=1.0, cheap_ms=0.01):
    """Computes on the first three calls per output buffer, then writes a copy of V (finite, wrong)
    in a fraction of the time: above_ceiling.cu in Python."""
    full = fakes.honest(scn)
    calls = {}

    def launch(b, t=None):
        key = b.out.view.data_ptr()
        calls[key] = calls.get(key, 0) + 1
        if calls[key] <= 3:
            clock.took(honest_ms)
            return full(b)
        clock.took(cheap_ms)
        b.out.view.copy_(b.v[:, :, [h // (scn.heads_q // scn.heads_kv) for h in range(scn.heads_q)]])
        b.lse.view.fill_(1.0)
        return 0

    return launch


def ceiling_at(tflops_max):
    return lambda tf: f"{tf:.1f} TFLOP/s is above {tflops_max}" if tf > tflops_max else None


def test_a_cheap_finite_stand_in_after_the_checks_is_implausible_for_certain():
    clock = fakes.StandInClock()
    launch = cheap_after_checks(SCN, clock)
    v, state = trial.check_scenario(SCN, SEED, launch, lambda: None, "cpu", CFG)
    # SCN's FLOPs in 0.01 ms: far above a ceiling set at what 1 ms would give
    ceiling = ceiling_at(SCN.flops / 1e-3 / 1e12 * 1.1)
    res = time_on(state, launch, clock, ceiling=ceiling)
    assert (res.verdict.status, res.verdict.code) == ("implausible", "implausible") and "above" in res.verdict.reason
    # without a ceiling the sampled check finds it (here: 3 of the counted calls, all of them cheap)
    launch = cheap_after_checks(SCN, clock)
    v, state = trial.check_scenario(SCN, SEED, launch, lambda: None, "cpu", CFG)
    res = time_on(state, launch, clock)
    assert res.verdict.code == "timed-output"


def test_an_honest_kernel_below_the_ceiling_passes_it():
    full = fakes.honest(SCN)
    clock = fakes.StandInClock()
    res = timed(lambda b, t: (full(b), clock.took(1.0))[0], clock)
    assert res.verdict.ok
    v, state = trial.check_scenario(SCN, SEED, full, lambda: None, "cpu", CFG)
    res = time_on(
        state, lambda b, t: (full(b), clock.took(1.0))[0], clock, ceiling=ceiling_at(SCN.flops / 1e-3 / 1e12 * 1.1)
    )
    assert res.verdict.ok, res.verdict.reason


def test_unwritten_outputs_come_before_the_ceiling():
    """lazy_after_checks.cu returns at once, leaving the poison: `timed-output`, though its time is
    also impossible."""
    full = fakes.honest(SCN)
    clock = fakes.StandInClock()
    n = [0]

    def launch(b, t=None):
        n[0] += 1
        clock.took(0.001)
        return full(b) if n[0] <= 3 else 0

    v, state = trial.check_scenario(SCN, SEED, launch, lambda: None, "cpu", CFG)
    res = time_on(state, launch, clock, ceiling=ceiling_at(1e-9))
    assert res.verdict.code == "timed-output" and "unwritten or non-finite" in res.verdict.reason


class ChangesState:
    """A device-state guard: reports a change after the kernel's `at`-th call in the timing."""

    def __init__(self, at):
        self.at, self.calls = at, 0

    def check_and_restore(self):
        self.calls += 1
        return ["the persisting-L2 set-aside: 0 -> 4194304"] if self.calls == self.at else []


def test_device_state_a_kernel_changed_is_its_verdict():
    full = fakes.honest(SCN)
    clock = fakes.StandInClock()
    v, state = trial.check_scenario(SCN, SEED, full, lambda: None, "cpu", CFG)
    guard = ChangesState(at=6)
    res = time_on(state, lambda b, t: (full(b), clock.took(1.0))[0], clock, guard=guard)
    assert (res.verdict.status, res.verdict.code) == ("rejected", "device-state")
    assert "persisting-L2 set-aside" in res.verdict.reason
    # the guard ran after every call of the kernel: warm-up, counted, repeat
    assert guard.calls == TCFG.warmup + TCFG.max_reps + TCFG.repeat_calls
    clean = ChangesState(at=-1)
    res = time_on(state, lambda b, t: (full(b), clock.took(1.0))[0], clock, guard=clean)
    assert res.verdict.ok and clean.calls == TCFG.warmup + TCFG.max_reps + TCFG.repeat_calls + 1  # and the re-check
