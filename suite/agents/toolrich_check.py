"""Drives the tool-rich arm's profiler and disassembly tools through the agent loop with a fixed
script instead of a model, and reports what the model would read: the compact tables. The command is
`kernelseek-suite toolrich-check` (cli/checks.py):

    kernelseek-suite toolrich-check [--kernel K.cu] [--scenario ID] [--trace T.jsonl]

Exit 0 when both tools gave their tables, 1 when one of them could not run or failed (its reason is
shown), 4 on bad arguments (a task, kernel or option the run cannot start with: CheckSetupError). The
report ends with the sandbox the tools ran in (as the self-check's does) and the trace.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..contracts import exitcodes
from ..contracts.traces import read_trace
from .runner import new_run
from .selfcheck import Script, ScriptedModel, scripted_config, trace_path_for


class CheckSetupError(ValueError):
    """The check's run cannot start (an unknown task, a kernel that is not there, a bad option)."""


@dataclass
class ToolCheckOptions:
    task: str = "fa-fwd-sm90"
    kernel: str | None = None  # the kernel (default: the task's own starting kernel)
    scenario: str | None = None  # the scenario to profile (default: the arm's)
    trace: str | Path | None = None  # the trace file (default: in a temporary folder)


def toolrich_check(opts: ToolCheckOptions, say: Callable[[str], None]) -> int:
    """Runs the check; `say` gets each line of its report. Returns the exit code (OK or FAIL); raises
    CheckSetupError when the run cannot start."""
    trace_path = trace_path_for(opts.trace, "ks-toolcheck-")
    cfg = scripted_config("toolrich", opts.task, opts.kernel, "toolrich-check-script")
    profile = {"scenario": opts.scenario} if opts.scenario else {}
    script: Script = [[("disassemble", {})], [("profile", profile)], [("search_docs", {"query": "wgmma TMA pipeline"})]]
    try:
        agent = new_run(cfg, trace_path, model=ScriptedModel(script))
    except (KeyError, ValueError, FileNotFoundError) as e:
        raise CheckSetupError(str(e)) from e
    agent.run()
    ok = True
    for ev in read_trace(trace_path).events:
        if ev["type"] != "tool_result":
            continue
        say(f"===== {ev['tool']} {ev['arguments'] or ''} ({ev['duration_s']:.1f}s)")
        say(ev["output"])
        say("")
        if ev["tool"] in ("disassemble", "profile") and ev["is_error"]:
            ok = False
    # where the tools ran: the profiler under the sandbox is what the check is there to show
    say(f"sandbox: {agent.ctx.workspace.describe()}")
    say(f"trace: {trace_path}")
    say("TOOLCHECK PASS" if ok else "TOOLCHECK FAIL")
    return exitcodes.OK if ok else exitcodes.FAIL
