"""The defences of harness/trial.py, on the CPU: each cheat of tests/adversarial/, written in Python
(fakes.py), is judged with the status and reason code the GPU run must show, and the honest kernel
passes."""

import pytest
import torch

import fakes
from kernelseek_suite.config import CheckConfig
from kernelseek_suite.harness import trial
from kernelseek_suite.scenarios import Scenario

CFG = CheckConfig(red_zone_bytes=4096)
GRID_LIKE = Scenario("grid-like", 2, 64, 64, 4, 2, 32, 32, True)
OFF_GRID = Scenario("off-grid", 2, 45, 17, 4, 2, 32, 32, True)  # tails, seqlen_q > seqlen_k, empty rows
SEED = 1234


def judge(kernel, scn=GRID_LIKE, sync=lambda: None):
    return trial.check_scenario(
        scn, SEED, kernel(scn) if callable(kernel) and not hasattr(kernel, "launch") else kernel, sync, "cpu", CFG
    )


@pytest.mark.parametrize("scn", [GRID_LIKE, OFF_GRID])
def test_the_honest_kernel_passes(scn):
    v, state = judge(fakes.honest, scn)
    assert v.ok and v.code == "" and not v.flags, v.reason
    assert state is not None and v.check["max_err"] <= v.check["tol"]


@pytest.mark.parametrize(
    "kernel,scn,status,code",
    [
        (fakes.writes_nothing, GRID_LIKE, "wrong", "unwritten"),
        (fakes.partial_write, GRID_LIKE, "wrong", "unwritten"),
        (fakes.no_lse, GRID_LIKE, "wrong", "unwritten"),
        (fakes.cache_by_pointer, GRID_LIKE, "rejected", "cached"),
        (fakes.low_precision, GRID_LIKE, "wrong", "mismatch"),
        (fakes.cheap_uniform, GRID_LIKE, "wrong", "mismatch"),
        (fakes.modifies_inputs, GRID_LIKE, "rejected", "inputs-modified"),
        (fakes.copies_input, GRID_LIKE, "wrong", "mismatch"),
        (fakes.grid_only, OFF_GRID, "wrong", "mismatch"),
        (fakes.nan_masked_rows, OFF_GRID, "wrong", "nonfinite"),
        (fakes.out_of_bounds, OFF_GRID, "rejected", "out-of-bounds"),
        (fakes.unsupported, GRID_LIKE, "unsupported", "unsupported"),
        (fakes.cuda_failure, GRID_LIKE, "error", "kernel-error"),
    ],
)
def test_each_cheat_is_caught_with_its_reason(kernel, scn, status, code):
    v, state = judge(kernel, scn)
    assert (v.status, v.code) == (status, code), v.reason
    assert state is None and v.reason


def test_grid_only_passes_on_the_grid_which_is_why_the_off_grid_set_exists():
    v, _ = judge(fakes.grid_only, GRID_LIKE)
    assert v.ok


def test_nan_in_masked_rows_only_shows_where_rows_are_empty():
    v, _ = judge(fakes.nan_masked_rows, GRID_LIKE)
    assert v.ok


def test_late_work_is_caught():
    k = fakes.LateWork(GRID_LIKE)
    v, _ = trial.check_scenario(GRID_LIKE, SEED, k.launch, k.sync, "cpu", CFG)
    assert (v.status, v.code) == ("rejected", "late-work")


def test_two_runs_that_disagree_beyond_the_tolerance_fail():
    v, _ = judge(lambda s: fakes.noisy(s, 0.05))
    assert v.code in ("repeat-differs", "mismatch")
    # well inside the tolerance (about 0.03 here): the largest of 16k differences of two draws of this
    # noise stays near 0.012, so the verdict does not hang on the draw
    v, _ = judge(lambda s: fakes.noisy(s, 0.002))
    assert v.ok and any(f.startswith("nondeterministic") for f in v.flags)


