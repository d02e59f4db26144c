"""New input contents for every timed call, and the sample of timed outputs (harness/fresh.py), on
the CPU."""

import random

import pytest
import torch

import fakes
from kernelseek_suite.config import CheckConfig
from kernelseek_suite.harness import fresh
from kernelseek_suite.harness.inputs import make_inputs
from kernelseek_suite.scenarios import Scenario

SCN = Scenario("s", 2, 48, 48, 4, 2, 32, 32, True)


def inputs():
    return make_inputs(SCN, 7, "cpu")


def test_every_call_sees_contents_never_seen_before_and_restore_gives_them_back():
    q, k, v = inputs()
    original = [t.clone() for t in (q, k, v)]
    f = fresh.FreshContent((q, k, v), 60, seed=3)
    bufs = type("Bufs", (), {"q": q, "k": k, "v": v})
    seen = {fakes.content_key(bufs)}
    for _ in range(60):
        f.next()
        key = fakes.content_key(bufs)
        assert key not in seen
        seen.add(key)
    f.restore()
    for now, before in zip((q, k, v), original):
        assert torch.equal(now.view(torch.int16), before.view(torch.int16))


def test_each_tensor_changes_at_every_call():
    q, k, v = inputs()
    f = fresh.FreshContent((q, k, v), 20, seed=5)
    for _ in range(20):
        before = [t.clone() for t in (q, k, v)]
        f.next()
        for now, was in zip((q, k, v), before):
            assert not torch.equal(now.view(torch.int16), was.view(torch.int16))


def test_magnitudes_are_kept_and_signs_flip_by_head_and_feature_column():
    q, k, v = inputs()
    a = q.clone()
    f = fresh.FreshContent((q, k, v), 1, seed=11)
    f.next()
    assert torch.equal(q.abs(), a.abs())
    flipped = q.view(torch.int16) != a.view(torch.int16)
    # the same columns flip for every token: the pattern over (head, feature) repeats along (batch, seq)
    per_column = flipped.reshape(-1, SCN.heads_q * SCN.d_qk)
    assert torch.equal(per_column, per_column[:1].expand_as(per_column))
    assert 0 < int(per_column[0].sum()) < SCN.heads_q * SCN.d_qk


def test_the_scores_change_so_an_old_output_is_no_answer():
    """q and k get different masks: q.k changes (the same mask on both would leave it as it was)."""
    q, k, v = inputs()
    s0 = torch.einsum("bshd,bthd->bhst", q[:, :, :2].float(), k.float())
    f = fresh.FreshContent((q, k, v), 1, seed=2)
    f.next()
    s1 = torch.einsum("bshd,bthd->bhst", q[:, :, :2].float(), k.float())
    assert not torch.allclose(s0, s1, atol=1e-2)
    assert not torch.equal(f.masks[0][0][: SCN.d_qk], f.masks[1][0][: SCN.d_qk])


def test_the_masks_depend_on_the_seed():
    q, k, v = inputs()
    a = fresh.FreshContent((q, k, v), 4, seed=1).masks[0]
    b = fresh.FreshContent((q, k, v), 4, seed=2).masks[0]
    assert not torch.equal(a, b)
    assert torch.equal(a, fresh.FreshContent((q, k, v), 4, seed=1).masks[0])


def test_no_more_calls_than_drawn_and_none_after_restore():
    q, k, v = inputs()
    f = fresh.FreshContent((q, k, v), 2, seed=1)
    f.next()
    f.next()
    with pytest.raises(RuntimeError):
        f.next()
    g = fresh.FreshContent((q, k, v), 5, seed=1)
    g.next()
    g.restore()
    with pytest.raises(RuntimeError):  # the same masks again would bring back seen contents
        g.next()


def test_only_contiguous_bf16_inputs():
    q, k, v = inputs()
    with pytest.raises(ValueError):
        fresh.FreshContent((q.float(), k, v), 1, seed=1)
    with pytest.raises(ValueError):
        fresh.FreshContent((q.transpose(1, 2), k, v), 1, seed=1)


def test_the_reservoir_keeps_k_items_each_equally_likely():
    n, k, trials = 12, 3, 6000
    hits = [0] * n
    rng = random.Random(42)
    for _ in range(trials):
        r = fresh.Reservoir(k, rng)
        kept = [None] * k
        for i in range(n):
            slot = r.offer()
            if slot is not None:
                kept[slot] = i
        assert None not in kept and len(set(kept)) == k
        for i in kept:
            hits[i] += 1
    expected = trials * k / n  # 1500; the spread of a binomial here is about 34
    assert all(abs(h - expected) < 200 for h in hits), hits


def test_a_short_stream_keeps_everything():
    r = fresh.Reservoir(3, random.Random(1))
    assert [r.offer(), r.offer()] == [0, 1]


