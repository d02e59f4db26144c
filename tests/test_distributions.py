"""The input distributions (harness/distributions.py), their checks (trial.check_distribution), their
timing (timed.time_scenario with one input set each) and what a row records of them, on the CPU."""

import math
import random

import pytest
import torch

import fakes
from kernelseek_suite.config import CheckConfig, TimingConfig
from kernelseek_suite.harness import distributions as D
from kernelseek_suite.harness import trial
from kernelseek_suite.harness.fresh import FreshContent
from kernelseek_suite.harness.reference import reference_pair
from kernelseek_suite.harness.timed import rounds_for, time_scenario
from kernelseek_suite.harness.worker import record_times
from kernelseek_suite.results import ScenarioResult, data_dependence, summarize
from kernelseek_suite.scenarios import Scenario

CFG = CheckConfig(red_zone_bytes=4096)
SCN = Scenario("dist", 2, 256, 256, 4, 2, 64, 64, False)
CAUSAL = Scenario("dist-causal", 2, 200, 256, 4, 2, 64, 64, True)
NAMES = list(D.DISTRIBUTIONS)


def scores(scn, q, k):
    """(batch, heads_q, seqlen_q, seqlen_k) scaled scores in fp32."""
    g = scn.heads_q // scn.heads_kv
    return torch.einsum("bqhd,bkhd->bhqk", q.float(), k.float().repeat_interleave(g, dim=2)) * scn.softmax_scale


def test_the_registry_has_the_four_kinds_of_data_and_the_primary_first():
    assert NAMES == ["standard", "wide", "llm", "rising"] and D.PRIMARY == NAMES[0]
    for d in D.DISTRIBUTIONS.values():
        assert d.summary and d.make.__doc__, d.name
    with pytest.raises(KeyError, match="unknown input distribution 'nope'"):
        D.get("nope")


@pytest.mark.parametrize("name", NAMES)
def test_each_is_a_pure_function_of_scenario_and_seed(name):
    make = D.get(name).make
    a, b, c = make(SCN, 5, "cpu"), make(SCN, 5, "cpu"), make(SCN, 6, "cpu")
    for x, y, z, shape in zip(a, b, c, [(2, 256, 4, 64), (2, 256, 2, 64), (2, 256, 2, 64)]):
        assert x.dtype == torch.bfloat16 and x.is_contiguous() and tuple(x.shape) == shape
        assert torch.equal(x, y) and not torch.equal(x, z)
        assert bool(torch.isfinite(x.float()).all())


def test_standard_is_the_suites_inputs_bit_for_bit():
    from kernelseek_suite.harness.inputs import make_inputs

    for x, y in zip(make_inputs(SCN, 11, "cpu"), D.standard(SCN, 11, "cpu")):
        assert torch.equal(x, y)


def test_standard_logits_are_near_one_and_wide_has_wide_and_narrow_heads():
    std = {n: scores(SCN, *D.get(n).make(SCN, 3, "cpu")[:2]).std(dim=-1).mean(dim=(0, 2)) for n in ("standard", "wide")}
    assert 0.5 < float(std["standard"].mean()) < 2.0
    assert float(std["wide"].max()) > 6.0 and float(std["wide"].min()) < 2.5


def test_llm_has_sinks_at_the_start_in_most_heads_and_massive_channels():
    q, k, _ = D.llm(SCN, 3, "cpu")
    s = scores(SCN, q, k)  # (b, h, q, k)
    lead = s[..., :4].mean(-1) - s[..., 4:].median(-1).values  # the sinks over the typical key
    assert float((lead.mean(dim=(0, 2)) > 8).float().mean()) >= 0.5
    mag = k.float().abs().mean(dim=(0, 1, 2))  # per channel
    assert float(mag[list(D.MASSIVE_CH)].min()) > 1.5 * float(mag[4:].mean())


def test_rising_makes_the_row_max_grow_block_after_block_in_both_walking_orders():
    q, k, _ = D.rising(SCN, 3, "cpu")
    s = scores(SCN, q, k)[0].reshape(-1, SCN.seqlen_k)  # rows of batch 0
    blocks = s.view(s.shape[0], -1, 64).amax(-1)  # (rows, 4 blocks of 64 keys)
    fwd = (blocks.diff(dim=1) > 0).float().mean(1)  # the max grows walking first to last
    bwd = (blocks.flip(1).diff(dim=1) > 0).float().mean(1)  # ... and last to first
    assert float((fwd == 1).float().mean()) > 0.3 and float((bwd == 1).float().mean()) > 0.3
    assert float(((fwd == 1) | (bwd == 1)).float().mean()) > 0.9


