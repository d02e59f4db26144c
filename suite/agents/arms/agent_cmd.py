"""`agent-cmd`: an existing coding-agent command line in the KernelSeek harness (external.py): run
with the task, evaluated when it stops, resumed with the evaluation and one question from the bank
(or typed with --human) while the goal is unmet and budget remains.

Arm options (`--agent-opt KEY=VALUE`; `run --agent-cmd "..."` sets `command`): `command` (the
agent's command line, e.g. `codex exec --sandbox danger-full-access`, `claude -p --permission-mode
acceptEdits`, `aider --model M`), `adapter` (codex, claude, aider, generic; default: from the
command's first word), `start` and `resume` (templates with {cmd}, {prompt}, {kernel} that replace
the adapter's), `invocation_timeout_s` (one session's time limit; default none, the run's wall limit
still holds), `output_chars` (4000: how much of a session's output is kept in the conversation and
the trace event; all of it is in a blob), `sandbox` (auto, landlock or none; default: the run's
--sandbox), `read` and `write` (more paths the command may read, or read and write, in the sandbox:
its installation, its configuration and session folder, e.g. `write=[~/.codex]`), and the question
settings of the kernelseek arm."""

from __future__ import annotations

from ..context import RunContext
from ..decisions import DecisionPoint
from ..external import ADAPTERS, CLAUDE_TOOLS, LEFTOVERS, ExternalAgent, adapter_for, command_sandbox
from ..external import OPTIONS as COMMAND_OPTIONS
from ..tools import ToolRegistry
from . import ArmOptionError, ArmParts, check_options, register_arm
from .kernelseek import OPTIONS as QUESTION_OPTIONS
from .kernelseek import KernelSeekSupervisor, questions_for

OPTIONS = {**COMMAND_OPTIONS, **QUESTION_OPTIONS}
# a stop that also shows one of these is asked about it (the first found), else about the stop
ASK_FIRST = ("claimed-limit", "repeated-failure", "plateau")


class SessionSupervisor(KernelSeekSupervisor):
    """One question after each session that ended with the goal unmet."""

    def after_session(self, ctx: RunContext, record) -> str | None:
        points = self.detector.observe(record)
        best = f"{ctx.best.geomean:.3f}x" if ctx.best else "no correct evaluation yet"
        stop = DecisionPoint(
            "early-stop",
            {
                "text": " ".join((record.response.content or "").split())[-300:],
                "best": best,
                "goal": ctx.task.goal.text(),
                "budget_left": ctx.budget_left(),
            },
        )
        chosen = next((d for t in ASK_FIRST for d in points if d.trigger == t), stop)
        for d in [stop, *points]:
            if d is not chosen:
                self._record(ctx, d, asked=False, reason=f"{chosen.trigger} was asked after this session")
        asked = self._ask(ctx, chosen)
        return asked.text if asked else None


@register_arm("agent-cmd", options=OPTIONS)
def build(ctx: RunContext) -> ArmParts:
    opts = check_options("agent-cmd", dict(ctx.config.arm_options))
    if not opts["command"]:
        raise ArmOptionError('the agent-cmd agent needs its command: --agent-cmd "..." (or --agent-opt command=...)')
    adapter = adapter_for(opts["command"], opts["adapter"])  # an unknown adapter is an error now
    for key in ("allowed_tools", "leftovers", "read", "write"):
        value = opts[key]
        if isinstance(value, str):
            opts[key] = [v.strip() for v in value.split(",") if v.strip()]
        elif value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
            raise ArmOptionError(f"{key}: {value!r}; expected a list of strings")
    questioner, bank = questions_for(ctx)
    supervisor = SessionSupervisor(ctx, questioner)
    start, resume = ADAPTERS[adapter]
    info = {
        "bank": bank,
        "agent_cmd": {
            "command": opts["command"],
            "adapter": adapter,
            "start": opts["start"] or start,
            "resume": opts["resume"] or resume,
            "invocation_timeout_s": opts["invocation_timeout_s"],
            "leftovers": [*LEFTOVERS.get(adapter, ()), *(opts["leftovers"] or [])],
            "sandbox": "landlock" if command_sandbox(ctx.config)[0] else "none",
            "read": list(opts["read"] or []),
            "write": list(opts["write"] or []),
        },
    }
    if adapter == "claude":
        info["agent_cmd"]["allowed_tools"] = list(opts["allowed_tools"] or CLAUDE_TOOLS)
    return ArmParts(ToolRegistry(), supervisor, info, driver=lambda c: ExternalAgent(c, supervisor, opts))
