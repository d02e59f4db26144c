"""The Hopper kernel built and called once on this GPU, for the tests that check its outputs on
inputs of their own (test_hopper_growing_max.py, test_hopper_dominated_rows.py), and the defaults of
its knobs that their models of its arithmetic take."""

from __future__ import annotations

import pytest

from kernelseek_suite import config

KERNEL = config.REPO_ROOT / "kernels/hopper/flash_fwd_sm90.cu"


def kernel_define(name: str) -> int:
    """The default of one of the kernel's integer knobs (`#define NAME N`), as the file has it."""
    import re

    return int(re.search(rf"^#define {name} (\d+)", KERNEL.read_text(), re.M).group(1))


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


def failure(lib, q, k, v, causal: bool, per_head: bool = False) -> str | None:
    """Why one call's output and LSE fail the pass rule against the reference (the return code if it
    returned an error), or None: the whole-tensor check, or the extended set's per-(batch, head) one."""
    import math

    from kernelseek_suite.contract import forward_fresh
    from kernelseek_suite.harness.check import CheckConfig, check_output
    from kernelseek_suite.harness.reference import reference_pair
    from kernelseek_suite.harness.trial import check_per_head

    scale = 1 / math.sqrt(q.shape[-1])
    ref, ref_lse, lowp = reference_pair(q, k, v, causal, scale)
    rc, out, lse = forward_fresh(lib, q, k, v, causal, scale)
    if rc != 0:
        return f"returned {rc}"
    r = (check_per_head if per_head else check_output)(out, ref, lowp, lse, ref_lse, CheckConfig())
    return None if r.ok else r.reason
