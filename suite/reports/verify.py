"""`verify`: compare a fresh run with the shipped results, scenario by scenario, with a noise
tolerance, and check each claim.

Speed is compared as the ratio to a baseline measured side by side in the same run (baseline time /
kernel time), which carries from one machine of the same GPU model to another far better than
absolute TFLOP/s. For each scenario the verdict is:
  same          the ratio moved by no more than the tolerance
  faster        the kernel is relatively faster in the fresh run, by more than the tolerance
  slower        ... slower, by more than the tolerance
  inconclusive  a side has no ratio or is not correct, or the timings' own spread is larger
                than the change
Then each claim: the fresh run has every scenario the shipped run has (a count and the first few
missing ids otherwise), is correct on as large a share, and has the same geometric mean of the ratio,
and, where both runs were timed on several input distributions, the same on each distribution both
have (a row's `ratio` is its lowest over the distributions, so the scenario verdicts compare those).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import cast

from .. import config
from ..results import ScenarioResult, distribution_names, geomean
from .data import ArchResults, load

SAME, FASTER, SLOWER, INCONCLUSIVE = "same", "faster", "slower", "inconclusive"
VERDICTS = (SAME, FASTER, SLOWER, INCONCLUSIVE)


@dataclass
class ScenarioVerdict:
    scenario: str
    shipped: float | None
    fresh: float | None
    verdict: str
    why: str = ""

    @property
    def change(self) -> float | None:
        if self.shipped and self.fresh:
            return self.fresh / self.shipped - 1
        return None


@dataclass
class Claim:
    claim: str
    shipped: str
    fresh: str
    verdict: str


@dataclass
class Verdict:
    baseline: str
    tolerance: float
    scenarios: list[ScenarioVerdict] = field(default_factory=list)
    claims: list[Claim] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # what makes the comparison one to read with care

    def counts(self) -> dict[str, int]:
        return {v: sum(s.verdict == v for s in self.scenarios) for v in VERDICTS}

    @property
    def reproduced(self) -> bool:
        """No claim came out worse in the fresh run."""
        return not any(c.verdict in (SLOWER, "not reproduced") for c in self.claims)

    def to_dict(self) -> dict:
        """`verify --json`: the verdict, every scenario's and every claim's (a change is fresh / shipped - 1)."""
        return {
            "reproduced": self.reproduced,
            "baseline": self.baseline,
            "tolerance": self.tolerance,
            "counts": self.counts(),
            "claims": [asdict(c) for c in self.claims],
            "scenarios": [{**asdict(s), "change": s.change} for s in self.scenarios],
            "warnings": self.warnings,
        }


def _rel_spread(r: ScenarioResult, impl: str) -> float:
    t = r.times_ms.get(impl) or {}
    if not t.get("median_ms") or t.get("iqr_ms") is None:
        return 0.0
    return t["iqr_ms"] / t["median_ms"]


def _classify(change: float, tolerance: float, noise: float) -> tuple[str, str]:
    if abs(change) <= tolerance:
        return SAME, f"within {tolerance:.0%}"
    if abs(change) <= noise:
        return INCONCLUSIVE, f"the timings' spread ({noise:.0%}) is larger than the change"
    return (FASTER if change > 0 else SLOWER), f"{change:+.1%}"


def scenario_verdict(
    old: ScenarioResult | None, new: ScenarioResult | None, baseline: str, tolerance: float
) -> ScenarioVerdict:
    sid = (new or old).scenario
    a = old.ratio.get(baseline) if old and old.correct else None
    b = new.ratio.get(baseline) if new and new.correct else None
    if old is None or new is None:
        return ScenarioVerdict(sid, a, b, INCONCLUSIVE, "not in the fresh run" if new is None else "not shipped")
    if not new.correct:
        return ScenarioVerdict(sid, a, b, INCONCLUSIVE, f"fresh run: {new.status}: {new.reason[:120]}")
    if not old.correct:
        return ScenarioVerdict(sid, a, b, INCONCLUSIVE, f"shipped run: {old.status}")
    if not a or not b:
        missing = "shipped" if not a else "fresh"
        side = old if not a else new
        return ScenarioVerdict(
            sid,
            a,
            b,
            INCONCLUSIVE,
            f"no ratio in the {missing} run ({side.baselines.get(baseline, 'not timed')[:100]})",
        )
    noise = math.sqrt(sum(_rel_spread(r, i) ** 2 for r in (old, new) for i in ("kernel", baseline)))
    verdict, why = _classify(b / a - 1, tolerance, noise)
    return ScenarioVerdict(sid, a, b, verdict, why)


def kernel_sha(res: ArchResults) -> str | None:
    return (res.summary.get("kernel") or {}).get("sha256") or res.provenance.get("kernel_sha256") or None


def kernel_warnings(old: ArchResults, new: ArchResults) -> list[str]:
    """The two runs are of different kernels (their sources' sha256 differ): what changed may be the
    kernel, not the machine or the run."""
    a, b = kernel_sha(old), kernel_sha(new)
    if a and b and a != b:
        return [
            f"the runs are of different kernels: shipped {old.kernel_path or '?'} (sha256 {a[:16]}), "
            f"fresh {new.kernel_path or '?'} (sha256 {b[:16]}); a change below may be the kernel's, not the run's"
        ]
    if not (a and b):
        return [f"the kernel's sha256 is not recorded in the {'shipped' if not a else 'fresh'} run: not compared"]
    return []


def _pct(n: int, d: int) -> str:
    return f"{n}/{d}"


MISSING_SHOWN = 3  # how many missing scenarios a claim names


def completeness_claim(
    label: str, shipped_rows: list[ScenarioResult], fresh_rows: list[ScenarioResult], optional: bool
) -> Claim:
    """Whether the fresh run has every scenario of a set the shipped run has: a run that leaves some
    out reproduces none of the claims about them. An optional set (the extended one) that the fresh
    run did not run at all is inconclusive; one run in part is not reproduced."""
    ran = {r.scenario for r in fresh_rows}
    missing = [r.scenario for r in shipped_rows if r.scenario not in ran]
    n = len(shipped_rows)
    if optional and not fresh_rows:
        return Claim(f"every {label} run again", str(n), "not run", INCONCLUSIVE)
    if not missing:
        return Claim(f"every {label} run again", str(n), _pct(n, n), "reproduced")
    named = ", ".join(missing[:MISSING_SHOWN]) + (", ..." if len(missing) > MISSING_SHOWN else "")
    return Claim(
        f"every {label} run again",
        str(n),
        f"{_pct(n - len(missing), n)} ({len(missing)} missing: {named})",
        "not reproduced",
    )


def compare(
    shipped: Path | ArchResults,
    fresh: Path | ArchResults,
    baseline: str | None = None,
    tolerance: float = config.VERIFY_TOLERANCE,
) -> Verdict:
    if not tolerance >= 0:
        raise ValueError(f"the tolerance must be a non-negative fraction, not {tolerance}")
    old = shipped if isinstance(shipped, ArchResults) else load(Path(shipped))
    new = fresh if isinstance(fresh, ArchResults) else load(Path(fresh))
    baseline = baseline or old.main_baseline
    v = Verdict(baseline, tolerance, warnings=kernel_warnings(old, new))
    old_by = {r.scenario: r for r in old.grid_rows}
    new_by = {r.scenario: r for r in new.grid_rows}
    for sid in list(old_by) + [s for s in new_by if s not in old_by]:
        v.scenarios.append(scenario_verdict(old_by.get(sid), new_by.get(sid), baseline, tolerance))

    # claim: the fresh run has every scenario the shipped run has
    for label, a_rows, b_rows, optional in (
        ("timed scenario", old.grid_rows, new.grid_rows, False),
        ("scenario of the extended set", old.extended_rows, new.extended_rows, True),
    ):
        if a_rows:
            v.claims.append(completeness_claim(label, a_rows, b_rows, optional))

    # claim: correct everywhere (timed grid and extended set)
    for label, a_rows, b_rows in (
        ("timed scenarios", old.grid_rows, new.grid_rows),
        ("extended set", old.extended_rows, new.extended_rows),
    ):
        if not a_rows:
            continue
        a_ok, b_ok = sum(r.correct for r in a_rows), sum(r.correct for r in b_rows)
        if not b_rows:
            verdict = INCONCLUSIVE
        elif b_ok * len(a_rows) >= a_ok * len(b_rows):  # the fresh share of correct ones is no lower
            verdict = "reproduced"
        else:
            verdict = "not reproduced"
        v.claims.append(
            Claim(
                f"correct on the {label}",
                _pct(a_ok, len(a_rows)),
                _pct(b_ok, len(b_rows)) if b_rows else "not run",
                verdict,
            )
        )

    # claim: the geometric mean of the ratio to each baseline, over the scenarios both runs timed
    for b in old.baselines:
        pairs = [
            (old_by[s].ratio[b], new_by[s].ratio[b])
            for s in old_by
            if s in new_by
            and old_by[s].correct
            and new_by[s].correct
            and old_by[s].ratio.get(b)
            and new_by[s].ratio.get(b)
        ]
        if not pairs:
            shipped_g = (old.summary.get("geomean") or {}).get(b)
            v.claims.append(
                Claim(
                    f"geomean vs {b}",
                    f"{shipped_g:.3f}x" if shipped_g else "not measured",
                    "no common scenario",
                    INCONCLUSIVE,
                )
            )
            continue
        ga, gb = geomean([p[0] for p in pairs]), geomean([p[1] for p in pairs])
        verdict, why = _classify(gb / ga - 1, tolerance, 0.0)
        v.claims.append(
            Claim(f"geomean vs {b} over {len(pairs)} common scenarios", f"{ga:.3f}x", f"{gb:.3f}x ({why})", verdict)
        )

    # claim: the geometric mean on each input distribution both runs were timed on (summary.json 3)
    fresh_dists = set(distribution_names(new.grid_rows))
    for d in [d for d in distribution_names(old.grid_rows) if d in fresh_dists]:
        for b in old.baselines:
            pairs = [
                (ra, rb)
                for s in old_by
                if s in new_by
                and old_by[s].correct
                and new_by[s].correct
                and (ra := (old_by[s].ratio_by_distribution.get(d) or {}).get(b))
                and (rb := (new_by[s].ratio_by_distribution.get(d) or {}).get(b))
            ]
            if not pairs:
                continue
            # the pairs hold ratios of times (> 0): each geomean is a number
            ga, gb = (cast(float, geomean([p[i] for p in pairs])) for i in (0, 1))
            verdict, why = _classify(gb / ga - 1, tolerance, 0.0)
            v.claims.append(
                Claim(
                    f"geomean vs {b} on {d} over {len(pairs)} common scenarios",
                    f"{ga:.3f}x",
                    f"{gb:.3f}x ({why})",
                    verdict,
                )
            )
    return v