@pytest.mark.parametrize("name", NAMES)
def test_a_cheaper_function_fails_on_every_distribution(name):
    """Not symmetric, not low-variance: the mean of V and the copy of the best key are far from the
    reference somewhere on each distribution, under the per-head rule."""
    q, k, v = D.get(name).make(CAUSAL, 9, "cpu")
    ref, ref_lse, lowp = reference_pair(q, k, v, True, CAUSAL.softmax_scale)
    mean_v, mean_lse = fakes.uniform_mean(q, k, v, True)
    assert not trial.check_per_head(mean_v, ref, lowp, None, None, CFG).ok
    p = torch.softmax(scores(CAUSAL, q, k).masked_fill(_mask(CAUSAL), -math.inf), dim=-1)
    top = torch.nn.functional.one_hot(p.argmax(-1), CAUSAL.seqlen_k).float()  # (b, h, q, k)
    g = CAUSAL.heads_q // CAUSAL.heads_kv
    hard = torch.einsum("bhqk,bkhd->bqhd", top, v.float().repeat_interleave(g, dim=2)).to(torch.bfloat16)
    assert not trial.check_per_head(hard, ref, lowp, None, None, CFG).ok


def _mask(scn):
    rows = torch.arange(scn.seqlen_q).view(-1, 1)
    cols = torch.arange(scn.seqlen_k).view(1, -1)
    return cols > rows + scn.seqlen_k - scn.seqlen_q


def test_the_per_head_rule_catches_one_wrong_narrow_head_the_whole_tensor_would_pass():
    q, k, v = D.wide(SCN, 2, "cpu")
    ref, ref_lse, lowp = reference_pair(q, k, v, False, SCN.softmax_scale)
    tol = 2 * (lowp.float() - ref).abs().amax(dim=(1, 3)) + CFG.atol  # (b, h)
    b, h = divmod(int(tol.argmin()), tol.shape[1])
    out = ref.clone()
    out[b, :, h] += 1.5 * float(tol[b, h])  # wrong on the strictest head only, within the loosest
    assert float(1.5 * tol[b, h]) < float(tol.max())
    assert trial.check_output(out.to(torch.bfloat16), ref, lowp, ref_lse, ref_lse, CFG).ok
    res = trial.check_per_head(out.to(torch.bfloat16), ref, lowp, ref_lse, ref_lse, CFG)
    assert not res.ok and res.reason.startswith(f"batch {b}, head {h}: max error")


def test_each_heads_error_and_tolerance_are_the_rules_on_that_head_alone():
    """What check_per_head judges (and scripts/check-seeds.py reports as error / tolerance): per (batch,
    head), the max error and the factor x the bf16 reference's max error there + atol, each head's
    values from its own elements only."""
    q, k, v = D.wide(SCN, 3, "cpu")
    ref, _, lowp = reference_pair(q, k, v, False, SCN.softmax_scale)
    out = ref.clone()
    out[1, 0, 2, 5] += 0.25
    err, tol = trial.per_head_error_and_tolerance(out, ref, lowp, CFG)
    assert err.shape == tol.shape == (SCN.batch, SCN.heads_q)
    assert math.isclose(float(err[1, 2]), 0.25, rel_tol=1e-6) and float(err.sum()) == float(err[1, 2])
    one = trial.check_output(out[1:2, :, 2:3], ref[1:2, :, 2:3], lowp[1:2, :, 2:3], None, None, CFG)
    assert math.isclose(float(tol[1, 2]), one.tol, rel_tol=1e-6)
    assert float(tol.min()) > CFG.atol


def test_tied_columns_keep_their_products_in_every_call_and_the_scores_still_change():
    q, k, v = D.rising(SCN, 4, "cpu")
    q0, k0 = q.clone(), k.clone()
    fresh = FreshContent((q, k, v), 4, 8, tied=D.DISTRIBUTIONS["rising"].tied)
    for _ in range(4):
        fresh.next()
        ramp = scores_on(SCN, q, k, D.RAMP_CH), scores_on(SCN, q0, k0, D.RAMP_CH)
        assert torch.equal(*ramp)
        assert not torch.equal(scores(SCN, q, k), scores(SCN, q0, k0))
    fresh.restore()
    assert torch.equal(q, q0) and torch.equal(k, k0)
    untied = FreshContent((q, k, v), 4, 8)
    untied.next()
    assert not torch.equal(scores_on(SCN, q, k, D.RAMP_CH), scores_on(SCN, q0, k0, D.RAMP_CH))


def scores_on(scn, q, k, ch):
    return scores(scn, q[..., ch : ch + 1], k[..., ch : ch + 1])


