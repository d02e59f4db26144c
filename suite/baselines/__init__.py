"""Baselines: adapters with one signature, registered by name. Adding one touches one file.

An adapter's `prepare(scenario)` returns a callable `(q, k, v) -> out` for tensors laid out
(batch, seqlen, heads, headdim), or raises `Unsupported`; `available()` says whether it can run here
and, if not, how to install it. A missing baseline is reported in its column, never a crash."""

from . import flash_attn as _flash_attn  # noqa: F401  (registers fa3, fa4)
from . import sdpa as _sdpa  # noqa: F401  (registers cudnn, sdpa-flash)
from .registry import REGISTRY, Baseline, Unsupported, get, register

__all__ = ["REGISTRY", "Baseline", "Unsupported", "get", "register"]
