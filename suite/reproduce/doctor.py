"""`doctor`: the preflight before a reproduction. Each problem has its own exit code and a fix.

  code  check            problem
  0     -                nothing in the way
  3     gpu              no NVIDIA GPU, or not the architecture's exact compute capability
                         (sm100 is 10.0: an sm120 RTX Blackwell is not an sm100 B200)
  10    docker-sdk       the Docker SDK for Python is not installed            (docker runtime)
  11    docker-engine    the Docker engine does not answer                     (docker runtime)
  12    nvidia-runtime   Docker cannot give containers a GPU                   (docker runtime)
  13    driver           the driver is older than the CUDA the run needs
  14    gpu-busy         other processes are on the GPU
  15    throttle         the GPU is slowed down (thermal, power brake, hardware slowdown)
  16    nvcc             nvcc is missing or too old for the architecture       (native runtime)
  17    baselines        the architecture's main baseline cannot be imported   (native runtime)
  18    nvml             nvidia-ml-py is missing, so clocks and processes cannot be read
The exit code is the first problem's, in this order; every problem is listed with its fix. With
`--runtime auto`, Docker problems are notes (the run would go native) and native checks run too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from .. import config
from ..contracts.exitcodes import DOCTOR as CODES

# The oldest Linux driver each CUDA release needs (CUDA's release notes, table 3); within a major
# release a newer toolkit runs on the major's first driver (minor version compatibility).
MIN_DRIVER = {12: "525.60.13", 13: "580.65.06"}
# The oldest nvcc that builds each architecture's `a` target
MIN_NVCC = {"sm90": (12, 0), "sm100": (12, 8)}

# NVML clock event ("throttle") reasons that mean the GPU runs slower than it should
SLOWDOWN_BITS = {
    0x8: "hardware slowdown",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake",
}


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    fix: str = ""
    note_only: bool = False  # a problem that does not stop this runtime (reported, no exit code)
    skipped: bool = False  # not checked (the detail says why): neither ok nor a problem

    @property
    def code(self) -> int:
        return 0 if self.ok or self.note_only or self.skipped else CODES[self.check]

    @property
    def state(self) -> str:
        """What the table shows: ok, skipped, note, or FAIL with the code."""
        if self.skipped:
            return "skipped"
        return "ok" if self.ok else ("note" if self.note_only else f"FAIL {self.code}")

    def to_dict(self) -> dict:
        return {**asdict(self), "code": self.code, "state": self.state}


def skipped(check: str, why: str) -> Finding:
    return Finding(check, False, f"not checked: {why}", skipped=True)


@dataclass
class Report:
    arch: str
    runtime: str
    findings: list[Finding]

    @property
    def exit_code(self) -> int:
        codes = [f.code for f in self.findings if f.code]
        return min(codes, key=list(CODES.values()).index) if codes else 0

    def to_dict(self) -> dict:
        return {
            "arch": self.arch,
            "runtime": self.runtime,
            "exit_code": self.exit_code,
            "findings": [f.to_dict() for f in self.findings],
        }


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v)[:3])


def image_cuda(arch: str, root: Path = config.REPO_ROOT) -> str | None:
    """The CUDA version of the architecture's image, from its FROM tag (e.g. 13.0.1)."""
    from .containers import base_images, dockerfile

    try:
        bases = base_images(dockerfile(arch, root))
    except ImportError:  # dockerfile-parse comes with the [docker] extra
        return None
    for b in bases:
        m = b.image and re.match(r"(\d+\.\d+(\.\d+)?)", b.image.tag)
        if m:
            return m.group(1)
    return None


