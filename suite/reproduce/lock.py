"""The pinned Python set of each container: `requirements.in` (torch and the baselines) plus the
suite's own dependencies, resolved into `requirements.lock` (every package of the closure, pinned,
with its sha256) for the image's interpreter: CPython 3.12 on manylinux x86_64.

Both the lock and its check run pip's own resolver with `--dry-run` for that target. PyPI serves
each wheel's metadata on its own (PEP 658), and where an index does not, pip's `fast-deps` reads it
from the wheel with HTTP range requests; either way nothing is downloaded in full, so checking the
torch closure costs seconds and a few MB instead of several GB.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import config

PYTHON_VERSION = "3.12"  # Ubuntu 24.04's python3, in both images
GLIBC_MAX = 39  # Ubuntu 24.04: glibc 2.39
SUITE = "kernelseek-suite"
SUITE_EXTRAS = "gpu,report"


class LockError(RuntimeError):
    pass


def target_args(glibc_max: int = GLIBC_MAX) -> list[str]:
    """pip options for the image's interpreter; manylinux tags are listed one by one because pip
    does not widen an explicit --platform to older glibc versions."""
    plats = ["manylinux2014_x86_64"] + [f"manylinux_2_{v}_x86_64" for v in range(17, glibc_max + 1)]
    args = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for p in plats:
        args += ["--platform", p]
    return args


def paths(arch: str, root: Path = config.REPO_ROOT) -> tuple[Path, Path]:
    folder = Path(root) / config.REPRODUCE[arch]["container"]
    return folder / "requirements.in", folder / "requirements.lock"


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Pin:
    name: str
    version: str
    hashes: tuple[str, ...] = ()


def read_lock(path: Path) -> list[Pin]:
    """The pins of a lock file (`name==version` with `--hash` options, lines joined at `\\`)."""
    text = Path(path).read_text().replace("\\\n", " ")
    pins = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip() if not line.lstrip().startswith("--hash") else line.strip()
        if not line or line.startswith("-"):
            continue
        m = re.match(r"([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;]+)", line)
        if not m:
            raise LockError(f"{path}: not a pinned requirement: {line!r}")
        pins.append(Pin(_canon(m.group(1)), m.group(3), tuple(re.findall(r"--hash=(sha256:[0-9a-f]{64})", line))))
    return pins


def _pip(args: list[str], timeout: float) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "pip", *args]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        raise LockError(f"pip did not finish within {timeout:.0f} s: {' '.join(cmd[:6])} ...") from e


MIN_PIP = (24, 0)  # older pips judge requires-python by the running interpreter under fast-deps


def _check_pip() -> None:
    from importlib.metadata import version

    have = tuple(int(x) for x in re.findall(r"\d+", version("pip"))[:2])
    if have < MIN_PIP:
        raise LockError(
            f"pip {version('pip')} is too old to resolve for another Python: "
            f"{sys.executable} -m pip install 'pip>={MIN_PIP[0]}'"
        )


def dry_run(requirements: list[str], timeout: float = 900, extra: list[str] = ()) -> list[dict]:
    """pip's resolution for the image's target, without installing or downloading wheels in full.
    pip runs `--isolated` (no pip.conf, no PIP_* variables: the index is PyPI, as in the image's
    build). Returns the report's `install` entries."""
    _check_pip()
    with tempfile.TemporaryDirectory(prefix="ks-lock-") as tmp:
        report = Path(tmp) / "report.json"
        args = [
            "--isolated",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--use-feature=fast-deps",
            "--quiet",
            "--target",
            str(Path(tmp) / "target"),
            "--report",
            str(report),
            *target_args(),
            *extra,
            *requirements,
        ]
        p = _pip(args, timeout)
        if p.returncode != 0 or not report.exists():
            errors = [l for l in (p.stderr + p.stdout).splitlines() if "ERROR" in l or "error" in l.lower()]
            raise LockError(
                "the pinned set does not resolve:\n  "
                + "\n  ".join((errors or (p.stderr + p.stdout).strip().splitlines())[-12:])
            )
        return json.loads(report.read_text())["install"]


