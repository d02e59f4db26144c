"""Fresh random inputs for a scenario, drawn from a per-run seed (recorded in the results) and one of
the input distributions (distributions.py), and the exact transform that turns one input set into
another whose reference is known without computing it again."""

from __future__ import annotations

import hashlib

from ..scenarios import Scenario


def scenario_seed(run_seed: int, scenario_id: str, trial: int = 0) -> int:
    h = hashlib.sha256(f"{run_seed}:{scenario_id}:{trial}".encode()).digest()
    return int.from_bytes(h[:8], "little") & 0x7FFF_FFFF_FFFF_FFFF


def make_inputs(scn: Scenario, seed: int, device="cuda", distribution: str = "standard"):
    """q (batch, seqlen_q, heads_q, d_qk), k/v (batch, seqlen_k, heads_kv, d_qk|d_v), bf16, contiguous,
    drawn from one of the input distributions (distributions.py; `standard` unless named)."""
    from .distributions import get

    return get(distribution).make(scn, seed, device)


def poison_like(t):
    """An output buffer filled with NaN: any element the kernel does not write fails the check."""
    import torch

    return torch.full_like(t, float("nan"))


class NewData:
    """Another input set for the same buffers, with a reference known exactly from the first one:
    V negated, the batch rolled by one, the heads rolled by one kv group (q heads by the group size,
    so every q head keeps its kv head). Attention commutes with all three, so the new reference is
    the old one negated and rolled the same way -- and a kernel that returns a result cached by
    pointer or shape returns the old, wrong answer."""

    def __init__(self, scn: Scenario):
        self.roll_batch = -1 if scn.batch > 1 else 0
        group = scn.heads_q // scn.heads_kv
        if scn.heads_kv > 1:
            self.roll_q, self.roll_kv = -group, -1
        else:
            self.roll_q, self.roll_kv = (-1 if scn.heads_q > 1 else 0), 0

    @staticmethod
    def _roll(t, shifts: list[tuple[int, int]]):
        import torch

        for shift, dim in shifts:
            if shift:
                t = torch.roll(t, shift, dims=dim)
        return t

    def inputs(self, q, k, v):
        q2 = self._roll(q, [(self.roll_batch, 0), (self.roll_q, 2)])
        k2 = self._roll(k, [(self.roll_batch, 0), (self.roll_kv, 2)])
        v2 = self._roll(-v, [(self.roll_batch, 0), (self.roll_kv, 2)])
        return q2, k2, v2

    def output(self, out):
        """(batch, seqlen_q, heads_q, d_v)"""
        return self._roll(-out, [(self.roll_batch, 0), (self.roll_q, 2)])

    def lse(self, lse):
        """(batch, heads_q, seqlen_q): unchanged by negating V"""
        return self._roll(lse, [(self.roll_batch, 0), (self.roll_q, 1)])
