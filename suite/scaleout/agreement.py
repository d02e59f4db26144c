"""Do ratios measured on several GPUs agree? Two runs of the same kernel and scenarios (say one on a
single GPU, one sharded over many) are set side by side: for each scenario measured in both, the
quotient of the ratios (run / reference), grouped by the GPU the run measured it on."""

from __future__ import annotations

import datetime as _dt
import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..results import geomean, read_jsonl


@dataclass
class GPUAgreement:
    gpu: str  # UUID, or index when no UUID was recorded
    host: str | None
    scenarios: int
    geomean_quotient: float | None
    min_quotient: float | None
    max_quotient: float | None
    max_abs_dev: float | None  # max |quotient - 1|


@dataclass
class Agreement:
    baseline: str
    scenarios: int
    geomean_quotient: float | None
    max_abs_dev: float | None
    gpu_spread: float | None  # max/min of the per-GPU geomeans, minus 1
    per_gpu: list[GPUAgreement] = field(default_factory=list)
    wall_s: dict = field(default_factory=dict)  # {"reference": s, "run": s} from provenance dates

    def to_dict(self) -> dict:
        return asdict(self)


def _wall(folder: Path) -> float | None:
    p = folder / "provenance.json"
    if not p.exists():
        return None
    prov = json.loads(p.read_text())
    if prov.get("resumed") or not prov.get("date") or not prov.get("date_end"):
        return None  # a resumed run's span is not its wall time
    t0, t1 = (_dt.datetime.fromisoformat(prov[k]) for k in ("date", "date_end"))
    return (t1 - t0).total_seconds()


def ratio_agreement(reference: Path, run: Path, baseline: str | None = None) -> Agreement:
    reference, run = Path(reference), Path(run)
    ref_rows = {r.scenario: r for r in read_jsonl(reference / "bench.jsonl") if r.correct and r.ratio}
    run_rows = [r for r in read_jsonl(run / "bench.jsonl") if r.correct and r.ratio]
    if not ref_rows or not run_rows:
        raise FileNotFoundError(f"no correct rows with ratios in {reference if not ref_rows else run}/bench.jsonl")
    if baseline is None:
        baseline = next(iter(next(iter(ref_rows.values())).ratio))
    groups: dict[str, list[float]] = {}
    hosts: dict[str, str | None] = {}
    for r in run_rows:
        ref = ref_rows.get(r.scenario)
        if ref is None or not ref.ratio.get(baseline) or not r.ratio.get(baseline):
            continue
        gpu = r.gpu or {}
        key = str(gpu.get("uuid") or gpu.get("index") if gpu else "unrecorded")
        groups.setdefault(key, []).append(r.ratio[baseline] / ref.ratio[baseline])
        hosts[key] = gpu.get("host")
    if not groups:
        raise ValueError(f"the two runs have no scenario measured against {baseline} in both")

    def dev(qs):
        return max(abs(q - 1) for q in qs)

    per_gpu = [
        GPUAgreement(k, hosts[k], len(q), _r(geomean(q)), _r(min(q)), _r(max(q)), _r(dev(q)))
        for k, q in sorted(groups.items())
    ]
    allq = [q for qs in groups.values() for q in qs]
    gms = [g.geomean_quotient for g in per_gpu if g.geomean_quotient]
    spread = _r(max(gms) / min(gms) - 1) if len(gms) > 1 else None
    return Agreement(
        baseline,
        len(allq),
        _r(geomean(allq)),
        _r(dev(allq)),
        spread,
        per_gpu,
        {"reference": _wall(reference), "run": _wall(run)},
    )


def _r(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 4)
