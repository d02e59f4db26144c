"""What the commands share: the `kernelseek-suite` group itself (usage errors exit 4; a closed pipe
costs the output, never the exit code), the console, `--arch`, the progress bar, the GPU check, the
way errors end a command, and the options `run` and `compare` both take (the model, the limits, the
task's inputs, the question settings, the sandbox), declared once in groups, each group read back
into a small dataclass."""

from __future__ import annotations

import errno
import io
import os
import sys
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import click
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from .. import __version__, config
from ..contracts import exitcodes
from ..contracts.extras import MissingExtra
from . import termination

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
        except MissingExtra as e:  # an optional part whose packages are not installed
            click.echo(f"error: {e}", err=True)
            raise click.exceptions.Exit(exitcodes.USAGE) from None
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
    # is killed and what was measured is already on disk; held in a call into C, the process ends
    # config.SIGTERM_GRACE_S later all the same (termination.py)
    termination.on_sigterm(_terminate)


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


FILE = click.Path(dir_okay=False, path_type=Path)
EXISTING_FILE = click.Path(exists=True, dir_okay=False, path_type=Path)
FOLDER = click.Path(file_okay=False, path_type=Path)
EXISTING_FOLDER = click.Path(exists=True, file_okay=False, path_type=Path)


def out_dir_option(default: Path | None = None, help: str | None = None):
    """`--out DIR` (the parameter `out_dir`)."""
    return click.option("--out", "out_dir", type=FOLDER, default=default, show_default=default is not None, help=help)


# the options `run` and `compare` share: long name -> (click's declarations, their settings); a command
# may give an option its own help text
SHARED_OPTIONS: dict[str, tuple[tuple[str, ...], dict[str, Any]]] = {
    "--model": (("--model", "model_name"), {"help": "the model name the endpoint knows"}),
    "--base-url": (("--base-url",), {"help": "an OpenAI-compatible endpoint"}),
    "--max-steps": (("--max-steps",), {"type": int}),
    "--max-evals": (("--max-evals",), {"type": int}),
    "--max-wall": (("--max-wall",), {"type": float}),
    "--max-tokens": (("--max-tokens",), {"type": int}),
    "--max-cost": (("--max-cost",), {"type": float}),
    "--price": (("--price",), {"nargs": 2, "type": float, "metavar": "IN OUT", "help": "USD per million tokens"}),
    "--price-cached": (
        ("--price-cached",),
        {"type": float, "metavar": "USD", "help": "per million cached prompt tokens [default: IN]"},
    ),
    "--stream": (
        ("--stream",),
        {"is_flag": True, "help": "stream answers (server-sent events): for long generations"},
    ),
    "--temperature": (("--temperature",), {"type": float}),
    "--context-tokens": (
        ("--context-tokens",),
        {
            "type": click.IntRange(min=1000),
            "help": "the model's context window (default: the endpoint's, where it says it)",
        },
    ),
    "--max-attempts": (
        ("--max-attempts",),
        {"type": click.IntRange(min=1), "help": "tries per model call (default 6)"},
    ),
    "--retry-budget": (("--retry-budget",), {"type": float, "help": "seconds one model call may spend on retries"}),
    "--kernel": (("--kernel",), {"type": EXISTING_FILE}),
    "--goal": (("--goal",), {"type": float}),
    "--task-opt": (("--task-opt", "task_opts"), {"multiple": True, "metavar": "KEY=VALUE"}),
    "--categories": (("--categories",), {}),
    "--plateau": (("--plateau",), {"type": click.IntRange(min=1), "help": "K evaluations without a new best"}),
    "--repeats": (("--repeats",), {"type": click.IntRange(min=1), "help": "the same failure N times"}),
    "--spacing": (("--spacing",), {"type": click.IntRange(min=0), "help": "steps between questions"}),
    "--sandbox": (("--sandbox",), {"type": click.Choice(["auto", "landlock", "none"])}),
}


class Groups:
    """The groups of shared options, each in the order the commands list it."""

    MODEL_ENDPOINT = ("--model", "--base-url")
    MODEL_PRICING = ("--price", "--price-cached", "--stream")
    MODEL_CALLS = ("--temperature", "--context-tokens", "--max-attempts", "--retry-budget")
    LIMITS = ("--max-steps", "--max-evals", "--max-wall", "--max-tokens", "--max-cost")
    TASK_INPUTS = ("--kernel", "--goal", "--task-opt")
    QUESTIONS = ("--categories", "--plateau", "--repeats", "--spacing")
    SANDBOX = ("--sandbox",)


def shared_options(group: tuple[str, ...], helps: Mapping[str, str] | None = None):
    """A decorator that declares the shared options of `group` on a command, in that order (each
    defaults to None, a repeatable one to none given); `helps`: the command's own help text for some
    of them, by long name."""

    def apply(f):
        for name in reversed(group):
            decls, settings = SHARED_OPTIONS[name]
            default = {} if settings.get("multiple") else {"default": None}
            f = click.option(*decls, **{**default, **settings, **_help(name, helps)})(f)
        return f

    return apply


