"""The contract check: tiny shared libraries, built with gcc (and one with nvcc), loaded with
KernelLibrary. The C struct below is the contract's, so a library that echoes fields back proves
the ctypes layout matches the C layout field by field."""

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from kernelseek_suite.contract import (
    ABI_VERSION,
    PARAMS_SIZE,
    AttnParams,
    ContractError,
    KernelLibrary,
    forward_fresh,
    make_params,
)

STRUCT = """
#include <stdint.h>
typedef void* cudaStream_t;
typedef struct {
  const void *q, *k, *v;  void *out;  float *lse;
  int64_t q_batch_stride, q_seq_stride, q_head_stride;
  int64_t k_batch_stride, k_seq_stride, k_head_stride;
  int64_t v_batch_stride, v_seq_stride, v_head_stride;
  int64_t o_batch_stride, o_seq_stride, o_head_stride;
  int64_t lse_batch_stride, lse_head_stride;
  int32_t batch, seqlen_q, seqlen_k, heads_q, heads_kv, d_qk, d_v;
  int32_t causal;
  float   softmax_scale;
  int32_t dtype;
} ks_attn_params;
"""

ECHO = """
int ks_abi_version(void) { return %(abi)s; }
int ks_params_size(void) { return %(size)s; }
/* a checksum of fields from the start, the middle and the end of the struct */
int ks_attn_fwd(const ks_attn_params* p, cudaStream_t s) {
  return (int)(p->o_seq_stride * 1000000 + p->d_v * 10000 + p->heads_kv * 100 + p->causal * 10
               + (p->softmax_scale == 0.125f) + (p->lse == 0 ? 0 : 2) + (s == (void*)0x40 ? 4 : 0));
}
"""

needs_gcc = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")


def so(tmp_path, body: str, name="k") -> str:
    src = tmp_path / f"{name}.c"
    src.write_text(body)
    lib = tmp_path / f"lib{name}.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src)], check=True)
    return str(lib)


@needs_gcc
def test_a_matching_library_loads_and_the_layout_agrees_field_by_field(tmp_path):
    lib = KernelLibrary(so(tmp_path, STRUCT + ECHO % {"abi": ABI_VERSION, "size": "sizeof(ks_attn_params)"}))
    q = torch.zeros(2, 8, 4, 16, dtype=torch.bfloat16)
    k = torch.zeros(2, 8, 2, 16, dtype=torch.bfloat16)
    v = torch.zeros(2, 8, 2, 32, dtype=torch.bfloat16)
    out = torch.zeros(2, 8, 4, 32, dtype=torch.bfloat16)
    p = make_params(q, k, v, out, None, causal=True, softmax_scale=0.125)
    assert p.o_seq_stride == 4 * 32
    assert lib.forward(p, 0x40) == 128 * 1000000 + 32 * 10000 + 2 * 100 + 10 + 1 + 0 + 4


@needs_gcc
@pytest.mark.parametrize(
    "abi,size,words",
    [
        (ABI_VERSION + 1, "sizeof(ks_attn_params)", "ABI version 2"),
        (ABI_VERSION, "sizeof(ks_attn_params) - 4", "struct layout differs"),
        (ABI_VERSION, "sizeof(ks_attn_params) + 8", "struct layout differs"),
    ],
)
def test_a_mismatch_is_refused_before_the_first_call(tmp_path, abi, size, words):
    with pytest.raises(ContractError) as e:
        KernelLibrary(so(tmp_path, STRUCT + ECHO % {"abi": abi, "size": size}))
    assert words in str(e.value)


@needs_gcc
def test_a_missing_symbol_is_refused(tmp_path):
    body = (
        STRUCT + "int ks_abi_version(void) { return 1; }\nint ks_params_size(void) { return sizeof(ks_attn_params); }\n"
    )
    with pytest.raises(ContractError) as e:
        KernelLibrary(so(tmp_path, body))
    assert "ks_attn_fwd" in str(e.value)


def test_a_file_that_is_not_a_library_is_refused(tmp_path):
    bad = tmp_path / "kernel.so"
    bad.write_text("not an ELF file")
    with pytest.raises(ContractError) as e:
        KernelLibrary(str(bad))
    assert "cannot load" in str(e.value)


@needs_gcc
def test_forward_fresh_passes_the_call_and_hands_back_outputs_that_start_as_nan(tmp_path):
    """One call on outputs of its own (what the GPU tests and scripts/check-seeds.py check): the echo
    library's checksum says which struct it got (o_seq_stride = heads_q * d_v of the fresh out, d_v,
    heads_kv, causal, the scale, an LSE pointer; stream 0 for tensors on the CPU); out and lse are
    fresh, shaped after q and v, and hold NaN where nothing was written."""
    lib = KernelLibrary(so(tmp_path, STRUCT + ECHO % {"abi": ABI_VERSION, "size": "sizeof(ks_attn_params)"}))
    q = torch.zeros(2, 8, 4, 16, dtype=torch.bfloat16)
    k = torch.zeros(2, 8, 2, 16, dtype=torch.bfloat16)
    v = torch.zeros(2, 8, 2, 32, dtype=torch.bfloat16)
    rc, out, lse = forward_fresh(lib, q, k, v, causal=True, softmax_scale=0.125)
    assert rc == (4 * 32) * 1000000 + 32 * 10000 + 2 * 100 + 10 + 1 + 2
    assert out.shape == (2, 8, 4, 32) and out.dtype == torch.bfloat16 and bool(out.isnan().all())
    assert lse.shape == (2, 4, 8) and lse.dtype == torch.float32 and bool(lse.isnan().all())


def test_the_struct_size_is_the_c_size():
    assert PARAMS_SIZE == ctypes.sizeof(AttnParams) == 5 * 8 + 14 * 8 + 8 * 4 + 4 + 4


def test_make_params_refuses_a_strided_last_dimension():
    q = torch.zeros(1, 4, 2, 16, dtype=torch.bfloat16)[..., ::2]
    with pytest.raises(ValueError):
        make_params(q, q, q, q, None, False, 0.25)


@pytest.mark.nvcc
def test_an_nvcc_built_kernel_loads_without_a_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv("KERNELSEEK_CACHE", str(tmp_path))
    from kernelseek_suite.build import build

    built = build(Path(__file__).parent / "kernels" / "spin.cu", "sm90")
    lib = KernelLibrary(built.library)
    assert lib.lib.ks_params_size() == PARAMS_SIZE
