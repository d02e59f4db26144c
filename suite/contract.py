"""The kernel contract: what one single-file kernel exports, mirrored here with ctypes.

A kernel is one `.cu` file that declares (itself, so it stays standalone)::

    #define KS_ABI_VERSION 1
    typedef struct {
      const void *q, *k, *v;  void *out;  float *lse;        // lse may be NULL
      int64_t q_batch_stride, q_seq_stride, q_head_stride;   // strides in elements
      int64_t k_batch_stride, k_seq_stride, k_head_stride;
      int64_t v_batch_stride, v_seq_stride, v_head_stride;
      int64_t o_batch_stride, o_seq_stride, o_head_stride;
      int64_t lse_batch_stride, lse_head_stride;             // lse is (batch, heads_q, seqlen_q) fp32
      int32_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, d_qk, d_v;
      int32_t causal;                                        // mask aligned bottom-right
      float   softmax_scale;
      int32_t dtype;                                         // 0 = bf16
    } ks_attn_params;

    extern "C" int ks_abi_version(void);          // returns KS_ABI_VERSION
    extern "C" int ks_params_size(void);          // returns sizeof(ks_attn_params)
    extern "C" int ks_attn_fwd(const ks_attn_params*, cudaStream_t);   // a KS_* code

and returns 0 on success, KS_ERR_UNSUPPORTED for a shape it does not handle (reported as
unsupported, never run), KS_ERR_INVALID for bad arguments, KS_ERR_CUDA when a CUDA call failed.
"""

from __future__ import annotations

import ctypes

ABI_VERSION = 1

KS_OK = 0
KS_ERR_UNSUPPORTED = 1
KS_ERR_INVALID = 2
KS_ERR_CUDA = 3

ERROR_NAMES = {
    KS_OK: "ok",
    KS_ERR_UNSUPPORTED: "unsupported",
    KS_ERR_INVALID: "invalid argument",
    KS_ERR_CUDA: "CUDA error",
}

DTYPE_BF16 = 0

REQUIRED_SYMBOLS = ("ks_abi_version", "ks_params_size", "ks_attn_fwd")


class AttnParams(ctypes.Structure):
    _fields_ = [
        ("q", ctypes.c_void_p),
        ("k", ctypes.c_void_p),
        ("v", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("q_batch_stride", ctypes.c_int64),
        ("q_seq_stride", ctypes.c_int64),
        ("q_head_stride", ctypes.c_int64),
        ("k_batch_stride", ctypes.c_int64),
        ("k_seq_stride", ctypes.c_int64),
        ("k_head_stride", ctypes.c_int64),
        ("v_batch_stride", ctypes.c_int64),
        ("v_seq_stride", ctypes.c_int64),
        ("v_head_stride", ctypes.c_int64),
        ("o_batch_stride", ctypes.c_int64),
        ("o_seq_stride", ctypes.c_int64),
        ("o_head_stride", ctypes.c_int64),
        ("lse_batch_stride", ctypes.c_int64),
        ("lse_head_stride", ctypes.c_int64),
        ("batch", ctypes.c_int32),
        ("seqlen_q", ctypes.c_int32),
        ("seqlen_k", ctypes.c_int32),
        ("heads_q", ctypes.c_int32),
        ("heads_kv", ctypes.c_int32),
        ("d_qk", ctypes.c_int32),
        ("d_v", ctypes.c_int32),
        ("causal", ctypes.c_int32),
        ("softmax_scale", ctypes.c_float),
        ("dtype", ctypes.c_int32),
    ]


PARAMS_SIZE = ctypes.sizeof(AttnParams)


class ContractError(RuntimeError):
    """The shared library does not implement the contract (missing symbol, ABI or layout mismatch)."""


class KernelLibrary:
    """A built kernel loaded with ctypes, its ABI verified before first use."""

    def __init__(self, so_path: str):
        self.path = str(so_path)
        try:
            self.lib = ctypes.CDLL(self.path, mode=ctypes.RTLD_LOCAL)
        except OSError as e:
            raise ContractError(f"cannot load {self.path}: {e}") from e
        for sym in REQUIRED_SYMBOLS:
            if not hasattr(self.lib, sym):
                raise ContractError(f"{self.path} does not export `{sym}` (see the kernel contract)")
        self.lib.ks_abi_version.restype = ctypes.c_int
        self.lib.ks_params_size.restype = ctypes.c_int
        self.lib.ks_attn_fwd.restype = ctypes.c_int
        self.lib.ks_attn_fwd.argtypes = [ctypes.POINTER(AttnParams), ctypes.c_void_p]
        abi = self.lib.ks_abi_version()
        if abi != ABI_VERSION:
            raise ContractError(f"kernel ABI version {abi}, the suite expects {ABI_VERSION}")
        size = self.lib.ks_params_size()
        if size != PARAMS_SIZE:
            raise ContractError(
                f"kernel's ks_attn_params is {size} bytes, the suite's is {PARAMS_SIZE}: "
                "the struct layout differs from the contract"
            )

    def forward(self, params: AttnParams, stream: int) -> int:
        return int(self.lib.ks_attn_fwd(ctypes.byref(params), ctypes.c_void_p(stream)))


def make_params(q, k, v, out, lse, causal: bool, softmax_scale: float) -> AttnParams:
    """Fill the struct from torch tensors laid out (batch, seqlen, heads, headdim)."""
    p = AttnParams()
    p.q, p.k, p.v, p.out = q.data_ptr(), k.data_ptr(), v.data_ptr(), out.data_ptr()
    p.lse = lse.data_ptr() if lse is not None else None
    for name, t in (("q", q), ("k", k), ("v", v), ("o", out)):
        st = t.stride()
        setattr(p, f"{name}_batch_stride", st[0])
        setattr(p, f"{name}_seq_stride", st[1])
        setattr(p, f"{name}_head_stride", st[2])
        if st[3] != 1:
            raise ValueError(f"{name}: the last dimension must be contiguous")
    if lse is not None:
        p.lse_batch_stride, p.lse_head_stride = lse.stride()[0], lse.stride()[1]
    p.batch, p.seqlen_q, p.heads_q, p.d_qk = q.shape
    p.seqlen_k, p.heads_kv = k.shape[1], k.shape[2]
    p.d_v = v.shape[3]
    p.causal = 1 if causal else 0
    p.softmax_scale = softmax_scale
    p.dtype = DTYPE_BF16
    return p


def forward_fresh(lib: KernelLibrary, q, k, v, causal: bool, softmax_scale: float):
    """(return code, out, lse) of one call of the kernel on fresh outputs: out (q's dtype) and lse
    (fp32) start as NaN, so an element the kernel does not write fails any check of them. On the
    current CUDA stream, synchronized, where q is on the GPU (stream 0 otherwise)."""
    import torch

    b, sq, hq, _ = q.shape
    out = torch.full((b, sq, hq, v.shape[-1]), float("nan"), device=q.device, dtype=q.dtype)
    lse = torch.full((b, hq, sq), float("nan"), device=q.device, dtype=torch.float32)
    stream = torch.cuda.current_stream().cuda_stream if q.is_cuda else 0
    rc = lib.forward(make_params(q, k, v, out, lse, causal, softmax_scale), stream)
    if q.is_cuda:
        torch.cuda.synchronize()
    return rc, out, lse
