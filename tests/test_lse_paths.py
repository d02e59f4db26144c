"""The LSE reaches the pass rule on every path that judges a kernel's outputs, on the CPU: the trials
before timing (trial.check_scenario, through judge), the re-check after it (trial.recheck), and the
sampled timed calls (fresh.check_sample, through trial.check_timed_outputs). A kernel whose output is
right and whose LSE is wrong fails each of them, and the default LSE bound, lse_atol + lse_rtol |lse|,
holds at its edge: an error 5% over it fails, 5% under it passes."""

import random

import pytest
import torch

import fakes
from kernelseek_suite.config import CheckConfig
from kernelseek_suite.harness import fresh, trial
from kernelseek_suite.harness.reference import attention_reference
from kernelseek_suite.scenarios import Scenario

CFG = CheckConfig(red_zone_bytes=4096)  # the default pass rule, with small guard zones
SCN = Scenario("lse", 2, 64, 64, 4, 2, 32, 32, True)  # causal, seqlen_q == seqlen_k: every row attends
SEED = 99
OVER, UNDER = 1.05, 0.95
# the default pass rule's LSE bound, written out: the tests hold the configuration to these numbers
LSE_ATOL, LSE_RTOL = 2e-3, 1e-4


def lse_bound(ref_lse):
    """The largest LSE error the default pass rule lets through, per row."""
    return LSE_ATOL + LSE_RTOL * ref_lse.abs()


def off_by(ref_lse, scale: float):
    """The reference LSE moved by `scale` times the bound of each row, up on even rows, down on odd."""
    sign = torch.ones_like(ref_lse)
    sign[..., 1::2] = -1
    return ref_lse + sign * scale * lse_bound(ref_lse)


def right_output_lse_off(scn: Scenario, scale: float):
    """A kernel that writes the right output and an LSE off by `scale` times the bound."""

    def launch(b):
        o, lse = attention_reference(b.q, b.k, b.v, scn.causal, scn.softmax_scale)
        b.out.view.copy_(o.to(torch.bfloat16))
        b.lse.view.copy_(off_by(lse, scale))
        return 0

    return launch


def test_the_bound_is_the_default_configs_and_moves_with_the_size_of_the_lse():
    assert (CheckConfig().lse_atol, CheckConfig().lse_rtol) == (LSE_ATOL, LSE_RTOL)
    o, lse = attention_reference(*_inputs(), SCN.causal, SCN.softmax_scale)
    # the rows' |lse| are large enough that lse_rtol's share of the bound is well beyond the 5% margins
    share = (LSE_RTOL * lse.abs() / lse_bound(lse)).max().item()
    assert share > 0.12


def _inputs():
    from kernelseek_suite.harness.inputs import make_inputs

    return make_inputs(SCN, SEED, "cpu")


# ---- before timing: trial.check_scenario judges every launch with its LSE ---------------------------


def test_a_right_output_with_a_wrong_lse_fails_the_trials():
    v, state = trial.check_scenario(SCN, SEED, right_output_lse_off(SCN, 100.0), lambda: None, "cpu", CFG)
    assert (v.status, v.code, state) == ("wrong", "lse", None)
    assert v.reason.startswith("LSE error ") and v.reason.endswith(" > 0.002 + 0.0001|lse|")
    assert v.check["max_err"] <= v.check["tol"] and v.check["lse_err"] > 0.2


@pytest.mark.parametrize("scale,ok", [(OVER, False), (UNDER, True)])
def test_the_trials_hold_the_lse_to_the_default_bound(scale, ok):
    v, state = trial.check_scenario(SCN, SEED, right_output_lse_off(SCN, scale), lambda: None, "cpu", CFG)
    assert v.ok == ok, v.reason
    if ok:
        # more than lse_atol alone lets through: lse_rtol |lse| carries part of the bound
        assert state is not None and v.check["lse_err"] > CFG.lse_atol
    else:
        assert (v.status, v.code) == ("wrong", "lse") and "> 0.002 + 0.0001|lse|" in v.reason


def test_the_recheck_after_timing_judges_the_lse():
    v, state = trial.check_scenario(SCN, SEED, fakes.honest(SCN), lambda: None, "cpu", CFG)
    assert v.ok, v.reason
    r = trial.recheck(right_output_lse_off(SCN, 100.0), state.bufs, state.expected, lambda: None, CFG)
    assert (r.status, r.code) == ("wrong", "lse")
    assert r.reason.startswith("re-check after timing: LSE error ")
    assert trial.recheck(right_output_lse_off(SCN, UNDER), state.bufs, state.expected, lambda: None, CFG).ok


def test_each_later_launch_of_the_trials_judges_the_lse():
    """Right on the first launch, the LSE wrong from the second (same inputs) or third (new data) on."""
    for bad_from, label in ((2, "second run on the same inputs"), (3, "new inputs in the same buffers")):
        calls = []
        good, bad = fakes.honest(SCN), right_output_lse_off(SCN, OVER)

        def launch(b, calls=calls, good=good, bad=bad, bad_from=bad_from):
            calls.append(1)
            return (bad if len(calls) >= bad_from else good)(b)

        v, _ = trial.check_scenario(SCN, SEED, launch, lambda: None, "cpu", CFG)
        assert (v.status, v.code) == ("wrong", "lse")
        assert v.reason.startswith(f"{label}: LSE error ")


# ---- after timing: the sampled timed calls are checked with their LSE -------------------------------


def sample(lse_scale: float, rows: int | None = None):
    q, k, v = _inputs()
    o, lse = attention_reference(q, k, v, SCN.causal, SCN.softmax_scale)
    return fresh.take_sample(6, 1, q, k, v, o.to(torch.bfloat16), off_by(lse, lse_scale), random.Random(3), rows=rows)


@pytest.mark.parametrize("rows", [None, 9])
def test_a_sampled_call_with_a_right_output_and_a_wrong_lse_fails(rows):
    assert fresh.check_sample(sample(0.0, rows), SCN, CFG).ok
    chk = fresh.check_sample(sample(100.0, rows), SCN, CFG)
    assert (chk.ok, chk.code) == (False, "lse")
    assert chk.max_err <= chk.tol and chk.lse_err > 0.2
    assert chk.reason.startswith("LSE error ") and chk.reason.endswith(" > 0.002 + 0.0001|lse|")


@pytest.mark.parametrize("scale,ok", [(OVER, False), (UNDER, True)])
def test_a_sampled_call_is_held_to_the_default_lse_bound(scale, ok):
    chk = fresh.check_sample(sample(scale), SCN, CFG)
    assert chk.ok == ok, chk.reason
    assert chk.code == ("" if ok else "lse")


def test_the_timed_outputs_check_rejects_a_sample_whose_lse_is_wrong():
    v, state = trial.check_scenario(SCN, SEED, fakes.honest(SCN), lambda: None, "cpu", CFG)
    sets = [(state.bufs, state.expected)]
    assert trial.check_timed_outputs([sample(UNDER)], sets, SCN, CFG).ok
    bad = trial.check_timed_outputs([sample(UNDER), sample(OVER)], sets, SCN, CFG)
    assert (bad.status, bad.code) == ("rejected", "timed-output")
    assert "timed call 6 (input set 1;" in bad.reason and "reference of its inputs: LSE error " in bad.reason
