import shutil

import pytest

from kernelseek_suite.gpu import list_gpus

HAS_GPU = bool(list_gpus())
HAS_NVCC = shutil.which("nvcc") is not None or __import__("os").path.exists("/usr/local/cuda/bin/nvcc")


def pytest_collection_modifyitems(config, items):
    skip_gpu = pytest.mark.skip(reason="needs an NVIDIA GPU")
    skip_nvcc = pytest.mark.skip(reason="needs nvcc")
    for item in items:
        if "gpu" in item.keywords and not HAS_GPU:
            item.add_marker(skip_gpu)
        if "nvcc" in item.keywords and not HAS_NVCC:
            item.add_marker(skip_nvcc)