def test_check_rows_samples_where_the_reference_would_cost_too_much():
    rng = random.Random(1)
    assert trial.check_rows(SCN, CFG, rng) is None  # 256 rows x 256 keys: all of them
    small = CheckConfig(sampled_reference_scores=256 * 32, sampled_rows_min=16)
    rows = trial.check_rows(SCN, small, rng)
    assert rows == sorted(set(rows)) and len(rows) == 32 and 0 <= rows[0] and rows[-1] < 256
    assert len(trial.check_rows(SCN, CheckConfig(sampled_reference_scores=1, sampled_rows_min=40), rng)) == 40


def clipped(scn, lo=-12.0, hi=12.0):
    """A kernel that is right while the scores stay within [lo, hi] and clips them beyond: right on
    the standard inputs, wrong on wide ones."""

    def launch(b):
        g = scn.heads_q // scn.heads_kv
        s = scores(scn, b.q, b.k)
        if scn.causal:
            s = s.masked_fill(_mask(scn), -math.inf)
        p = torch.softmax(s.clamp(lo, hi).masked_fill(torch.isinf(s), -math.inf), -1)
        o = torch.einsum("bhqk,bkhd->bqhd", p, b.v.float().repeat_interleave(g, dim=2))
        b.out.view.copy_(o.to(torch.bfloat16))
        b.lse.view.copy_(torch.logsumexp(s, -1))
        return 0

    return launch


@pytest.mark.parametrize("name", NAMES[1:])
def test_an_honest_kernel_passes_each_distribution_and_its_state_keeps_the_sampled_reference(name):
    small = CheckConfig(red_zone_bytes=4096, sampled_reference_scores=256 * 64, sampled_rows_min=16)
    v, st = trial.check_distribution(SCN, name, 3, fakes.honest(SCN), lambda: None, "cpu", small, random.Random(0))
    assert v.ok, v.reason
    assert st.distribution == name and len(st.expected.rows) == 64 and st.expected.per_head
    assert st.expected.ref.shape == (2, 64, 4, 64)


def test_a_kernel_right_only_on_narrow_logits_fails_the_wide_distribution_by_name():
    launch = clipped(SCN)
    assert float(scores(SCN, *D.standard(SCN, 3, "cpu")[:2]).abs().max()) < 12  # never clipped there
    assert trial.check_scenario(SCN, 3, launch, lambda: None, "cpu", CFG)[0].ok
    v, st = trial.check_distribution(SCN, "wide", 3, launch, lambda: None, "cpu", CFG, random.Random(0))
    assert not v.ok and st is None and v.reason.startswith("on wide inputs: ")


def test_a_distribution_check_sees_the_same_defences_as_the_first_launch():
    v, _ = trial.check_distribution(
        SCN, "llm", 3, fakes.writes_nothing(SCN), lambda: None, "cpu", CFG, random.Random(0)
    )
    assert v.code == "unwritten" and v.reason.startswith("on llm inputs: ")
    v, _ = trial.check_distribution(
        SCN, "llm", 3, fakes.modifies_inputs(SCN), lambda: None, "cpu", CFG, random.Random(0)
    )
    assert v.code == "inputs-modified"


TCFG = TimingConfig(
    warmup=1, min_reps=2, max_reps=6, budget_s=100.0, min_reps_per_distribution=3, max_reps_per_distribution=4
)


def states_for(scn, launch):
    v, first = trial.check_scenario(scn, 3, launch, lambda: None, "cpu", CFG)
    assert v.ok, v.reason
    out = [first]
    for i, name in enumerate(NAMES[1:]):
        v, st = trial.check_distribution(scn, name, 10 + i, launch, lambda: None, "cpu", CFG, random.Random(i))
        assert v.ok, v.reason
        out.append(st)
    return out


def time_all(states, launch, baselines=None, clock=None):
    """The timed phase over every distribution's state, on the CPU with a stand-in clock."""
    return time_scenario(
        SCN,
        states,
        launch,
        baselines or {},
        3,
        random.Random(3),
        "cpu",
        TCFG,
        CFG,
        lambda: None,
        gap_ms=0.0,
        timer=clock or fakes.StandInClock(),
    )


def test_rounds_give_each_distribution_its_calls_and_one_distribution_keeps_the_settings():
    cfg = rounds_for(TCFG, 4)
    assert (cfg.input_sets, cfg.min_reps, cfg.max_reps) == (4, 12, 16)
    assert rounds_for(TCFG, 1) is TCFG


