"""Typed results: one row per scenario (JSONL, appended as it comes), and summary.json.

summary.json is a contract that tools read. Schema version 3, fields:
  schema_version      3
  kind                "bench" | "eval"
  arch                "sm90" | "sm100" | ...
  scenarios_total     timed grid scenarios in this run (182 for a full sweep)
  scenarios_correct   of those, how many passed the check (and the re-check after timing)
  extended_total      extended-set cases run (0 when not run)
  extended_correct    of those, how many passed
  geomean             {baseline: the headline: the geometric mean of baseline_time / kernel_time over
                       the scenarios where both were measured, on the input distribution where it
                       is lowest (`worst_distribution`)}; > 1 means the kernel is faster
  min_ratio           {baseline: the smallest ratio of any scenario on any distribution}
  min_ratio_scenario  {baseline: the scenario id of that smallest ratio}
  ratio_count         {baseline: how many scenarios entered the geomean}
  distributions       [the input distributions every scenario was checked and timed on, in order]
                       (harness/distributions.py); [] for a run that timed one (version 2 rows)
  worst_distribution  {baseline: the distribution whose geomean is the headline}
  by_distribution     {distribution: {"geomean": {baseline: x}, "min_ratio": {baseline: y},
                       "min_ratio_scenario": {baseline: id}, "ratio_count": {baseline: n}}}
  data_dependent      {"threshold": t, "scenarios": {id: {"kernel": s, "baselines": s_b}}}: the
                       rows where the kernel's time moves across distributions by more than any
                       baseline's does anywhere in the run: a row's spread is its slowest
                       distribution's median over its fastest; `threshold` is the largest spread
                       of any baseline on any correct row (the baselines' own noise and data
                       dependence), and a row is listed when the kernel's spread exceeds it
  kernel              {"path": ..., "sha256": ...}
  provenance          {"gpu_name", "git_sha", "date", ... see provenance.py}
  failures            {reason code: number of rows with it}, e.g. {"unwritten": 3}; see CODES
  flagged             {scenario: [alarm codes]}: plausibility alarms ("jump"); an alarm does not
                      make a row incorrect, it asks for a human look
  ceiling             {"gemm_tflops": the bf16 GEMM measured on the GPU, "factor": the margin,
                       "implausible_above_tflops": their product}: a row above it has the status
                      `implausible` (not correct); null when no GEMM was measured
  sanitize            present with `--sanitize`: {"ok": bool, "runs": [...]} (harness/sanitize.py)
  fast_p              {baseline: {p: share}}: KernelBench's fast_p, the share of the timed grid
                       scenarios (every one of a bench, config.EVAL_TIMED_SUBSET of an eval) that are
                       correct and more than p times as fast as the baseline (its `ratio`, the lowest
                       over the distributions, > p), for each p of config.FAST_P_THRESHOLDS, written
                       as "0", "1", "1.1", ...; a scenario that is not correct or has no ratio counts
                       as not fast; null for a baseline measured on no scenario. Added in version 3
                       (a summary written before has none)
  fast_p_total        how many timed scenarios the shares of `fast_p` are of
Readers must ignore keys they do not know.
Version 3 (was 2): every scenario checked and timed on several input distributions; `geomean` is the
worst distribution's (was: one distribution's); `distributions`, `worst_distribution`,
`by_distribution` and `data_dependent` added. A row's `ratio` is its lowest over the distributions,
`ratio_by_distribution` has each; `times_ms` and `tflops` pool every distribution's calls.
Version 2 (was 1): `ceiling` added; a row faster than the ceiling is `implausible` (counted in
`failures`, left out of the geomeans) where version 1 kept it correct with a "roofline" flag.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .scenarios import Scenario

SUMMARY_SCHEMA_VERSION = 3

# statuses of a row; only "ok" is correct
STATUS_OK = "ok"
STATUS_WRONG = "wrong"
STATUS_UNSUPPORTED = "unsupported"
STATUS_ERROR = "error"  # the kernel returned an error code, or a CUDA error was raised
STATUS_CRASH = "crash"  # the worker process died
STATUS_TIMEOUT = "timeout"  # the worker did not answer in time (a hang)
STATUS_REJECTED = "rejected"  # caught breaking the contract (inputs modified, out-of-bounds
# writes, work left running after the call, a cached result, ...)
STATUS_IMPLAUSIBLE = "implausible"  # faster than the GEMM ceiling measured on the GPU allows

# Reason codes: one short, stable word per row that is not ok (the `reason` says it in full).
CODES = {
    "unsupported": "the kernel returned KS_ERR_UNSUPPORTED",
    "kernel-error": "the kernel returned an error code",
    "unwritten": "output elements still hold the poison written before the launch",
    "nonfinite": "NaN or Inf in the output",
    "mismatch": "the output is farther from the reference than the tolerance",
    "lse": "the log-sum-exp is wrong",
    "repeat-differs": "two runs on the same inputs disagree",
    "cached": "new inputs in the same buffers gave the previous call's output",
    "inputs-modified": "the kernel changed its inputs",
    "out-of-bounds": "writes landed in the guard zones around the output",
    "late-work": "work was still running after the harness's stream was done",
    "timed-output": "an output written during timing was unwritten, non-finite or wrong",
    "implausible": "faster than the bf16 GEMM ceiling measured on the GPU (x the margin) allows",
    "device-state": "the kernel changed device or stream state of the harness (persisting L2, a limit, a window)",
    "cuda-error": "a CUDA error (e.g. an illegal address) in the worker",
    "crash": "the worker process died",
    "timeout": "the worker did not answer in time (a hang)",
    "memory": "the worker went over its host memory limit",
    "contract": "the library does not implement the kernel contract",
    "error": "another error in the worker",
}


@dataclass
class ScenarioResult:
    scenario: str
    head_config: str
    batch: int
    seqlen_q: int
    seqlen_k: int
    causal: bool
    extended: bool
    flops: float
    status: str
    reason: str = ""
    code: str = ""  # one of CODES when status != ok
    check: dict | None = None
    recheck: dict | None = None
    times_ms: dict = field(default_factory=dict)  # impl -> TimingStats as dict, every distribution's calls
    tflops: dict = field(default_factory=dict)  # impl -> TFLOP/s at that median
    # baseline -> baseline_ms / kernel_ms on the distribution where it is lowest
    ratio: dict = field(default_factory=dict)
    baselines: dict = field(default_factory=dict)  # baseline -> "ok" or why it has no number
    seed: int | None = None
    wall_s: float = 0.0
    gpu: dict | None = None
    flags: list = field(default_factory=list)  # plausibility alarms and other notes
    # per input distribution (harness/distributions.py), in the run's order: the check of that
    # distribution's inputs, and the timing on them ({dist: {impl: TimingStats as dict}}, {dist:
    # {impl: TFLOP/s}}, {dist: {baseline: ratio}})
    checks_by_distribution: dict = field(default_factory=dict)
    times_ms_by_distribution: dict = field(default_factory=dict)
    tflops_by_distribution: dict = field(default_factory=dict)
    ratio_by_distribution: dict = field(default_factory=dict)

    @property
    def correct(self) -> bool:
        return self.status == STATUS_OK

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def for_scenario(cls, s: Scenario, status: str, **fields) -> ScenarioResult:
        """The one constructor of a row from its scenario (the worker's, and a failed one's)."""
        return cls(
            s.id, s.head_config, s.batch, s.seqlen_q, s.seqlen_k, s.causal, s.extended, s.flops, status, **fields
        )

    @classmethod
    def from_dict(cls, d: dict) -> ScenarioResult:
        known = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in known})


def append_jsonl(path: Path, row: ScenarioResult) -> None:
    with open(path, "a") as f:
        f.write(json.dumps(row.to_dict()) + "\n")
        f.flush()


def read_jsonl(path: Path) -> list[ScenarioResult]:
    rows: list[ScenarioResult] = []
    if not Path(path).exists():
        return rows
    for line in Path(path).read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(ScenarioResult.from_dict(json.loads(line)))
        except (json.JSONDecodeError, TypeError):
            continue  # a line cut short by a crash of the writer: ignore it
    return rows


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))


def _ratio_stats(pairs: list[tuple[float, str]]) -> tuple[float | None, float | None, str | None, int]:
    """(geomean, min, the scenario of the min, count) of (ratio, scenario) pairs."""
    g = geomean([p[0] for p in pairs])
    if not pairs:
        return None, None, None, 0
    lo = min(pairs)
    return (round(g, 4) if g is not None else None), round(lo[0], 4), lo[1], len(pairs)


def distribution_names(rows: list[ScenarioResult]) -> list[str]:
    """The input distributions the rows were timed on, in the order the first row that has them
    gives (rows of a version-2 run have none)."""
    out: list[str] = []
    for r in rows:
        for d in list(r.ratio_by_distribution) + list(r.times_ms_by_distribution):
            if d not in out:
                out.append(d)
    return out


def by_distribution(rows: list[ScenarioResult], baselines: list[str]) -> dict[str, dict]:
    """{distribution: {"geomean", "min_ratio", "min_ratio_scenario", "ratio_count"}} over the
    correct grid rows."""
    grid = [r for r in rows if not r.extended and r.correct]
    out: dict[str, dict] = {}
    for d in distribution_names(rows):
        entry: dict[str, dict] = {"geomean": {}, "min_ratio": {}, "min_ratio_scenario": {}, "ratio_count": {}}
        for b in baselines:
            pairs = [
                (r.ratio_by_distribution[d][b], r.scenario)
                for r in grid
                if (r.ratio_by_distribution.get(d) or {}).get(b)
            ]
            g, mn, mn_id, n = _ratio_stats(pairs)
            entry["geomean"][b], entry["min_ratio"][b], entry["min_ratio_scenario"][b] = g, mn, mn_id
            entry["ratio_count"][b] = n
        out[d] = entry
    return out


def time_spread(row: ScenarioResult, impl: str) -> float | None:
    """The slowest distribution's median time of `impl` over its fastest (1.0: the same on all)."""
    meds = [
        t[impl]["median_ms"] for t in row.times_ms_by_distribution.values() if impl in t and t[impl].get("median_ms")
    ]
    if len(meds) < 2:
        return None
    return max(meds) / min(meds)


