"""The head-to-head's outputs, rendered from the runs' stats (runstats.py): `runs.jsonl` (one
RunStats per run), a table per run and per arm with each arm's median and spread and a bootstrap
interval of the difference between arms (stats.py; `compare.md` with tabulate, `compare.csv`,
`stats.json`), and the best-so-far speed-up against the step for every run with the questions
marked (`best_so_far.png` and `.svg`, matplotlib)."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from tabulate import tabulate

from .runstats import RunStats
from .stats import Interval, median_difference, spread

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
    head = [
        "arm",
        "seed",
        "best vs baseline",
        "steps to best",
        "evals to best",
        "evals",
        "wrong",
        "questions",
        "tool calls",
        "tokens",
        "cost $",
        "wall min",
        "exit",
        "full grid",
    ]
    rows = [
        [
            r.arm,
            r.seed,
            _num(r.best, "{:.3f}x"),
            _num(r.steps_to_best, "{}"),
            _num(r.evals_to_best, "{}"),
            r.evals,
            r.wrong,
            r.questions,
            _calls(r.tool_calls),
            r.total_tokens,
            _num(r.cost, "{:.4f}"),
            f"{r.wall_s / 60:.1f}",
            r.exit_reason or "-",
            _final(r),
        ]
        for r in sorted(runs, key=lambda r: (r.arm, r.seed or 0))
    ]
    return head, rows


def _final(r: RunStats) -> str:
    if r.final_geomean is not None:
        return f"{r.final_geomean:.3f}x"
    return r.final_status or "-"


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


def intervals(runs: list[RunStats]) -> dict[str, list[Interval]]:
    """Each arm against the first (in arm_order): the difference of medians with its bootstrap interval,
    of the best over the timed scenarios and, where every run has one, of the full-grid speed-up."""
    arms = arm_order(runs)
    out: dict[str, list[Interval]] = {"best": [], "full_grid": []}
    for other in arms[1:]:
        for metric, value in (("best", lambda r: r.best), ("full_grid", lambda r: r.final_geomean)):
            a = {r.seed: value(r) for r in runs if r.arm == arms[0]}
            b = {r.seed: value(r) for r in runs if r.arm == other}
            if metric == "full_grid" and not any(v is not None for v in [*a.values(), *b.values()]):
                continue
            out[metric].append(median_difference(a, b, arms[0], other))
    return out


def interval_rows(runs: list[RunStats]) -> tuple[list[str], list[list]]:
    head = ["metric", "difference of medians", "value", "95 % interval", "pairs (same seed)", "runs", "note"]
    rows = []
    for metric, items in intervals(runs).items():
        name = {"best": "best over the timed scenarios", "full_grid": "best kernel on the full grid"}[metric]
        for iv in items:
            rows.append(
                [
                    name,
                    f"{iv.b} - {iv.a}",
                    _num(iv.difference, "{:+.3f}"),
                    "-" if iv.low is None else f"[{iv.low:+.3f}, {iv.high:+.3f}]",
                    iv.paired,
                    f"{iv.n_a}+{iv.n_b}",
                    iv.note or "",
                ]
            )
    return head, rows


def markdown(runs: list[RunStats], note: str = "") -> str:
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
    h, rows = arm_rows(runs)
    lines += [
        "",
        "## Per arm",
        "",
        tabulate(rows, h, tablefmt="github", disable_numparse=True),
        "",
        "`median best`: the median over the arm's runs of each run's best speed-up; `IQR`: its 25th-75th "
        "percentiles; `range`: lowest-highest; `full grid`: each run's best kernel benched on the task's full "
        "grid at the end.",
    ]
    h, rows = interval_rows(runs)
    if rows:
        lines += [
            "",
            "## Difference between the arms",
            "",
            tabulate(rows, h, tablefmt="github", disable_numparse=True),
            "",
            "Percentile bootstrap (10,000 resamples of the seeds, fixed seed): each resample draws the seeds "
            "with replacement and takes the difference of the two arms' medians over them.",
        ]
    h, rows = run_rows(runs)
    lines += [
        "",
        "## Per run",
        "",
        tabulate(rows, h, tablefmt="github", disable_numparse=True),
        "",
        "`wrong`: evaluated candidates judged incorrect (wrong results, crashes, time-outs, build failures). "
        "`steps to best`: the step whose evaluation gave the run's best.",
    ]
    return "\n".join(lines) + "\n"


def plot(runs: list[RunStats], png: Path, svg: Path, title: str = "") -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

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
    ax.set_xlabel("step (model call)")
    ax.set_ylabel("best speed-up so far vs the baseline")
    ax.axhline(1.0, color="grey", linewidth=0.8, linestyle=":")
    ax.set_title(title or "Best-so-far speed-up against step")
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    fig.savefig(png, dpi=120)
    fig.savefig(svg)
    plt.close(fig)


def render(runs: list[RunStats], out_dir: Path, note: str = "") -> CompareOutputs:
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
    outs.markdown.write_text(markdown(runs, note), encoding="utf-8")
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
                "intervals": {k: [iv.to_dict() for iv in v] for k, v in intervals(runs).items()},
            },
            indent=1,
        )
    )
    tasks = ", ".join(sorted({r.task for r in runs}))
    plot(runs, outs.png, outs.svg, title=f"Best-so-far speed-up against step ({tasks})")
    return outs


def read_runs(path: Path) -> list[RunStats]:
    return [RunStats.from_dict(json.loads(l)) for l in Path(path).read_text(encoding="utf-8").splitlines() if l.strip()]
