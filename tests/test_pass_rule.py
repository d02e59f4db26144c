"""The pass rule (harness/check.py) at its edges, on small constructed tensors whose errors are exact
in binary floating point: the tolerance met exactly and missed by one ulp, shapes off in one
dimension, NaN and Inf in each argument and place, and the LSE wrong while the output is right.
Every failing case asserts `.ok`, the code, the reason and the numbers reported."""

import math

import pytest
import torch

from kernelseek_suite.config import CheckConfig
from kernelseek_suite.harness.check import CheckResult, check_output

# exact binary fractions, so that tolerances and errors are computed without rounding
CFG = CheckConfig(factor=3.0, atol=0.25, lse_atol=0.25, lse_rtol=0.5)
LOWP_ERR = 0.5
TOL = 3.0 * 0.5 + 0.25  # 1.75
INF, NAN = float("inf"), float("nan")


def tensors(shape=(2, 3, 2, 4)):
    """ref, an output equal to it, and a low-precision reference off by exactly LOWP_ERR once."""
    ref = torch.arange(math.prod(shape), dtype=torch.float32).reshape(shape) / 8
    lowp = ref.clone()
    lowp.view(-1)[5] += LOWP_ERR
    return ref.clone(), ref, lowp


def lse_pair():
    """(batch 1, heads 2, rows 3): row 0 of head 0 attends to nothing (-inf); the others attend."""
    ref = torch.tensor([[[-INF, 2.0, -2.0], [0.0, 4.0, -1.0]]])
    return ref.clone(), ref


def one_ulp_farther(x: float) -> float:
    """The next float32 away from zero."""
    return torch.nextafter(torch.tensor(x, dtype=torch.float32), torch.tensor(math.copysign(INF, x))).item()


def test_the_right_answer_passes_with_the_numbers_reported():
    out, ref, lowp = tensors()
    lse, ref_lse = lse_pair()
    r = check_output(out, ref, lowp, lse, ref_lse, CFG)
    assert r == CheckResult(True, "", 0.0, LOWP_ERR, TOL, 0, 0.0, "")
    assert r.to_dict() == {
        "ok": True,
        "reason": "",
        "max_err": 0.0,
        "lowp_err": LOWP_ERR,
        "tol": TOL,
        "nonfinite": 0,
        "lse_err": 0.0,
        "code": "",
    }


def test_the_default_config_is_flash_attentions_rule():
    out, ref, lowp = tensors()
    r = check_output(out, ref, lowp)
    assert r.ok and r.tol == 2.0 * LOWP_ERR + 2e-4 and r.lse_err is None


# ---- the tolerance ------------------------------------------------------------------------------


@pytest.mark.parametrize("where", [0, 7, -1])
def test_an_error_exactly_at_the_tolerance_passes(where):
    out, ref, lowp = tensors()
    out.view(-1)[where] += TOL
    r = check_output(out, ref, lowp, cfg=CFG)
    assert r.ok and r.code == "" and r.reason == ""
    assert (r.max_err, r.lowp_err, r.tol) == (TOL, LOWP_ERR, TOL)


@pytest.mark.parametrize("sign", [1, -1])
def test_an_error_one_ulp_over_the_tolerance_fails(sign):
    out, ref, lowp = tensors()
    assert ref.view(-1)[0] == 0
    over = one_ulp_farther(sign * TOL)
    out.view(-1)[0] = over
    r = check_output(out, ref, lowp, cfg=CFG)
    assert not r.ok and r.code == "mismatch"
    assert r.max_err == abs(over) > TOL and r.tol == TOL and r.lowp_err == LOWP_ERR
    assert r.nonfinite == 0 and r.lse_err is None
    assert r.reason == (f"max error {r.max_err:.3g} > tolerance 1.75 (3 x bf16-reference error 0.5 + 0.25)")


def test_the_tolerance_grows_with_the_low_precision_error_not_shrinks():
    out, ref, lowp = tensors()
    lowp.view(-1)[5] += 1.5  # lowp error 2.0: tolerance 6.25
    out.view(-1)[3] += 6.0
    r = check_output(out, ref, lowp, cfg=CFG)
    assert r.ok and r.tol == 6.25 and r.lowp_err == 2.0 and r.max_err == 6.0
    out.view(-1)[3] += 0.5
    assert not check_output(out, ref, lowp, cfg=CFG).ok


