"""The input distributions every scenario is checked and timed on, in one place.

A kernel may take a path whose cost depends on the values it reads (a softmax step that skips the
row max, a block redone when the max grew, O rescaled only when the max grew far). FA3, FA4 and
cuDNN take the same time on any data; such a kernel does not, and a speed measured on one kind of
data says nothing about another. So each scenario is checked and timed on every distribution here,
beside the baselines, and the headline is the worst distribution's.

Each distribution is a pure function of (scenario, seed, device) giving q (batch, seqlen_q,
heads_q, d_qk), k (batch, seqlen_k, heads_kv, d_qk), v (batch, seqlen_k, heads_kv, d_v) in bf16,
contiguous. Every one keeps what makes a wrong kernel fail the pass rule: V with per-head scales and
mean shifts (not symmetric, not low-variance), and at least some heads whose rows attend broadly, so
that a cheaper function (a mean of V, the value of the top key, a copy of an input) is far from the
reference somewhere.

`tied` names the feature columns of q and k where a distribution keeps its structure (a sink
channel, a ramp, massive channels): while timing, the fresh contents of every call (fresh.py) flip
the signs of those columns of q and of k together, so every timed call sees the same structure,
while the other columns are flipped independently, so that no two calls have the same scores.

The properties of real q, k and v these stand for are in docs/judging.md ("Input distributions"),
with the public work each rests on.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass

from ..scenarios import Scenario


@dataclass(frozen=True)
class Distribution:
    name: str
    summary: str  # one line: the property of real data it stands for
    make: Callable  # (scenario, seed, device) -> (q, k, v)
    tied: tuple[int, ...] = ()  # feature columns of q and k whose signs flip together while timing


class _Draw:
    """Random tensors from one generator, on the scenario's device, in fp32."""

    def __init__(self, seed: int, device):
        import torch

        self.torch = torch
        self.device = device
        self.gen = torch.Generator(device=device)
        self.gen.manual_seed(seed)

    def randn(self, *shape):
        return self.torch.randn(*shape, generator=self.gen, device=self.device, dtype=self.torch.float32)

    def rand(self, *shape):
        return self.torch.rand(*shape, generator=self.gen, device=self.device, dtype=self.torch.float32)

    def uniform(self, lo, hi, *shape):
        return lo + (hi - lo) * self.rand(*shape)

    def log_uniform(self, lo, hi, *shape):
        return self.torch.exp(self.uniform(math.log(lo), math.log(hi), *shape))


def _values(r: _Draw, scn: Scenario):
    """V as in every distribution: per-head scales and mean shifts."""
    v = r.randn(scn.batch, scn.seqlen_k, scn.heads_kv, scn.d_v)
    return v * r.uniform(0.5, 2.0, 1, 1, scn.heads_kv, 1) + r.uniform(-0.5, 0.5, 1, 1, scn.heads_kv, 1)


def _bf16(q, k, v):
    import torch

    return q.to(torch.bfloat16).contiguous(), k.to(torch.bfloat16).contiguous(), v.to(torch.bfloat16).contiguous()


def standard(scn: Scenario, seed: int, device="cuda"):
    """Near N(0, 1): per-head scales and mean shifts, 2% of keys with 2.5x the norm. Logits have a
    standard deviation near 1: some rows attend sharply, most broadly."""
    r = _Draw(seed, device)
    hq, hk = scn.heads_q, scn.heads_kv
    q = r.randn(scn.batch, scn.seqlen_q, hq, scn.d_qk)
    k = r.randn(scn.batch, scn.seqlen_k, hk, scn.d_qk)
    v = r.randn(scn.batch, scn.seqlen_k, hk, scn.d_v)
    q = q * r.uniform(0.5, 1.5, 1, 1, hq, 1) + r.uniform(-0.2, 0.3, 1, 1, hq, 1)
    hot = r.rand(scn.batch, scn.seqlen_k, hk, 1) < 0.02
    k = k * r.uniform(0.5, 1.5, 1, 1, hk, 1) * r.torch.where(hot, 2.5, 1.0)
    v = v * r.uniform(0.5, 2.0, 1, 1, hk, 1) + r.uniform(-0.5, 0.5, 1, 1, hk, 1)
    return _bf16(q, k, v)


