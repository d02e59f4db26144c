"""What the commands share: the `kernelseek-suite` group itself (usage errors exit 4; a closed pipe
costs the output, never the exit code), the console, `--arch`, the progress bar, the GPU check and
the way errors end a command."""

from __future__ import annotations

import errno
import io
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import __version__, config
from ..contracts import exitcodes

console = Console(stderr=True)


def fail(message: str, code: int, as_json: dict | None = None) -> NoReturn:
    """End the command: `error: message` on stderr (and `as_json` on stdout for --json callers)."""
    if as_json is not None:
        import json

        click.echo(json.dumps(as_json))
    click.echo(f"error: {message}", err=True)
    sys.exit(code)


def _to_devnull(fd: int) -> None:
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def _quiet_pipe() -> None:
    """The reader went away (`... | head`): what is left to write goes nowhere, and the exit is
    quiet (no BrokenPipeError at the interpreter's final flush)."""
    try:
        _to_devnull(sys.stdout.fileno())
    except (OSError, ValueError):  # no real file descriptor (a test runner's buffer)
        pass


class _PipeSafeRaw(io.RawIOBase):
    """A file descriptor that outlives its reader: once the reader has gone (EPIPE), the descriptor
    is pointed at /dev/null and every write, that one included, succeeds. Its owner never closes it."""

    def __init__(self, fd: int):
        super().__init__()
        self._fd = fd

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:
        return self._fd

    def isatty(self) -> bool:
        return os.isatty(self._fd)

    def write(self, b) -> int:
        try:
            return os.write(self._fd, b)
        except OSError as e:
            if e.errno != errno.EPIPE:
                raise
            _to_devnull(self._fd)
            return len(memoryview(b))


def survive_closed_pipes() -> None:
    """Make stdout and stderr survive a reader that goes away (`reproduce 2>&1 | head -2`): the
    rest of the output is dropped and the command goes on to its own exit code (a closed pipe turns
    neither a failure into 0 nor a success into 1). Streams without a file descriptor (a test
    runner's buffers) are left as they are."""
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(getattr(stream, "buffer", None), io.BufferedWriter) and isinstance(
            stream.buffer.raw, _PipeSafeRaw
        ):
            continue
        try:
            fd = stream.fileno()
            stream.flush()
        except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
            continue
        safe = io.TextIOWrapper(
            io.BufferedWriter(_PipeSafeRaw(fd)),
            encoding=stream.encoding,
            errors=stream.errors,
            line_buffering=stream.line_buffering,
            write_through=getattr(stream, "write_through", False),
        )
        setattr(sys, name, safe)


class SuiteGroup(click.Group):
    """click.Group with the suite's exit codes: click's usage errors (an unknown command or option,
    a bad choice, a missing file) exit USAGE, not click's 2, which here means "does not build"."""

    def make_context(self, info_name, args, parent=None, **extra):
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as e:
            e.exit_code = exitcodes.USAGE
            raise

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.UsageError as e:
            e.exit_code = exitcodes.USAGE
            raise
        except BrokenPipeError:  # a stream survive_closed_pipes could not wrap
            _quiet_pipe()
            raise click.exceptions.Exit(exitcodes.OK) from None


@click.group(cls=SuiteGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelseek-suite")
def main() -> None:
    """Evaluate single-file FlashAttention forward kernels against FA3/FA4/cuDNN, and the agents
    that write them. Exit codes: 0 ok, 1 not correct everywhere, 2 the kernel breaks the rules or
    does not build, 3 no suitable GPU, 4 bad arguments (`doctor`: 10-18, see its help)."""
    survive_closed_pipes()
    # SIGTERM (timeout, a job scheduler) unwinds like Ctrl-C, so a sweep's cleanup runs: its worker
    # is killed and what was measured is already on disk
    signal.signal(signal.SIGTERM, _terminate)


def _terminate(signum, frame):
    raise SystemExit(exitcodes.signalled(signum))


def arch_option(f):
    return click.option(
        "--arch",
        type=click.Choice(sorted(config.ARCHES)),
        default="sm90",
        show_default=True,
        help="target architecture",
    )(f)


def progress() -> Progress:
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[last]}"),
        console=console,
    )


def run_with_progress(fn: Callable[..., Any], label: str) -> Any:
    """Call fn(on_row=..., on_start=...) with a progress bar on stderr."""
    with progress() as prog:
        task = prog.add_task(label, total=1, last="")

        def on_start(total, already):
            prog.update(task, total=total, completed=already)

        def on_row(row):
            r = "/".join(f"{b} {v:.2f}x" for b, v in row.ratio.items())
            prog.update(task, advance=1, last=f"{row.scenario}: {row.status} {r}")

        return fn(on_row=on_row, on_start=on_start)


def say(msg: str) -> None:
    """A progress message, on stderr (above the progress bar while one is shown)."""
    click.echo(msg, err=True)


def key_values(items, hint) -> dict:
    import yaml

    opts = {}
    for item in items:
        if "=" not in item:
            raise click.BadParameter(f"{item!r}: expected KEY=VALUE", param_hint=hint)
        k, v = item.split("=", 1)
        try:
            value = yaml.safe_load(v)
        except yaml.YAMLError:  # not YAML (a template such as "{cmd} resume {prompt}"): the text itself
            value = v
        opts[k.strip().replace("-", "_")] = value
    return opts


def task_options(kernel, goal, task_opts) -> dict:
    opts = key_values(task_opts, "--task-opt")
    if kernel:
        opts["kernel"] = str(Path(kernel).resolve())
    if goal is not None:
        opts["goal"] = goal
    return opts
