"""`--sanitize`: run the kernel under compute-sanitizer (memcheck, racecheck, initcheck) on a small
subset of scenarios (config.SANITIZE_SUBSET).

The process under the sanitizer (sanitize_worker.py) launches nothing on the GPU but the kernel:
inputs are made on the host and copied over, and torch's caching allocator is off, so every tensor is
its own allocation and an access past its end is seen by memcheck (inside the caching allocator's
pools it would land in another tensor, unseen; the sweep's guard zones catch those). The verdict is
read from the sanitizer's own log file and exit code, never from the kernel's output.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..contracts import exitcodes

ERROR_EXITCODE = exitcodes.SANITIZER_FOUND_ERRORS
TOOLS = ("memcheck", "racecheck", "initcheck")

_SUMMARY_RE = re.compile(r"ERROR SUMMARY:\s*(\d+)\s+errors?")
_RACE_RE = re.compile(r"RACECHECK SUMMARY:\s*(\d+)\s+hazards? displayed\s*\((\d+)\s+errors?,\s*(\d+)\s+warnings?\)")
_FINDING_RE = re.compile(
    r"Invalid|Uninitialized|[Rr]ace|[Hh]azard|out of bounds|Misaligned|Error:|error:|"
    r"Program hit|Unspecified launch failure"
)


@dataclass
class SanitizerRun:
    tool: str
    scenarios: list[str]
    ok: bool
    errors: int | None
    summary: str
    findings: list[str] = field(default_factory=list)
    returncode: int | None = None
    wall_s: float = 0.0

    def to_dict(self) -> dict:
        return asdict(self)


def sanitizer_path() -> str | None:
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    from ..build import nvcc_path

    nvcc = nvcc_path()
    candidates = [Path(os.path.realpath(nvcc)).parent / "compute-sanitizer"] if nvcc else []
    candidates.append(Path("/usr/local/cuda/bin/compute-sanitizer"))
    for c in candidates:
        if c.exists():
            return str(c)
    return None


def parse_report(text: str) -> tuple[int | None, str, list[str]]:
    """(errors, the summary line, the first findings) from a compute-sanitizer log."""
    errors, summary = None, ""
    for line in text.splitlines():
        m = _RACE_RE.search(line)
        if m:
            errors, summary = int(m.group(2)), line.strip("= \t")
            continue
        m = _SUMMARY_RE.search(line)
        if m:
            errors, summary = int(m.group(1)), line.strip("= \t")
    findings = [l.strip("= \t") for l in text.splitlines() if _FINDING_RE.search(l) and "SUMMARY" not in l]
    return errors, summary, findings[:8]


def verdict(tool: str, scenarios: list[str], returncode: int | None, log_text: str, wall_s: float) -> SanitizerRun:
    errors, summary, findings = parse_report(log_text)
    if returncode is None:
        return SanitizerRun(tool, scenarios, False, errors, summary or "timed out", findings, None, wall_s)
    ok = returncode == 0 and errors in (0, None) and bool(summary)
    if not summary:
        summary = f"no sanitizer summary (exit code {returncode})"
    elif returncode not in (0, ERROR_EXITCODE):
        summary += f"; the run itself failed (exit code {returncode})"
        ok = False
    return SanitizerRun(tool, scenarios, ok, errors, summary, findings, returncode, wall_s)


def run_sanitizer(
    library: str,
    scenario_ids: dict[str, tuple[str, ...]],
    seed: int,
    gpu_uuid: str | None = None,
    timeout_s: float = 900.0,
    log_dir: Path | None = None,
) -> list[SanitizerRun]:
    """One compute-sanitizer run per tool, each over its scenarios."""
    from .. import scenarios as sc

    tool_path = sanitizer_path()
    runs = []
    catalog = sc.by_id()
    log_dir = Path(log_dir or tempfile.mkdtemp(prefix="ks-sanitize-"))
    log_dir.mkdir(parents=True, exist_ok=True)
    for tool, ids in scenario_ids.items():
        ids = list(ids)
        if tool_path is None:
            runs.append(
                SanitizerRun(
                    tool,
                    ids,
                    False,
                    None,
                    "compute-sanitizer not found (it ships with the CUDA toolkit; put it on the PATH)",
                )
            )
            continue
        job = {"library": library, "seed": seed, "scenarios": [catalog[i].to_dict() for i in ids]}
        job_path = log_dir / f"{tool}.job.json"
        job_path.write_text(json.dumps(job))
        log_path = log_dir / f"{tool}.log"
        env = dict(os.environ)
        env["PYTORCH_NO_CUDA_MEMORY_CACHING"] = "1"
        env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        if gpu_uuid:
            env["CUDA_VISIBLE_DEVICES"] = gpu_uuid
        cmd = [
            tool_path,
            "--tool",
            tool,
            "--error-exitcode",
            str(ERROR_EXITCODE),
            "--print-limit",
            "20",
            "--log-file",
            str(log_path),
            sys.executable,
            "-m",
            "kernelseek_suite.harness.sanitize_worker",
            str(job_path),
        ]
        t0 = time.time()
        with open(log_dir / f"{tool}.out", "w") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
            try:
                rc = proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait()
                rc = None
        text = log_path.read_text(errors="replace") if log_path.exists() else ""
        runs.append(verdict(tool, ids, rc, text, round(time.time() - t0, 1)))
    return runs


def summary_entry(runs: list[SanitizerRun]) -> dict:
    return {"ok": all(r.ok for r in runs), "runs": [r.to_dict() for r in runs]}
