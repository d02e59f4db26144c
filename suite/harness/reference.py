"""Reference attention on the GPU (or CPU for tests): fp32, in chunks of query rows so 32k fits.

`upcast=True` gives the fp32 reference; `upcast=False` gives the low-precision reference computed
with bf16 operands (bf16 scores and bf16 P), whose error sets the tolerance of the pass rule."""

from __future__ import annotations

import math


def attention_reference(
    q,
    k,
    v,
    causal: bool,
    softmax_scale: float,
    upcast: bool = True,
    chunk_bytes: int = 1 << 30,
    rows: list[int] | None = None,
    seqlen_q: int | None = None,
):
    """q (b, sq, hq, dqk), k (b, sk, hk, dqk), v (b, sk, hk, dv) -> out (b, sq, hq, dv) fp32 (or
    bf16 when not upcast) and lse (b, hq, sq) fp32. Causal mask aligned bottom-right; rows with
    nothing to attend give 0 and lse -inf.

    `rows` (increasing) and `seqlen_q`: q holds only these query rows of a problem with `seqlen_q`
    rows, so the causal mask of row i of q is that of row rows[i] of the whole problem."""
    import torch

    b, sq, hq, dqk = q.shape
    sk, hk, dv = k.shape[1], k.shape[2], v.shape[3]
    whole = rows is None
    row_ids = range(sq) if rows is None else rows
    if whole:
        seqlen_q = sq
    elif (
        seqlen_q is None
        or len(row_ids) != sq
        or any(a >= c for a, c in zip(row_ids, row_ids[1:]))
        or row_ids[-1] >= seqlen_q
    ):
        raise ValueError("rows must be increasing, one per row of q, with seqlen_q given")
    group = hq // hk
    out_dtype = torch.float32 if upcast else q.dtype
    out = torch.empty(b, sq, hq, dv, device=q.device, dtype=out_dtype)
    lse = torch.empty(b, hq, sq, device=q.device, dtype=torch.float32)
    chunk = max(1, min(sq, chunk_bytes // max(1, hq * sk * 4)))
    diag = sk - seqlen_q  # row r sees keys 0 .. r + diag (bottom-right alignment)
    for bi in range(b):
        kb = k[bi].permute(1, 0, 2)  # (hk, sk, dqk)
        vb = v[bi].permute(1, 0, 2)  # (hk, sk, dv)
        if upcast:
            kb, vb = kb.float(), vb.float()
        for r0 in range(0, sq, chunk):
            r1 = min(sq, r0 + chunk)
            n = r1 - r0
            # causal: only the keys that some row of the chunk sees (the last row sees the most)
            first, last = row_ids[r0], row_ids[r1 - 1]  # rows of the whole problem
            kend = max(0, min(sk, last + 1 + diag)) if causal else sk
            if kend == 0:  # no row of the chunk sees any key
                out[bi, r0:r1] = 0
                lse[bi, :, r0:r1] = float("-inf")
                continue
            qc = q[bi, r0:r1].permute(1, 0, 2)  # (hq, n, dqk)
            qc = qc.float() if upcast else qc
            qc = qc.reshape(hk, group * n, dqk)
            kc, vc = kb[:, :kend], vb[:, :kend]
            # the scale is applied to the fp32 accumulator (cuBLAS epilogue), not in a pass of its own
            s = torch.baddbmm(
                torch.empty(1, 1, 1, device=q.device, dtype=qc.dtype),
                qc,
                kc.transpose(1, 2),
                beta=0,
                alpha=softmax_scale,
            )
            s = s.float() if s.dtype != torch.float32 else s  # (hk, group*n, kend)
            s = s.view(hk, group, n, kend)
            if causal:  # keys before `full` are seen by every row of the chunk
                full = max(0, min(kend, first + diag + 1))
                if full < kend:
                    ids = torch.arange(r0, r1) if whole else torch.tensor(list(row_ids[r0:r1]))
                    row_idx = ids.to(q.device).view(n, 1)
                    cols = torch.arange(full, kend, device=q.device).view(1, kend - full)
                    s[..., full:].masked_fill_((cols > row_idx + diag).view(1, 1, n, kend - full), float("-inf"))
            # few passes over the (rows x keys) scores, in place: they dominate the check's time
            m = s.amax(dim=-1, keepdim=True)  # -inf on rows that see nothing
            m = torch.where(torch.isneginf(m), torch.zeros_like(m), m)
            p = s.sub_(m).exp_()  # 0 on rows that see nothing
            l = p.sum(dim=-1, keepdim=True)
            lse_c = (m + torch.log(l)).squeeze(-1)  # -inf where l = 0
            inv = torch.where(l > 0, 1.0 / l, torch.zeros_like(l))
            if upcast:  # normalize the output: one pass over (rows x dv)
                o = torch.matmul(p.reshape(hk, group * n, kend), vc).view(hk, group, n, dv).mul_(inv)
            else:  # bf16 P is the normalized probabilities, as before
                o = torch.matmul(p.mul_(inv).to(q.dtype).reshape(hk, group * n, kend), vc).view(hk, group, n, dv)
            out[bi, r0:r1] = o.reshape(hq, n, dv).permute(1, 0, 2).to(out_dtype)
            lse[bi, :, r0:r1] = lse_c.reshape(hq, n)
    return out, lse


def reference_pair(
    q,
    k,
    v,
    causal: bool,
    softmax_scale: float | None = None,
    rows: list[int] | None = None,
    seqlen_q: int | None = None,
):
    """(fp32 out, fp32 lse, low-precision out) for the pass rule (of the given `rows` of q only, as in
    attention_reference)."""
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(q.shape[-1])
    ref, ref_lse = attention_reference(q, k, v, causal, softmax_scale, upcast=True, rows=rows, seqlen_q=seqlen_q)
    lowp, _ = attention_reference(q, k, v, causal, softmax_scale, upcast=False, rows=rows, seqlen_q=seqlen_q)
    return ref, ref_lse, lowp
