"""Reference attention on the GPU (or CPU for tests): fp32, in chunks of query rows so 32k fits.

`upcast=True` gives the fp32 reference; `upcast=False` gives the low-precision reference computed
with bf16 operands (bf16 scores and bf16 P), whose error sets the tolerance of the pass rule."""
from __future__ import annotations

import math


def attention_reference(q, k, v, causal: bool, softmax_scale: float, upcast: bool = True,
                        chunk_bytes: int = 1 << 30):
    """q (b, sq, hq, dqk), k (b, sk, hk, dqk), v (b, sk, hk, dv) -> out (b, sq, hq, dv) fp32 (or
    bf16 when not upcast) and lse (b, hq, sq) fp32. Causal mask aligned bottom-right; rows with
    nothing to attend give 0 and lse -inf."""
    import torch

    b, sq, hq, dqk = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    group = hq // hk
    out_dtype = torch.float32 if upcast else q.dtype
    out = torch.empty(b, sq, hq, dv, device=q.device, dtype=out_dtype)
    lse = torch.empty(b, hq, sq, device=q.device, dtype=torch.float32)
    rows = max(1, min(sq, chunk_bytes // max(1, hq * sk * 4)))
    cols = torch.arange(sk, device=q.device)
    for bi in range(b):
        kb = k[bi].permute(1, 0, 2)            # (hk, sk, dqk)
        vb = v[bi].permute(1, 0, 2)            # (hk, sk, dv)
        if upcast:
            kb, vb = kb.float(), vb.float()
        for r0 in range(0, sq, rows):
            r1 = min(sq, r0 + rows)
            n = r1 - r0
            qc = q[bi, r0:r1].permute(1, 0, 2)  # (hq, n, dqk)
            qc = qc.float() if upcast else qc
            qc = qc.reshape(hk, group * n, dqk)
            s = torch.matmul(qc, kb.transpose(1, 2))
            s = s.float() if s.dtype != torch.float32 else s
            s.mul_(softmax_scale)                                       # (hk, group*n, sk)
            s = s.view(hk, group, n, sk)
            if causal:
                row_idx = torch.arange(r0, r1, device=q.device).view(n, 1)
                masked = cols.view(1, sk) > row_idx + (sk - sq)
                s.masked_fill_(masked.view(1, 1, n, sk), float("-inf"))
            # few passes over the (rows x seqlen_k) scores, in place: they dominate the check's time
            lse_c = torch.logsumexp(s, dim=-1)                          # -inf on rows with nothing visible
            shift = torch.where(torch.isneginf(lse_c), torch.zeros_like(lse_c), lse_c)
            p = s.sub_(shift.unsqueeze(-1)).exp_()                      # 0 on empty rows
            p = p.reshape(hk, group * n, sk)
            if not upcast:
                p = p.to(q.dtype)
            o = torch.matmul(p, vb)                                   # (hk, group*n, dv)
            out[bi, r0:r1] = o.view(hq, n, dv).permute(1, 0, 2).to(out_dtype)
            lse[bi, :, r0:r1] = lse_c.reshape(hq, n)
    return out, lse


def reference_pair(q, k, v, causal: bool, softmax_scale: float | None = None):
    """(fp32 out, fp32 lse, low-precision out) for the pass rule."""
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    ref, ref_lse = attention_reference(q, k, v, causal, softmax_scale, upcast=True)
    lowp, _ = attention_reference(q, k, v, causal, softmax_scale, upcast=False)
    return ref, ref_lse, lowp
