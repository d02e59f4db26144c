"""Trace analysis: what each run did (human messages, bank questions by category, tool calls by tool,
evaluations, wrong candidates) and the test of the central claim, gain attribution. A large gain is
a correct evaluation of a new kernel (its sha256 is neither the previous best's nor that of any
kernel evaluated before in the run) whose speed-up beats the run's best so far by more than the
noise band of the task (noise.py: the A/A control's band from the comparison's `noise.json`, or the
byte-identical re-evaluations in the traces), and by at least `threshold` when one is given; with
no band measured and no threshold given, 10 % stands in and the output says so. A re-evaluation of
an unchanged kernel is never a gain, whatever it measured: it is listed as not credited. (The first
correct evaluation sets the starting level and is not a gain.) A gain is attributed to the nearest
question asked after the previous best and before it (none: `none`), with the question's category
(`layer-shift`, `limit-rejection`, `information`; `human` for a typed one) and the layer of the
system that the agent's next edits touched (edit_file's added lines and shell commands between the
question and the gain, scored by layers.py), beside the layer it had worked in before the question.
control.py says what the same gains would credit by chance (question times shuffled) and at the rate
of the arms that ask no questions.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from pathlib import Path

from tabulate import tabulate

from ..agents import layers
from ..contracts.traces import question_category, read_trace
from .control import ArmRate, CategoryControl, Control, control
from .noise import Repeats, bands, trace_repeats
from .plots import Frame, finish, pyplot
from .runstats import EvalPoint, arm_label
from .tables import Columns, column_rows

DEFAULT_THRESHOLD = 0.10
CATEGORIES = ("layer-shift", "limit-rejection", "information", "human", "none")
CATEGORY_COLORS = {
    "layer-shift": "#2ca02c",
    "limit-rejection": "#d62728",
    "information": "#9467bd",
    "human": "#8c564b",
    "uncategorized": "#7f7f7f",
}


@dataclass
class Gain:
    trace: str
    run_id: str
    arm: str
    eval_index: int
    step: int
    before: float
    after: float
    gain_pct: float
    category: str  # of the question it followed, or "none"
    question_step: int | None  # the question's step, trigger, bank id and text (None without one)
    question_trigger: str | None
    question_id: str | None
    question_text: str | None
    layer_before: str | None  # the layer worked in before the question (None without one)
    layer_after: str | None  # the layer of the edits that led to the gain
    prev_best_step: int = 0  # the step of the best this gain beats
    candidate_sha256: str = ""
    threshold: float = 0.0  # the gain it had to exceed (a fraction)
    note: str = ""  # why a gain above the threshold is not credited


@dataclass
class RunAnalysis:
    trace: str
    run_id: str
    arm: str
    steps: int
    human_messages: int
    questions_by_category: dict[str, int]
    tool_calls: dict[str, int]
    evaluations: int
    wrong: int
    gains: list[Gain]
    points: list[EvalPoint] = field(default_factory=list)
    questions: list[tuple[int, str]] = field(default_factory=list)  # (step, category)
    task: str = ""
    threshold: float = DEFAULT_THRESHOLD  # the gain a large gain exceeded in this run
    threshold_source: str = ""
    not_credited: list[Gain] = field(default_factory=list)  # above the threshold, but the same kernel


@dataclass
class Analysis:
    threshold: float | None  # the threshold given (None: the noise band alone)
    runs: list[RunAnalysis]
    shuffles: int = 2000
    _control: Control | None = None
    thresholds: dict[str, tuple[float, str]] = field(default_factory=dict)  # task -> (threshold, where from)

    @property
    def control(self) -> Control:
        """The attribution's baselines (control.py), computed once."""
        if self._control is None:
            self._control = control(self.runs, self.shuffles)
        return self._control

    @property
    def gains(self) -> list[Gain]:
        return [g for r in self.runs for g in r.gains]

    def shares(self, arm: str | None = None) -> dict[str, tuple[int, float]]:
        """category -> (large gains that followed it, their share of all large gains)."""
        gains = [g for g in self.gains if arm is None or g.arm == arm]
        cats = list(CATEGORIES) + sorted({g.category for g in gains} - set(CATEGORIES))
        total = len(gains)
        return {c: (n, n / total if total else 0.0) for c in cats for n in [sum(g.category == c for g in gains)]}