def data_dependence(rows: list[ScenarioResult], baselines: list[str]) -> dict:
    """summary.json's `data_dependent`: the rows whose kernel time moves across the distributions
    by more than any baseline's does on any correct grid row of the run."""
    grid = [r for r in rows if not r.extended and r.correct]
    base = [s for r in grid for b in baselines if (s := time_spread(r, b)) is not None]
    if not base:
        return {"threshold": None, "scenarios": {}}
    threshold = max(base)
    flagged = {}
    for r in grid:
        k = time_spread(r, "kernel")
        if k is not None and k > threshold:
            worst_b = max((s for b in baselines if (s := time_spread(r, b)) is not None), default=None)
            flagged[r.scenario] = {"kernel": round(k, 4), "baselines": round(worst_b, 4) if worst_b else None}
    return {"threshold": round(threshold, 4), "scenarios": flagged}


def summarize(
    rows: list[ScenarioResult], kind: str, arch: str, kernel: dict, provenance: dict, baselines: list[str]
) -> dict:
    grid_rows = [r for r in rows if not r.extended]
    gm: dict[str, float | None] = {}
    mn: dict[str, float | None] = {}
    mn_id: dict[str, str | None] = {}
    cnt: dict[str, int] = {}
    for b in baselines:
        pairs = [(r.ratio[b], r.scenario) for r in grid_rows if r.correct and r.ratio.get(b)]
        gm[b], mn[b], mn_id[b], cnt[b] = _ratio_stats(pairs)
    per_dist = by_distribution(rows, baselines)
    worst: dict[str, str | None] = {}
    for b in baselines:
        measured = [(e["geomean"][b], d) for d, e in per_dist.items() if e["geomean"].get(b) is not None]
        if measured:  # the headline: the lowest distribution's geomean
            gm[b], name = min(measured)
            worst[b], cnt[b] = name, per_dist[name]["ratio_count"][b]
        else:
            worst[b] = None
    return {
        "schema_version": SUMMARY_SCHEMA_VERSION,
        "kind": kind,
        "arch": arch,
        "scenarios_total": len(grid_rows),
        "scenarios_correct": sum(r.correct for r in grid_rows),
        "extended_total": len(rows) - len(grid_rows),
        "extended_correct": sum(r.correct for r in rows if r.extended),
        "geomean": gm,
        "min_ratio": mn,
        "min_ratio_scenario": mn_id,
        "ratio_count": cnt,
        "distributions": distribution_names(rows),
        "worst_distribution": worst,
        "by_distribution": per_dist,
        "data_dependent": data_dependence(rows, baselines),
        "kernel": kernel,
        "provenance": provenance,
        "failures": failure_counts(rows),
        "flagged": {r.scenario: [f.split(":", 1)[0] for f in r.flags] for r in rows if r.flags},
        "ceiling": ceiling(provenance),
        "fast_p": fast_p(rows, kind, baselines),
        "fast_p_total": len(fast_p_rows(rows, kind)),
    }


