"""FlashAttention-3 (Hopper) and FlashAttention-4 (CuTe DSL) adapters."""

from __future__ import annotations

import importlib

from .registry import Baseline, Unsupported, register


def _probe_fa3():
    for mod in ("flash_attn_interface", "fa3_fwd_interface"):
        try:
            return importlib.import_module(mod)
        except ImportError:
            continue
    raise ImportError("neither flash_attn_interface (FA3 source build) nor fa3_fwd_interface (fa3-fwd wheel)")


def _first(out):
    return out[0] if isinstance(out, (tuple, list)) else out


def _prepare_fa3(mod, scn):
    if scn.dtype != "bf16":
        raise Unsupported("fa3 adapter: bf16 only")

    def fn(q, k, v):
        return _first(mod.flash_attn_func(q, k, v, softmax_scale=scn.softmax_scale, causal=scn.causal))

    return fn


def _probe_fa4():
    from .fa4_warm import enable_disk_cache

    enable_disk_cache()  # what the warm-up before the sweep compiled is loaded, not compiled again
    return importlib.import_module("flash_attn.cute")


def _prepare_fa4(mod, scn):
    def fn(q, k, v):
        return _first(mod.flash_attn_func(q, k, v, softmax_scale=scn.softmax_scale, causal=scn.causal))

    return fn


register(
    Baseline(
        "fa3",
        "FlashAttention-3 forward (hopper/), flash_attn_interface or the fa3-fwd wheel",
        "pip install fa3-fwd==0.0.3 (or build flash-attention/hopper)",
        _probe_fa3,
        _prepare_fa3,
        packages=("fa3-fwd", "flash_attn_3", "flash-attn-3"),
    )
)
register(
    Baseline(
        "fa4",
        "FlashAttention-4 (flash_attn.cute, CuTe DSL)",
        "pip install flash-attn-4==4.0.0b36",
        _probe_fa4,
        _prepare_fa4,
        packages=("flash-attn-4",),
    )
)
