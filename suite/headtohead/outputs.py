"""What a comparison writes from its traces: the candidates re-measured on this machine (where asked),
each run's best kernel benched on its task's full grid with the A/A control, the noise, the tables
and plot (report.py) and the page of the runs side by side. Progress goes to a `say` callback."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ..contracts.traces import read_trace
from ..reports.trace_html import render_traces
from .compare import _machine, interpreter_changes, remeasure, remeasured_by_trace, unprotected
from .final import FINAL_FILE, aa_control, bench_all, full_grid_repeats, read_rows
from .noise import NOISE_FILE, read_noise, trace_repeats, write_noise
from .protocol import CONTROL_DEFAULTS
from .report import CompareOutputs, render
from .runstats import stats_from_trace
from .sandbox_policy import remeasured_unsandboxed


def _quiet(message: str) -> None:
    pass


@dataclass
class Written:
    outputs: CompareOutputs  # the tables and plots (report.py)
    page: Path  # the runs, browsable


@dataclass
class ComparisonOutputs:
    """The outputs of the runs of `traces` in `out_dir`: `remeasure()` first where asked, then `write()`."""

    traces: list[Path]
    out_dir: Path
    sandbox: str = "auto"  # for re-measuring and the final bench
    control: dict = field(default_factory=dict)  # the A/A control and min_runs (CONTROL_DEFAULTS fill in)
    note: str = ""  # said under the tables
    say: Callable[[str], None] = _quiet
    remeasured: dict = field(default_factory=dict)  # trace -> its re-measured evaluations

    def __post_init__(self) -> None:
        self.control = {**CONTROL_DEFAULTS, **self.control}

    def remeasure(self) -> None:
        """Every recorded candidate evaluated again on this machine (HarnessTampered and EvaluatorFailed
        end it)."""
        say, out_dir = self.say, self.out_dir
        say(f"re-measuring the candidates of {len(self.traces)} trace(s) on this machine ...")
        rows = remeasure(self.traces, out_dir, sandbox=self.sandbox, on_result=lambda r: say(_remeasured(r)))
        self.remeasured = remeasured_by_trace(rows)
        if any(r.status == "no_gpu" for r in rows):
            say(
                "warning: some candidates could not be measured here (no suitable GPU); they count as "
                "not correct in the re-measured table"
            )
        note = f"Speed-ups re-measured on this machine ({out_dir / 'remeasure.jsonl'})."
        if remeasured_unsandboxed(self.sandbox):
            note += " The re-measurement ran without the sandbox (--allow-unsandboxed)."
        self.note = _joined(self.note, note, " ")

    def write(self, final_bench: dict | None) -> Written:
        """The final bench and the A/A control (where `final_bench` is enabled), the noise, the tables,
        the plot and the page of the runs."""
        traces, out_dir = self.traces, self.out_dir
        out_dir.mkdir(parents=True, exist_ok=True)  # --from-traces into a new folder
        lacking = unprotected(traces) + interpreter_changes(traces)
        if lacking:
            self.note = _joined(
                self.note,
                "Runs without every protection (docs/threat-model.md), allowed with --allow-unsandboxed:\n"
                + "\n".join(f"- {x}" for x in lacking),
                "\n\n",
            )
        fb = final_bench or {}
        aa = [r for r in read_noise(out_dir / NOISE_FILE) if r.source == "aa"]  # an earlier A/A control
        if fb.get("enabled"):
            self._final_bench(fb.get("timeout_s", 3600))
            aa = self._aa_control(fb.get("timeout_s", 3600))
        finals = read_rows(out_dir / FINAL_FILE)
        runs = [stats_from_trace(t, self.remeasured.get(str(t)), finals.get(str(t))) for t in traces]
        tasks = {r.trace: r.task for r in runs}
        noise = aa + full_grid_repeats({t: finals[t] for t in tasks if t in finals}, tasks) + trace_repeats(traces)
        write_noise(out_dir / NOISE_FILE, noise, _machine())
        outs = render(runs, out_dir, self.note, self.control["min_runs"], noise)
        # the runs themselves, browsable: two arms side by side
        page = render_traces(traces, out_dir / "traces.html", title=f"Head-to-head: {len(traces)} runs")
        return Written(outs, page)

    def _final_bench(self, timeout_s: float) -> None:
        k = self.control["rebench"]
        self.say(f"benching each run's best kernel on its task's full grid, {k} times ({len(self.traces)} run(s)) ...")
        bench_all(
            self.traces,
            self.out_dir,
            timeout_s,
            self.remeasured,
            sandbox=self.sandbox,
            repeats=k,
            on_result=lambda r: self.say(
                f"  {Path(r.trace).name}: {r.status} "
                + (f"{r.geomean:.3f}x" if r.geomean is not None else "")
                + (f" ({r.note})" if r.note else "")
            ),
        )

    def _aa_control(self, timeout_s: float) -> list:
        aa = []
        for trace in first_trace_per_task(self.traces):
            n = self.control["aa_repeats"]
            self.say(f"A/A control: the starting kernel of {trace.name}'s task evaluated {n} times as in a run ...")
            rep = aa_control(trace, self.out_dir, n, timeout_s, self.sandbox)
            self.say(
                f"  {rep.task}: "
                + (", ".join(f"{v:.3f}x" for v in rep.values) or "-")
                + (f" ({rep.status}: {rep.note})" if rep.status != "ok" else "")
            )
            aa.append(rep)
        return aa


def _remeasured(r) -> str:
    recorded = "-" if r.recorded_geomean is None else f"{r.recorded_geomean:.3f}x"
    now = "-" if r.geomean is None else f"{r.geomean:.3f}x"
    return (
        f"  {Path(r.trace).name} evaluation {r.eval_index}: recorded {r.recorded_status} {recorded}, "
        f"now {r.status} {now}"
    )


def _joined(first: str, then: str, sep: str) -> str:
    return (first + sep if first else "") + then


def first_trace_per_task(traces: list[Path]) -> list[Path]:
    seen: dict[str, Path] = {}
    for t in traces:
        events = read_trace(t).events
        task = (events[0].get("task") or {}).get("name", "") if events else ""
        seen.setdefault(task, t)
    return list(seen.values())
