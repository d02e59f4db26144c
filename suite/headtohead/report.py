"""The head-to-head's outputs, rendered from the runs' stats (runstats.py): `runs.jsonl` (one
RunStats per run), a table per run and per arm with each arm's median and spread, a bootstrap
interval of the difference between arms over seeds and re-measurements and its verdict (stats.py),
the A/A control (an arm run twice, and the noise band of the task: noise.py) (`compare.md` with
tabulate, `compare.csv`, `stats.json`), and the best-so-far speed-up against the step for every run
with the questions marked (`best_so_far.png` and `.svg`, matplotlib)."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from operator import attrgetter
from pathlib import Path

from tabulate import tabulate

from .noise import NoiseBand, Repeats, bands
from .plots import Frame, finish, pyplot
from .runstats import RunStats
from .stats import DEFAULT_MIN_RUNS, Interval, Sample, median_difference, spread
from .tables import Columns, column_rows

AA_SUFFIX = "-aa"  # the label of an arm's A/A copy: the same agent and options, run again

ARM_COLORS = {"kernelseek": "#1f77b4", "toolrich": "#ff7f0e", "general": "#2ca02c"}
CATEGORY_MARKERS = {"layer-shift": "v", "limit-rejection": "s", "information": "o", "human": "D"}


@dataclass
class CompareOutputs:
    runs_jsonl: Path
    markdown: Path
    csv: Path
    png: Path
    svg: Path
    stats: Path


def _num(x, fmt="{:.3f}") -> str:
    return "-" if x is None else fmt.format(x)


def _calls(calls: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(calls.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def run_rows(runs: list[RunStats]) -> tuple[list[str], list[list]]:
    return column_rows(sorted(runs, key=lambda r: (r.arm, r.seed or 0)), _RUN_COLUMNS)


def _final(r: RunStats) -> str:
    if r.final_geomean is not None:
        if len(r.final_geomeans) > 1:
            lo, hi = min(r.final_geomeans), max(r.final_geomeans)
            return f"{r.final_geomean:.3f}x ({len(r.final_geomeans)}: {lo:.3f}-{hi:.3f})"
        return f"{r.final_geomean:.3f}x"
    return r.final_status or "-"


_RUN_COLUMNS: Columns = {
    "arm": attrgetter("arm"),
    "seed": attrgetter("seed"),
    "best vs baseline": lambda r: _num(r.best, "{:.3f}x"),
    "steps to best": lambda r: _num(r.steps_to_best, "{}"),
    "evals to best": lambda r: _num(r.evals_to_best, "{}"),
    "evals": attrgetter("evals"),
    "wrong": attrgetter("wrong"),
    "questions": attrgetter("questions"),
    "tool calls": lambda r: _calls(r.tool_calls),
    "tokens": attrgetter("total_tokens"),
    "cost $": lambda r: _num(r.cost, "{:.4f}"),
    "wall min": lambda r: f"{r.wall_s / 60:.1f}",
    "exit": lambda r: r.exit_reason or "-",
    "full grid": _final,
}


def _spread(values) -> tuple[str, str, str]:
    s = spread(list(values))
    if not s.n:
        return "-", "-", "-"
    return (f"{s.median:.3f}x", f"{s.q1:.3f}-{s.q3:.3f}", f"{s.low:.3f}-{s.high:.3f}")


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return statistics.fmean(xs) if xs else None


def arm_order(runs: list[RunStats]) -> list[str]:
    return sorted({r.arm for r in runs})


def arm_rows(runs: list[RunStats]) -> tuple[list[str], list[list]]:
    head = [
        "arm",
        "runs",
        "median best",
        "IQR",
        "range",
        "median full grid",
        "full grid IQR",
        "mean steps to best",
        "mean evals to best",
        "wrong",
        "tokens",
        "cost $",
        "mean wall min",
        "goal met",
    ]
    rows = []
    for arm in arm_order(runs):
        rs = [r for r in runs if r.arm == arm]
        costs = [r.cost for r in rs if r.cost is not None]
        med, iqr, rng = _spread(r.best for r in rs)
        fmed, fiqr, _ = _spread(r.final_geomean for r in rs)
        rows.append(
            [
                arm,
                len(rs),
                med,
                iqr,
                rng,
                fmed,
                fiqr,
                _num(_mean(r.steps_to_best for r in rs), "{:.1f}"),
                _num(_mean(r.evals_to_best for r in rs), "{:.1f}"),
                sum(r.wrong for r in rs),
                sum(r.total_tokens for r in rs),
                _num(sum(costs) if costs else None, "{:.4f}"),
                f"{statistics.fmean(r.wall_s for r in rs) / 60:.1f}",
                f"{sum(r.goal_met for r in rs)}/{len(rs)}",
            ]
        )
    return head, rows


def write_csv(runs: list[RunStats], path: Path) -> None:
    tools = sorted({t for r in runs for t in r.tool_calls})
    cats = sorted({c for r in runs for c in r.questions_by_category})
    fields = [
        "arm",
        "seed",
        "run_id",
        "task",
        "model",
        "baseline",
        "best",
        "best_eval",
        "steps_to_best",
        "evals_to_best",
        "steps",
        "evals",
        "wrong",
        "questions",
        *[f"questions_{c}" for c in cats],
        *[f"calls_{t}" for t in tools],
        "prompt_tokens",
        "completion_tokens",
        "total_tokens",
        "cost",
        "wall_s",
        "exit_reason",
        "goal_met",
        "remeasured",
        "final_geomean",
        "final_status",
        "trace",
    ]
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        for r in sorted(runs, key=lambda r: (r.arm, r.seed or 0)):
            d = r.to_dict()
            row = {k: d.get(k) for k in fields if k in d}
            row.update({f"calls_{t}": r.tool_calls.get(t, 0) for t in tools})
            row.update({f"questions_{c}": r.questions_by_category.get(c, 0) for c in cats})
            w.writerow(row)


def aa_pairs(runs: list[RunStats]) -> list[tuple[str, str]]:
    """(arm, its A/A copy): an arm labelled `<arm>-aa` running the same agent as `<arm>`."""
    agents = {r.arm: r.agent for r in runs}
    return [
        (arm[: -len(AA_SUFFIX)], arm)
        for arm in arm_order(runs)
        if arm.endswith(AA_SUFFIX) and agents.get(arm[: -len(AA_SUFFIX)]) == agents[arm]
    ]


def _samples(runs: list[RunStats], arm: str, metric: str) -> dict:
    out: dict = {}
    for r in runs:
        if r.arm != arm:
            continue
        if metric == "best":
            out[r.seed] = None if r.best is None else Sample(r.best_sha256, r.best_measurements() or [r.best])
        else:
            values = r.final_geomeans or ([r.final_geomean] if r.final_geomean is not None else [])
            out[r.seed] = Sample(r.best_sha256, values) if values else None
    return out


def intervals(
    runs: list[RunStats], min_runs: int = DEFAULT_MIN_RUNS, noise: list[Repeats] | None = None
) -> dict[str, list[Interval]]:
    """Each arm against the first (in arm_order; A/A copies aside), and each A/A copy against its arm:
    the difference of medians with its bootstrap interval over seeds and re-measurements, of the best
    over the timed scenarios and, where a run has one, of the full-grid speed-up. `noise`: the A/A
    control's measurements, pooled with the runs' own measurements of the same kernels."""
    pairs = aa_pairs(runs)
    copies = {c for _, c in pairs}
    arms = [a for a in arm_order(runs) if a not in copies]
    # the A/A control's own benches add to the runs' measurements (re-evaluations and re-benches are the
    # runs' own, already in their samples)
    extra = {
        "best": _pool([r for r in noise or [] if r.kind == "evaluation" and r.source == "aa"]),
        "full_grid": _pool([r for r in noise or [] if r.kind == "full_grid" and r.source == "aa"]),
    }
    out: dict[str, list[Interval]] = {"best": [], "full_grid": []}
    todo = [(arms[0], other, "arms") for other in arms[1:]] + [(a, c, "aa") for a, c in pairs]
    for first, other, kind in todo:
        for metric in ("best", "full_grid"):
            a, b = _samples(runs, first, metric), _samples(runs, other, metric)
            if metric == "full_grid" and not any(v is not None for v in [*a.values(), *b.values()]):
                continue
            sets = [r.values for r in noise or [] if r.kind == ("evaluation" if metric == "best" else metric)]
            out[metric].append(
                median_difference(a, b, first, other, min_runs, extra[metric], kind=kind, noise_sets=sets)
            )
    return out


def _pool(repeats: list[Repeats]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in repeats:
        if r.candidate_sha256:
            out.setdefault(r.candidate_sha256, []).extend(r.values)
    return out


def interval_rows(
    runs: list[RunStats], min_runs: int = DEFAULT_MIN_RUNS, noise: list[Repeats] | None = None
) -> tuple[list[str], list[list]]:
    head = ["metric", "difference of medians", "value", "95 % interval", "verdict", "pairs (same seed)", "runs", "note"]
    rows = []
    for metric, items in intervals(runs, min_runs, noise).items():
        name = {"best": "best over the timed scenarios", "full_grid": "best kernel on the full grid"}[metric]
        for iv in items:
            rows.append(
                [
                    name + (" (A/A control)" if iv.kind == "aa" else ""),
                    f"{iv.b} - {iv.a}",
                    _num(iv.difference, "{:+.3f}"),
                    ("insufficient runs" if iv.verdict == "insufficient runs" else "-")
                    if iv.low is None
                    else f"[{iv.low:+.3f}, {iv.high:+.3f}]",
                    iv.verdict,
                    iv.paired,
                    f"{iv.n_a}+{iv.n_b}",
                    iv.note or "",
                ]
            )
    return head, rows


def noise_lines(noise: list[Repeats]) -> list[str]:
    """The A/A control's measurements and the bands, in words."""
    if not noise:
        return []
    lines = []
    for r in noise:
        if r.source == "aa":
            vals = ", ".join(f"{v:.3f}x" for v in r.values) or "-"
            lines.append(
                f"- {r.task}: the starting kernel evaluated {len(r.values)} times as a run evaluates it: {vals}"
                + (f" ({r.status}: {r.note})" if r.status != "ok" else "")
            )
    found: dict[tuple[str, str], NoiseBand] = bands(noise)
    for b in found.values():
        lines.append(f"- band, {b.text()}")
    return lines