def test_every_distribution_is_timed_for_the_kernel_and_the_baselines_side_by_side():
    clock = fakes.StandInClock()
    full = fakes.honest(SCN)
    slow_on = {2: 3.0}  # the kernel takes 3 ms on the third input set (llm), 1 ms elsewhere

    def launch(b, t):
        clock.took(slow_on.get(t, 1.0))
        return full(b)

    def baseline(q, k, v):
        clock.took(2.0)

    res = time_all(states_for(SCN, full), launch, {"fa3": baseline}, clock)
    assert res.verdict.ok, res.verdict.reason
    assert list(res.by_distribution) == NAMES
    for name, stats in res.by_distribution.items():
        assert set(stats) == {"kernel", "fa3"} and stats["kernel"].reps >= 3 and stats["fa3"].median_ms == 2.0
        assert stats["kernel"].median_ms == (3.0 if name == "llm" else 1.0)
    assert res.stats["kernel"].reps == sum(s["kernel"].reps for s in res.by_distribution.values())
    row = ScenarioResult(SCN.id, SCN.head_config, 2, 256, 256, False, False, SCN.flops, "ok")
    record_times(row, SCN, res, ["fa3"])
    assert row.ratio_by_distribution["llm"] == {"fa3": round(2.0 / 3.0, 4)}
    assert row.ratio_by_distribution["wide"] == {"fa3": 2.0}
    assert row.ratio == {"fa3": round(2.0 / 3.0, 4)}  # the row's lowest
    assert row.tflops_by_distribution["llm"]["kernel"] == round(SCN.flops / 3e-3 / 1e12, 2)
    assert row.times_ms_by_distribution["standard"]["kernel"]["median_ms"] == 1.0


def test_a_timed_output_wrong_only_on_one_distribution_is_caught_by_its_own_sampled_calls():
    clock = fakes.StandInClock()
    full = fakes.honest(SCN)
    calls = {"n": 0}

    def launch(b, t):
        calls["n"] += 1
        if t == 3 and calls["n"] > 2:  # rising: right while checked and warmed up, then stale
            b.out.view.copy_(torch.zeros_like(b.out.view))
            return 0
        return full(b)

    res = time_all(states_for(SCN, full), launch, clock=clock)
    assert res.verdict.code == "timed-output" and "input set 3" in res.verdict.reason


def test_the_recheck_after_timing_runs_on_new_data_of_the_last_distribution():
    seen = []
    full = fakes.honest(SCN)

    def launch(b, t):
        seen.append((t, b.v.clone()))
        return full(b)

    states = states_for(SCN, full)
    v_before = states[-1].bufs.v.clone()
    res = time_all(states, launch)
    assert res.verdict.ok and res.recheck is not None
    t, v_last = seen[-1]
    assert (
        t == 3
        and not torch.equal(v_last, v_before)
        and torch.equal(v_last.float().abs().sum(), v_before.float().abs().sum())
    )


def _row(sid, kernel, fa3):
    """A correct grid row timed on two distributions: kernel and fa3 medians per distribution."""
    r = ScenarioResult(sid, "d64-h4kv2", 2, 256, 256, False, False, 1e12, "ok")
    for d, (k, b) in {"standard": (kernel[0], fa3[0]), "wide": (kernel[1], fa3[1])}.items():
        r.times_ms_by_distribution[d] = {"kernel": {"median_ms": k}, "fa3": {"median_ms": b}}
        r.ratio_by_distribution[d] = {"fa3": round(b / k, 4)}
    r.ratio = {"fa3": min(x["fa3"] for x in r.ratio_by_distribution.values())}
    return r


def test_the_summary_headline_is_the_worst_distribution_and_the_flag_uses_the_baselines_spread():
    rows = [
        _row("a", (1.0, 1.0), (1.1, 1.12)),  # fa3 moves by 1.018x across the inputs
        _row("b", (1.0, 1.05), (1.2, 1.2)),  # the kernel by 1.05x: data-dependent
        _row("c", (1.0, 1.01), (1.0, 1.0)),  # within the baselines' spread
    ]
    s = summarize(rows, "bench", "sm90", {}, {}, ["fa3"])
    std = math.exp((math.log(1.1) + math.log(1.2) + math.log(1.0)) / 3)
    wide = math.exp((math.log(1.12) + math.log(1.2 / 1.05) + math.log(1.0 / 1.01)) / 3)
    assert s["distributions"] == ["standard", "wide"] and s["schema_version"] == 3
    assert s["by_distribution"]["standard"]["geomean"]["fa3"] == round(std, 4)
    assert s["geomean"]["fa3"] == round(min(std, wide), 4) and s["worst_distribution"]["fa3"] == "wide"
    assert s["min_ratio"]["fa3"] == round(1.0 / 1.01, 4) and s["min_ratio_scenario"]["fa3"] == "c"
    dd = data_dependence(rows, ["fa3"])
    assert dd["threshold"] == round(1.12 / 1.1, 4) and list(dd["scenarios"]) == ["b"]
    assert dd["scenarios"]["b"] == {"kernel": 1.05, "baselines": 1.0}
    assert data_dependence([_row("x", (1.0, 1.0), (1.0, 1.0))][:0], ["fa3"]) == {"threshold": None, "scenarios": {}}