def _layer(texts: dict[int, list[str]], step_layers: dict[int, dict], lo: int, hi: int) -> str | None:
    """The dominant layer of the edits and commands of steps lo < step <= hi (the steps' recorded layer
    scores when there were none)."""
    text = "\n".join(t for s in range(lo + 1, hi + 1) for t in texts.get(s, []))
    scores = layers.scores(text) if text.strip() else {}
    if not scores:
        for s in range(lo + 1, hi + 1):
            for lid, n in (step_layers.get(s) or {}).items():
                scores[lid] = scores.get(lid, 0) + n
    return layers.dominant(scores)


def analyze_events(
    events: list[dict], trace: str, threshold: float = DEFAULT_THRESHOLD, band: float | None = None, source: str = ""
) -> RunAnalysis:
    """`threshold`: the least gain a large gain has (a fraction); `band`: the task's noise band, which a
    large gain must exceed."""
    start = events[0]
    texts: dict[int, list[str]] = {}
    step_layers: dict[int, dict] = {}
    calls: dict[str, int] = {}
    by_cat: dict[str, int] = {}
    human = steps = 0
    questions: list[dict] = []
    points: list[EvalPoint] = []
    gains: list[Gain] = []
    held: list[Gain] = []
    seen: dict[str, int] = {}  # sha256 -> the first evaluation of that kernel
    best: float | None = None
    best_sha = ""
    best_step, best_seq = 0, -1
    for ev in events:
        t = ev["type"]
        if t == "tool_result":
            calls[ev["tool"]] = calls.get(ev["tool"], 0) + 1
            if ev["tool"] == "edit_file" and ev.get("data"):
                texts.setdefault(ev["step"], []).append(str(ev["data"].get("added", "")))
            elif ev["tool"] == "shell":
                texts.setdefault(ev["step"], []).append(str(ev["arguments"].get("command", "")))
        elif t == "step":
            step_layers[ev["step"]] = ev.get("layers") or {}
            steps = max(steps, ev["totals"]["steps"])
        elif t == "question":
            cat = question_category(ev)
            by_cat[cat] = by_cat.get(cat, 0) + 1
            human += ev.get("source") == "human"
            questions.append(ev)
        elif t == "harness_eval":
            p = EvalPoint(
                ev["index"], ev["step"], ev["status"], ev["correct"], ev.get("geomean"), ev["candidate_sha256"]
            )
            points.append(p)
            earlier = seen.get(p.candidate_sha256)
            seen.setdefault(p.candidate_sha256, p.index)
            if not (p.correct and p.geomean is not None):
                continue
            again = p.candidate_sha256 == best_sha or earlier is not None
            if best is not None and again and p.geomean > best and p.geomean >= best * (1 + threshold):
                # an unchanged kernel measured above the previous best: listed, never credited
                g = _attribute(ev, p, best, best_step, best_seq, questions, texts, step_layers, trace, start)
                g.threshold = max(threshold, band or 0.0)
                g.note = (
                    "the same kernel as the previous best (sha256): a re-measurement, not a gain"
                    if p.candidate_sha256 == best_sha
                    else f"a kernel first evaluated at evaluation {earlier}: a re-measurement, not a gain"
                )
                held.append(g)
            elif best is not None and not again and _large(p.geomean, best, threshold, band):
                g = _attribute(ev, p, best, best_step, best_seq, questions, texts, step_layers, trace, start)
                g.threshold = max(threshold, band or 0.0)
                gains.append(g)
            if best is None or p.geomean > best:
                best, best_step, best_seq, best_sha = p.geomean, p.step, ev["seq"], p.candidate_sha256
    return RunAnalysis(
        trace,
        start.get("run_id", ""),
        arm_label(start),
        steps,
        human,
        by_cat,
        dict(sorted(calls.items())),
        len(points),
        sum(1 for p in points if not p.correct and p.status not in ("no_gpu", "error")),
        gains,
        points,
        [(q["step"], question_category(q)) for q in questions],
        task=(start.get("task") or {}).get("name", ""),
        threshold=max(threshold, band or 0.0),
        threshold_source=source,
        not_credited=held,
    )


