"""New input contents for every timed call, and a random sample of timed outputs to check.

A kernel could keep its outputs keyed by the *contents* of q/k/v (a hash of them, or of a few of
their elements) and replay them when the same contents come back. So before every call the timing
loop counts, the kernel's q, k and v get contents it has never seen in this process:
`FreshContent.next()` flips the sign bits of each tensor in place with a random mask over its
(head, feature) columns, the same for every token. A mask is a row of a table drawn once per
scenario on the GPU from the harness's secret seed; the contents after n calls are the original
XOR the XOR of n random rows, which differ from every earlier state unless all h*d >= 64 random
bits agree (probability 2^-64 per pair of calls). The cost is one in-place elementwise pass per
tensor (read and write each byte once), on the harness's stream, before the call's timed events.

Each tensor gets its own mask, so q.k products change sign term by term (q and k flipped with the
same mask would leave them unchanged): the new output is not a transform of an old one; it has to be
computed. The statistics of the data stay those of the harness's inputs (the magnitudes of every
element are kept), so the kernel's and the baselines' times are measured on the same kind of data.
An input distribution that keeps its structure in a few feature columns (a sink channel, a ramp:
distributions.py, `tied`) has those columns of q and k flipped together (q head h with its kv head),
so their products, and the structure, are the same in every call; all other columns still differ.
`restore()` undoes all the flips at once, so the inputs can be compared bit for bit after timing.

`Reservoir` picks a uniform random sample of the counted calls as they come (their number is not
known in advance, and nothing the kernel can see tells which are kept); `take_sample` keeps the
inputs and output of one random (batch, q head) of such a call, on a uniform random set of its query
rows (all of them when there are few), and `check_sample` judges those rows against the fp32
reference of exactly those inputs with the pass rule. A replayed output is wrong on every row; a
kernel that leaves a fraction f of the rows wrong passes one check with probability about
(1 - f)^rows. The reference of `rows` rows costs rows/seqlen_q of the whole head's (at 32k keys, 256
rows instead of 32768). Device-agnostic: tested on the CPU.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from ..config import CheckConfig
from ..scenarios import Scenario
from .check import CheckResult, check_output
from .reference import reference_pair

SIGN_BIT = -32768  # 0x8000 as an int16: the sign bit of a bf16


class FreshContent:
    """Flips sign bits of bf16 tensors (batch, seq, heads, d) in place, one random mask per call."""

    def __init__(self, tensors, calls: int, seed: int, tied: tuple[int, ...] = ()):
        import torch

        gen = torch.Generator(device=tensors[0].device)
        gen.manual_seed(seed)
        self.views = []
        self.masks = []
        for t in tensors:
            if t.dtype != torch.bfloat16 or not t.is_contiguous():
                raise ValueError("fresh contents need contiguous bf16 tensors")
            cols = t.shape[-2] * t.shape[-1]
            self.views.append(t.view(torch.int16).view(-1, cols))
            bits = torch.randint(0, 2, (calls, cols), generator=gen, device=t.device, dtype=torch.int16)
            self.masks.append(bits * SIGN_BIT)
        if tied and len(tensors) >= 2:
            self._tie(tensors[0], tensors[1], tied, calls)
        self.calls = calls
        self.used = 0

    def _tie(self, q, k, tied: tuple[int, ...], calls: int) -> None:
        """q's masks on the `tied` feature columns made those of its kv head in k."""
        import torch

        hq, d, hk = q.shape[-2], q.shape[-1], k.shape[-2]
        cols = torch.tensor([c for c in tied if 0 <= c < d], dtype=torch.long, device=q.device)
        if cols.numel() == 0 or hq % hk:
            return
        qm, km = self.masks[0].view(calls, hq, d), self.masks[1].view(calls, hk, d)
        qm[:, :, cols] = km[:, :, cols].repeat_interleave(hq // hk, dim=1)

    def next(self) -> None:
        """New contents, never seen before in this process (see the module docstring)."""
        if self.used >= self.calls:
            raise RuntimeError(f"fresh contents for {self.calls} calls were drawn; more were asked for")
        for view, mask in zip(self.views, self.masks):
            view.bitwise_xor_(mask[self.used])
        self.used += 1

    def cumulative(self) -> list:
        """Per tensor, the mask that takes the original contents to the current ones (XOR of the
        masks applied so far)."""
        out = []
        for mask in self.masks:
            flips = (mask[: self.used] != 0).sum(dim=0) % 2
            out.append((flips * SIGN_BIT).to(mask.dtype))
        return out

    def restore(self) -> None:
        """Back to the contents before the first call, bit for bit. The masks are not used again
        (they would bring back contents already seen): `next()` refuses after this."""
        if self.used:
            for view, mask in zip(self.views, self.cumulative()):
                view.bitwise_xor_(mask)
        self.calls = self.used = 0


class Reservoir:
    """A uniform random sample of `k` items of a stream whose length is not known in advance
    (Vitter's algorithm R): `offer()` returns the slot the item goes into, or None."""

    def __init__(self, k: int, rng: random.Random):
        self.k, self.rng, self.seen = k, rng, 0

    def offer(self) -> int | None:
        n = self.seen
        self.seen += 1
        if n < self.k:
            return n
        j = self.rng.randrange(n + 1)
        return j if j < self.k else None


@dataclass
class Sample:
    """One (batch, q head) of a timed call, on some of its query rows: the inputs and what the kernel
    wrote there. `rows` (increasing) index the call's `seqlen_q` query rows; q, out and lse hold
    those rows only, k and v the whole kv head."""

    round: int
    input_set: int
    batch: int
    head: int
    q: object
    k: object
    v: object
    out: object
    lse: object
    rows: list
    seqlen_q: int


def take_sample(
    call_round: int, input_set: int, q, k, v, out, lse, rng: random.Random, rows: int | None = None
) -> Sample:
    """Copies of one random (batch, q head): `rows` of its query rows drawn uniformly (all of them
    when `rows` is None or at least seqlen_q) of q, the output and LSE, and its whole kv head."""
    import torch

    b = rng.randrange(q.shape[0])
    h = rng.randrange(q.shape[2])
    hk = h // (q.shape[2] // k.shape[2])
    sq = q.shape[1]
    picked = list(range(sq)) if rows is None or rows >= sq else sorted(rng.sample(range(sq), rows))
    idx = torch.tensor(picked, device=q.device)
    return Sample(
        call_round,
        input_set,
        b,
        h,
        q[b : b + 1, :, h : h + 1].index_select(1, idx),
        k[b : b + 1, :, hk : hk + 1].clone(),
        v[b : b + 1, :, hk : hk + 1].clone(),
        out[b : b + 1, :, h : h + 1].index_select(1, idx),
        lse[b : b + 1, h : h + 1].index_select(2, idx),
        picked,
        sq,
    )


def check_sample(s: Sample, scn: Scenario, cfg: CheckConfig) -> CheckResult:
    ref, ref_lse, lowp = reference_pair(s.q, s.k, s.v, scn.causal, scn.softmax_scale, rows=s.rows, seqlen_q=s.seqlen_q)
    return check_output(s.out, ref, lowp, s.lse, ref_lse, cfg)