def test_a_low_precision_reference_equal_to_the_reference_leaves_atol_alone():
    out, ref, _ = tensors()
    out.view(-1)[0] += 0.25
    r = check_output(out, ref, ref.clone(), cfg=CFG)
    assert r.ok and (r.max_err, r.lowp_err, r.tol) == (0.25, 0.0, 0.25)
    out.view(-1)[0] += 0.25
    r = check_output(out, ref, ref.clone(), cfg=CFG)
    assert not r.ok and r.code == "mismatch" and (r.max_err, r.tol) == (0.5, 0.25)


def test_empty_tensors_pass_with_no_error():
    empty = torch.empty(0, 3, 2, 4)
    r = check_output(empty, empty, empty, cfg=CFG)
    assert r == CheckResult(True, "", 0.0, 0.0, 0.25, 0, None, "")


# ---- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize("dim", range(4))
@pytest.mark.parametrize("delta", [-1, 1])
def test_a_shape_off_in_one_dimension_fails(dim, delta):
    out, ref, lowp = tensors()
    shape = list(ref.shape)
    shape[dim] += delta
    wrong = torch.zeros(shape)
    r = check_output(wrong, ref, lowp, cfg=CFG)
    assert not r.ok and r.code == "mismatch"
    assert r.reason == f"output shape {tuple(shape)} != {tuple(ref.shape)}"
    assert (r.max_err, r.lowp_err, r.tol, r.nonfinite, r.lse_err) == (INF, 0.0, 0.0, wrong.numel(), None)


def test_the_same_elements_in_another_shape_fail():
    out, ref, lowp = tensors((2, 3, 2, 4))
    for shape in ((3, 2, 2, 4), (2, 3, 4, 2), (48,)):
        r = check_output(out.reshape(shape), ref, lowp, cfg=CFG)
        assert not r.ok and r.code == "mismatch" and "output shape" in r.reason


# ---- NaN and Inf ---------------------------------------------------------------------------------


@pytest.mark.parametrize("value", [NAN, INF, -INF])
@pytest.mark.parametrize("where", [0, 20, -1])
def test_a_non_finite_output_element_fails_wherever_it_is(value, where):
    out, ref, lowp = tensors()
    lse, ref_lse = lse_pair()
    out.view(-1)[where] = value
    r = check_output(out, ref, lowp, lse, ref_lse, CFG)
    assert not r.ok and r.code == "nonfinite" and r.nonfinite == 1
    assert math.isnan(r.max_err) and (r.lowp_err, r.tol, r.lse_err) == (LOWP_ERR, TOL, None)
    assert r.reason == "1 of 48 output elements are NaN/Inf (unwritten or non-finite)"


def test_every_non_finite_element_is_counted():
    out, ref, lowp = tensors()
    out.view(-1)[[0, 1, 30, 47]] = torch.tensor([NAN, INF, -INF, NAN])
    r = check_output(out, ref, lowp, cfg=CFG)
    assert not r.ok and r.nonfinite == 4 and r.reason.startswith("4 of 48 ")


@pytest.mark.parametrize("value", [NAN, INF, -INF])
@pytest.mark.parametrize("where", [0, -1])
def test_a_non_finite_reference_cannot_make_an_output_pass(value, where):
    # the references come from the harness; if one is broken, no output is judged right against it
    out, ref, lowp = tensors()
    bad_ref = ref.clone()
    bad_ref.view(-1)[where] = value
    bad_lowp = lowp.clone()
    bad_lowp.view(-1)[where] = value
    for r in (check_output(out, bad_ref, lowp, cfg=CFG), check_output(out, ref, bad_lowp, cfg=CFG)):
        assert not r.ok and r.code == "mismatch" and r.nonfinite == 0 and r.lse_err is None
        assert r.reason == "the reference or its bf16 twin is not finite (a harness fault)"
        assert math.isnan(r.max_err) and not math.isfinite(r.tol)


# ---- the LSE, with the output right ----------------------------------------------------------------


def check_lse(lse, ref_lse=None):
    out, ref, lowp = tensors()
    return check_output(out, ref, lowp, lse, lse_pair()[1] if ref_lse is None else ref_lse, CFG)


