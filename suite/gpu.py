"""What GPU is here, read without creating a CUDA context in the calling process (NVML, else
nvidia-smi), so that the harness's own process is never tied to a context a bad kernel can poison."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import asdict, dataclass

from . import config

# the GPU (NVML index) `eval` and agent runs use when none is named; a Dask worker running agent runs
# sets it to its own GPU, so that each run's evaluations stay on that worker's device
GPU_ENV = "KERNELSEEK_GPU"


def default_gpu_index() -> int:
    try:
        return int(os.environ.get(GPU_ENV) or 0)
    except ValueError:
        return 0


class NoGPUError(RuntimeError):
    """No usable GPU for the requested architecture; the message says what is missing."""


@dataclass
class GPUInfo:
    index: int
    name: str
    uuid: str
    compute_capability: tuple[int, int] | None
    driver: str
    sm_clock_mhz: int | None = None
    mem_clock_mhz: int | None = None
    max_sm_clock_mhz: int | None = None
    temperature_c: int | None = None
    power_w: float | None = None
    throttle_reasons: int | None = None
    processes: int | None = None

    def to_dict(self) -> dict:
        d = asdict(self)
        d["compute_capability"] = list(self.compute_capability) if self.compute_capability else None
        return d


def _nvml_gpus() -> list[GPUInfo]:
    import pynvml  # nvidia-ml-py

    pynvml.nvmlInit()
    try:
        driver = pynvml.nvmlSystemGetDriverVersion()
        driver = driver.decode() if isinstance(driver, bytes) else driver
        out = []
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            name = pynvml.nvmlDeviceGetName(h)
            uuid = pynvml.nvmlDeviceGetUUID(h)

            def opt(fn, *a):
                try:
                    return fn(*a)
                except Exception:
                    return None

            cc = opt(pynvml.nvmlDeviceGetCudaComputeCapability, h)
            procs = opt(pynvml.nvmlDeviceGetComputeRunningProcesses, h)
            power = opt(pynvml.nvmlDeviceGetPowerUsage, h)
            out.append(
                GPUInfo(
                    i,
                    name.decode() if isinstance(name, bytes) else name,
                    uuid.decode() if isinstance(uuid, bytes) else uuid,
                    tuple(cc) if cc else None,
                    driver,
                    opt(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_SM),
                    opt(pynvml.nvmlDeviceGetClockInfo, h, pynvml.NVML_CLOCK_MEM),
                    opt(pynvml.nvmlDeviceGetMaxClockInfo, h, pynvml.NVML_CLOCK_SM),
                    opt(pynvml.nvmlDeviceGetTemperature, h, pynvml.NVML_TEMPERATURE_GPU),
                    power / 1000.0 if power is not None else None,
                    opt(pynvml.nvmlDeviceGetCurrentClocksThrottleReasons, h),
                    len(procs) if procs is not None else None,
                )
            )
        return out
    finally:
        pynvml.nvmlShutdown()


def _smi_gpus() -> list[GPUInfo]:
    smi = shutil.which("nvidia-smi")
    if not smi:
        return []
    fields = "index,name,uuid,compute_cap,driver_version,clocks.sm,clocks.mem,clocks.max.sm,temperature.gpu,power.draw"
    p = subprocess.run(
        [smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=30
    )
    if p.returncode != 0:
        return []
    out = []
    for line in p.stdout.strip().splitlines():
        f = [x.strip() for x in line.split(",")]
        if len(f) < 10:
            continue

        def num(x, conv=int):
            try:
                return conv(float(x)) if conv is int else conv(x)
            except ValueError:
                return None

        major, _, minor = f[3].partition(".")
        cc = (int(major), int(minor)) if minor else None
        out.append(
            GPUInfo(int(f[0]), f[1], f[2], cc, f[4], num(f[5]), num(f[6]), num(f[7]), num(f[8]), num(f[9], float))
        )
    return out


def list_gpus() -> list[GPUInfo]:
    try:
        return _nvml_gpus()
    except Exception:
        try:
            return _smi_gpus()
        except Exception:
            return []


def require_gpu(arch: str, index: int = 0, gpus: list[GPUInfo] | None = None) -> GPUInfo:
    """The GPU the run uses, checked against the architecture (exact compute capability: sm120 is
    not sm100). `gpus` replaces this machine's list (the preflight's tests pass their own)."""
    gpus = list_gpus() if gpus is None else gpus
    if not gpus:
        raise NoGPUError(
            "no NVIDIA GPU found (NVML and nvidia-smi see none): `bench` and `eval` need a "
            f"{config.ARCHES[arch]['gpus'] if arch in config.ARCHES else arch} GPU. Without one, `scenarios`, "
            "`build` and rendering saved results still work."
        )
    if index >= len(gpus):
        raise NoGPUError(f"GPU index {index} does not exist ({len(gpus)} visible)")
    g = gpus[index]
    want = config.ARCHES[arch]["cc"]
    if arch != "sm80" and g.compute_capability is not None and tuple(g.compute_capability) != want:
        have = "sm{}{}".format(*g.compute_capability)
        raise NoGPUError(
            f"{arch} needs a GPU of compute capability {want[0]}.{want[1]} "
            f"({config.ARCHES[arch]['gpus']}); GPU {index} is {g.name} ({have})"
        )
    return g