_ARM_NOTE = (
    "`median best`: the median over the arm's runs of each run's best speed-up; `IQR`: its 25th-75th "
    "percentiles; `range`: lowest-highest; `full grid`: each run's best kernel benched on the task's full "
    "grid at the end."
)
_INTERVAL_NOTE = (
    "Each run's value is its best kernel's median over every measurement of that file (its re-evaluations, "
    "the final bench's re-benches, the A/A control's), so runs whose best kernels are the same file have the "
    "same value. Percentile bootstrap (10,000 resamples, fixed seed) over the seeds (drawn with replacement, "
    "paired by seed) and the measurements (each kernel's median of its measurements drawn with replacement; "
    "a kernel measured once is scaled by a deviation drawn from the kernels measured several times). "
    "With fewer than {min_runs} runs with a value in an arm: `insufficient runs`, no interval. An A/A "
    "control is an arm run twice under two labels: it must show no significant difference."
)
_NOISE_NOTE = (
    "The band: the largest ratio between two measurements of one unchanged kernel, less 1; a difference "
    "below it is within the noise of this task on this machine (docs/head-to-head.md)."
)
_RUN_NOTE = (
    "`wrong`: evaluated candidates judged incorrect (wrong results, crashes, time-outs, build failures). "
    "`steps to best`: the step whose evaluation gave the run's best."
)