def test_a_sample_is_one_batch_and_head_with_its_kv_head():
    q, k, v = inputs()
    out = torch.randn(SCN.batch, SCN.seqlen_q, SCN.heads_q, SCN.d_v).to(torch.bfloat16)
    lse = torch.randn(SCN.batch, SCN.heads_q, SCN.seqlen_q)
    rng = random.Random(4)
    for _ in range(20):
        s = fresh.take_sample(3, 1, q, k, v, out, lse, rng)
        hk = s.head // (SCN.heads_q // SCN.heads_kv)
        assert torch.equal(s.q[0, :, 0], q[s.batch, :, s.head]) and torch.equal(s.k[0, :, 0], k[s.batch, :, hk])
        assert torch.equal(s.v[0, :, 0], v[s.batch, :, hk]) and torch.equal(s.out[0, :, 0], out[s.batch, :, s.head])
        assert torch.equal(s.lse[0, 0], lse[s.batch, s.head]) and (s.round, s.input_set) == (3, 1)
        q.zero_()  # copies, not views
        assert s.q.abs().sum() > 0
        q, k, v = inputs()


def test_a_sample_of_rows_holds_those_rows_drawn_uniformly():
    q, k, v = inputs()
    out = torch.randn(SCN.batch, SCN.seqlen_q, SCN.heads_q, SCN.d_v).to(torch.bfloat16)
    lse = torch.randn(SCN.batch, SCN.heads_q, SCN.seqlen_q)
    rng = random.Random(5)
    hits = [0] * SCN.seqlen_q
    for _ in range(300):
        s = fresh.take_sample(0, 0, q, k, v, out, lse, rng, rows=12)
        assert len(s.rows) == 12 and s.rows == sorted(set(s.rows)) and s.seqlen_q == SCN.seqlen_q
        assert torch.equal(s.q[0, :, 0], q[s.batch, s.rows, s.head])
        assert torch.equal(s.out[0, :, 0], out[s.batch, s.rows, s.head])
        assert torch.equal(s.lse[0, 0], lse[s.batch, s.head, s.rows])
        hk = s.head // (SCN.heads_q // SCN.heads_kv)
        assert torch.equal(s.k[0, :, 0], k[s.batch, :, hk]) and torch.equal(s.v[0, :, 0], v[s.batch, :, hk])
        for r in s.rows:
            hits[r] += 1
    # 300 x 12 / 48 = 75 per row; a binomial's spread here is about 7.5
    assert all(40 < h < 110 for h in hits), hits
    # as many rows as the head has, or more: all of them, in order
    assert fresh.take_sample(0, 0, q, k, v, out, lse, rng, rows=SCN.seqlen_q).rows == list(range(SCN.seqlen_q))
    assert fresh.take_sample(0, 0, q, k, v, out, lse, rng).rows == list(range(SCN.seqlen_q))


def test_a_sample_of_rows_is_checked_with_each_row_s_own_causal_mask():
    q, k, v = inputs()
    o, l = fakes.attention_reference(q, k, v, SCN.causal, SCN.softmax_scale)
    rng = random.Random(2)
    for _ in range(10):  # right everywhere: every sample of rows passes
        s = fresh.take_sample(0, 0, q, k, v, o.to(torch.bfloat16), l, rng, rows=7)
        assert fresh.check_sample(s, SCN, CheckConfig()).ok
    # wrong on a quarter of the rows (those of the causal diagonal's first quarter): caught by a
    # sample of 7 rows with probability 1 - (3/4)^7 > 0.86; over 20 samples, all but surely
    bad = o.clone()
    bad[:, : SCN.seqlen_q // 4] += 0.5
    caught = sum(
        not fresh.check_sample(
            fresh.take_sample(0, 0, q, k, v, bad.to(torch.bfloat16), l, rng, rows=7), SCN, CheckConfig()
        ).ok
        for _ in range(20)
    )
    assert caught >= 14
    f = fresh.FreshContent((q, k, v), 1, seed=9)
    f.next()  # new contents, the old output: a replay is wrong on every row
    for _ in range(10):
        assert not fresh.check_sample(
            fresh.take_sample(0, 0, q, k, v, o.to(torch.bfloat16), l, rng, rows=3), SCN, CheckConfig()
        ).ok


def test_a_sample_is_checked_against_the_reference_of_its_own_inputs():
    q, k, v = inputs()
    o, l = fakes.attention_reference(q, k, v, SCN.causal, SCN.softmax_scale)
    s = fresh.take_sample(0, 0, q, k, v, o.to(torch.bfloat16), l, random.Random(0))
    assert fresh.check_sample(s, SCN, CheckConfig()).ok
    f = fresh.FreshContent((q, k, v), 1, seed=9)
    f.next()  # new contents, the old output: a replay
    stale = fresh.take_sample(0, 0, q, k, v, o.to(torch.bfloat16), l, random.Random(0))
    assert not fresh.check_sample(stale, SCN, CheckConfig()).ok