def _large(value: float, best: float, threshold: float, band: float | None) -> bool:
    """A gain of at least `threshold` that exceeds the noise band."""
    return value >= best * (1 + threshold) and (band is None or value > best * (1 + band))


def _attribute(ev, p, before, best_step, best_seq, questions, texts, step_layers, trace, start) -> Gain:
    q = next((q for q in reversed(questions) if best_seq < q["seq"] < ev["seq"]), None) or {}
    return Gain(
        trace,
        start.get("run_id", ""),
        arm_label(start),
        p.index,
        p.step,
        before,
        p.geomean,
        round((p.geomean / before - 1) * 100, 2),
        question_category(q) if q else "none",
        q.get("step"),
        q.get("trigger"),
        q.get("bank_id"),
        q.get("text"),
        _layer(texts, step_layers, best_step, q["step"]) if q else None,
        _layer(texts, step_layers, q.get("step", best_step), p.step),
        prev_best_step=best_step,
        candidate_sha256=p.candidate_sha256,
    )


def analyze(
    paths: list[Path], threshold: float | None = None, shuffles: int = 2000, noise: list[Repeats] | None = None
) -> Analysis:
    """`threshold`: the least gain (a fraction) a large gain has, beside the noise band (None: the band
    alone, or 10 % where no band was measured). `noise`: the comparison's A/A control (noise.json);
    the byte-identical re-evaluations in the traces add to it."""
    loaded = []
    for path in paths:
        events = read_trace(path).events
        if not events or events[0].get("type") != "run_start":
            raise ValueError(f"{path}: not a trace (no run_start)")
        loaded.append((path, events))
    found = bands([r for r in [*(noise or []), *trace_repeats(paths)] if r.kind == "evaluation"])
    thresholds: dict[str, tuple[float, str]] = {}
    runs = []
    for path, events in loaded:
        task = (events[0].get("task") or {}).get("name", "")
        nb = found.get((task, "evaluation"))
        band = nb.band if nb else None
        floor = threshold if threshold is not None else (DEFAULT_THRESHOLD if band is None else 0.0)
        if nb is None or band is None:
            source = (
                f"the --gain given ({floor * 100:g} %); no noise band measured for {task}"
                if threshold is not None
                else f"no noise band measured for {task}: {DEFAULT_THRESHOLD * 100:g} % stands in (not a measurement)"
            )
        else:
            source = f"the noise band of {task}, +{band * 100:.1f} % ({', '.join(nb.sources)})"
            if threshold is not None and threshold > band:
                source = (
                    f"the --gain given ({threshold * 100:g} %), above the noise band of {task} (+{band * 100:.1f} %)"
                )
        thresholds[task] = (max(floor, band or 0.0), source)
        runs.append(analyze_events(events, str(path), floor, band, source))
    return Analysis(threshold, runs, shuffles, thresholds=thresholds)


# ---------------------------------------------------------------- tables


def _counts(d: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(d.items(), key=lambda kv: (-kv[1], kv[0]))) or "-"


def _table(items: list, columns: Columns) -> str:
    """A GitHub-style table of `items`."""
    head, rows = column_rows(items, columns)
    return tabulate(rows, head, tablefmt="github")


def _question(g: Gain) -> str:
    if g.question_step is None:
        return "-"
    return f"step {g.question_step} {g.question_trigger or ''}" + (f" {g.question_id}" if g.question_id else "")