def _table(head: list[str], rows: list[list]) -> str:
    return tabulate(rows, head, tablefmt="github", disable_numparse=True)


def _section(title: str, body: list[str], note: str) -> list[str]:
    """A section of compare.md: its heading, its body and the note under it."""
    return ["", f"## {title}", "", *body, "", note]


def markdown(
    runs: list[RunStats], note: str = "", min_runs: int = DEFAULT_MIN_RUNS, noise: list[Repeats] | None = None
) -> str:
    tasks = sorted({r.task for r in runs})
    models = sorted({r.model for r in runs})
    baselines = sorted({r.baseline for r in runs if r.baseline})
    lines = [
        "# Head-to-head",
        "",
        f"Task {', '.join(tasks)}; model {', '.join(models)}; speed-up is baseline time / candidate time "
        f"(geometric mean over the timed scenarios) against {', '.join(baselines) or 'the baseline'}.",
    ]
    if note:
        lines += ["", note]
    lines += _section("Per arm", [_table(*arm_rows(runs))], _ARM_NOTE)
    head, rows = interval_rows(runs, min_runs, noise)
    if rows:
        lines += _section("Difference between the arms", [_table(head, rows)], _INTERVAL_NOTE.format(min_runs=min_runs))
    nl = noise_lines(noise or [])
    if nl:
        lines += _section("Noise (A/A control)", nl, _NOISE_NOTE)
    lines += _section("Per run", [_table(*run_rows(runs))], _RUN_NOTE)
    return "\n".join(lines) + "\n"