def test_the_cache_is_caught_by_new_data_in_the_same_buffers_not_before():
    calls = []
    inner = fakes.cache_by_pointer(GRID_LIKE)

    def launch(b):
        calls.append(b.out.view.data_ptr())
        return inner(b)

    v, _ = trial.check_scenario(GRID_LIKE, SEED, launch, lambda: None, "cpu", CFG)
    assert v.code == "cached" and len(calls) == 3 and len(set(calls)) == 1


def test_poison_is_a_nan_no_arithmetic_makes():
    g = trial.Guarded((4, 4), torch.bfloat16, "cpu", 512)
    g.poison()
    assert torch.isnan(g.view).all() and g.count_poison(g.view) == 16
    g.view.copy_(torch.full((4, 4), float("nan")) * 0)  # a NaN computed by arithmetic
    assert g.count_poison(g.view) == 0
    f = trial.Guarded((3,), torch.float32, "cpu", 512)
    f.poison()
    assert f.count_poison(f.view) == 3 and torch.isnan(f.view).all()


def test_guard_zones_see_writes_on_either_side():
    g = trial.Guarded((2, 8), torch.bfloat16, "cpu", 1024)
    assert g.zone == 512 and g.zones_intact()
    assert g.view.data_ptr() - g.full.data_ptr() == 1024
    g.view.fill_(1.0)
    assert g.zones_intact()
    g.full[g.zone - 1] = 0.0
    assert not g.zones_intact()


def test_timed_outputs_and_inputs_after_timing():
    import random

    from kernelseek_suite.harness.fresh import take_sample

    v, state = judge(fakes.honest)
    sets = [(state.bufs, state.expected)]
    b, exp = state.bufs, state.expected
    assert trial.check_timed_outputs([], sets, GRID_LIKE, CFG).ok
    assert trial.timed_unwritten({0: 0, 1: 0}).ok
    assert (
        trial.timed_unwritten({0: 0, 1: 12}).code == "timed-output"
        and "input set 1" in trial.timed_unwritten({0: 0, 1: 12}).reason
    )
    good = take_sample(4, 0, b.q, b.k, b.v, exp.ref.to(torch.bfloat16), exp.ref_lse, random.Random(1))
    assert trial.check_timed_outputs([good], sets, GRID_LIKE, CFG).ok
    wrong = take_sample(
        4, 0, b.q, b.k, b.v, torch.zeros_like(exp.ref, dtype=torch.bfloat16), exp.ref_lse, random.Random(1)
    )
    bad = trial.check_timed_outputs([good, wrong], sets, GRID_LIKE, CFG)
    assert bad.code == "timed-output" and "timed call 4" in bad.reason
    state.bufs.v.mul_(2)
    assert trial.check_timed_outputs([], sets, GRID_LIKE, CFG).code == "inputs-modified"


def test_recheck_after_timing_uses_a_fresh_poisoned_run():
    v, state = judge(fakes.honest)
    assert trial.recheck(fakes.honest(GRID_LIKE), state.bufs, state.expected, lambda: None, CFG).ok
    r = trial.recheck(fakes.writes_nothing(GRID_LIKE), state.bufs, state.expected, lambda: None, CFG)
    assert r.code == "unwritten" and r.reason.startswith("re-check after timing")


def test_a_kernel_lazy_after_its_first_calls_fails_once_timed_calls_are_checked():
    """Computes on the first three calls per output buffer (what a harness that checks only before
    timing sees), then returns the stale buffer. The trials pass; the poisoned timed calls do not."""
    counts = {}
    full = fakes.honest(GRID_LIKE)

    def launch(b):
        key = b.out.view.data_ptr()
        counts[key] = counts.get(key, 0) + 1
        return full(b) if counts[key] <= 3 else 0

    v, state = trial.check_scenario(GRID_LIKE, SEED, launch, lambda: None, "cpu", CFG)
    assert v.ok
    # a timed call, as the worker makes it: poisoned before, counted after
    state.bufs.out.poison()
    state.bufs.lse.poison()
    launch(state.bufs)
    bad = int((~torch.isfinite(state.bufs.out.view)).sum())
    assert trial.timed_unwritten({0: bad}).code == "timed-output"
