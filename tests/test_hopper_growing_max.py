"""The Hopper kernel's fast softmax (v15) takes the exponentials against a reference (the row max of
an earlier block plus a bias, KS_REF_BIAS, in log2 units, v20) without computing the block's own max,
and redoes a block exactly when its sums get too large (the max grew by more than the bias + 16 - 5 in
log2 units past the block that set the reference, up to P = inf past the bias + 128). The kernel visits K/V blocks last to
first, so keys whose scale grows toward the first keys make the row max jump in nearly every row: on
a GPU every output must still pass the suite's pass rule. Without a GPU: the inputs do reach each
regime: a growth that the window absorbs, redos with finite exponentials, and infinite ones."""

import math

import pytest

from hopper_gpu import kernel_define

# (d_qk, d_v, heads_q, heads_kv, batch, seqlen_q, seqlen_k): every head dimension, odd lengths, and
# seqlen_q != seqlen_k both ways
SHAPES = [
    (64, 64, 4, 1, 2, 1000, 3001),
    (96, 96, 2, 2, 1, 3001, 3001),
    (128, 128, 4, 1, 1, 3001, 3001),
    (128, 128, 2, 2, 1, 8192, 8192),
    (192, 128, 2, 1, 1, 3001, 1000),
    (256, 256, 2, 1, 1, 1000, 1000),
]
AMPS = (4.0, 40.0, 400.0)  # how much larger the first key's scale is than the last one's, minus 1
BIAS = kernel_define("KS_REF_BIAS")  # the kernel's bias (its default), in log2 units
WINDOW_LOG2 = BIAS + 16 - 5  # the growth (log2 units) past which a block's partial sums can exceed 2^16
INF_LOG2 = BIAS + 128  # the growth past which exp2 of the stale reference's exponent overflows


def grow_inputs(shape, amp: float, seed: int, device: str):
    import torch

    dqk, dv, hq, hk, b, sq, sk = shape
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    q = torch.randn(b, sq, hq, dqk, generator=g, device=device)
    k = torch.randn(b, sk, hk, dqk, generator=g, device=device)
    v = torch.randn(b, sk, hk, dv, generator=g, device=device)
    j = torch.arange(sk, device=device, dtype=torch.float32) / sk
    k = k * (1 + amp * (1 - j) ** 2).view(1, sk, 1, 1)
    return q.bfloat16(), k.bfloat16(), v.bfloat16()


@pytest.mark.parametrize("amp", AMPS)
def test_the_inputs_make_the_row_max_jump_past_the_fast_softmax(amp):
    import torch

    q, k, _ = grow_inputs((128, 128, 1, 1, 1, 1000, 3001), amp, 7, "cpu")
    s = q[0, :, 0].float() @ k[0, :, 0].float().T * (1 / math.sqrt(128)) * math.log2(math.e)
    # the first block the kernel visits holds the last keys; the max over all keys is where it ends
    growth = s.max(dim=1).values - s[:, -128:].max(dim=1).values
    assert bool(torch.isfinite(growth).all())

    def share(t):
        return float((growth > t).float().mean())

    if amp == AMPS[0]:  # the max grows far in nearly every row (v19 redid those), within the window
        assert share(11) > 0.9 and share(WINDOW_LOG2) == 0.0
    elif amp == AMPS[1]:  # redos in nearly every row, with finite exponentials in most
        assert share(WINDOW_LOG2) > 0.9 and share(INF_LOG2) < 0.1
    else:  # redos with infinite exponentials in nearly every row
        assert share(INF_LOG2) > 0.9


@pytest.mark.gpu
@pytest.mark.nvcc
@pytest.mark.slow
def test_outputs_pass_when_the_row_max_keeps_growing():
    from hopper_gpu import failure, hopper_kernel

    lib = hopper_kernel()
    failures = []
    for shape in SHAPES:
        for causal in (False, True):
            for amp in AMPS:
                why = failure(lib, *grow_inputs(shape, amp, 99, "cuda"), causal)
                if why is not None:
                    failures.append((shape, causal, amp, why))
    assert failures == []
