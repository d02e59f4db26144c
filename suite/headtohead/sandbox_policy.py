"""When a comparison may run (or re-measure, or take runs) without the sandbox: never, unless
--allow-unsandboxed is given, and then the table says so (docs/threat-model.md). Each function
returns what to tell the user, or None where nothing stands in the way."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from ..agents.sandbox import landlock_status
from .compare import unsandboxed

UNSANDBOXED = """\
{what} needs the sandbox, and {why}.
Without it a candidate (and the agent's shell) can write outside its folder and read the repository's
kernels and results (docs/threat-model.md). Run where Landlock is available, or pass --allow-unsandboxed
to go ahead anyway (the table then says so)."""

UNSANDBOXED_RUNS = """\
{n} of the runs ran without the sandbox:
{runs}
Their shell, candidates or agent command could write outside their folders and read the repository's
kernels and results (docs/threat-model.md). Pass --allow-unsandboxed to take them anyway (the table
then lists them)."""


def sandbox_refusal(what: str, sandbox: str | None, allow_unsandboxed: bool) -> str | None:
    """Why `what` may not run here without --allow-unsandboxed, or None."""
    if allow_unsandboxed:
        return None
    available, detail = landlock_status()
    if sandbox == "none":
        return UNSANDBOXED.format(what=what, why="--sandbox none turns it off")
    if not available:
        return UNSANDBOXED.format(what=what, why=f"Landlock is not available here ({detail})")
    return None


def runs_sandbox(sandbox: str | None, allow_unsandboxed: bool) -> str:
    """The sandbox the runs are given: without --allow-unsandboxed a run that cannot have the sandbox
    fails, not falls back."""
    return sandbox or ("auto" if allow_unsandboxed else "landlock")


def unsandboxed_runs_refusal(traces: list[Path]) -> str | None:
    """Why the runs of `traces` may not be taken without --allow-unsandboxed, or None."""
    bare = unsandboxed(traces)
    if not bare:
        return None
    return UNSANDBOXED_RUNS.format(n=len(bare), runs="\n".join(f"- {r}" for r in bare))


def agent_commands_refusal(configs: Iterable) -> str | None:
    """Why runs whose agent command runs outside the sandbox may not go ahead, or None. A sandbox
    setting that cannot be had is a ValueError or a RuntimeError (agents/external.py)."""
    from ..agents.external import command_sandbox

    outside = [c.label or c.arm for c in configs if c.arm == "agent-cmd" and not command_sandbox(c)[0]]
    if not outside:
        return None
    why = f"the agent-cmd arm runs its command outside it ({', '.join(sorted(set(outside)))})"
    return UNSANDBOXED.format(what="compare", why=why)


def remeasured_unsandboxed(sandbox: str) -> bool:
    """Whether a re-measurement with this sandbox setting runs without the sandbox."""
    return sandbox == "none" or not landlock_status()[0]