def _gain_columns(gain: str) -> dict[str, Callable[[Gain], object]]:
    """The columns that say which gain it is: the run, the evaluation, the speed-up, the gain (headed
    `gain`) and the question it followed."""
    return {
        "run": attrgetter("run_id"),
        "eval": attrgetter("eval_index"),
        "step": attrgetter("step"),
        "speed-up": lambda g: f"{g.before:.3f}x -> {g.after:.3f}x",
        gain: lambda g: f"+{g.gain_pct:.1f} %",
        "after question": attrgetter("category"),
    }


_RUN_COLUMNS: dict[str, Callable[[RunAnalysis], object]] = {
    "run": attrgetter("run_id"),
    "arm": attrgetter("arm"),
    "human messages": attrgetter("human_messages"),
    "bank questions": lambda r: _counts({k: v for k, v in r.questions_by_category.items() if k != "human"}),
    "tool calls": lambda r: _counts(r.tool_calls),
    "evaluations": attrgetter("evaluations"),
    "wrong": attrgetter("wrong"),
    "large gains": lambda r: len(r.gains),
}
_GAIN_COLUMNS = {
    **_gain_columns("gain"),
    "question": _question,
    "layers": lambda g: f"{g.layer_before or '-'} -> {g.layer_after or '-'}",
}
_HELD_COLUMNS: Columns = {**_gain_columns("apparent gain"), "why": attrgetter("note")}
_RATE_COLUMNS: dict[str, Callable[[ArmRate], object]] = {
    "arm": attrgetter("arm"),
    "runs": attrgetter("runs"),
    "steps": attrgetter("steps"),
    "evaluations": attrgetter("evaluations"),
    "large gains": attrgetter("gains"),
    "per 10 evaluations": lambda x: "-" if x.per_eval is None else f"{x.per_eval * 10:.2f}",
    "per 100 steps": lambda x: "-" if not x.steps else f"{x.gains / x.steps * 100:.1f}",
}
_CONTROL_COLUMNS: dict[str, Callable[[CategoryControl], object]] = {
    "arm": attrgetter("arm"),
    "category": attrgetter("category"),
    "questions": attrgetter("questions"),
    "credited": attrgetter("credited"),
    "by chance: mean [95 %]": lambda c: f"{c.chance_mean:.2f} [{c.chance_low:g}-{c.chance_high:g}]",
    "p": lambda c: f"{c.p:.3f}",
    "evaluations after": attrgetter("evals_after"),
    "at the other arms' rate": lambda c: "-" if c.at_other_rate is None else f"{c.at_other_rate:.2f}",
}


def run_table(a: Analysis) -> str:
    return _table(a.runs, _RUN_COLUMNS)


def gains_table(a: Analysis) -> str:
    return _table(a.gains, _GAIN_COLUMNS)


def shares_table(a: Analysis) -> str:
    arms = sorted({r.arm for r in a.runs})
    every = a.shares()
    per = {arm: a.shares(arm) for arm in arms}
    rows = []
    for cat, (n, share) in every.items():
        rows.append(
            [cat, n, f"{share * 100:.0f} %"] + [f"{per[arm][cat][0]} ({per[arm][cat][1] * 100:.0f} %)" for arm in arms]
        )
    rows.append(
        ["all large gains", len(a.gains), ""] + [str(len([g for g in a.gains if g.arm == arm])) for arm in arms]
    )
    return tabulate(rows, ["followed", "large gains", "share"] + arms, tablefmt="github")


def rates_table(a: Analysis) -> str:
    return _table(a.control.rates, _RATE_COLUMNS)


def control_table(a: Analysis) -> str:
    return _table(a.control.categories, _CONTROL_COLUMNS)


