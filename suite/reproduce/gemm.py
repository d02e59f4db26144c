"""The bf16 GEMM ceiling of a GPU: torch.matmul of two n x n bf16 matrices of random data, timed
with CUDA events over several runs after a warm-up; the median gives TFLOP/s = 2 n^3 / time.

It runs in a child process (`python -m kernelseek_suite.reproduce.gemm`), never in the caller's
CUDA context, the same way the harness's worker does. A child may also be started ahead of its
measurement (`GatedChild`): it imports torch, then waits at a gate (harness/gate.py) before it
touches the GPU."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from dataclasses import asdict, dataclass

from .. import config
from ..contracts import exitcodes
from ..harness.gate import Gate, wait_at_gate

MARK = "@@GEMM "
GATE_TIMED_OUT = exitcodes.CEILING_GATE_TIMED_OUT  # its gate did not open in time: it measured nothing


class CeilingError(RuntimeError):
    pass


class GateTimedOut(RuntimeError):
    """A gated child waited its whole timeout at the gate and measured nothing."""


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


def _child_env(gpu_index: int, device: str) -> dict[str, str]:
    env = dict(os.environ)
    if device == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(gpu_index)
    return env


def _command(n: int, reps: int, device: str, gate: dict | None = None) -> list[str]:
    cmd = [sys.executable, "-m", "kernelseek_suite.reproduce.gemm", str(n), str(reps), device]
    return cmd + [json.dumps(gate)] if gate is not None else cmd


def _parse(returncode: int, stdout: str, stderr: str) -> GemmCeiling:
    for line in stdout.splitlines():
        if line.startswith(MARK):
            return GemmCeiling(**json.loads(line[len(MARK) :]))
    tail = (stderr or stdout).strip().splitlines()[-5:]
    raise CeilingError(f"the GEMM ceiling child exited with {returncode}: {' | '.join(tail)}")


def measure_in_child(
    gpu_index: int = 0,
    n: int = config.GEMM_CEILING_N,
    reps: int = config.GEMM_CEILING_REPS,
    device: str = "cuda",
    timeout_s: float = 600,
) -> GemmCeiling:
    cmd = _command(n, reps, device)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=_child_env(gpu_index, device))
    except subprocess.TimeoutExpired as e:
        raise CeilingError(f"the GEMM ceiling did not finish within {timeout_s:.0f} s") from e
    return _parse(p.returncode, p.stdout, p.stderr)


class GatedChild:
    """A ceiling's child started before the GPU is free: its Python and torch imports (CPU only)
    happen meanwhile, and it creates no CUDA context until `measure` opens its gate. `kill` ends it
    early. It dies with the thread that started it (PDEATHSIG is per thread), so that thread must
    outlive it: start it from the thread that measures or kills it."""

    def __init__(
        self,
        gpu_index: int = 0,
        n: int = config.GEMM_CEILING_N,
        reps: int = config.GEMM_CEILING_REPS,
        device: str = "cuda",
        gate_timeout_s: float = 3600,
    ):
        # the harness's own guard against orphans on the GPU; imported here, the child never needs it
        from ..containment import die_with_parent

        self.gate = Gate(gate_timeout_s)
        try:
            self.proc = subprocess.Popen(
                _command(n, reps, device, self.gate.job()),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=_child_env(gpu_index, device),
                preexec_fn=die_with_parent,
            )
        except BaseException:
            self.gate.remove()
            raise

    def measure(self, timeout_s: float = 600) -> GemmCeiling:
        """Opens the gate and waits for the result: CeilingError as measure_in_child, GateTimedOut
        when the child gave up waiting before."""
        self.gate.open()
        try:
            stdout, stderr = self.proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired as e:
            self.kill()
            raise CeilingError(f"the GEMM ceiling did not finish within {timeout_s:.0f} s") from e
        finally:
            self.gate.remove()
        if self.proc.returncode == GATE_TIMED_OUT:
            raise GateTimedOut(f"the GEMM ceiling child waited {self.gate.timeout_s:.0f} s at its gate and gave up")
        return _parse(self.proc.returncode, stdout, stderr)

    def kill(self) -> None:
        """Ends a child that has not been measured yet and reaps it; nothing after `measure`."""
        if self.proc.returncode is None:
            self.proc.kill()
            self.proc.communicate()
        self.gate.remove()


def _wait_at_gate(gate: dict) -> bool:
    """In a gated child: torch is imported first (that creates no CUDA context), then the child waits.
    False when the timeout passed first: the GPU may still be in use, so nothing is measured."""
    import torch  # noqa: F401

    waited = wait_at_gate(gate)
    if waited is not None and waited["timed_out"]:
        sys.stderr.write(f"the gate did not open within {float(gate['timeout_s']):.0f} s\n")
        return False
    return True


def main(argv: list[str]) -> int:
    """argv: n, reps, and optionally the device and a gate (Gate.job() as JSON)."""
    n, reps, device = int(argv[0]), int(argv[1]), argv[2] if len(argv) > 2 else "cuda"
    if len(argv) > 3 and not _wait_at_gate(json.loads(argv[3])):
        return GATE_TIMED_OUT
    sys.stdout.write(MARK + json.dumps(measure(n, reps, device=device).to_dict()) + "\n")
    return exitcodes.OK


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