def check_gpu(arch: str, gpus: list, index: int = 0) -> Finding:
    from ..gpu import NoGPUError, require_gpu

    want = config.ARCHES[arch]
    try:
        g = require_gpu(arch, index, gpus)
    except NoGPUError as e:
        return Finding(
            "gpu",
            False,
            str(e),
            f"run on a {want['gpus']} GPU (compute capability "
            f"{want['cc'][0]}.{want['cc'][1]} exactly); without one, `make reproduce` still runs the "
            "static checks and renders the shipped results",
        )
    return Finding(
        "gpu",
        True,
        f"GPU {index}: {g.name}, compute capability "
        f"{'.'.join(map(str, g.compute_capability or ()))}, driver {g.driver}",
    )


def check_driver(driver: str | None, cuda: str | None, what: str) -> Finding:
    if not driver or not cuda:
        return skipped("driver", f"driver {driver or 'unknown'}, CUDA of {what} {cuda or 'unknown'}")
    need = MIN_DRIVER.get(_version_tuple(cuda)[0])
    if need and _version_tuple(driver) < _version_tuple(need):
        return Finding(
            "driver",
            False,
            f"driver {driver} is older than CUDA {cuda} ({what}) needs ({need})",
            f"install NVIDIA driver {need} or newer (`sudo apt install nvidia-driver-{need.split('.')[0]}` "
            "or your distribution's package), then reboot",
        )
    return Finding("driver", True, f"driver {driver} runs CUDA {cuda} ({what})")


def check_gpu_state(g) -> list[Finding]:
    out = []
    if g.processes is None and g.throttle_reasons is None:
        return [
            Finding(
                "nvml",
                False,
                "clocks, throttling and processes could not be read",
                "pip install nvidia-ml-py (the suite reads GPU state through NVML)",
            )
        ]
    if g.processes:
        out.append(
            Finding(
                "gpu-busy",
                False,
                f"{g.processes} other process(es) run on GPU {g.index}",
                "wait for them or stop them (`nvidia-smi` lists them); timings on a shared GPU are not comparable",
            )
        )
    else:
        out.append(Finding("gpu-busy", True, f"no other process on GPU {g.index}"))
    bits = [name for bit, name in SLOWDOWN_BITS.items() if (g.throttle_reasons or 0) & bit]
    clocks = f"SM clock {g.sm_clock_mhz}/{g.max_sm_clock_mhz} MHz, {g.temperature_c} C, {g.power_w} W"
    if bits:
        out.append(
            Finding(
                "throttle",
                False,
                f"GPU {g.index} is slowed down: {', '.join(bits)} ({clocks})",
                "let it cool down, check its airflow and power cables, and rerun `doctor`; never lock "
                "or change clocks for a measurement",
            )
        )
    else:
        out.append(Finding("throttle", True, clocks))
    return out


def check_nvcc(arch: str, version: str | None) -> Finding:
    need = MIN_NVCC.get(arch, (12, 0))
    if not version:
        return Finding(
            "nvcc",
            False,
            "nvcc not found",
            f"install the CUDA toolkit {need[0]}.{need[1]} or newer and put nvcc on the PATH (or use --runtime docker)",
        )
    if _version_tuple(version)[:2] < need:
        return Finding(
            "nvcc",
            False,
            f"nvcc {version} cannot build {arch}a",
            f"install the CUDA toolkit {need[0]}.{need[1]} or newer",
        )
    return Finding("nvcc", True, f"nvcc {version}")


