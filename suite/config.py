"""One place for the harness's settings: tolerances, timing budgets, paths, build flags.

Every other module reads its constants from here; the CLI can override some of them per run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypedDict

REPO_ROOT = Path(__file__).resolve().parent.parent


def cache_dir() -> Path:
    base = os.environ.get("KERNELSEEK_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "kernelseek-suite"
    )
    return Path(base)


# Architectures the suite knows: nvcc target, the compute capability a GPU must report exactly,
# and the default baseline the kernel is judged against.
class Arch(TypedDict):
    gencode: str  # nvcc's -gencode
    cc: tuple[int, int]  # the compute capability a GPU must report exactly
    baseline: str  # the default baseline
    gpus: str  # the GPUs, in words


class Reproducible(TypedDict):
    kernel: str  # the architecture's kernel, relative to the checkout
    baselines: tuple[str, ...]
    container: str


ARCHES: dict[str, Arch] = {
    "sm90": {
        "gencode": "-gencode=arch=compute_90a,code=sm_90a",
        "cc": (9, 0),
        "baseline": "fa3",
        "gpus": "H100 / H200",
    },
    "sm100": {
        "gencode": "-gencode=arch=compute_100a,code=sm_100a",
        "cc": (10, 0),
        "baseline": "fa4",
        "gpus": "B200 / GB200",
    },
    # sm80 is for the reference kernel and tests only. Any sm80+ GPU runs it: sm_80 SASS runs on sm8x
    # only, so the PTX goes in too and the driver compiles it for newer GPUs (an H200, a B200)
    "sm80": {
        "gencode": "-gencode=arch=compute_80,code=[sm_80,compute_80]",
        "cc": (8, 0),
        "baseline": "fa3",
        "gpus": "A100 or newer",
    },
}

# ptxas warnings that fail a build: serialized wgmma, injected warpgroup arrive, register overflow.
FATAL_PTXAS_WARNINGS = ("C7515", "C7519", "C7511")

# `--split-compile=0`: the front end and ptxas work on the file's kernels in parallel, one thread per
# core (the Hopper file's 18 kernels: 39 s -> 26 s on 2 cores); each kernel's code is what a serial
# build makes up to register names and addresses.
NVCC_FLAGS = (
    "-O3",
    "-std=c++17",
    "-shared",
    "-Xcompiler",
    "-fPIC",
    "-lineinfo",
    "-Xptxas",
    "-v",
    "--use_fast_math",
    "--split-compile=0",
)


@dataclass(frozen=True)
class CheckConfig:
    """Pass rule, as FlashAttention's own tests: max|out-ref| <= factor*max|out_lowp-ref| + atol."""

    factor: float = 2.0
    atol: float = 2e-4
    lse_atol: float = 2e-3
    lse_rtol: float = 1e-4
    # guard zones around the output and LSE buffers: a write that lands there is out of bounds
    red_zone_bytes: int = 1 << 20
    # the input distributions other than the primary one are checked against a reference of sampled
    # query rows (of every batch and head): as many as make this many scores per (batch, head), at
    # least `sampled_rows_min`, all of them where that is the whole (harness/trial.py, check_rows)
    sampled_reference_scores: int = 1 << 22
    sampled_rows_min: int = 256


@dataclass(frozen=True)
class TimingConfig:
    warmup: int = 2
    min_reps: int = 5
    max_reps: int = 50
    budget_s: float = 0.15  # per implementation per scenario, after warm-up
    # a noise target (nvbench's --max-noise): with it, timing goes on past the budget until every
    # implementation's relative spread (IQR / median of its counted calls) is at most this, or it has
    # max_reps; None: the budget alone decides
    max_noise: float | None = None
    input_sets: int = 2  # rotated between repetitions (with one input distribution)
    # with several input distributions (harness/distributions.py) every one is an input set, and the
    # rounds give each of them this many counted calls, at least and at most (harness/timed.py)
    min_reps_per_distribution: int = 5
    max_reps_per_distribution: int = 25
    l2_flush_bytes: int = 256 << 20
    # Each timed call starts after the GPU has spun this long on the stream (EventTimer): the call is
    # enqueued meanwhile, so its host-side overhead stays out of its time (without it, on one H200 host
    # the baselines' Python wrappers read as 18-23% more GPU time on the s512 rows than on another).
    launch_lead_ms: float = 0.5
    # Every call ends with a device-wide synchronize; the time from the end of the work on the
    # harness's stream to the device going idle (beyond the calibrated overhead) is work the kernel
    # left running elsewhere. It counts, and more than max(abs, rel * call time) rejects the kernel.
    late_work_abs_ms: float = 0.05
    late_work_rel: float = 0.25
    # The kernel's inputs get new contents before every call it is timed on (harness/fresh.py). In
    # `repeat_calls` random rounds it is also timed once more on the contents it has just seen; a
    # median repeat / counted time below `repeat_faster` is a result replayed by content (`cached`).
    # An honest kernel does the same work whatever the values: the ratio sits at 1 within noise.
    repeat_calls: int = 3
    repeat_faster: float = 0.8
    # timed calls whose output is kept (a uniform random sample, drawn as the calls come) and checked
    # against the fp32 reference of that call's inputs, on one (batch, head) chosen at random and
    # `checked_rows` of its query rows drawn uniformly (all of them below that): the reference then
    # costs checked_rows / seqlen_q of a whole head's (harness/fresh.py)
    checked_calls: int = 3
    checked_rows: int = 256


