"""The pass rule and the reference, on the CPU at small sizes."""

import math

import pytest
import torch

from fakes import flash_style, naive_attention, uniform_mean
from kernelseek_suite.config import CheckConfig
from kernelseek_suite.harness.check import check_output
from kernelseek_suite.harness.inputs import NewData, make_inputs, scenario_seed
from kernelseek_suite.harness.reference import attention_reference, reference_pair
from kernelseek_suite.scenarios import Scenario


def scn(b=2, sq=33, sk=33, hq=4, hk=2, d=32, dv=None, causal=False):
    return Scenario("t", b, sq, sk, hq, hk, d, dv or d, causal)


def inputs(s, seed=7):
    return make_inputs(s, seed, device="cpu")


# ---- the reference against a naive implementation --------------------------------------------------


@pytest.mark.parametrize(
    "s",
    [
        scn(),  # plain
        scn(hq=4, hk=1, causal=True),  # MQA, causal, square
        scn(hq=6, hk=2, sq=17, sk=45, causal=True),  # GQA, seqlen_q < seqlen_k (bottom-right)
        scn(hq=4, hk=4, sq=45, sk=17, causal=True),  # seqlen_q > seqlen_k: the first rows see nothing
        scn(b=1, hq=1, hk=1, sq=1, sk=1, d=16),  # a single element
        scn(d=48, dv=32, sq=20, sk=31),  # d_qk != d_v
    ],
)
@pytest.mark.parametrize("chunk_bytes", [1 << 30, 4 * 6 * 45 * 2])  # whole, or a few rows per chunk
def test_reference_matches_a_naive_float64_attention(s, chunk_bytes):
    # small chunks exercise the causal paths: chunks that see no key, see all keys, or cross the diagonal
    q, k, v = inputs(s)
    out, lse = attention_reference(q, k, v, s.causal, s.softmax_scale, chunk_bytes=chunk_bytes)
    want, want_lse = naive_attention(q, k, v, s.causal)
    assert out.dtype == torch.float32 and out.shape == want.shape
    torch.testing.assert_close(out.double(), want, atol=2e-5, rtol=1e-5)
    assert torch.equal(torch.isneginf(lse), torch.isneginf(want_lse))
    live = ~torch.isneginf(want_lse)
    torch.testing.assert_close(lse.double()[live], want_lse[live], atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "s",
    [
        scn(hq=6, hk=2, sq=17, sk=45, causal=True),  # seqlen_q < seqlen_k
        scn(hq=4, hk=4, sq=45, sk=17, causal=True),  # the first 28 rows see nothing
        scn(sq=33, sk=33, causal=True),
        scn(sq=20, sk=31),
    ],
)
@pytest.mark.parametrize("chunk_bytes", [1 << 30, 4 * 6 * 45 * 2])
def test_the_reference_of_some_rows_is_those_rows_of_the_whole(s, chunk_bytes):
    # the causal mask of a row depends on its place in the whole problem, not in the subset
    q, k, v = inputs(s)
    whole, whole_lse = attention_reference(q, k, v, s.causal, s.softmax_scale)
    for rows in ([0], [s.seqlen_q - 1], [1, 5, 16], list(range(3, s.seqlen_q, 4)), list(range(s.seqlen_q))):
        out, lse = attention_reference(
            q[:, rows], k, v, s.causal, s.softmax_scale, chunk_bytes=chunk_bytes, rows=rows, seqlen_q=s.seqlen_q
        )
        torch.testing.assert_close(out, whole[:, rows])
        assert torch.equal(torch.isneginf(lse), torch.isneginf(whole_lse[:, :, rows]))
        live = ~torch.isneginf(lse)
        torch.testing.assert_close(lse[live], whole_lse[:, :, rows][live])
        lowp, _ = attention_reference(
            q[:, rows], k, v, s.causal, s.softmax_scale, upcast=False, rows=rows, seqlen_q=s.seqlen_q
        )
        full_lowp, _ = attention_reference(q, k, v, s.causal, s.softmax_scale, upcast=False)
        torch.testing.assert_close(lowp, full_lowp[:, rows])


def test_rows_must_be_increasing_and_inside_the_problem():
    s = scn(sq=10, sk=10, causal=True)
    q, k, v = inputs(s)
    for rows, seqlen_q in (([3, 2], 10), ([2, 2], 10), ([1, 10], 10), ([1, 2], None), ([1, 2, 3], 10)):
        with pytest.raises(ValueError):
            attention_reference(q[:, :2], k, v, True, s.softmax_scale, rows=rows, seqlen_q=seqlen_q)


