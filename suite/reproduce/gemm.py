"""The bf16 GEMM ceiling of a GPU: torch.matmul of two n x n bf16 matrices of random data, timed
with CUDA events over several runs after a warm-up; the median gives TFLOP/s = 2 n^3 / time.

It runs in a child process (`python -m kernelseek_suite.reproduce.gemm`), never in the caller's
CUDA context, the same way the harness's worker does."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from .. import config

MARK = "@@GEMM "


class CeilingError(RuntimeError):
    pass


@dataclass
class GemmCeiling:
    tflops: float  # at the median time
    median_ms: float
    min_ms: float
    max_ms: float
    n: int
    reps: int
    device: str
    torch: str
    dtype: str = "bfloat16"

    def to_dict(self) -> dict:
        return asdict(self)


def measure(n: int, reps: int, warmup: int = 3, device: str = "cuda") -> GemmCeiling:
    """In this process. `device="cpu"` exists so the logic can be tested without a GPU."""
    import torch

    dev = torch.device(device)
    gen = torch.Generator(device=dev).manual_seed(1234)
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16, generator=gen)
    for _ in range(warmup):
        torch.matmul(a, b)
    times = []
    if dev.type == "cuda":
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        for _ in range(reps):
            start.record()
            torch.matmul(a, b)
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end))
        name = torch.cuda.get_device_name(dev)
    else:
        for _ in range(reps):
            t0 = time.perf_counter()
            torch.matmul(a, b)
            times.append((time.perf_counter() - t0) * 1e3)
        name = "cpu"
    med = statistics.median(times)
    return GemmCeiling(2 * n**3 / (med * 1e-3) / 1e12, med, min(times), max(times), n, reps, name, torch.__version__)


def measure_in_child(
    gpu_index: int = 0,
    n: int = config.GEMM_CEILING_N,
    reps: int = config.GEMM_CEILING_REPS,
    device: str = "cuda",
    timeout_s: float = 600,
) -> GemmCeiling:
    env = dict(os.environ)
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    cmd = [sys.executable, "-m", "kernelseek_suite.reproduce.gemm", str(n), str(reps), device]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=env)
    except subprocess.TimeoutExpired as e:
        raise CeilingError(f"the GEMM ceiling did not finish within {timeout_s:.0f} s") from e
    for line in p.stdout.splitlines():
        if line.startswith(MARK):
            return GemmCeiling(**json.loads(line[len(MARK) :]))
    tail = (p.stderr or p.stdout).strip().splitlines()[-5:]
    raise CeilingError(f"the GEMM ceiling child exited with {p.returncode}: {' | '.join(tail)}")


def main(argv: list[str]) -> int:
    n, reps, device = int(argv[0]), int(argv[1]), argv[2] if len(argv) > 2 else "cuda"
    sys.stdout.write(MARK + json.dumps(measure(n, reps, device=device).to_dict()) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
