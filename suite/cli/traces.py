"""`kernelseek-suite traces ...`: validate, show and analyze agent run traces."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..exitcodes import FAIL, OK, USAGE
from .common import fail, say


@click.group("traces")
def traces_group():
    """Validate and read agent run traces."""


@traces_group.command("validate")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
def traces_validate(files):
    """Check FILES against the trace schema; exit 1 if any is invalid."""
    from ..agents.trace import validate_trace

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
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def traces_show(file):
    """A readable timeline of a run."""
    from ..agents.trace import read_trace, timeline_lines

    tf = read_trace(file)
    for line in timeline_lines(tf.events):
        click.echo(line)
    for p in tf.problems:
        click.echo(f"warning: {p}", err=True)


@traces_group.command("analyze")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, path_type=Path))
@click.option(
    "--gain",
    "threshold",
    type=float,
    default=10.0,
    show_default=True,
    help="a large gain: a new best at least this many percent above the previous best",
)
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("results/analysis"),
    show_default=True,
)
def traces_analyze(files, threshold, out_dir):
    """Questions, tool calls, evaluations and gain attribution for FILES (traces, or folders of them)."""
    from ..headtohead.analysis import analyze, markdown, write
    from ..headtohead.runstats import find_traces

    traces = [t for f in files for t in find_traces(f)]
    if not traces:
        fail("no traces among the given files", USAGE)
    a = analyze(traces, threshold / 100.0)
    click.echo(markdown(a))
    written = write(a, out_dir)
    say(f"wrote {', '.join(str(p) for p in written)}")


@traces_group.command("html")
@click.argument("files", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option(
    "--out",
    "out_dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="the folder of the page (default: the first trace's); <trace>.html for one run, traces.html for several",
)
def traces_html(files, out_dir):
    """A self-contained page (no server, no network) to browse the runs of FILES: timeline, best-so-far
    curve with the questions, conversation, each candidate's diff; two runs side by side."""
    from ..agents.trace import read_trace
    from ..reports.trace_html import default_output, render_traces

    for f in files:
        events = read_trace(f).events
        if not events or events[0].get("type") != "run_start":
            fail(f"{f}: not a trace (it does not start with run_start)", USAGE)
    out = render_traces(list(files), default_output(list(files), out_dir))
    click.echo(f"page: {out}")


COMMANDS = (traces_group,)