def test_rows_with_nothing_to_attend_give_zero_and_minus_inf():
    s = scn(sq=40, sk=10, causal=True)
    q, k, v = inputs(s)
    out, lse = attention_reference(q, k, v, True, s.softmax_scale)
    # bottom-right: row i sees columns j <= i + (10 - 40), so rows 0..29 see nothing
    assert torch.isneginf(lse[:, :, :30]).all() and torch.isfinite(lse[:, :, 30:]).all()
    assert (out[:, :30] == 0).all() and (out[:, 30:].abs() > 0).any()


def test_causal_with_more_keys_sees_a_prefix_of_them():
    s = scn(b=1, hq=1, hk=1, sq=3, sk=8, causal=True)
    q, k, v = inputs(s)
    out, _ = attention_reference(q, k, v, True, s.softmax_scale)
    # the last query row sees all 8 keys: same as non-causal for that row
    full, _ = attention_reference(q, k, v, False, s.softmax_scale)
    torch.testing.assert_close(out[:, -1], full[:, -1])
    # row 0 sees keys 0..5 only
    part, _ = attention_reference(q[:, :1], k[:, :6], v[:, :6], False, s.softmax_scale)
    torch.testing.assert_close(out[:, :1], part)


def test_chunking_does_not_change_the_reference():
    s = scn(sq=50, sk=70, causal=True, hq=4, hk=2)
    q, k, v = inputs(s)
    whole, whole_lse = attention_reference(q, k, v, True, s.softmax_scale)
    tiny, tiny_lse = attention_reference(q, k, v, True, s.softmax_scale, chunk_bytes=4 * 4 * 70 * 3)
    torch.testing.assert_close(tiny, whole)
    torch.testing.assert_close(tiny_lse, whole_lse)


def test_the_low_precision_reference_is_close_but_not_equal():
    s = scn(sq=64, sk=64)
    q, k, v = inputs(s)
    ref, _, lowp = reference_pair(q, k, v, False)
    err = (lowp.float() - ref).abs().max().item()
    assert lowp.dtype == torch.bfloat16
    assert 1e-4 < err < 0.1


def test_new_data_has_the_reference_the_transform_says():
    """The cache defence relies on it: the reference of the transformed inputs is the transformed
    reference, exactly in the math and to float rounding in practice."""
    for s in (scn(b=3, hq=6, hk=2, causal=True, sq=20, sk=30), scn(b=1, hq=4, hk=1), scn(b=2, hq=1, hk=1)):
        q, k, v = inputs(s)
        nd = NewData(s)
        ref, lse = attention_reference(q, k, v, s.causal, s.softmax_scale)
        ref2, lse2 = attention_reference(*nd.inputs(q, k, v), s.causal, s.softmax_scale)
        torch.testing.assert_close(ref2, nd.output(ref), atol=1e-6, rtol=1e-6)
        torch.testing.assert_close(lse2, nd.lse(lse), atol=1e-6, rtol=1e-6)
        assert not torch.equal(nd.output(ref), ref)


# ---- the pass rule ------------------------------------------------------------------------------


@pytest.fixture
def case():
    s = scn(b=2, sq=48, sk=40, hq=4, hk=2, causal=True)
    q, k, v = inputs(s, 11)
    ref, ref_lse, lowp = reference_pair(q, k, v, True, s.softmax_scale)
    return ref.to(torch.bfloat16), ref_lse.clone(), ref, ref_lse, lowp


def test_the_right_answer_passes(case):
    out, lse, ref, ref_lse, lowp = case
    r = check_output(out, ref, lowp, lse, ref_lse)
    assert r.ok and r.code == "" and r.max_err <= r.tol and r.lse_err == 0.0


def test_a_wrong_output_fails(case):
    out, lse, ref, ref_lse, lowp = case
    out[1, 40, 3, 5] += 0.5
    r = check_output(out, ref, lowp, lse, ref_lse)
    assert not r.ok and r.code == "mismatch" and "tolerance" in r.reason


def test_an_error_just_inside_the_tolerance_passes_and_just_outside_fails(case):
    _, lse, ref, ref_lse, lowp = case
    tol = 2 * (lowp.float() - ref).abs().max().item() + CheckConfig().atol
    inside = ref.clone()
    inside[0, 47, 0, 0] += 0.9 * tol
    outside = ref.clone()
    outside[0, 47, 0, 0] += 1.1 * tol
    # fp32 outputs so that the rounding to bf16 does not blur the edge
    assert check_output(inside, ref, lowp, lse, ref_lse).ok
    assert not check_output(outside, ref, lowp, lse, ref_lse).ok


@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_element_fails(case, value):
    out, lse, ref, ref_lse, lowp = case
    out[0, 10, 1, 2] = value
    r = check_output(out, ref, lowp, lse, ref_lse)
    assert not r.ok and r.code == "nonfinite" and r.nonfinite == 1