@dataclass(frozen=True)
class SweepConfig:
    scenario_timeout_s: float = 180.0  # a scenario that takes longer is a hang
    worker_start_timeout_s: float = 240.0
    max_restarts: int = 400
    # Host memory of a worker (resident set, polled by the parent). Not RLIMIT_AS: the CUDA driver
    # reserves far more virtual address space than it uses, so an address-space limit breaks CUDA.
    memory_limit_gb: float = 48.0
    poll_s: float = 0.5
    # with FA4 among the baselines: processes that compile it before the sweep (baselines/fa4_warm.py),
    # and the time after which they are stopped (the worker then compiles what is missing)
    fa4_warm_jobs: int = 8
    fa4_warm_timeout_s: float = 180.0
    # the sweep's worker starts while the warm-up runs and measures nothing on the GPU until it has
    # ended (harness/gate.py); it waits at most the warm-up's own timeout plus this margin
    fa4_warm_gate_margin_s: float = 60.0
    # with the FA4 warm-up, the sweep's first worker starts before the kernel's build and imports
    # what it needs meanwhile (harness/gate.py, `await_build`); it waits at most this long for the build
    build_gate_timeout_s: float = 1800.0

    @property
    def fa4_warm_gate_timeout_s(self) -> float:
        return self.fa4_warm_timeout_s + self.fa4_warm_gate_margin_s


@dataclass(frozen=True)
class PlausibilityConfig:
    """Timings that are too good to be true (harness/plausibility.py)."""

    # a row whose kernel TFLOP/s is above this multiple of the bf16 GEMM ceiling measured on the GPU
    # is `implausible`, not correct. The kernel's own softmax-free variant (two GEMMs) reached up to
    # 1.046x the measured GEMM on the H200; see plausibility.py for the margin.
    ceiling_factor: float = 1.10
    # a ratio this many times the same scenario's ratio in a previous run (`--previous DIR`)
    jump_factor: float = 1.5
    gemm_size: int = 8192


@dataclass(frozen=True)
class HarnessConfig:
    check: CheckConfig = field(default_factory=CheckConfig)
    timing: TimingConfig = field(default_factory=TimingConfig)
    sweep: SweepConfig = field(default_factory=SweepConfig)
    plausibility: PlausibilityConfig = field(default_factory=PlausibilityConfig)
    # the input distributions every scenario is checked and timed on (harness/distributions.py), the
    # first in full; None: every one there, in its order
    distributions: tuple[str, ...] | None = None


DEFAULT = HarnessConfig()


class SamplingError(ValueError):
    """Sampling options that contradict each other (more samples at least than at most)."""


def with_sampling(
    cfg: HarnessConfig,
    warmup: int | None = None,
    min_samples: int | None = None,
    max_samples: int | None = None,
    min_time_s: float | None = None,
    scenario_timeout_s: float | None = None,
    max_noise: float | None = None,
) -> HarnessConfig:
    """`bench` and `eval`'s sampling options over `cfg` (None: as it is): `warmup` untimed calls per
    implementation (TimingConfig.warmup); at least `min_samples` and at most `max_samples` counted
    calls of each implementation, on each input distribution where there are several
    (min_reps/max_reps and their per-distribution forms); timing goes on after `min_samples` until
    each implementation has been timed for `min_time_s` seconds (budget_s) or has `max_samples`; a
    scenario that takes longer than `scenario_timeout_s` is a hang (SweepConfig.scenario_timeout_s).
    With `max_noise` (a fraction: 0.02 is 2%), timing also goes on until each implementation's
    relative spread (IQR / median) is at most that, or it has `max_samples`. A `min_samples` above
    the default maximum raises the maximum with it."""
    from dataclasses import replace

    t = cfg.timing
    if warmup is not None:
        t = replace(t, warmup=warmup)
    if min_samples is not None:
        t = replace(
            t,
            min_reps=min_samples,
            min_reps_per_distribution=min_samples,
            max_reps=max(t.max_reps, min_samples),
            max_reps_per_distribution=max(t.max_reps_per_distribution, min_samples),
        )
    if max_samples is not None:
        if max_samples < t.min_reps_per_distribution:
            raise SamplingError(
                f"--max-samples {max_samples} is below the minimum, {t.min_reps_per_distribution} counted calls"
                + ("" if min_samples is not None else " (set --min-samples too)")
            )
        t = replace(t, max_reps=max_samples, max_reps_per_distribution=max_samples)
    if min_time_s is not None:
        t = replace(t, budget_s=min_time_s)
    if max_noise is not None:
        t = replace(t, max_noise=max_noise)
    sweep = cfg.sweep if scenario_timeout_s is None else replace(cfg.sweep, scenario_timeout_s=scenario_timeout_s)
    return replace(cfg, timing=t, sweep=sweep)


