"""Read a results folder: the bench run (bench.jsonl, summary.json, provenance.json), the GEMM
reference measured in the same run (its file and keys keep the name `ceiling`), and the record
`reproduce` wrote (runtime, kernels, wall time).

Layout of `results/<arch>/`:
  reproduce.json        what ran: arch, runtime, kernel, missing kernels, image, wall time, status
  gemm_ceiling.json     the bf16 GEMM reference measured before and after the sweep (a reference, not a bound)
  <kernel stem>/        the bench run (bench.jsonl is the raw data; the rest is rendered from it)
  REPORT.md, tables/, plots/   rendered by `kernelseek-suite render`
A plain bench folder (bench.jsonl beside provenance.json) is read too.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from .. import config
from ..results import ScenarioResult, read_jsonl

RECORD = "reproduce.json"
CEILING = "gemm_ceiling.json"

# what the data in a folder is: measured by the run that wrote it, or shipped and only re-rendered
MEASURED = "measured"
SHIPPED = "shipped, not re-measured"


class NoResults(FileNotFoundError):
    """The folder holds no bench data."""


@dataclass
class ArchResults:
    root: Path
    run_dir: Path
    arch: str
    rows: list[ScenarioResult]
    summary: dict
    provenance: dict
    record: dict = field(default_factory=dict)
    ceiling: dict | None = None

    @property
    def grid_rows(self) -> list[ScenarioResult]:
        return [r for r in self.rows if not r.extended]

    @property
    def extended_rows(self) -> list[ScenarioResult]:
        return [r for r in self.rows if r.extended]

    @property
    def baselines(self) -> list[str]:
        listed = list(self.provenance.get("baselines") or [])
        seen = {b for r in self.rows for b in list(r.ratio) + list(r.baselines)}
        return listed + sorted(seen - set(listed))

    @property
    def main_baseline(self) -> str:
        """The baseline the claims are about (FA3 on sm90, FA4 on sm100), if it is in the data."""
        want = config.REPRODUCE[self.arch]["baselines"][0] if self.arch in config.REPRODUCE else "fa3"
        return want if want in self.baselines or not self.baselines else self.baselines[0]

    @property
    def ceiling_tflops(self) -> float | None:
        return (self.ceiling or {}).get("tflops")

    @property
    def kernel_path(self) -> str:
        """The kernel's path, relative to the repository (the measuring machine's checkout left out)."""
        path = (
            self.record.get("kernel") or (self.summary.get("kernel") or {}).get("path") or self.provenance.get("kernel")
        )
        return repo_relative(path or "")

    @property
    def kernel_file(self) -> str:
        """The kernel by its file name ("kernel" when the data does not say)."""
        return PurePosixPath(self.kernel_path).name or "kernel"


# the repository's top-level folders a measured file can sit in
REPO_FOLDERS = ("kernels", "tests", "results", "bank", "scratch")


def repo_relative(path: str) -> str:
    """A path recorded on the measuring machine, made relative to its checkout: as is when relative;
    relative to this checkout when under it; from the first of the repository's own folders in it
    (kernels/, tests/, ...) otherwise; else the file name alone."""
    if not path or not PurePosixPath(path).is_absolute():
        return path
    try:
        return Path(path).relative_to(config.REPO_ROOT).as_posix()
    except ValueError:
        pass
    parts = PurePosixPath(path).parts
    for i, part in enumerate(parts):
        if part in REPO_FOLDERS:
            return PurePosixPath(*parts[i:]).as_posix()
    return PurePosixPath(path).name


def version_of_cudnn(v) -> str | None:
    """cuDNN's version as people write it: torch reports an integer, 91900 for 9.19.0 (cuDNN 9:
    major * 10000 + minor * 100 + patch) or 8906 for 8.9.6 (cuDNN 8 and older: * 1000, * 100)."""
    if v is None or isinstance(v, bool):
        return None
    try:
        n = int(v)
    except (TypeError, ValueError):
        return str(v)
    if n >= 10000:
        return f"{n // 10000}.{n % 10000 // 100}.{n % 100}"
    return f"{n // 1000}.{n % 1000 // 100}.{n % 100}"


def find_run_dir(root: Path) -> Path:
    root = Path(root)
    if (root / "bench.jsonl").exists():
        return root
    rec = _read_json(root / RECORD)
    if rec.get("run") and (root / rec["run"] / "bench.jsonl").exists():
        return root / rec["run"]
    runs = sorted(p.parent for p in root.glob("*/bench.jsonl"))
    if len(runs) == 1:
        return runs[0]
    if not runs:
        raise NoResults(f"no bench data in {root} (no bench.jsonl there or one level below)")
    raise NoResults(
        f"{root} holds several runs ({', '.join(p.name for p in runs)}) and no {RECORD} "
        "that names one; pass the run folder itself"
    )


def load(root: Path) -> ArchResults:
    root = Path(root)
    run = find_run_dir(root)
    rows = read_jsonl(run / "bench.jsonl")
    if not rows:
        raise NoResults(f"{run / 'bench.jsonl'} has no rows")
    prov = _read_json(run / "provenance.json")
    summary = _read_json(run / "summary.json")
    record = _read_json(root / RECORD) if run != root else _read_json(run / RECORD)
    ceiling = _read_json(root / CEILING) or _read_json(run / CEILING) or None
    arch = record.get("arch") or prov.get("arch") or summary.get("arch") or "sm90"
    return ArchResults(root, run, arch, rows, summary, prov, record, ceiling)


def _read_json(path: Path) -> dict:
    try:
        return json.loads(Path(path).read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return {}
