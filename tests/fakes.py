"""Shared helpers of the CPU tests: a naive attention to check the reference against, and kernels
written in Python that behave like the adversarial CUDA kernels (tests/adversarial/), for the trial
logic (harness/trial.py) to judge on the CPU."""

import math

import torch

from kernelseek_suite.contract import KS_ERR_CUDA, KS_ERR_UNSUPPORTED
from kernelseek_suite.harness.reference import attention_reference
from stand_ins import StandInClock  # noqa: F401 (the timing loop's stand-in, torch-free)


def naive_attention(q, k, v, causal: bool, scale: float | None = None):
    """Float64, one (batch, head) at a time, the mask as a matrix. Bottom-right causal alignment;
    rows with nothing to attend give 0 and LSE -inf."""
    b, sq, hq, d = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    scale = 1 / math.sqrt(d) if scale is None else scale
    out = torch.zeros(b, sq, hq, dv, dtype=torch.float64)
    lse = torch.full((b, hq, sq), float("-inf"), dtype=torch.float64)
    for bi in range(b):
        for h in range(hq):
            kh = h // (hq // hk)
            s = q[bi, :, h].double() @ k[bi, :, kh].double().T * scale
            for i in range(sq):
                for j in range(sk):
                    if causal and j > i + sk - sq:
                        s[i, j] = float("-inf")
            for i in range(sq):
                row = s[i]
                if torch.isinf(row).all():
                    continue
                m = row.max()
                p = torch.exp(row - m)
                lse[bi, h, i] = m + torch.log(p.sum())
                out[bi, i, h] = (p / p.sum()) @ v[bi, :, kh].double()
    return out, lse


def flash_style(q, k, v, causal: bool, scale: float, block: int = 64):
    """An honest bf16 kernel's numerics: fp32 scores, online softmax over key blocks, P rounded to
    bf16 before P @ V with fp32 accumulation (what the reference CUDA kernel does)."""
    b, sq, hq, d = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    out = torch.zeros(b, sq, hq, dv)
    lse = torch.full((b, hq, sq), float("-inf"))
    rows = torch.arange(sq).view(sq, 1)
    for bi in range(b):
        for h in range(hq):
            kh = h // (hq // hk)
            qh = q[bi, :, h].float()
            m = torch.full((sq, 1), float("-inf"))
            l = torch.zeros(sq, 1)
            acc = torch.zeros(sq, dv)
            for j0 in range(0, sk, block):
                kb = k[bi, j0 : j0 + block, kh].float()
                vb = v[bi, j0 : j0 + block, kh].float()
                s = qh @ kb.T * scale
                if causal:
                    cols = torch.arange(j0, j0 + kb.shape[0]).view(1, -1)
                    s = s.masked_fill(cols > rows + sk - sq, float("-inf"))
                m_new = torch.maximum(m, s.amax(1, keepdim=True))
                m_use = torch.where(torch.isinf(m_new), torch.zeros_like(m_new), m_new)
                corr = torch.exp(torch.where(torch.isinf(m), m_use, m) - m_use)
                p = torch.exp(s - m_use)
                l = l * corr + p.sum(1, keepdim=True)
                acc = acc * corr + p.to(torch.bfloat16).float() @ vb
                m = m_new
            inv = torch.where(l > 0, 1 / l, torch.zeros_like(l))
            out[bi, :, h] = acc * inv
            lse[bi, h] = torch.where(l[:, 0] > 0, m[:, 0] + torch.log(l[:, 0]), torch.full_like(l[:, 0], float("-inf")))
    return out.to(torch.bfloat16), lse