def test_an_unwritten_output_fails(case):
    out, lse, ref, ref_lse, lowp = case
    out[:, 20:] = float("nan")  # what poisoning leaves where nothing was written
    r = check_output(out, ref, lowp, lse, ref_lse)
    assert not r.ok and r.nonfinite == out[:, 20:].numel()


def test_a_zero_output_where_rows_attend_fails(case):
    out, lse, ref, ref_lse, lowp = case
    assert not check_output(torch.zeros_like(out), ref, lowp, lse, ref_lse).ok


def test_lse_rules(case):
    out, lse, ref, ref_lse, lowp = case
    empty = torch.isneginf(ref_lse)
    assert empty.any() and (~empty).any()
    bad = lse.clone()
    bad[empty] = 0.0  # an empty row must be -inf
    assert check_output(out, ref, lowp, bad, ref_lse).code == "lse"
    bad = lse.clone()
    bad[0, 0, -1] = float("-inf")  # a row that attends must be finite
    assert check_output(out, ref, lowp, bad, ref_lse).code == "lse"
    bad = lse.clone()
    bad[1, 2, -1] = float("nan")
    assert "NaN" in check_output(out, ref, lowp, bad, ref_lse).reason
    bad = lse.clone()
    bad[~empty] += 0.01
    assert check_output(out, ref, lowp, bad, ref_lse).code == "lse"
    ok = lse.clone()
    ok[~empty] += 1e-4
    assert check_output(out, ref, lowp, ok, ref_lse).ok


def test_a_wrong_shape_fails(case):
    out, lse, ref, ref_lse, lowp = case
    assert not check_output(out[:, :-1], ref, lowp, lse, ref_lse).ok


# ---- the inputs --------------------------------------------------------------------------------


def test_inputs_are_fresh_per_seed_and_reproducible():
    s = scn()
    a, b, c = inputs(s, 1), inputs(s, 1), inputs(s, 2)
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    assert not torch.equal(a[0], c[0])
    assert scenario_seed(5, "x", 0) != scenario_seed(5, "x", 1) != scenario_seed(6, "x", 0)


def test_inputs_are_not_symmetric_or_low_variance():
    s = scn(b=2, sq=256, sk=256, hq=8, hk=4, d=64)
    q, k, v = (t.float() for t in inputs(s, 3))
    assert q.mean().abs() > 0.02  # shifted
    per_head_std = v.std(dim=(0, 1, 3))
    assert per_head_std.max() / per_head_std.min() > 1.2  # heads differ
    scores = torch.einsum("bqhd,bkhd->bhqk", q[:, :, ::2], k) / math.sqrt(64)
    assert scores.std() > 0.5  # the softmax is far from uniform


@pytest.mark.parametrize(
    "s",
    [
        scn(b=2, sq=128, sk=128, hq=4, hk=2, d=64),
        scn(b=1, sq=200, sk=130, hq=4, hk=1, d=128, causal=True),
        scn(b=3, sq=65, sk=300, hq=2, hk=2, d=96, causal=True),
        scn(b=1, sq=100, sk=100, hq=2, hk=1, d=192, dv=128),
    ],
)
def test_an_honest_bf16_kernel_passes_with_margin(s):
    """The honest CUDA kernel's numerics (fp32 scores, bf16 P, online softmax), emulated: the
    harness's inputs must not make the pass rule too tight for honest work."""
    for seed in (1, 2):
        q, k, v = inputs(s, seed)
        ref, ref_lse, lowp = reference_pair(q, k, v, s.causal, s.softmax_scale)
        out, lse = flash_style(q, k, v, s.causal, s.softmax_scale)
        r = check_output(out, ref, lowp, lse, ref_lse)
        assert r.ok, r.reason
        assert r.max_err < 0.75 * r.tol


def test_a_cheaper_computation_passes_on_low_variance_data_but_not_on_the_harness_inputs():
    """Why the inputs are varied: a plain mean of V is right when every score is about equal."""
    s = scn(b=2, sq=64, sk=64, hq=4, hk=2, d=64, causal=True)
    g = torch.Generator().manual_seed(0)
    low = [(0.02 * torch.randn(*shape, generator=g)).to(torch.bfloat16) for shape in ((2, 64, 4, 64), (2, 64, 2, 64))]
    v = torch.randn(2, 64, 2, 64, generator=g).to(torch.bfloat16)
    ref, ref_lse, lowp = reference_pair(low[0], low[1], v, True, s.softmax_scale)
    out, lse = uniform_mean(low[0], low[1], v, True)
    assert check_output(out, ref, lowp, lse, ref_lse).ok

    q, k, v = inputs(s)
    ref, ref_lse, lowp = reference_pair(q, k, v, True, s.softmax_scale)
    out, lse = uniform_mean(q, k, v, True)
    assert check_output(out, ref, lowp, lse, ref_lse).code == "mismatch"