@pytest.mark.parametrize("row", [(0, 0, 0), (0, 0, 1), (0, 1, 2)])  # an empty row, rows that attend
def test_a_nan_lse_fails(row):
    lse, _ = lse_pair()
    lse[row] = NAN
    r = check_lse(lse)
    assert r == CheckResult(False, "LSE has NaN", 0.0, LOWP_ERR, TOL, 0, None, "lse")


@pytest.mark.parametrize("value", [0.0, 2.0, INF, -1e30])
def test_an_empty_row_whose_lse_is_not_minus_inf_fails(value):
    lse, _ = lse_pair()
    lse[0, 0, 0] = value
    r = check_lse(lse)
    assert r == CheckResult(False, "LSE of rows with nothing to attend is not -inf", 0.0, LOWP_ERR, TOL, 0, None, "lse")


@pytest.mark.parametrize("value", [INF, -INF])
@pytest.mark.parametrize("row", [(0, 0, 1), (0, 1, 0), (0, 1, 2)])
def test_a_row_that_attends_with_an_infinite_lse_fails(value, row):
    lse, _ = lse_pair()
    lse[row] = value
    r = check_lse(lse)
    assert r == CheckResult(False, "LSE is not finite on rows that attend", 0.0, LOWP_ERR, TOL, 0, None, "lse")


@pytest.mark.parametrize("row,ref_value", [((0, 0, 1), 2.0), ((0, 0, 2), -2.0), ((0, 1, 1), 4.0)])
def test_an_lse_error_exactly_at_its_bound_passes_and_one_ulp_over_fails(row, ref_value):
    bound = 0.25 + 0.5 * abs(ref_value)  # lse_atol + lse_rtol |lse|
    edge = ref_value + math.copysign(bound, ref_value)  # away from zero, where the ulp is coarser
    lse, ref_lse = lse_pair()
    lse[row] = edge
    r = check_lse(lse)
    assert r.ok and r.code == "" and r.lse_err == bound
    lse[row] = one_ulp_farther(edge)
    r = check_lse(lse)
    assert not r.ok and r.code == "lse" and r.lse_err == abs(lse[row].item() - ref_value) > bound
    assert (r.max_err, r.lowp_err, r.tol, r.nonfinite) == (0.0, LOWP_ERR, TOL, 0)
    assert r.reason == f"LSE error {r.lse_err:.3g} > 0.25 + 0.5|lse|"


def test_the_lse_bound_is_per_row():
    lse, ref_lse = lse_pair()
    lse[0, 1, 1] += 2.0  # row with |lse| 4: bound 2.25, so 2.0 is fine
    assert check_lse(lse).ok and check_lse(lse).lse_err == 2.0
    lse[0, 1, 0] += 0.5  # row with lse 0: bound 0.25, so 0.5 is not, though 0.5 < 2.25
    r = check_lse(lse)
    assert not r.ok and r.code == "lse" and r.lse_err == 2.0


@pytest.mark.parametrize("value", [NAN, INF])
def test_a_non_finite_reference_lse_on_a_row_that_attends_fails(value):
    lse, ref_lse = lse_pair()
    ref_lse[0, 1, 0] = value
    r = check_lse(lse, ref_lse)
    assert r == CheckResult(
        False,
        "the reference LSE is not finite on rows that attend (a harness fault)",
        0.0,
        LOWP_ERR,
        TOL,
        0,
        None,
        "lse",
    )


def test_every_row_empty_gives_no_lse_error():
    lse = torch.full((1, 2, 3), -INF)
    r = check_lse(lse, lse.clone())
    assert r.ok and r.lse_err == 0.0


def test_the_lse_is_checked_only_when_both_sides_have_one():
    lse, ref_lse = lse_pair()
    lse[0, 1, 1] = NAN
    out, ref, lowp = tensors()
    for given, want in ((None, ref_lse), (lse, None), (None, None)):
        r = check_output(out, ref, lowp, given, want, CFG)
        assert r.ok and r.lse_err is None


def test_an_output_error_is_reported_before_an_lse_error():
    out, ref, lowp = tensors()
    out.view(-1)[4] += 2.0
    lse, ref_lse = lse_pair()
    lse[0, 1, 1] = NAN
    r = check_output(out, ref, lowp, lse, ref_lse, CFG)
    assert not r.ok and r.code == "mismatch" and r.lse_err is None
