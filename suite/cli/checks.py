"""`kernelseek-suite selfcheck` and `toolrich-check`: a task's tools, or the tool-rich arm's
equipment, driven through the agent loop with a fixed script instead of a model, so that a machine
is checked without an endpoint (agents/selfcheck.py, agents/toolrich_check.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..contracts.exitcodes import USAGE
from .common import fail

_TRACE = click.option(
    "--trace",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="trace file (default: a temporary folder)",
)


@click.command("selfcheck")
@click.option("--task", default="fa-fwd-sm90", show_default=True)
@click.option("--kernel", default=None, help="starting kernel (default: the task's own)")
@_TRACE
@click.option("--sandbox", type=click.Choice(["auto", "landlock", "none"]), default="auto", show_default=True)
@click.option(
    "--allow-unsandboxed",
    is_flag=True,
    help="pass even when a protection is missing (it is still named, with what gives it back)",
)
def selfcheck_cmd(task, kernel, trace, sandbox, allow_unsandboxed):
    """Drive a task's tools through the agent loop with a fixed script instead of a model: view, shell
    (a write outside the workspace and a read of the repository tried), edit, evaluate. Exit 0 when
    the evaluation is correct everywhere with a geomean and every protection is in force (or
    --allow-unsandboxed), 1 otherwise, 3 no suitable GPU, 6 the evaluator's own machinery failed."""
    from ..agents.selfcheck import SelfCheckOptions, selfcheck

    sys.exit(selfcheck(SelfCheckOptions(task, kernel, trace, sandbox, allow_unsandboxed), click.echo))


@click.command("toolrich-check")
@click.option("--task", default="fa-fwd-sm90", show_default=True)
@click.option("--kernel", default=None, help="the kernel (default: the task's own starting kernel)")
@click.option("--scenario", default=None, help="the scenario to profile (default: the arm's)")
@_TRACE
def toolrich_check_cmd(task, kernel, scenario, trace):
    """Drive the tool-rich arm's disassemble, profile and search_docs tools through the agent loop
    with a fixed script, and print the tables the model would read. Exit 0 when both the profiler
    and the disassembly gave theirs, 1 when one could not run or failed, 4 on bad arguments."""
    from ..agents.toolrich_check import CheckSetupError, ToolCheckOptions, toolrich_check

    try:
        code = toolrich_check(ToolCheckOptions(task, kernel, scenario, trace), click.echo)
    except CheckSetupError as e:
        fail(str(e), USAGE)
    sys.exit(code)


COMMANDS = (selfcheck_cmd, toolrich_check_cmd)