def probe_baselines(names: list[str]) -> dict[str, str]:
    """Whether each baseline imports, asked of a child process so this one never loads CUDA."""
    code = (
        "import json,sys; from kernelseek_suite import baselines as bl; "
        "print(json.dumps({b: bl.get(b).available()[1] for b in sys.argv[1:]}))"
    )
    p = subprocess.run([sys.executable, "-c", code, *names], capture_output=True, text=True, timeout=300)
    try:
        return json.loads(p.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        return {n: f"the probe failed: {(p.stderr or '').strip()[-200:]}" for n in names}


def check_baselines(arch: str, status: dict[str, str]) -> list[Finding]:
    main, *others = config.REPRODUCE[arch]["baselines"]
    out = []
    for name in [main, *others]:
        s = status.get(name, "not checked")
        ok = s == "ok"
        out.append(
            Finding(
                "baselines",
                ok,
                f"{name}: {s}",
                "" if ok else f"{s.split(': ')[-1]}; on a node with no internet: make reproduce WHEELHOUSE=DIR",
                note_only=name != main,
            )
        )
    return out


def diagnose(
    arch: str,
    runtime: str = "auto",
    gpu_index: int = 0,
    root: Path = config.REPO_ROOT,
    gpus: list | None = None,
    make_client: Callable | None = None,
    nvcc_version: Callable[[], str | None] | None = None,
    baseline_status: Callable[[list[str]], dict] | None = None,
) -> Report:
    """Run every check that matters for `runtime`; the keyword arguments replace the machine's own
    readers (NVML, the Docker engine, nvcc, the baseline probe), which is how the tests drive it."""
    from ..gpu import list_gpus

    gpus = list_gpus() if gpus is None else gpus
    findings = [check_gpu(arch, gpus, gpu_index)]
    g = gpus[gpu_index] if gpu_index < len(gpus) else None

    docker_ok = False
    if runtime in ("auto", "docker"):
        note = runtime == "auto"
        docker_ok = _docker_findings(findings, make_client, note)
        if docker_ok or runtime == "docker":
            findings.append(check_driver(g.driver if g else None, image_cuda(arch, root), f"the {arch} image"))
    else:
        findings.append(skipped("docker-engine", "--runtime native"))
    if runtime == "native" or (runtime == "auto" and not docker_ok):
        version = (nvcc_version or _nvcc_version)()
        findings.append(check_nvcc(arch, version))
        findings.append(check_driver(g.driver if g else None, version, "nvcc"))
        if g is not None:
            names = list(config.REPRODUCE[arch]["baselines"])
            findings += check_baselines(arch, (baseline_status or probe_baselines)(names))
        else:
            findings.append(skipped("baselines", f"no GPU {gpu_index} to import them for"))
    else:
        findings.append(skipped("nvcc", "the run builds in the container"))
    if g is not None:
        findings += check_gpu_state(g)
    else:
        findings += [skipped(c, f"no GPU {gpu_index} to read") for c in ("gpu-busy", "throttle")]
    return Report(arch, runtime, findings)


def _docker_findings(findings: list[Finding], make_client: Callable | None, note: bool) -> bool:
    from .containers import NO_ENGINE_FIX, NO_GPU_RUNTIME_FIX, ContainerError, client, explain, nvidia_runtime

    try:
        import docker  # noqa: F401
    except ImportError:
        findings.append(
            Finding(
                "docker-sdk",
                False,
                "the Docker SDK for Python is not installed",
                "pip install 'kernelseek-suite[docker]'",
                note_only=note,
            )
        )
        return False
    try:
        cli = (make_client or client)()
        cli.ping()
        info = cli.info()
    except ContainerError as e:
        findings.append(Finding("docker-engine", False, str(e).split(": start")[0], NO_ENGINE_FIX, note_only=note))
        return False
    except Exception as e:
        findings.append(Finding("docker-engine", False, explain(e).split(": start")[0], NO_ENGINE_FIX, note_only=note))
        return False
    findings.append(Finding("docker-engine", True, f"Docker {info.get('ServerVersion', '?')}"))
    if not nvidia_runtime(info):
        findings.append(
            Finding(
                "nvidia-runtime",
                False,
                "the engine has no NVIDIA runtime (`--gpus` would fail with 'could not select device driver')",
                NO_GPU_RUNTIME_FIX,
                note_only=note,
            )
        )
        return False
    findings.append(Finding("nvidia-runtime", True, "NVIDIA runtime registered"))
    return True


def _nvcc_version() -> str | None:
    from ..build import BuildError, nvcc_version

    try:
        return nvcc_version()
    except BuildError:
        return None