def fast_p_rows(rows: list[ScenarioResult], kind: str) -> list[ScenarioResult]:
    """The rows fast_p is a share of: the timed grid scenarios (an eval times a fixed subset; its
    other scenarios are only checked)."""
    from . import config

    timed = [r for r in rows if not r.extended]
    return [r for r in timed if r.scenario in config.EVAL_TIMED_SUBSET] if kind == "eval" else timed


def fast_p(
    rows: list[ScenarioResult], kind: str, baselines: list[str], thresholds: tuple[float, ...] | None = None
) -> dict[str, dict[str, float] | None]:
    """summary.json's `fast_p` (KernelBench): per baseline and threshold p, the share of the timed
    grid scenarios that are correct and whose ratio to the baseline is above p."""
    from . import config

    thresholds = config.FAST_P_THRESHOLDS if thresholds is None else thresholds
    timed = fast_p_rows(rows, kind)
    out: dict[str, dict[str, float] | None] = {}
    for b in baselines:
        if not timed or not any(r.ratio.get(b) for r in timed):
            out[b] = None
            continue
        out[b] = {
            f"{p:g}": round(sum(r.correct and (r.ratio.get(b) or 0) > p for r in timed) / len(timed), 4)
            for p in thresholds
        }
    return out


def ceiling(provenance: dict) -> dict | None:
    """summary.json's `ceiling`: the GEMM the worker measured and the bound of `implausible`."""
    gemm, factor = provenance.get("gemm_tflops"), provenance.get("ceiling_factor")
    if not gemm or not factor:
        return None
    return {"gemm_tflops": gemm, "factor": factor, "implausible_above_tflops": round(gemm * factor, 1)}