def _pin_of(entry: dict) -> Pin:
    meta = entry["metadata"]
    h = (entry.get("download_info", {}).get("archive_info", {}).get("hashes") or {}).get("sha256")
    return Pin(_canon(meta["name"]), meta["version"], (f"sha256:{h}",) if h else ())


def render_lock(arch: str, pins: list[Pin]) -> str:
    head = [
        f"# containers/{arch}/requirements.lock: generated by `kernelseek-suite container lock --arch {arch}`",
        f"# from requirements.in beside it and the suite's [{SUITE_EXTRAS}] dependencies; do not edit by hand.",
        f"# Target: CPython {PYTHON_VERSION}, manylinux x86_64 (the image's python3). Install with",
        "#   pip install --require-hashes --only-binary=:all: -r requirements.lock",
        "",
    ]
    body = []
    for p in sorted(pins, key=lambda p: p.name):
        body.append(f"{p.name}=={p.version}" + "".join(f" \\\n    --hash={h}" for h in p.hashes))
    return "\n".join(head + body) + "\n"


def lock(arch: str, root: Path = config.REPO_ROOT, timeout: float = 900) -> Path:
    """Resolve requirements.in + the suite's dependencies and write requirements.lock."""
    req_in, req_lock = paths(arch, root)
    entries = dry_run(["-r", str(req_in), f"{Path(root).resolve()}[{SUITE_EXTRAS}]"], timeout)
    pins = [_pin_of(e) for e in entries if _canon(e["metadata"]["name"]) != SUITE]
    missing = [p.name for p in pins if not p.hashes]
    if missing:
        raise LockError(f"the index gave no sha256 for: {', '.join(missing)}")
    req_lock.write_text(render_lock(arch, pins))
    return req_lock


@dataclass
class LockCheck:
    arch: str
    lock: Path
    ok: bool
    problems: list[str] = field(default_factory=list)
    packages: int = 0
    seconds: float = 0.0


def check(arch: str, root: Path = config.REPO_ROOT, timeout: float = 900) -> LockCheck:
    """The lock resolves as it stands, for the image's target: every pin exists with a wheel for
    CPython 3.12 manylinux x86_64, nothing outside the lock is needed (pip's --require-hashes mode
    refuses any package that is not pinned with a hash), no pin is left unused, and requirements.in's
    pins are in it."""
    req_in, req_lock = paths(arch, root)
    t0 = time.time()
    problems = []
    pins = read_lock(req_lock)
    no_hash = [p.name for p in pins if not p.hashes]
    if no_hash:
        problems.append("pins without a hash: " + ", ".join(no_hash))
    locked = {p.name: p.version for p in pins}
    for want in read_lock(req_in):
        if locked.get(want.name) != want.version:
            problems.append(
                f"requirements.in pins {want.name}=={want.version}, the lock has "
                f"{locked.get(want.name, 'nothing')}: run `kernelseek-suite container lock --arch {arch}`"
            )
    try:
        entries = dry_run(["--require-hashes", "-r", str(req_lock)], timeout)
    except LockError as e:
        return LockCheck(arch, req_lock, False, problems + [str(e)], len(pins), time.time() - t0)
    resolved = {_canon(e["metadata"]["name"]): e["metadata"]["version"] for e in entries}
    unused = sorted(set(locked) - set(resolved))
    if unused:
        problems.append("pinned but not needed by the closure: " + ", ".join(unused))
    for name, ver in resolved.items():
        if locked.get(name) != ver:
            problems.append(f"{name}: resolved {ver}, pinned {locked.get(name)}")
    return LockCheck(arch, req_lock, not problems, problems, len(pins), time.time() - t0)
