"""The scenario grid, as data: 182 timed forward scenarios per architecture and the extended
correctness set (odd lengths, seqlen_q != seqlen_k, batch 3, one head), and custom scenarios from
the command line (`--shape batch=4,seqlen=8192,heads=32/8,d=128,causal`). Nothing here needs a GPU."""

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


# ---- custom scenarios: `bench --shape`, `run_once --shape` ----------------------------------------

SHAPE_KEYS = ("batch", "seqlen", "heads", "d", "causal")
SHAPE_MAX_D = 256  # head dimensions: multiples of 8 up to this (what FlashAttention kernels handle)
SHAPE_HELP = (
    "batch=B,seqlen=S[/SK],heads=H[/HKV],d=D[/DV][,causal]: one scenario of that shape (seqlen: query/key "
    "lengths, heads: query/kv heads, d: qk/v head dimensions; one number for both; batch 1 by default)"
)


class ShapeError(ValueError):
    """A --shape that does not describe a scenario; the message says what is wrong."""


def _pair(key: str, value: str) -> tuple[int, int]:
    parts = value.split("/")
    if len(parts) > 2 or not all(p.strip().isdigit() for p in parts):
        raise ShapeError(f"{key}={value}: expected a positive whole number or two as N/M")
    a, b = (int(parts[0]), int(parts[-1]))
    if a <= 0 or b <= 0:
        raise ShapeError(f"{key}={value}: must be positive")
    return a, b


def parse_shape(spec: str) -> Scenario:
    """The scenario a --shape describes, e.g. `batch=4,seqlen=8192,heads=32/8,d=128,causal`. Its id
    names every dimension (`shape-b4-d128-h32kv8-s8192-causal`; `-q{SQ}-k{SK}` for unequal lengths)."""
    fields: dict[str, str] = {}
    for item in (p.strip() for p in spec.split(",")):
        if not item:
            continue
        key, eq, value = item.partition("=")
        key = key.strip().lower()
        if key not in SHAPE_KEYS:
            raise ShapeError(f"unknown key {key!r} in {spec!r}; known: {', '.join(SHAPE_KEYS)}")
        if key in fields:
            raise ShapeError(f"{key} given twice in {spec!r}")
        if key != "causal" and not eq:
            raise ShapeError(f"{key}: expected {key}=VALUE")
        fields[key] = value.strip() if eq else "yes"
    missing = [k for k in ("seqlen", "heads", "d") if k not in fields]
    if missing:
        raise ShapeError(f"{spec!r} lacks {', '.join(missing)} (a shape is {SHAPE_HELP})")
    batch, other = _pair("batch", fields.get("batch", "1"))
    if batch != other:
        raise ShapeError(f"batch={fields['batch']}: one number")
    sq, sk = _pair("seqlen", fields["seqlen"])
    hq, hkv = _pair("heads", fields["heads"])
    dqk, dv = _pair("d", fields["d"])
    if hq % hkv:
        raise ShapeError(f"heads={fields['heads']}: the query heads must be a multiple of the kv heads")
    for name, d in (("d", dqk), ("d (v)", dv)):
        if d % 8 or d > SHAPE_MAX_D:
            raise ShapeError(f"{name}={d}: a head dimension is a multiple of 8 up to {SHAPE_MAX_D}")
    causal_text = fields.get("causal", "no").lower()
    if causal_text not in ("yes", "no", "true", "false", "1", "0"):
        raise ShapeError(f"causal={fields['causal']}: expected causal, causal=yes or causal=no")
    causal = causal_text in ("yes", "true", "1")
    hc = HeadConfig(dqk, dv, hq, hkv)
    lengths = f"s{sq}" if sq == sk else f"q{sq}-k{sk}"
    sid = f"shape-b{batch}-{hc.name}-{lengths}" + ("-causal" if causal else "")
    return Scenario(sid, batch, sq, sk, hq, hkv, dqk, dv, causal)
