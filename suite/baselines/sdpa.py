"""torch scaled_dot_product_attention with a pinned backend: cuDNN and the flash (FA2) backend."""

from __future__ import annotations

from .registry import Baseline, Unsupported, register


def _probe():
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: F401

    if not torch.cuda.is_available():
        raise ImportError("no CUDA GPU for torch")
    return torch


def _make(backend_name: str):
    def prepare(torch, scn):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel

        if scn.causal and scn.seqlen_q != scn.seqlen_k:
            raise Unsupported("SDPA's causal mask is aligned top-left; the suite's is bottom-right")
        backend = getattr(SDPBackend, backend_name)
        gqa = scn.heads_q != scn.heads_kv

        def fn(q, k, v):
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(
                    q.transpose(1, 2),
                    k.transpose(1, 2),
                    v.transpose(1, 2),
                    is_causal=scn.causal,
                    scale=scn.softmax_scale,
                    enable_gqa=gqa,
                )
            return o.transpose(1, 2)

        return fn

    return prepare


register(
    Baseline(
        "cudnn",
        "torch SDPA, cuDNN backend",
        "a CUDA build of torch with cuDNN 9 (pip install torch)",
        _probe,
        _make("CUDNN_ATTENTION"),
        packages=("torch",),
    )
)
register(
    Baseline(
        "sdpa-flash",
        "torch SDPA, flash backend (FA2)",
        "a CUDA build of torch (pip install torch)",
        _probe,
        _make("FLASH_ATTENTION"),
        packages=("torch",),
    )
)
