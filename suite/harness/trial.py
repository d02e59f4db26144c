"""Correctness trials of one scenario, and the checks after timing.

Each launch is judged in this order (the first failure is the reason):
  1. the return code (unsupported / an error code);
  2. late work: the output is copied on the harness's stream right after the call, then the whole
     device is synchronized; if the output changed in between, the kernel left work running
     elsewhere (another stream, a host thread) and the result was not ready when its stream said so;
  3. guard zones: the output and LSE live inside larger buffers whose margins hold a pattern; a
     changed margin is an out-of-bounds write;
  4. the inputs: regenerated from the seed after the run and compared bit for bit;
  5. unwritten elements: the output and LSE are filled with a NaN of a payload no arithmetic makes
     before every launch, so stale memory that happens to hold a right answer cannot pass;
  6. the pass rule (check.py) against a reference computed after the run, from fresh inputs.

A scenario runs three launches before timing on its primary input distribution (distributions.py):
the first, a second on the same inputs (two runs must agree), and a third with new data in the same
buffers (inputs.NewData): a result cached by pointer or shape is caught there. On each of the other
distributions it runs once more, in buffers of their own, judged the same way (return code, late
work, guard zones, inputs, unwritten elements) and by the pass rule on a uniform random sample of
query rows of every (batch, head) (`check_rows`: all of them where the reference is cheap), applied
to each (batch, head) on its own: a distribution with wide heads has a loose tolerance there, and the
narrow heads keep it strict. Device-agnostic: `launch` and `sync` are passed in, so the logic is
tested on the CPU with kernels written in Python.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field

from ..config import CheckConfig
from ..contract import ERROR_NAMES, KS_ERR_UNSUPPORTED, KS_OK
from ..results import STATUS_ERROR, STATUS_OK, STATUS_REJECTED, STATUS_UNSUPPORTED, STATUS_WRONG
from ..scenarios import Scenario
from .check import CheckResult, check_output
from .distributions import PRIMARY
from .inputs import NewData, make_inputs
from .reference import reference_pair

POISON_BF16 = 0x7FC1  # a quiet NaN with a payload that arithmetic does not produce
POISON_F32 = 0x7FC00001
CANARY_BF16 = 0x7FB5  # the pattern in the guard zones
CANARY_F32 = 0x7FB5A5A5


class Guarded:
    """A tensor inside a larger flat buffer whose margins hold a known pattern."""

    def __init__(self, shape, dtype, device, zone_bytes: int):
        import torch

        self.int_dtype, self.poison_bits, self.canary = (
            (torch.int16, POISON_BF16, CANARY_BF16)
            if dtype == torch.bfloat16
            else (torch.int32, POISON_F32, CANARY_F32)
        )
        elem = torch.empty(0, dtype=dtype).element_size()
        self.zone = max(256, zone_bytes) // elem  # a multiple of 256 bytes keeps the view aligned
        self.n = 1
        for d in shape:
            self.n *= d
        self.full = torch.empty(self.n + 2 * self.zone, dtype=dtype, device=device)
        ints = self.full.view(self.int_dtype)
        ints[: self.zone].fill_(self.canary)
        ints[self.zone + self.n :].fill_(self.canary)
        self.view = self.full[self.zone : self.zone + self.n].view(*shape)

    def poison(self) -> None:
        self.view.view(self.int_dtype).fill_(self.poison_bits)

    def zones_intact(self) -> bool:
        ints = self.full.view(self.int_dtype)
        return bool((ints[: self.zone] == self.canary).all()) and bool(
            (ints[self.zone + self.n :] == self.canary).all()
        )

    def count_nonfinite(self):
        """NaN/Inf elements in the view (the poison included), as a tensor: no synchronize."""
        import torch

        return (~torch.isfinite(self.view)).sum()

    def count_poison(self, t) -> int:
        return int((t.view(self.int_dtype) == self.poison_bits).sum().item())


@dataclass
class Buffers:
    q: object
    k: object
    v: object
    out: Guarded
    lse: Guarded


@dataclass
class Expected:
    """The inputs a launch should have seen and its reference: of every query row, or of `rows` only
    (increasing; the reference then holds those rows), judged per (batch, head) when `per_head`."""

    q: object
    k: object
    v: object
    ref: object
    ref_lse: object
    lowp: object
    rows: list | None = None
    per_head: bool = False

    def new_data(self, nd: NewData) -> Expected:
        q, k, v = nd.inputs(self.q, self.k, self.v)
        return Expected(
            q, k, v, nd.output(self.ref), nd.lse(self.ref_lse), nd.output(self.lowp), self.rows, self.per_head
        )

    def pick(self, out, lse):
        """The output and LSE rows the reference holds."""
        if self.rows is None:
            return out, lse
        import torch

        idx = torch.tensor(self.rows, device=out.device)
        return out.index_select(1, idx), lse.index_select(2, idx)


@dataclass
class RunResult:
    rc: int
    out: object  # the output as the harness's stream saw it right after the call
    lse: object
    late: bool  # it changed after that: work left running elsewhere


@dataclass
class Verdict:
    status: str = STATUS_OK
    code: str = ""
    reason: str = ""
    check: dict | None = None
    flags: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.status == STATUS_OK


Launch = Callable[[Buffers], int]


def bits_equal(a, b) -> bool:
    import torch

    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    as_int = torch.int16 if a.element_size() == 2 else torch.int32
    return torch.equal(a.reshape(-1).view(as_int), b.reshape(-1).view(as_int))


def new_buffers(scn: Scenario, seed: int, device, cfg: CheckConfig, distribution: str = PRIMARY) -> Buffers:
    import torch

    q, k, v = make_inputs(scn, seed, device, distribution)
    out = Guarded((scn.batch, scn.seqlen_q, scn.heads_q, scn.d_v), torch.bfloat16, device, cfg.red_zone_bytes)
    lse = Guarded((scn.batch, scn.heads_q, scn.seqlen_q), torch.float32, device, cfg.red_zone_bytes // 4)
    return Buffers(q, k, v, out, lse)


def expected_for(
    scn: Scenario, seed: int, device, distribution: str = PRIMARY, rows: list | None = None, per_head: bool = False
) -> Expected:
    """Regenerate the inputs from the seed (after the kernel ran: it cannot have touched them) and
    compute the reference from them (of the query `rows` only, when given)."""
    q, k, v = make_inputs(scn, seed, device, distribution)
    if rows is None:
        ref, ref_lse, lowp = reference_pair(q, k, v, scn.causal, scn.softmax_scale)
    else:
        import torch

        q_rows = q.index_select(1, torch.tensor(rows, device=q.device))
        ref, ref_lse, lowp = reference_pair(
            q_rows, k, v, scn.causal, scn.softmax_scale, rows=rows, seqlen_q=scn.seqlen_q
        )
    return Expected(q, k, v, ref, ref_lse, lowp, rows, per_head)


def check_rows(scn: Scenario, cfg: CheckConfig, rng: random.Random) -> list | None:
    """The query rows a sampled reference is computed for: all of them (None) where a whole
    reference costs at most `cfg.sampled_reference_scores` scores per (batch, head), else a uniform
    random sample of that many scores' worth (at least `cfg.sampled_rows_min`), sorted."""
    n = max(cfg.sampled_rows_min, cfg.sampled_reference_scores // max(1, scn.seqlen_k))
    if n >= scn.seqlen_q:
        return None
    return sorted(rng.sample(range(scn.seqlen_q), n))


def per_head_error_and_tolerance(out, ref, lowp, cfg: CheckConfig):
    """Each (batch, head)'s max error and its own tolerance (the pass rule's factor x the bf16
    reference's max error there, + atol), both (batch, heads), of (batch, seq, heads, d) outputs."""
    err = (out.float() - ref.float()).abs().amax(dim=(1, 3))
    tol = cfg.factor * (lowp.float() - ref.float()).abs().amax(dim=(1, 3)) + cfg.atol
    return err, tol


def check_per_head(out, ref, lowp, lse, ref_lse, cfg: CheckConfig) -> CheckResult:
    """The pass rule on each (batch, head) of (batch, seq, heads, d) outputs on its own: the whole
    check first (shapes, non-finite values, the LSE), then, where that passes, the (batch, head)
    farthest beyond its own tolerance, if any, judged alone."""
    whole = check_output(out, ref, lowp, lse, ref_lse, cfg)
    if not whole.ok or out.numel() == 0:
        return whole
    err, tol = per_head_error_and_tolerance(out, ref, lowp, cfg)
    excess = err - tol
    worst = int(excess.argmax())
    if float(excess.reshape(-1)[worst]) <= 0:
        return whole
    b, h = divmod(worst, err.shape[1])
    one = check_output(
        out[b : b + 1, :, h : h + 1],
        ref[b : b + 1, :, h : h + 1],
        lowp[b : b + 1, :, h : h + 1],
        None if lse is None else lse[b : b + 1, h : h + 1],
        None if ref_lse is None else ref_lse[b : b + 1, h : h + 1],
        cfg,
    )
    if not one.ok:
        one.reason = f"batch {b}, head {h}: {one.reason}"
    return one


def load_inputs(bufs: Buffers, exp: Expected) -> None:
    """The expected inputs copied into the buffers, in place (the kernel sees the same pointers)."""
    import torch

    with torch.no_grad():
        for dst, src in ((bufs.q, exp.q), (bufs.k, exp.k), (bufs.v, exp.v)):
            dst.copy_(src)  # type: ignore[attr-defined]


def run_once(launch: Launch, bufs: Buffers, sync: Callable[[], None]) -> RunResult:
    bufs.out.poison()
    bufs.lse.poison()
    rc = launch(bufs)
    out, lse = bufs.out.view.clone(), bufs.lse.view.clone()  # on the harness's stream, right after
    sync()  # the whole device
    late = not (bits_equal(out, bufs.out.view) and bits_equal(lse, bufs.lse.view))
    return RunResult(rc, out, lse, late)


def _prefixed(label: str, text: str) -> str:
    return f"{label}: {text}" if label else text


def judge(run: RunResult, bufs: Buffers, exp: Expected, cfg: CheckConfig, label: str = "") -> Verdict:
    def bad(status, code, text):
        return Verdict(status, code, _prefixed(label, text))

    if run.rc == KS_ERR_UNSUPPORTED:
        return bad(STATUS_UNSUPPORTED, "unsupported", "the kernel returned KS_ERR_UNSUPPORTED")
    if run.rc != KS_OK:
        return bad(
            STATUS_ERROR, "kernel-error", f"the kernel returned {run.rc} ({ERROR_NAMES.get(run.rc, 'unknown code')})"
        )
    if run.late:
        return bad(
            STATUS_REJECTED,
            "late-work",
            "the output changed after the harness's stream was done: the kernel left work running "
            "elsewhere (another stream or a host thread) instead of on the stream passed in",
        )
    for name, g in (("output", bufs.out), ("LSE", bufs.lse)):
        if not g.zones_intact():
            return bad(
                STATUS_REJECTED,
                "out-of-bounds",
                f"writes landed outside the {name} buffer (in the guard zone around it)",
            )
    changed = [
        n
        for n, now, want in (("q", bufs.q, exp.q), ("k", bufs.k, exp.k), ("v", bufs.v, exp.v))
        if not bits_equal(now, want)
    ]
    if changed:
        return bad(STATUS_REJECTED, "inputs-modified", f"the kernel changed its inputs ({', '.join(changed)})")
    for name, g, t in (("output", bufs.out, run.out), ("LSE", bufs.lse, run.lse)):
        n = g.count_poison(t)
        if n:
            return bad(
                STATUS_WRONG,
                "unwritten",
                f"{n} of {t.numel()} {name} elements were not written "
                "(they still hold the poison set before the launch)",
            )
    out, lse = exp.pick(run.out, run.lse)
    rule = check_per_head if exp.per_head else check_output
    chk = rule(out, exp.ref, exp.lowp, lse, exp.ref_lse, cfg)
    if not chk.ok:
        v = bad(STATUS_WRONG, chk.code or "mismatch", chk.reason)
        v.check = chk.to_dict()
        return v
    return Verdict(check=chk.to_dict())


@dataclass
class ScenarioState:
    """What the timing phase reuses: the buffers (holding the new-data inputs) and their reference,
    of one input distribution."""

    bufs: Buffers
    expected: Expected
    distribution: str = PRIMARY


def check_scenario(
    scn: Scenario,
    seed: int,
    launch: Launch,
    sync: Callable[[], None],
    device,
    cfg: CheckConfig,
    distribution: str = PRIMARY,
) -> tuple[Verdict, ScenarioState | None]:
    bufs = new_buffers(scn, seed, device, cfg, distribution)
    first = run_once(launch, bufs, sync)
    if first.rc != KS_OK:
        return judge(first, bufs, None, cfg), None  # type: ignore[arg-type]
    exp = expected_for(scn, seed, device, distribution)
    verdict = judge(first, bufs, exp, cfg)
    if not verdict.ok:
        return verdict, None

    second = run_once(launch, bufs, sync)
    v2 = judge(second, bufs, exp, cfg, "second run on the same inputs")
    if not v2.ok:
        return v2, None
    diff = float((first.out.float() - second.out.float()).abs().max().item()) if first.out.numel() else 0.0
    if diff > verdict.check["tol"]:
        return Verdict(
            STATUS_WRONG,
            "repeat-differs",
            f"two runs on the same inputs differ by {diff:.3g} (tolerance {verdict.check['tol']:.3g})",
        ), None
    if not bits_equal(first.out, second.out):
        verdict.flags.append(
            f"nondeterministic: two runs on the same inputs differ by up to {diff:.3g} (within the tolerance)"
        )

    nd = NewData(scn)
    exp_b = exp.new_data(nd)
    load_inputs(bufs, exp_b)
    third = run_once(launch, bufs, sync)
    if third.rc == KS_OK and not third.late and bits_equal(third.out, first.out) and not bits_equal(exp_b.ref, exp.ref):
        return Verdict(
            STATUS_REJECTED,
            "cached",
            "new inputs in the same buffers gave exactly the previous call's output "
            "(a result cached by pointer or shape)",
        ), None
    v3 = judge(third, bufs, exp_b, cfg, "new inputs in the same buffers")
    if not v3.ok:
        return v3, None
    return verdict, ScenarioState(bufs, exp_b, distribution)


def check_distribution(
    scn: Scenario,
    distribution: str,
    seed: int,
    launch: Launch,
    sync: Callable[[], None],
    device,
    cfg: CheckConfig,
    rng: random.Random,
) -> tuple[Verdict, ScenarioState | None]:
    """One launch on an input distribution other than the primary one, in buffers of its own, judged
    as the first launch of `check_scenario` is, against a reference of sampled query rows
    (`check_rows`) per (batch, head); its reason names the distribution."""
    bufs = new_buffers(scn, seed, device, cfg, distribution)
    run = run_once(launch, bufs, sync)
    if run.rc != KS_OK:
        return judge(run, bufs, None, cfg, f"on {distribution} inputs"), None  # type: ignore[arg-type]
    exp = expected_for(scn, seed, device, distribution, check_rows(scn, cfg, rng), per_head=True)
    verdict = judge(run, bufs, exp, cfg, f"on {distribution} inputs")
    return verdict, (ScenarioState(bufs, exp, distribution) if verdict.ok else None)


def timed_unwritten(bad_counts: dict[int, int]) -> Verdict:
    """Every timed launch was poisoned first and its output counted for non-finite elements
    (`bad_counts` per input set)."""
    for t, n in sorted(bad_counts.items()):
        if n:
            return Verdict(
                STATUS_REJECTED,
                "timed-output",
                f"outputs written during timing (input set {t}) held {n} unwritten or "
                "non-finite elements: the kernel does less work when it is timed",
            )
    return Verdict()


def check_timed_outputs(
    samples: list, sets: list[tuple[Buffers, Expected]], scn: Scenario, cfg: CheckConfig
) -> Verdict:
    """After timing (the inputs restored to their contents before it, fresh.py): the inputs must be as
    they were, and a random sample of timed calls (fresh.Sample: one (batch, head) each) is checked
    against the reference of the inputs that call saw."""
    from .fresh import check_sample

    for bufs, exp in sets:
        changed = [
            n
            for n, now, want in (("q", bufs.q, exp.q), ("k", bufs.k, exp.k), ("v", bufs.v, exp.v))
            if not bits_equal(now, want)
        ]
        if changed:
            return Verdict(
                STATUS_REJECTED,
                "inputs-modified",
                f"the kernel changed its inputs during timing ({', '.join(changed)})",
            )
    for s in samples:
        chk = check_sample(s, scn, cfg)
        if not chk.ok:
            return Verdict(
                STATUS_REJECTED,
                "timed-output",
                f"the output of timed call {s.round} (input set {s.input_set}; batch {s.batch}, "
                f"head {s.head} checked) fails the check against the reference of its inputs: "
                f"{chk.reason}",
            )
    return Verdict()


def recheck(launch: Launch, bufs: Buffers, exp: Expected, sync: Callable[[], None], cfg: CheckConfig) -> Verdict:
    """Correctness again after timing, on another input set."""
    return judge(run_once(launch, bufs, sync), bufs, exp, cfg, "re-check after timing")


def recheck_new_data(
    scn: Scenario, launch: Launch, state: ScenarioState, sync: Callable[[], None], cfg: CheckConfig
) -> Verdict:
    """Correctness again after timing, in the buffers of `state` with new data (inputs.NewData, whose
    reference is known from the state's without computing it again): contents the kernel has not
    seen, of that state's distribution."""
    exp = state.expected.new_data(NewData(scn))
    load_inputs(state.bufs, exp)
    return recheck(launch, state.bufs, exp, sync, cfg)