def _help(name: str, helps: Mapping[str, str] | None) -> dict:
    return {"help": helps[name]} if helps and name in helps else {}


_Bundle = TypeVar("_Bundle", bound="FromParams")


class FromParams:
    """A dataclass of options read back from a command's parameters, by name."""

    @classmethod
    def of(cls: type[_Bundle], params: Mapping[str, Any]) -> _Bundle:
        return cls(**{f.name: params[f.name] for f in fields(cls)})  # type: ignore[arg-type]


@dataclass(frozen=True)
class ModelOptions(FromParams):
    """Groups.MODEL_ENDPOINT, MODEL_PRICING and MODEL_CALLS: the model, its endpoint, its price and how
    it is called."""

    model_name: str | None
    base_url: str | None
    price: tuple[float, float] | None
    price_cached: float | None
    stream: bool | None
    temperature: float | None
    context_tokens: int | None
    max_attempts: int | None
    retry_budget: float | None

    def prices(self) -> dict:
        """--price IN OUT as ModelConfig fields."""
        if not self.price:
            return {}
        return {"price_input_per_mtok": self.price[0], "price_output_per_mtok": self.price[1]}

    def request_model(self) -> dict:
        """A comparison's model (ModelConfig fields), before call_settings."""
        return {
            "name": self.model_name,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "stream": bool(self.stream),
            **self.prices(),
        }

    def call_settings(self) -> dict:
        """The retries and the cached-token price given (ModelConfig fields)."""
        return _given(
            {
                "max_attempts": self.max_attempts,
                "retry_budget_s": self.retry_budget,
                "price_cached_input_per_mtok": self.price_cached,
            }
        )

    def configure(self, config) -> None:
        """A new run's model and context window (a RunConfig)."""
        model = {
            "name": self.model_name,
            "base_url": self.base_url,
            "temperature": self.temperature,
            "retry_budget_s": self.retry_budget,
            "price_cached_input_per_mtok": self.price_cached,
            "stream": bool(self.stream),
            **self.prices(),
        }
        if self.max_attempts is not None:
            model["max_attempts"] = self.max_attempts
        for k, v in model.items():
            setattr(config.model, k, v)
        config.context.window_tokens = self.context_tokens

    def resume_overrides(self) -> dict:
        """What a resumed run takes from the command line over its recorded model."""
        given = (
            ("base_url", self.base_url),
            ("name", self.model_name),
            ("max_attempts", self.max_attempts),
            ("retry_budget_s", self.retry_budget),
        )
        out = {k: v for k, v in given if v}
        out.update(self.prices())
        if self.price_cached is not None:
            out["price_cached_input_per_mtok"] = self.price_cached
        if self.stream:
            out["stream"] = True
        return out


@dataclass(frozen=True)
class LimitOptions(FromParams):
    """Groups.LIMITS: a run's budget."""

    max_steps: int | None
    max_evals: int | None
    max_wall: float | None  # minutes
    max_tokens: int | None
    max_cost: float | None

    def limits(self) -> dict:
        """The limits given (Limits fields: the wall time in seconds)."""
        given = asdict(self)
        wall = given.pop("max_wall")
        given["max_wall_s"] = None if wall is None else wall * 60
        return _given(given)


@dataclass(frozen=True)
class TaskInputs(FromParams):
    """Groups.TASK_INPUTS: the starting kernel, the goal and the task's options."""

    kernel: Path | None
    goal: float | None
    task_opts: tuple[str, ...]

    def options(self) -> dict:
        """The task's options (the kernel's path resolved)."""
        return task_options(self.kernel, self.goal, self.task_opts)


@dataclass(frozen=True)
class QuestionOptions(FromParams):
    """Groups.QUESTIONS: when an arm that asks questions asks them, and which."""

    categories: str | None  # comma-separated
    plateau: int | None
    repeats: int | None
    spacing: int | None

    def arm_options(self) -> dict:
        """The question settings given, as arm options."""
        from ..headtohead.protocol import QUESTION_KEYS

        given = {
            "categories": [c.strip() for c in self.categories.split(",") if c.strip()] if self.categories else None,
            "plateau": self.plateau,
            "repeats": self.repeats,
            "spacing": self.spacing,
        }
        return {QUESTION_KEYS[k]: v for k, v in _given(given).items()}


@dataclass(frozen=True)
class RunOptions:
    """The shared groups a command that starts runs reads back (`run`, `compare`)."""

    model: ModelOptions
    limits: LimitOptions
    task: TaskInputs
    questions: QuestionOptions

    @classmethod
    def of(cls, params: Mapping[str, Any]) -> RunOptions:
        return cls(ModelOptions.of(params), LimitOptions.of(params), TaskInputs.of(params), QuestionOptions.of(params))


def _given(values: dict[str, Any]) -> dict[str, Any]:
    """The values that were given (not None)."""
    return {k: v for k, v in values.items() if v is not None}