def sampling_record(cfg: HarnessConfig) -> dict:
    """The sampling a run used, as provenance.json records it (`sampling`)."""
    t = cfg.timing
    return {
        "warmup": t.warmup,
        "min_samples": t.min_reps_per_distribution,
        "max_samples": t.max_reps_per_distribution,
        "min_samples_one_distribution": t.min_reps,
        "max_samples_one_distribution": t.max_reps,
        "min_time_s": t.budget_s,
        "max_noise": t.max_noise,
        "scenario_timeout_s": cfg.sweep.scenario_timeout_s,
    }


# The agent-facing `eval`: a fixed representative subset is timed (correctness runs on all 182).
EVAL_TIMED_SUBSET = (
    "d64-h32kv32-s1024",
    "d64-h32kv8-s4096-causal",
    "d96-h16kv16-s2048",
    "d128-h16kv16-s1024",
    "d128-h16kv16-s8192-causal",
    "d128-h16kv4-s4096",
    "d128-h16kv1-s16384-causal",
    "d256-h8kv8-s2048-causal",
    "d256-h8kv4-s8192",
    "d192v128-h16kv16-s4096",
)

# KernelBench's fast_p in summary.json (results.fast_p): the share of the timed scenarios that are
# correct and more than p times as fast as the baseline, for each of these p (0: correct and timed)
FAST_P_THRESHOLDS = (0.0, 1.0, 1.1, 1.2, 1.5, 2.0)

# `--sanitize`: compute-sanitizer runs the kernel once per scenario of a small subset (the tools
# slow a kernel down 10-1000x, racecheck the most). Small off-grid shapes: tails, causal with
# seqlen_q != seqlen_k both ways, GQA/MQA, every head dimension.
SANITIZE_SUBSET = {
    "memcheck": (
        "ext-d128-h16kv4-b3-q113-k1000-causal",
        "ext-d128-h16kv4-b3-q1000-k113-causal",
        "ext-d64-h32kv1-b3-q17-k17",
        "ext-d256-h8kv4-b3-q113-k113",
        "ext-d192v128-h16kv16-b3-q17-k3001-causal",
        "ext-d96-h16kv16-b3-q113-k113",
    ),
    "initcheck": (
        "ext-d128-h16kv4-b3-q113-k1000-causal",
        "ext-d64-h32kv1-b3-q17-k17",
        "ext-d192v128-h16kv16-b3-q17-k17",
    ),
    "racecheck": ("ext-d128-h16kv4-b3-q17-k17", "ext-d64-h32kv8-b3-q113-k113-causal"),
}
SANITIZER_TIMEOUT_S = 900.0

# a command sent SIGTERM while its main thread is held in a call into C (a GPU kernel that does not
# finish) ends this long after it without its cleanup (cli/termination.py); 143 as for SIGTERM
SIGTERM_GRACE_S = 15.0

# `reproduce`: the kernel each architecture is judged by (the reference kernel stands in while it
# does not exist), the baselines it runs beside (the first is the one the claims are about), the
# container that pins the software, and the GEMM that measures the GPU's ceiling in the same run.
REFERENCE_KERNEL = "kernels/reference/attn_fwd_ref.cu"
REPRODUCE: dict[str, Reproducible] = {
    "sm90": {
        "kernel": "kernels/hopper/flash_fwd_sm90.cu",
        "baselines": ("fa3", "fa4", "cudnn"),
        "container": "containers/sm90",
    },
    "sm100": {
        "kernel": "kernels/blackwell/flash_fwd_sm100.cu",
        "baselines": ("fa4", "cudnn"),
        "container": "containers/sm100",
    },
}
GEMM_CEILING_N = 8192  # bf16 C = A @ B with A, B of n x n, random data
GEMM_CEILING_REPS = 30
VERIFY_TOLERANCE = 0.05  # run-to-run spread on one warm H200 was about 3%
