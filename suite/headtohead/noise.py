"""The noise of a task's measurements on this machine: the A/A control.

The same kernel measured again does not give the same speed-up: timing varies from one measurement to
the next (the cpu-attn starting kernel at the agents' budget spread 0.89-1.12x). An A/A control
measures that spread: the same kernel benched repeatedly, which any difference between two kernels
(or two arms) must exceed before it means anything. Its sources here, each a set of measurements of
one file (sha256):

- `evaluation`: the task's starting kernel evaluated N times exactly as a run evaluates a candidate
  (the compare's A/A control, `control.aa_repeats`), and every candidate that a run evaluated more
  than once unchanged (byte-identical re-evaluations in the traces, of any run of the task);
- `full_grid`: each run's best kernel benched k times in the final bench (`control.rebench`).

The **band** of a kind of measurement is the largest ratio between two measurements of one kernel,
less 1: the largest apparent gain an unchanged kernel showed. Gain attribution credits only gains
above the evaluation band of the task (analysis.py); the bootstrap of the difference between arms
draws each run's value from these measurements (stats.py). `noise.json` in the comparison's folder
keeps the sets and the bands."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..contracts.traces import read_trace
from ..provenance import now_utc

NOISE_FILE = "noise.json"
KINDS = ("evaluation", "full_grid")


@dataclass
class Repeats:
    """Measurements of one kernel, all made the same way."""

    task: str
    kind: str  # evaluation | full_grid
    what: str
    candidate_sha256: str | None
    values: list[float] = field(default_factory=list)
    status: str = "ok"  # ok, or why there are no values (no_gpu, wrong, ...)
    note: str = ""
    source: str = "aa"  # aa: the A/A control's own benches; trace: re-evaluations in runs; rebench: final bench

    def to_dict(self) -> dict:
        return asdict(self)


def band(sets: list[list[float]]) -> float | None:
    """The largest ratio between two measurements of one kernel, less 1 (None: no set of two)."""
    ratios = [
        max(vals) / min(vals)
        for vals in ([float(x) for x in v if x is not None and x > 0] for v in sets)
        if len(vals) >= 2
    ]
    return max(ratios) - 1.0 if ratios else None


@dataclass
class NoiseBand:
    task: str
    kind: str
    band: float | None
    sets: int  # kernels measured more than once
    measurements: int
    sources: list[str]

    def text(self) -> str:
        if self.band is None:
            return f"{self.task} ({self.kind}): not measured"
        return (
            f"{self.task} ({self.kind}): +{self.band * 100:.1f} % (the largest ratio between two measurements of "
            f"one kernel; {self.sets} kernel(s), {self.measurements} measurements)"
        )


def bands(repeats: list[Repeats]) -> dict[tuple[str, str], NoiseBand]:
    """(task, kind) -> its band, from every set of two measurements or more."""
    out: dict[tuple[str, str], NoiseBand] = {}
    for task, kind in sorted({(r.task, r.kind) for r in repeats}):
        sets = [r for r in repeats if (r.task, r.kind) == (task, kind) and len(r.values) >= 2]
        out[(task, kind)] = NoiseBand(
            task,
            kind,
            band([r.values for r in sets]),
            len(sets),
            sum(len(r.values) for r in sets),
            sorted({r.what for r in sets}),
        )
    return out


def trace_repeats(paths: list[Path]) -> list[Repeats]:
    """Candidates evaluated more than once unchanged (the same sha256, correct each time), pooled over
    the runs of each task: A/A measurements the runs made themselves."""
    found: dict[tuple[str, str], list[float]] = {}
    runs: dict[tuple[str, str], set[str]] = {}
    for path in paths:
        events = read_trace(path).events
        if not events or events[0].get("type") != "run_start":
            continue
        task = (events[0].get("task") or {}).get("name", "")
        for ev in events:
            if ev.get("type") == "harness_eval" and ev.get("correct") and ev.get("geomean") is not None:
                key = (task, ev["candidate_sha256"])
                found.setdefault(key, []).append(float(ev["geomean"]))
                runs.setdefault(key, set()).add(events[0].get("run_id", str(path)))
    return [
        Repeats(
            task,
            "evaluation",
            f"a candidate evaluated {len(vals)} times unchanged in {len(runs[(task, sha)])} run(s)",
            sha,
            vals,
            source="trace",
        )
        for (task, sha), vals in sorted(found.items())
        if len(vals) >= 2
    ]


def write_noise(path: Path, repeats: list[Repeats], machine: dict | None = None) -> None:
    data = {
        "measured_at": now_utc(),
        "host": machine or {},
        "repeats": [r.to_dict() for r in repeats],
        "bands": [asdict(b) for b in bands(repeats).values()],
    }
    Path(path).write_text(json.dumps(data, indent=1))


def read_noise(path: Path) -> list[Repeats]:
    """The sets of `noise.json` (none when there is no file)."""
    path = Path(path)
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    return [Repeats(**r) for r in data.get("repeats", [])]


def find_noise(paths: list[Path]) -> Path | None:
    """A comparison's noise.json for these traces or folders: in a given folder or the one above it
    (`<out>/traces/` sits beside `<out>/noise.json`)."""
    for p in paths:
        p = Path(p)
        folder = p if p.is_dir() else p.parent
        for cand in (folder / NOISE_FILE, folder.parent / NOISE_FILE):
            if cand.is_file():
                return cand
    return None