def failure_counts(rows: list[ScenarioResult]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in rows:
        if not r.correct:
            key = r.code or r.status
            out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def missing_columns(rows: list[ScenarioResult], baselines: list[str]) -> dict[str, str]:
    """{baseline: why}: the baselines with no number in any of `rows` for one and the same reason
    (not installed, say), so that a table says it once for the column instead of on every row."""
    out = {}
    for b in baselines:
        why = {r.baselines.get(b) for r in rows}
        if rows and len(why) == 1 and not any(r.ratio.get(b) for r in rows):
            (msg,) = why
            if msg and msg != "ok":
                out[b] = msg
    return out


def row_note(r: ScenarioResult, skip: dict[str, str] | None = None) -> str:
    """A row's note: its reason when it is not ok, else what its baselines said (other than the
    column-wide notes in `skip`)."""
    if r.status != STATUS_OK:
        return r.reason
    return "; ".join(f"{b}: {m}" for b, m in r.baselines.items() if m != "ok" and b not in (skip or {}))


def breakdown(rows: list[ScenarioResult], baseline: str) -> dict[str, dict[str, float | None]]:
    """Geometric means of the ratio per head configuration, per seqlen, and causal vs not."""
    groups: dict[str, dict[str, list[float]]] = {"head_config": {}, "seqlen": {}, "mask": {}}
    for r in rows:
        if r.extended or not r.correct or not r.ratio.get(baseline):
            continue
        v = r.ratio[baseline]
        groups["head_config"].setdefault(r.head_config, []).append(v)
        groups["seqlen"].setdefault(str(r.seqlen_q), []).append(v)
        groups["mask"].setdefault("causal" if r.causal else "non-causal", []).append(v)
    return {g: {k: geomean(v) for k, v in d.items()} for g, d in groups.items()}