def _temperatures(r: _Draw, scn: Scenario, wide_share: float, wide: tuple[float, float], narrow: tuple[float, float]):
    """Per q head, the standard deviation its logits should have: `wide_share` of the heads in
    `wide`, the others in `narrow` (log-uniform), in a random order of heads."""
    torch = r.torch
    n_wide = max(1, round(wide_share * scn.heads_q)) if scn.heads_q > 1 else 1
    t = torch.cat(
        [r.log_uniform(*wide, n_wide), r.log_uniform(*narrow, scn.heads_q - n_wide)]
        if scn.heads_q > n_wide
        else [r.log_uniform(*wide, n_wide)]
    )
    return t[torch.randperm(scn.heads_q, generator=r.gen, device=r.device)]


def wide(scn: Scenario, seed: int, device="cuda"):
    """Wide logits: three heads in four have a logit standard deviation of 6 to 20 (log-uniform),
    the rest 1 to 2. Without normalization of q and k, attention logits grow during training until
    some heads are nearly one-hot, and the heads of one layer differ widely in temperature."""
    r = _Draw(seed, device)
    hq, hk, d = scn.heads_q, scn.heads_kv, scn.d_qk
    std = _temperatures(r, scn, 0.75, (6.0, 20.0), (1.0, 2.0))
    # logit std of unit q, k is 1 (scale = 1/sqrt(d)); k's own per-head scale is divided out of q's
    k_scale = r.uniform(0.8, 1.25, 1, 1, hk, 1)
    q_scale = std.view(1, 1, hq, 1) / k_scale.repeat_interleave(hq // hk, dim=2)
    q = r.randn(scn.batch, scn.seqlen_q, hq, d) * q_scale
    k = r.randn(scn.batch, scn.seqlen_k, hk, d) * k_scale
    return _bf16(q, k, _values(r, scn))


# the channels of q and k where `llm` and `rising` put their structure (sign flips shared while timing)
SINK_CH, MASSIVE_CH, RAMP_CH = 0, (1, 2), 0


def _rope(x, start: int = 4, base: float = 10000.0):
    """Rotary position embedding on the channels from `start` on (pairs (start + 2i, start + 2i + 1)),
    positions along dim 1."""
    import torch

    n = x.shape[-1] - start
    n -= n % 2
    if n <= 0:
        return x
    pos = torch.arange(x.shape[1], device=x.device, dtype=torch.float32).view(1, -1, 1, 1)
    freq = base ** (-torch.arange(0, n, 2, device=x.device, dtype=torch.float32) / n)
    ang = pos * freq.view(1, 1, 1, -1)
    cos, sin = torch.cos(ang), torch.sin(ang)
    a, b = x[..., start : start + n : 2], x[..., start + 1 : start + n : 2]
    out = x.clone()
    out[..., start : start + n : 2] = a * cos - b * sin
    out[..., start + 1 : start + n : 2] = a * sin + b * cos
    return out


def llm(scn: Scenario, seed: int, device="cuda"):
    """What a pre-norm LLM's attention layer sees: per-head temperatures (logit std 1 to 6), two
    massive channels per head in q and k (2x to 8x the others, with a bias: they shift whole rows and
    spread the keys' scores by several units), attention sinks (in three heads of four the first
    four keys score 10 to 30 above the typical key), and rotary position embedding on a component
    shared by the tokens, so nearby keys score higher (local heads)."""
    r = _Draw(seed, device)
    torch = r.torch
    b, sq, sk, hq, hk, d = scn.batch, scn.seqlen_q, scn.seqlen_k, scn.heads_q, scn.heads_kv, scn.d_qk
    g = hq // hk
    scale = scn.softmax_scale
    std = _temperatures(r, scn, 0.5, (3.0, 6.0), (1.0, 2.0))
    # a component shared by the tokens of a head, rotated by position: q_i . k_j then varies with i - j
    shared_q = r.randn(1, 1, hk, d).repeat_interleave(g, dim=2) * 0.8
    shared_k = r.randn(1, 1, hk, d) * 0.8
    q = _rope(r.randn(b, sq, hq, d) + shared_q) * std.view(1, 1, hq, 1)
    k = _rope(r.randn(b, sk, hk, d) + shared_k)
    # massive channels: a large bias and a large spread, in both q and k, 2x to 8x the others
    # (log-uniform per kv head: some heads stay narrow, so a wrong kernel still fails there)
    mag = r.log_uniform(2.0, 8.0, hk)
    for ch in MASSIVE_CH:
        if ch < d:
            q[..., ch] = mag.repeat_interleave(g).view(1, 1, hq) * (r.randn(b, sq, hq) + r.uniform(-1.0, 1.0, 1, 1, hq))
            k[..., ch] = mag.view(1, 1, hk) * (r.randn(b, sk, hk) + r.uniform(-1.0, 1.0, 1, 1, hk))
    # sinks: q carries a constant positive channel, the first four keys a large value there, the rest
    # a small one; the sinks' lead is 10-30 in most heads (a quarter of the heads have none)
    lead = r.uniform(10.0, 30.0, hq) * (r.rand(hq) < 0.75)
    amp = torch.sqrt(lead / scale).view(1, 1, hq)  # q's sink channel; k's is set per kv head below
    q[..., SINK_CH] = amp * (1.0 + 0.05 * r.randn(b, sq, hq))
    k_sink = 0.3 * r.randn(b, sk, hk)
    n_sink = min(4, sk)
    amp_k = amp.view(hq)[::g].view(1, 1, hk)  # the group's first q head sets its kv head's sinks
    k_sink[:, :n_sink] = amp_k
    k[..., SINK_CH] = k_sink
    return _bf16(q, k, _values(r, scn))


def rising(scn: Scenario, seed: int, device="cuda"):
    """Adversarial for value-dependent fast paths: in every row the scores rise steadily along the
    keys, in one direction or the other (a random half of the rows each), so the row max keeps
    growing from block to block whichever way a kernel walks the keys; over the whole sequence the
    rise is 12 to 40 (per head), on top of scores of standard deviation 1 to 2."""
    r = _Draw(seed, device)
    torch = r.torch
    b, sq, sk, hq, hk, d = scn.batch, scn.seqlen_q, scn.seqlen_k, scn.heads_q, scn.heads_kv, scn.d_qk
    g = hq // hk
    scale = scn.softmax_scale
    q = r.randn(b, sq, hq, d) * r.uniform(1.0, 1.4, 1, 1, hq, 1)
    k = r.randn(b, sk, hk, d) * r.uniform(1.0, 1.4, 1, 1, hk, 1)
    rise = r.uniform(12.0, 40.0, hk)  # the scores' rise over the whole sequence, per kv head
    amp = torch.sqrt(rise / (2.0 * scale)).view(1, 1, hk)
    ramp = torch.linspace(-1.0, 1.0, sk, device=r.device).view(1, sk, 1)
    k[..., RAMP_CH] = amp * ramp
    sign = torch.where(r.rand(b, sq, hq) < 0.5, -1.0, 1.0)
    q[..., RAMP_CH] = sign * amp.repeat_interleave(g, dim=2) * (1.0 + 0.05 * r.randn(b, sq, hq))
    return _bf16(q, k, _values(r, scn))


DISTRIBUTIONS: dict[str, Distribution] = {
    d.name: d
    for d in (
        Distribution("standard", "near N(0, 1), logit std ~1; per-head scales, a few hot keys", standard),
        Distribution("wide", "wide logits: 3 heads in 4 at logit std 6-20, the rest 1-2", wide),
        Distribution(
            "llm",
            "massive channels, attention sinks at the start, per-head temperatures, rotary positions",
            llm,
            tied=(SINK_CH, *MASSIVE_CH),
        ),
        Distribution(
            "rising",
            "adversarial: scores rise along the keys in either direction, the row max grows every block",
            rising,
            tied=(RAMP_CH,),
        ),
    )
}
PRIMARY = "standard"  # checked in full (three launches, the whole reference); the others sampled
FILE_PREFIX = "file:"  # `file:PATH`: q, k and v read from a safetensors file (`from_file`)


def names() -> list[str]:
    return list(DISTRIBUTIONS)


def get(name: str) -> Distribution:
    if name.startswith(FILE_PREFIX):
        return from_file(name[len(FILE_PREFIX) :])
    try:
        return DISTRIBUTIONS[name]
    except KeyError:
        raise KeyError(f"unknown input distribution {name!r}; known: {', '.join(DISTRIBUTIONS)}") from None


# ---- inputs captured from a model -------------------------------------------------------------


class InputsError(ValueError):
    """A file of captured inputs that cannot be used: missing, unreadable, or tensors of the wrong
    names, shapes or types."""


def read_inputs(path) -> tuple[dict, dict]:
    """({"q", "k", "v": CPU tensors}, the file's metadata) of a safetensors file, checked: q
    (batch, seqlen_q, heads_q, d_qk), k (batch, seqlen_k, heads_kv, d_qk), v (batch, seqlen_k,
    heads_kv, d_v), floating point (converted to bf16), heads_q a multiple of heads_kv."""
    import torch

    try:
        from safetensors import safe_open
    except ImportError:
        raise InputsError("reading captured inputs needs the safetensors package: pip install safetensors") from None
    try:
        with safe_open(str(path), framework="pt") as f:
            meta = f.metadata() or {}
            missing = [n for n in ("q", "k", "v") if n not in f.keys()]
            if missing:
                have = ", ".join(sorted(f.keys()))
                raise InputsError(f"{path}: no tensor named {', '.join(missing)} (it has: {have})")
            t = {n: f.get_tensor(n) for n in ("q", "k", "v")}
    except InputsError:
        raise
    except Exception as e:  # not a safetensors file, unreadable
        raise InputsError(f"{path}: not a readable safetensors file ({type(e).__name__}: {e})") from None
    for n, x in t.items():
        if x.dim() != 4:
            raise InputsError(f"{path}: {n} has shape {tuple(x.shape)}; expected (batch, seqlen, heads, head_dim)")
        if not x.is_floating_point():
            raise InputsError(f"{path}: {n} is {x.dtype}; expected a floating-point tensor (bf16)")
    q, k, v = t["q"], t["k"], t["v"]
    if not (q.shape[0] == k.shape[0] == v.shape[0]) or k.shape[:3] != v.shape[:3] or q.shape[3] != k.shape[3]:
        raise InputsError(
            f"{path}: shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} do not fit together: q and k "
            "share batch and head_dim, k and v share batch, seqlen and heads"
        )
    if k.shape[2] == 0 or q.shape[2] % k.shape[2]:
        raise InputsError(f"{path}: {q.shape[2]} q heads are not a multiple of {k.shape[2]} kv heads")
    return {n: x.to(torch.bfloat16).contiguous() for n, x in t.items()}, meta


def scenario_from_file(path, causal: bool | None = None) -> Scenario:
    """The scenario of a file's inputs; `causal` from the argument, else from the file's metadata
    (`causal`: "true"/"false"), else False."""
    from pathlib import Path

    t, meta = read_inputs(path)
    q, k, v = t["q"], t["k"], t["v"]
    if causal is None:
        causal = str(meta.get("causal", "false")).strip().lower() in ("1", "true", "yes")
    return Scenario(
        f"file-{Path(path).stem}" + ("-causal" if causal else ""),
        q.shape[0],
        q.shape[1],
        k.shape[1],
        q.shape[2],
        k.shape[2],
        q.shape[3],
        v.shape[3],
        causal,
    )


@functools.lru_cache(maxsize=2)
def _read_cached(path: str, mtime_ns: int) -> tuple[dict, dict]:
    """read_inputs, once per file version (the tensors are only ever copied from)."""
    return read_inputs(path)


def from_file(path) -> Distribution:
    """The inputs of a file as a distribution of one: the same q, k, v whatever the seed (each call
    gives fresh copies on the device); a scenario of another shape is refused."""
    from pathlib import Path

    path = str(Path(path).resolve())

    def make(scn: Scenario, seed: int, device="cuda"):
        t, _ = _read_cached(path, Path(path).stat().st_mtime_ns)
        want = {
            "q": (scn.batch, scn.seqlen_q, scn.heads_q, scn.d_qk),
            "k": (scn.batch, scn.seqlen_k, scn.heads_kv, scn.d_qk),
            "v": (scn.batch, scn.seqlen_k, scn.heads_kv, scn.d_v),
        }
        for n, shape in want.items():
            if tuple(t[n].shape) != shape:
                raise InputsError(f"{path}: {n} has shape {tuple(t[n].shape)}, the scenario {scn.id} needs {shape}")
        return tuple(t[n].to(device=device, copy=True) for n in ("q", "k", "v"))

    make.__doc__ = f"q, k and v as captured in {path}."
    return Distribution(FILE_PREFIX + path, f"captured inputs ({Path(path).name})", make)
