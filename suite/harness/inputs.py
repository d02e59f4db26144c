"""Fresh random inputs for a scenario, drawn from a per-run seed (recorded in the results)."""
from __future__ import annotations

import hashlib

from ..scenarios import Scenario


def scenario_seed(run_seed: int, scenario_id: str, trial: int = 0) -> int:
    h = hashlib.sha256(f"{run_seed}:{scenario_id}:{trial}".encode()).digest()
    return int.from_bytes(h[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def make_inputs(scn: Scenario, seed: int, device="cuda"):
    """q (batch, seqlen_q, heads_q, d_qk), k/v (batch, seqlen_k, heads_kv, d_qk|d_v), bf16, contiguous.

    Not only standard normal data: the variance differs per tensor and per head, and the mean of
    q is shifted, so a kernel computing a different, cheaper function cannot hide behind symmetry."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    dt = torch.bfloat16

    def randn(*shape):
        return torch.randn(*shape, generator=gen, device=device, dtype=torch.float32)

    q = randn(scn.batch, scn.seqlen_q, scn.heads_q, scn.d_qk)
    k = randn(scn.batch, scn.seqlen_k, scn.heads_kv, scn.d_qk)
    v = randn(scn.batch, scn.seqlen_k, scn.heads_kv, scn.d_v)
    # per-head scale in [0.5, 1.5] for q and k, and a small mean shift: varied score distributions
    q = q * (0.5 + torch.rand(1, 1, scn.heads_q, 1, generator=gen, device=device)) + 0.1
    k = k * (0.5 + torch.rand(1, 1, scn.heads_kv, 1, generator=gen, device=device))
    return q.to(dt), k.to(dt), v.to(dt)


def poison_like(t):
    """An output buffer filled with NaN: any element the kernel does not write fails the check."""
    import torch

    return torch.full_like(t, float("nan"))
