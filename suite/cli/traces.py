"""`kernelseek-suite traces ...`: validate, show and analyze agent run traces."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from ..contracts.exitcodes import FAIL, OK, USAGE
from .common import EXISTING_FILE, fail, out_dir_option, say


@click.group("traces")
def traces_group():
    """Validate and read agent run traces."""


@traces_group.command("validate")
@click.argument("files", nargs=-1, required=True, type=EXISTING_FILE)
def traces_validate(files):
    """Check FILES against the trace schema; exit 1 if any is invalid."""
    from ..contracts.traces import validate_trace

    bad = 0
    for f in files:
        v = validate_trace(f)
        click.echo(f"{f}: {'valid' if v.ok else 'INVALID'} ({v.events} events)")
        for e in v.errors[:50]:
            click.echo(f"  error: {e}")
        if len(v.errors) > 50:
            click.echo(f"  ... and {len(v.errors) - 50} more errors")
        for n in v.notes:
            click.echo(f"  note: {n}")
        bad += not v.ok
    sys.exit(FAIL if bad else OK)


@traces_group.command("show")
@click.argument("file", type=EXISTING_FILE)
@click.option(
    "--json", "as_json", is_flag=True, help="one JSON object: the run, how it ended, the timeline's lines, the problems"
)
def traces_show(file, as_json):
    """A readable timeline of a run. A file that is not a trace (no run_start first) exits 4."""
    from ..contracts.traces import read_trace, timeline_lines

    tf = _read_or_fail(file, read_trace, as_json)
    lines = timeline_lines(tf.events)
    if as_json:
        click.echo(json.dumps(_show_record(file, tf, lines)))
        return
    for line in lines:
        click.echo(line)
    for p in tf.problems[:SHOWN_PROBLEMS]:
        click.echo(f"warning: {p}", err=True)
    if len(tf.problems) > SHOWN_PROBLEMS:
        click.echo(f"warning: ... and {len(tf.problems) - SHOWN_PROBLEMS} more lines that are not events", err=True)


SHOWN_PROBLEMS = 10  # `traces show`: the warnings about lines that are not events, at most


def _read_or_fail(file: Path, read_trace, as_json: bool = False):
    """The trace in FILE, or the command ends with USAGE and one line saying why it is not one."""

    def not_a_trace(why: str):
        message = f"{file}: not a trace ({why})"
        fail(message, USAGE, {"file": str(file), "error": message} if as_json else None)

    try:
        tf = read_trace(file)
    except UnicodeDecodeError:
        not_a_trace("not UTF-8 text")
    if not tf.events:
        not_a_trace(f"none of its {len(tf.problems)} lines is a JSON object" if tf.problems else "it is empty")
    if tf.events[0].get("type") != "run_start":
        not_a_trace(f"its first event is {str(tf.events[0].get('type'))!r}, not run_start")
    return tf


def _show_record(file: Path, tf, lines: list[str]) -> dict:
    start = tf.events[0]
    last = {ev.get("type"): ev for ev in tf.events}
    end, exit_ = last.get("run_end"), last.get("exit")
    return {
        "file": str(file),
        "run_id": start.get("run_id"),
        "arm": start.get("arm"),
        "task": (start.get("task") or {}).get("name"),
        "model": (start.get("model") or {}).get("name"),
        "events": len(tf.events),
        "finished": end is not None,
        "exit": None if exit_ is None else {k: exit_.get(k) for k in ("reason", "limit", "message")},
        "goal_met": None if end is None else bool(end.get("goal_met")),
        "best": None if end is None else end.get("best"),
        "totals": None if end is None else end.get("totals"),
        "cut_short": tf.cut_short,
        "problems": tf.problems,
        "timeline": lines,
    }


@traces_group.command("analyze")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--gain",
    "threshold",
    type=float,
    default=None,
    help="a large gain is also at least this many percent above the previous best [default: the task's noise "
    "band alone; 10 where none was measured]",
)
@click.option(
    "--noise",
    "noise_file",
    type=EXISTING_FILE,
    help="a comparison's noise.json (the A/A control) [default: the one beside the traces, if any]",
)
@out_dir_option(Path("results/analysis"))
def traces_analyze(files, threshold, noise_file, out_dir):
    """Questions, tool calls, evaluations and gain attribution for FILES (traces, or folders of them). A
    gain is credited only for a new kernel (sha256) and above the task's noise band (the A/A control)."""
    from ..headtohead.analysis import analyze, markdown, write
    from ..headtohead.noise import find_noise, read_noise
    from ..headtohead.runstats import find_traces

    traces = [t for f in files for t in find_traces(f)]
    if not traces:
        fail("no traces among the given files", USAGE)
    noise_file = noise_file or find_noise(list(files))
    if noise_file:
        say(f"the A/A control of {noise_file}")
    a = analyze(
        traces, None if threshold is None else threshold / 100.0, noise=read_noise(noise_file) if noise_file else None
    )
    click.echo(markdown(a))
    written = write(a, out_dir)
    say(f"wrote {', '.join(str(p) for p in written)}")


@traces_group.command("html")
@click.argument("files", nargs=-1, required=True, type=EXISTING_FILE)
@out_dir_option(
    help="the folder of the page (default: the first trace's); <trace>.html for one run, traces.html for several"
)
def traces_html(files, out_dir):
    """A self-contained page (no server, no network) to browse the runs of FILES: timeline, best-so-far
    curve with the questions, conversation, each candidate's diff; two runs side by side."""
    from ..contracts.traces import read_trace
    from ..reports.trace_html import default_output, render_traces

    for f in files:
        _read_or_fail(f, read_trace)
    out = render_traces(list(files), default_output(list(files), out_dir))
    click.echo(f"page: {out}")


COMMANDS = (traces_group,)
