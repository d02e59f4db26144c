"""The Hopper kernel's exponential on the FMA pipe (`exp2_fma`, KS_POLY_EXP), evaluated step by step in
fp32 from the constants the kernel file states: its relative error against 2^x stays far below bf16's
rounding (2^-9) over the whole range the softmax feeds it, it gives exactly 0 for -inf and NaN (a masked
S), and a large x gives 2^127, above the fast softmax's FAST_LIMIT, so such a block is still redone."""

import re

import numpy as np
import pytest

from kernelseek_suite import config

KERNEL = config.REPO_ROOT / "kernels" / "hopper" / "flash_fwd_sm90.cu"
F32 = np.float32


def _constants() -> dict[str, np.float32]:
    text = KERNEL.read_text()
    names = ("EXP2_SHIFT", "EXP2_C3", "EXP2_C2", "EXP2_C1", "EXP2_C0")
    out = {}
    for name in names:
        m = re.search(rf"\b{name} = ([0-9.e+-]+)f", text)
        assert m, f"{name} not found in {KERNEL.name}"
        out[name] = F32(m.group(1))
    return out


def exp2_fma(x: np.ndarray) -> np.ndarray:
    """The kernel's exp2_fma, one fp32 operation at a time (fminf/fmaxf return the number beside a NaN)."""
    c = _constants()
    x = np.asarray(x, dtype=F32)
    x = np.fmin(np.fmax(x, F32(-127.0)), F32(127.0))  # np.fmax/fmin: a NaN loses, as in CUDA
    t = (x + c["EXP2_SHIFT"]).astype(F32)
    f = (x - (t - c["EXP2_SHIFT"]).astype(F32)).astype(F32)
    poly = c["EXP2_C0"] + f * (c["EXP2_C1"] + f * (c["EXP2_C2"] + f * c["EXP2_C3"]))  # FMAs: rounded once each
    poly = poly.astype(F32)
    bits = (t.view(np.int32).astype(np.int64) << 23) & 0xFFFFFFFF
    scale = bits.astype(np.uint32).view(F32)
    return (poly * scale).astype(F32)


def test_the_relative_error_is_far_below_bf16_rounding_where_the_softmax_feeds_it():
    # P = 2^x with x from -126 (flushed below) to FAST_LIMIT's 16 and beyond: the whole normal range
    x = np.linspace(-125.9, 126.9, 2_000_003, dtype=np.float64).astype(F32)
    got = exp2_fma(x).astype(np.float64)
    want = np.exp2(x.astype(np.float64))
    rel = np.abs(got / want - 1.0)
    assert rel.max() < 7.6e-5 < 2.0**-9 / 16, rel.max()


def test_each_integer_gives_its_power_of_two_within_the_polynomial_error():
    i = np.arange(-126, 128, dtype=F32)
    rel = np.abs(exp2_fma(i).astype(np.float64) / np.exp2(i.astype(np.float64)) - 1.0)
    assert rel.max() < 7.6e-5


@pytest.mark.parametrize("x", [-np.inf, np.nan, -127.0, -500.0])
def test_a_masked_or_far_below_s_gives_exactly_zero(x):
    assert exp2_fma(np.array([x], dtype=F32))[0] == 0.0


def test_a_large_x_stays_finite_and_far_above_the_fast_softmax_limit():
    text = KERNEL.read_text()
    limit = float(re.search(r"constexpr float FAST_LIMIT = ([0-9.]+)f;", text).group(1))
    for x in (17.0, 127.0, 1e6, np.inf):
        v = exp2_fma(np.array([x], dtype=F32))[0]
        assert np.isfinite(v) and v > limit, (x, v)
    assert exp2_fma(np.array([np.inf], dtype=F32))[0] == pytest.approx(2.0**127, rel=1e-4)


def test_the_knob_puts_the_function_in_the_softmax_and_defaults_off():
    text = KERNEL.read_text()
    assert re.search(r"^#define KS_POLY_EXP 0\b", text, re.M)
    assert "? exp2_fma(x) : exp2f(x)" in text
