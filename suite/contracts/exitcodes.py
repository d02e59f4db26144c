"""The exit codes of every command and of the suite's own child processes, in one place. This module
imports nothing of the suite: every layer may use it.

  0   OK           success; for `bench`/`eval`: correct on every scenario run
  1   FAIL         not correct everywhere (or implausible rows); a claim not reproduced; the command
                   ran and its answer is "no"
  2   BUILD        the kernel breaks the rules or does not build (no GPU needed to find out)
  3   NO_GPU       no suitable GPU (after every check that needs none has passed)
  4   USAGE        bad arguments or files, click's own usage errors included, or an optional part
                   whose packages (an extra) are not installed (contracts/extras.py)
  5   RUNTIME      `reproduce --runtime docker` where Docker cannot run it
  6   EVALUATOR    the evaluator's own machinery failed (CUDA unusable, its worker unable to start, every
                   scenario failing the same way before the kernel ran): no verdict on the kernel
  7   ENDPOINT     the model endpoint failed (unreachable, refusing, or failing after the bounded
                   retries of --max-attempts and --retry-budget): no verdict on the agent
  10-18            `doctor`: one code per problem (DOCTOR below)
The suite's own child processes (never a command's code; each distinct from every code above):
  20  WORKER_FATAL        the measuring worker stopped before its scenarios (the kernel's library
                          breaks the contract, or an error outside any one scenario)
  21  WORKER_CUDA_LOST    the worker's CUDA context is gone: the parent starts a fresh worker
  22  CEILING_GATE_TIMED_OUT  a gated GEMM-ceiling child's gate did not open in time: nothing measured
  86  SANITIZER_FOUND_ERRORS  compute-sanitizer found errors (the code it is told to exit with)
A command whose output is cut off by a closed pipe (`reproduce 2>&1 | head -2`) drops the rest of its
output and exits with its own code (cli/common.py, survive_closed_pipes). `make` exits 2 for any failed
recipe: `make reproduce` prints the command's code, which a script gets from the command itself.
"""

from __future__ import annotations

OK = 0
FAIL = 1
BUILD = 2
NO_GPU = 3
USAGE = 4
RUNTIME = 5
EVALUATOR = 6
ENDPOINT = 7

# The measuring worker's own codes (harness/worker.py, read by harness/sweep.py).
WORKER_FATAL = 20
WORKER_CUDA_LOST = 21
# A gated GEMM-ceiling child whose gate did not open in time: it measured nothing (reproduce/gemm.py).
CEILING_GATE_TIMED_OUT = 22
# compute-sanitizer's exit code when it found errors (its --error-exitcode; harness/sanitize.py).
SANITIZER_FOUND_ERRORS = 86

# `doctor`: each problem its own code; the exit code is the first problem's, in this order.
DOCTOR = {
    "gpu": NO_GPU,  # no NVIDIA GPU, or not the architecture's exact compute capability
    "docker-sdk": 10,  # the Docker SDK for Python is not installed
    "docker-engine": 11,  # the Docker engine does not answer
    "nvidia-runtime": 12,  # Docker cannot give containers a GPU
    "driver": 13,  # the driver is older than the CUDA the run needs
    "gpu-busy": 14,  # other processes are on the GPU
    "throttle": 15,  # the GPU is slowed down
    "nvcc": 16,  # nvcc is missing or too old for the architecture
    "baselines": 17,  # the architecture's main baseline cannot be imported
    "nvml": 18,  # nvidia-ml-py is missing
}


def signalled(signum: int) -> int:
    """The code of a process ended by a signal, as a shell reports it (128 + the signal's number)."""
    return 128 + signum


MEANING = {
    OK: "ok",
    FAIL: "not correct everywhere",
    BUILD: "breaks the rules or does not build",
    NO_GPU: "no suitable GPU",
    USAGE: "bad arguments",
    RUNTIME: "the container runtime is not usable",
    EVALUATOR: "the evaluator's own machinery failed",
    ENDPOINT: "the model endpoint failed",
}
