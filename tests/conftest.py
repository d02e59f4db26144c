import shutil

import pytest

from kernelseek_suite.gpu import list_gpus

HAS_GPU = bool(list_gpus())
HAS_NVCC = shutil.which("nvcc") is not None or __import__("os").path.exists("/usr/local/cuda/bin/nvcc")
# per-test limits beyond pyproject's `timeout` (120 s): builds with nvcc, and runs on a GPU
SLOW_TIMEOUT_S = 900
GPU_TIMEOUT_S = 1800


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc")
    for item in items:
        if item.get_closest_marker("timeout") is None:
            if "gpu" in item.keywords:
                item.add_marker(pytest.mark.timeout(GPU_TIMEOUT_S))
            elif "nvcc" in item.keywords or "slow" in item.keywords:
                item.add_marker(pytest.mark.timeout(SLOW_TIMEOUT_S))
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)
        if "nvcc" in item.keywords and not HAS_NVCC:
            item.add_marker(skip_nvcc)