def uniform_mean(q, k, v, causal: bool):
    """A cheaper, different computation: the plain mean of the visible V rows, LSE log(count). It
    equals attention when all scores are about equal (symmetric, low-variance data)."""
    b, sq, hq, _ = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    csum = torch.cat([torch.zeros(b, 1, hk, dv), v.float().cumsum(1)], 1)
    rows = torch.arange(sq)
    n = (rows + sk - sq + 1).clamp(0, sk) if causal else torch.full((sq,), sk)
    g = hq // hk
    out = torch.zeros(b, sq, hq, dv)
    for h in range(hq):
        tot = csum[:, n, h // g]  # (b, sq, dv)
        out[:, :, h] = torch.where(n.view(1, sq, 1) > 0, tot / n.clamp(min=1).view(1, sq, 1), 0.0)
    lse = torch.where(n > 0, torch.log(n.float().clamp(min=1)), float("-inf")).view(1, 1, sq).expand(b, hq, sq)
    return out.to(torch.bfloat16), lse.contiguous()


# ---- kernels in Python for the trial logic: launch(bufs) -> return code -------------------------


def honest(scn):
    def launch(b):
        o, l = attention_reference(b.q, b.k, b.v, scn.causal, scn.softmax_scale)
        b.out.view.copy_(o.to(torch.bfloat16))
        b.lse.view.copy_(l)
        return 0

    return launch


def writes_nothing(scn):
    return lambda b: 0


def partial_write(scn):
    full = honest(scn)

    def launch(b):
        keep = b.out.view.clone()
        full(b)
        half = scn.seqlen_q // 2
        b.out.view[:, half:] = keep[:, half:]
        return 0

    return launch


def cache_by_pointer(scn):
    memo = {}
    full = honest(scn)

    def launch(b):
        key = (b.q.data_ptr(), b.out.view.data_ptr(), tuple(b.q.shape))
        if key not in memo:
            full(b)
            memo[key] = (b.out.view.clone(), b.lse.view.clone())
        else:
            b.out.view.copy_(memo[key][0])
            b.lse.view.copy_(memo[key][1])
        return 0

    return launch


def low_precision(scn):
    def launch(b):
        def trunc(t):  # keep 3 of the 7 mantissa bits of bf16
            return (t.view(torch.int16) & ~0x000F).view(torch.bfloat16)

        o, l = attention_reference(trunc(b.q), trunc(b.k), b.v, scn.causal, scn.softmax_scale)
        b.out.view.copy_(o.to(torch.bfloat16))
        b.lse.view.copy_(l)
        return 0

    return launch


class LateWork:
    """Leaves its work to run after the call returned: simulated by doing it at the next
    synchronize of the whole device (the device-agnostic trials take `sync` from the caller)."""

    def __init__(self, scn):
        self.pending = []
        self.full = honest(scn)

    def launch(self, b):
        self.pending.append(b)
        return 0

    def sync(self):
        while self.pending:
            self.full(self.pending.pop())


def cheap_uniform(scn):
    def launch(b):
        o, l = uniform_mean(b.q, b.k, b.v, scn.causal)
        b.out.view.copy_(o)
        b.lse.view.copy_(l)
        return 0

    return launch


def modifies_inputs(scn):
    full = honest(scn)

    def launch(b):
        b.v.zero_()
        return full(b)

    return launch


def copies_input(scn):
    def launch(b):
        g = scn.heads_q // scn.heads_kv
        idx = torch.arange(scn.seqlen_q).clamp(max=scn.seqlen_k - 1)
        for h in range(scn.heads_q):
            b.out.view[:, :, h] = b.v[:, idx, h // g]
        b.lse.view.zero_()
        return 0

    return launch


def grid_only(scn):
    """Right only on the grid's shapes (seqlen_q == seqlen_k, a multiple of 64). Elsewhere it does
    what tests/adversarial/grid_only.cu does: no tail mask (keys past the end are zeros that still
    take part in the softmax) and the causal diagonal through (0, 0) instead of bottom-right."""
    full = honest(scn)

    def launch(b):
        if scn.seqlen_q == scn.seqlen_k and scn.seqlen_q % 64 == 0:
            return full(b)
        pad = -scn.seqlen_k % 64
        k = torch.nn.functional.pad(b.k.float(), (0, 0, 0, 0, 0, pad))
        v = torch.nn.functional.pad(b.v.float(), (0, 0, 0, 0, 0, pad))
        g = scn.heads_q // scn.heads_kv
        k, v = k.repeat_interleave(g, dim=2), v.repeat_interleave(g, dim=2)
        s = torch.einsum("bqhd,bkhd->bhqk", b.q.float(), k) * scn.softmax_scale
        if scn.causal:
            i = torch.arange(scn.seqlen_q).view(-1, 1)
            j = torch.arange(k.shape[1]).view(1, -1)
            s = s.masked_fill(j > i, float("-inf"))
        b.out.view.copy_(torch.einsum("bhqk,bkhd->bqhd", torch.softmax(s, -1), v).to(torch.bfloat16))
        b.lse.view.copy_(torch.logsumexp(s, -1))
        return 0

    return launch


def nan_masked_rows(scn):
    full = honest(scn)

    def launch(b):
        full(b)
        empty = torch.isneginf(b.lse.view)  # (b, hq, sq)
        b.out.view.masked_fill_(empty.permute(0, 2, 1).unsqueeze(-1), float("nan"))
        return 0

    return launch


def out_of_bounds(scn):
    full = honest(scn)

    def launch(b):
        full(b)
        g = b.out
        g.full[g.zone + g.n : g.zone + g.n + 8] = 1.0  # eight elements past the end
        return 0

    return launch


def noisy(scn, size: float):
    full = honest(scn)

    def launch(b):
        full(b)
        b.out.view.add_(size * torch.randn_like(b.out.view.float()).to(torch.bfloat16))
        return 0

    return launch


def unsupported(scn):
    return lambda b: KS_ERR_UNSUPPORTED


def cuda_failure(scn):
    return lambda b: KS_ERR_CUDA


def no_lse(scn):
    full = honest(scn)

    def launch(b):
        keep = b.lse.view.clone()
        full(b)
        b.lse.view.copy_(keep)
        return 0

    return launch


# ---- kernels that keep results by input contents, and a clock for the timing loop on the CPU -----


def content_key(b, sample: int | None = None, signs: bool = True) -> bytes:
    """The bytes of q, k and v (every element, or the first `sample` of each; without their sign
    bits when not `signs`): what a kernel replaying by content keys on."""
    parts = []
    for t in (b.q, b.k, b.v):
        bits = t.reshape(-1).view(torch.int16)
        bits = bits if sample is None else bits[:sample]
        parts.append((bits if signs else bits & 0x7FFF).numpy().tobytes())
    return b"".join(parts)


class ContentReplay:
    """Keeps each output by a key of its input contents and replays it when the key comes back.
    Each call reports the time it would take (`clock`): `compute_ms` when it computes, `replay_ms`
    when it replays (paced: a replay made to look like plausible work)."""

    def __init__(self, scn, compute_ms=1.0, replay_ms=0.05, sample=None, signs=True):
        self.full = honest(scn)
        self.memo, self.clock = {}, StandInClock()
        self.compute_ms, self.replay_ms, self.sample, self.signs = compute_ms, replay_ms, sample, signs
        self.replays = 0

    def launch(self, b, _input_set=None):
        key = content_key(b, self.sample, self.signs)
        if key in self.memo:
            b.out.view.copy_(self.memo[key][0])
            b.lse.view.copy_(self.memo[key][1])
            self.replays += 1
            self.clock.took(self.replay_ms)
        else:
            self.full(b)
            self.memo[key] = (b.out.view.clone(), b.lse.view.clone())
            self.clock.took(self.compute_ms)
        return 0
