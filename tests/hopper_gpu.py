"""The Hopper kernel built and called once on this GPU, for the tests that check its outputs on
inputs of their own (test_hopper_growing_max.py, test_hopper_dominated_rows.py)."""

from __future__ import annotations

import pytest

from kernelseek_suite import config

KERNEL = config.REPO_ROOT / "kernels/hopper/flash_fwd_sm90.cu"


def hopper_kernel():
    """The kernel's library, from the build cache (one build serves these tests and a later bench or
    run-once of the same text); skips the test where there is no sm90 GPU."""
    from kernelseek_suite.build import build
    from kernelseek_suite.contract import KernelLibrary
    from kernelseek_suite.gpu import NoGPUError, require_gpu

    try:
        require_gpu("sm90")
    except NoGPUError as e:
        pytest.skip(str(e))
    return KernelLibrary(build(KERNEL, "sm90").library)


def forward(lib, q, k, v, causal: bool, scale: float):
    """(return code, out, lse) of one call; out and lse start as NaN, so what is not written fails."""
    import torch

    from kernelseek_suite.contract import make_params

    b, sq, hq, _ = q.shape
    out = torch.full((b, sq, hq, v.shape[-1]), float("nan"), device="cuda", dtype=torch.bfloat16)
    lse = torch.full((b, hq, sq), float("nan"), device="cuda", dtype=torch.float32)
    rc = lib.forward(make_params(q, k, v, out, lse, causal, scale), torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    return rc, out, lse