def plot(runs: list[RunStats], png: Path, svg: Path, title: str = "") -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(9, 5.5))
    styles = ["-", "--", ":", "-."]
    seeds = sorted({r.seed for r in runs if r.seed is not None})
    labelled_cats = set()
    for r in sorted(runs, key=lambda r: (r.arm, r.seed or 0)):
        curve = [(s, b) for s, b in r.curve() if b is not None]
        color = ARM_COLORS.get(r.arm)
        ls = styles[seeds.index(r.seed) % len(styles)] if r.seed in seeds else "-"
        if curve:
            xs, ys = zip(*curve)
            (line,) = ax.step(xs, ys, where="post", color=color, linestyle=ls, label=f"{r.arm} seed {r.seed}")
            color = line.get_color()
        for step, cat in r.question_steps:
            y = next((b for s, b in reversed(curve) if s <= step), None)
            if y is None:
                continue
            label = f"question: {cat}" if cat not in labelled_cats else None
            labelled_cats.add(cat)
            ax.plot(
                [step],
                [y],
                marker=CATEGORY_MARKERS.get(cat, "x"),
                color=color,
                markersize=7,
                linestyle="none",
                markeredgecolor="black",
                label=label,
            )
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    title = title or "Best-so-far speed-up against step"
    finish(fig, ax, Frame("step (model call)", "best speed-up so far vs the baseline", title, 8, "best"))
    fig.savefig(png, dpi=120)
    fig.savefig(svg)
    plt.close(fig)


def render(
    runs: list[RunStats],
    out_dir: Path,
    note: str = "",
    min_runs: int = DEFAULT_MIN_RUNS,
    noise: list[Repeats] | None = None,
) -> CompareOutputs:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    outs = CompareOutputs(
        out_dir / "runs.jsonl",
        out_dir / "compare.md",
        out_dir / "compare.csv",
        out_dir / "best_so_far.png",
        out_dir / "best_so_far.svg",
        out_dir / "stats.json",
    )
    with open(outs.runs_jsonl, "w", encoding="utf-8") as f:
        for r in runs:
            f.write(json.dumps(r.to_dict()) + "\n")
    runs = read_runs(outs.runs_jsonl)  # tables and plots come from the file, as a reader would
    outs.markdown.write_text(markdown(runs, note, min_runs, noise), encoding="utf-8")
    write_csv(runs, outs.csv)
    outs.stats.write_text(
        json.dumps(
            {
                "arms": {
                    arm: {
                        "best": spread([r.best for r in runs if r.arm == arm]).to_dict(),
                        "full_grid": spread([r.final_geomean for r in runs if r.arm == arm]).to_dict(),
                    }
                    for arm in arm_order(runs)
                },
                "intervals": {k: [iv.to_dict() for iv in v] for k, v in intervals(runs, min_runs, noise).items()},
                "min_runs": min_runs,
                "noise": [b.__dict__ for b in bands(noise or []).values()],
            },
            indent=1,
        )
    )
    tasks = ", ".join(sorted({r.task for r in runs}))
    plot(runs, outs.png, outs.svg, title=f"Best-so-far speed-up against step ({tasks})")
    return outs


def read_runs(path: Path) -> list[RunStats]:
    return [RunStats.from_dict(json.loads(l)) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]
