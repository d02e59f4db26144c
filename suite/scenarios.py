"""The scenario grid, as data: 182 timed forward scenarios per architecture and the extended
correctness set (odd lengths, seqlen_q != seqlen_k, batch 3, one head). Nothing here needs a GPU."""

from __future__ import annotations

import fnmatch
import math
from dataclasses import asdict, dataclass

TOTAL_TOKENS = 32768
SEQLENS = (512, 1024, 2048, 4096, 8192, 16384, 32768)


@dataclass(frozen=True)
class HeadConfig:
    d_qk: int
    d_v: int
    heads_q: int
    heads_kv: int

    @property
    def name(self) -> str:
        d = f"d{self.d_qk}" if self.d_qk == self.d_v else f"d{self.d_qk}v{self.d_v}"
        return f"{d}-h{self.heads_q}kv{self.heads_kv}"


HEAD_CONFIGS = (
    HeadConfig(64, 64, 32, 32),
    HeadConfig(64, 64, 32, 8),
    HeadConfig(64, 64, 32, 4),
    HeadConfig(64, 64, 32, 1),
    HeadConfig(96, 96, 16, 16),
    HeadConfig(128, 128, 16, 16),
    HeadConfig(128, 128, 16, 4),
    HeadConfig(128, 128, 16, 2),
    HeadConfig(128, 128, 16, 1),
    HeadConfig(256, 256, 8, 8),
    HeadConfig(256, 256, 8, 4),
    HeadConfig(256, 256, 8, 1),
    HeadConfig(192, 128, 16, 16),
)


@dataclass(frozen=True)
class Scenario:
    id: str
    batch: int
    seqlen_q: int
    seqlen_k: int
    heads_q: int
    heads_kv: int
    d_qk: int
    d_v: int
    causal: bool
    extended: bool = False
    dtype: str = "bf16"

    @property
    def head_config(self) -> str:
        return HeadConfig(self.d_qk, self.d_v, self.heads_q, self.heads_kv).name

    @property
    def softmax_scale(self) -> float:
        return 1.0 / math.sqrt(self.d_qk)

    @property
    def flops(self) -> float:
        """2 * batch * heads_q * seqlen_q * seqlen_k_eff * (d_qk + d_v); seqlen_k_eff halved for
        causal (the FlashAttention convention, also used when seqlen_q != seqlen_k)."""
        k_eff = self.seqlen_k / 2 if self.causal else self.seqlen_k
        return 2.0 * self.batch * self.heads_q * self.seqlen_q * k_eff * (self.d_qk + self.d_v)

    def to_dict(self) -> dict:
        return asdict(self)


def _grid_id(hc: HeadConfig, seqlen: int, causal: bool) -> str:
    return f"{hc.name}-s{seqlen}" + ("-causal" if causal else "")


def grid(arch: str = "sm90") -> list[Scenario]:
    """The 182 timed scenarios (the same grid for every architecture)."""
    out = []
    for hc in HEAD_CONFIGS:
        for s in SEQLENS:
            for causal in (False, True):
                out.append(
                    Scenario(
                        _grid_id(hc, s, causal),
                        TOTAL_TOKENS // s,
                        s,
                        s,
                        hc.heads_q,
                        hc.heads_kv,
                        hc.d_qk,
                        hc.d_v,
                        causal,
                    )
                )
    return out


# (batch, seqlen_q, seqlen_k): odd lengths, and seqlen_q != seqlen_k both ways
EXTENDED_SHAPES = (
    (3, 1, 1),
    (3, 17, 17),
    (3, 113, 113),
    (3, 1000, 1000),
    (3, 3001, 3001),
    (3, 113, 1000),
    (3, 1000, 113),
    (3, 17, 3001),
    (3, 3001, 17),
    (3, 1, 1000),
    (3, 1000, 1),
)
# one head (q and kv), both ways unequal
ONE_HEAD_SHAPES = ((1, 1000, 3001), (1, 3001, 1000), (1, 1, 17))


def extended(arch: str = "sm90") -> list[Scenario]:
    """The extended correctness set (not timed): every head configuration, both masks."""
    out = []
    for hc in HEAD_CONFIGS:
        for causal in (False, True):
            for b, sq, sk in EXTENDED_SHAPES:
                sid = f"ext-{hc.name}-b{b}-q{sq}-k{sk}" + ("-causal" if causal else "")
                out.append(Scenario(sid, b, sq, sk, hc.heads_q, hc.heads_kv, hc.d_qk, hc.d_v, causal, extended=True))
    dims = sorted({(hc.d_qk, hc.d_v) for hc in HEAD_CONFIGS})
    for dqk, dv in dims:
        for causal in (False, True):
            for b, sq, sk in ONE_HEAD_SHAPES:
                name = HeadConfig(dqk, dv, 1, 1).name
                sid = f"ext-{name}-b{b}-q{sq}-k{sk}" + ("-causal" if causal else "")
                out.append(Scenario(sid, b, sq, sk, 1, 1, dqk, dv, causal, extended=True))
    return out


def by_id(arch: str = "sm90") -> dict[str, Scenario]:
    return {s.id: s for s in grid(arch) + extended(arch)}


def select(scenarios: list[Scenario], pattern: str | None) -> list[Scenario]:
    """Filter by comma-separated glob patterns on the id (e.g. 'd128-*,*-causal')."""
    if not pattern:
        return list(scenarios)
    pats = [p.strip() for p in pattern.split(",") if p.strip()]
    chosen = [s for s in scenarios if any(fnmatch.fnmatchcase(s.id, p) for p in pats)]
    return chosen