def markdown(a: Analysis) -> str:
    ctl = a.control
    lines = [
        "# Trace analysis",
        "",
        "Large gain: a correct evaluation of a new kernel (its sha256 neither the previous best's nor that of a "
        "kernel evaluated before in the run) above the run's previous best by more than the threshold of its task:",
        "",
        *[f"- {task or '(no task)'}: +{v * 100:.1f} %: {src}" for task, (v, src) in sorted(a.thresholds.items())],
        "",
        "Each is attributed to the nearest question asked after the previous best (none: `none`); the layers are "
        "those of the agent's edits and commands before the question and between the question and the gain.",
        "",
        "## Share of large gains by the question they followed",
        "",
        shares_table(a),
        "",
        "## Against chance and against the other arms",
        "",
        f"`credited`: large gains attributed to the category. `by chance`: the same gains with each run's "
        f"question times shuffled among its steps ({ctl.shuffles} shuffles, fixed seed): the mean credit and its "
        "95 % range; `p`: the share of shuffles crediting at least as many. `at the other arms' rate`: the large "
        "gains the evaluations after the category's questions would give at the rate of the arms without "
        "questions. A category whose credit is no more than chance and the other arms' rate give is credited "
        "for its timing, not its effect.",
        "",
    ]
    lines += [control_table(a) if ctl.categories else "(no arm asked questions)", "", rates_table(a), ""]
    lines += ["## Runs", "", run_table(a), "", "## Large gains", "", gains_table(a) if a.gains else "(none)", ""]
    held = [g for r in a.runs for g in r.not_credited]
    lines += [
        "## Not credited: re-measurements of an unchanged kernel",
        "",
        held_table(held) if held else "(none)",
        "",
    ]
    return "\n".join(lines)


def held_table(held: list[Gain]) -> str:
    return _table(held, _HELD_COLUMNS)


def write_gains_csv(a: Analysis, path: Path) -> None:
    _write_csv(path, list(Gain.__dataclass_fields__), [asdict(g) for g in a.gains])


def _write_csv(path: Path, fields: list[str], rows: list[dict]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=fields)
        w.writeheader()
        w.writerows(rows)


# ---------------------------------------------------------------- timeline plots


def timeline(r: RunAnalysis, gains: list[Gain], png: Path) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(10, 4.5))
    best, xs, ys = None, [], []
    for p in r.points:
        if p.correct and p.geomean is not None and (best is None or p.geomean > best):
            best = p.geomean
        if best is not None:
            xs.append(p.step)
            ys.append(best)
    if xs:
        xs.append(max(r.steps, xs[-1]))
        ys.append(ys[-1])
        ax.step(xs, ys, where="post", color="black", linewidth=1.5, label="best so far")
    ok = [(p.step, p.geomean) for p in r.points if p.correct and p.geomean is not None]
    if ok:
        ax.plot(*zip(*ok), "o", color="#1f77b4", markersize=4, label="correct candidate")
    bad = [p.step for p in r.points if not p.correct]
    if bad:
        ax.plot(bad, [0] * len(bad), "x", color="#d62728", markersize=6, label="wrong or failed candidate")
    seen = set()
    for step, cat in r.questions:
        ax.axvline(
            step,
            color=CATEGORY_COLORS.get(cat, "#7f7f7f"),
            linewidth=1,
            alpha=0.8,
            label=f"question: {cat}" if cat not in seen else None,
        )
        seen.add(cat)
    if gains:
        ax.plot(
            [g.step for g in gains],
            [g.after for g in gains],
            "*",
            color="gold",
            markeredgecolor="black",
            markersize=14,
            label="large gain",
        )
    finish(fig, ax, Frame("step (model call)", "speed-up vs the baseline", f"{r.run_id} ({r.arm})", 7, "upper left"))
    fig.savefig(png, dpi=110)
    plt.close(fig)


def write(a: Analysis, out_dir: Path) -> list[Path]:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = [out_dir / "analysis.md", out_dir / "gains.csv", out_dir / "attribution.csv"]
    written[0].write_text(markdown(a), encoding="utf-8")
    write_gains_csv(a, written[1])
    cats = a.control.categories
    fields = list(CategoryControl.__dataclass_fields__) if cats else ["arm", "category"]
    _write_csv(written[2], fields, [asdict(c) for c in cats])
    for r in a.runs:
        name = re.sub(r"[^\w.-]+", "_", r.run_id or Path(r.trace).stem)
        png = out_dir / f"timeline-{name}.png"
        timeline(r, [g for g in a.gains if g.trace == r.trace], png)
        written.append(png)
    return written
