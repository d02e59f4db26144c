"""Drives a task's tools through the real agent loop with a fixed script instead of a model, so a
machine can be checked without an endpoint: view the kernel, run shell commands (and try to write
outside the workspace and to read the repository's kernels), make a harmless edit, evaluate (from the
sealed copy, in the sandbox where there is one). The command is `kernelseek-suite selfcheck`
(cli/checks.py):

    kernelseek-suite selfcheck --task fa-fwd-sm90 [--kernel K.cu] [--trace T.jsonl] [--allow-unsandboxed]

Passes (exit 0) when the evaluation is correct on every scenario and reports a geomean against the
baseline, and every protection of docs/threat-model.md is in force (the sandbox of the shell and of
the candidates, the sealed evaluator, the agent's process out of reach, the key nowhere above it).
A missing protection is named with what gives it back, and fails the check (exit 1) unless
--allow-unsandboxed is given. Exit 1 also for an evaluation that is not correct everywhere, 3 when
the task needs a GPU this machine lacks, 6 when the evaluator's own machinery failed (CUDA unusable,
its worker unable to start: no verdict on the kernel).
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import REPO_ROOT
from ..contracts.exitcodes import EVALUATOR, FAIL, NO_GPU, OK
from ..contracts.traces import read_trace
from .config import RunConfig
from .model import ModelResponse, ToolCall
from .protections import missing
from .runner import new_run
from .tasks import make_task

Script = list[list[tuple[str, dict]]]  # each step's tool calls: (tool, arguments)


class ScriptedModel:
    """A Model that answers with a fixed list of tool calls, then stops."""

    def __init__(self, steps: Script):
        self.steps = list(steps)
        self.calls = 0

    def describe(self) -> dict:
        return {"name": "selfcheck-script", "base_url": None, "sampling": {}}

    def request_params(self) -> dict:
        return {"model": "selfcheck-script"}

    def query(self, messages: list[dict], tools: list[dict]) -> ModelResponse:
        self.calls += 1
        if not self.steps:
            return ModelResponse("self-check finished", [], "stop", _NO_USAGE, 0.0)
        calls = [
            ToolCall(f"sc_{self.calls}_{i}", name, args, json.dumps(args))
            for i, (name, args) in enumerate(self.steps.pop(0))
        ]
        return ModelResponse(None, calls, "tool_calls", _NO_USAGE, 0.0)


_NO_USAGE = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0, "cost": None}


def script_for(kernel: str, outside: Path, answers: Path | None = None) -> Script:
    answers = answers or REPO_ROOT / "kernels" / "hopper" / "NOTES.md"
    return [
        [("view_file", {"path": kernel, "start_line": 1, "end_line": 20})],
        [
            (
                "shell",
                {
                    "command": "pwd; ls -la; (nvcc --version || true) | tail -1; (nvidia-smi -L || true)",
                    "timeout_s": 60,
                },
            )
        ],
        [
            (
                "shell",
                {"command": f"echo probe > {outside} && echo WROTE-OUTSIDE || echo write-refused", "timeout_s": 30},
            )
        ],
        [
            (
                "shell",
                {
                    "command": f"head -c 64 {answers} >/dev/null && echo READ-REPOSITORY || echo read-refused",
                    "timeout_s": 30,
                },
            )
        ],
        [("edit_file", {"path": "selfcheck-note.txt", "new_text": "the self-check wrote this file\n"})],
        [("evaluate", {})],
    ]


def trace_path_for(trace: str | Path | None, prefix: str) -> Path:
    """The trace file given, or one in a new temporary folder."""
    return Path(trace) if trace else Path(tempfile.mkdtemp(prefix=prefix)) / "trace.jsonl"


def scripted_config(arm: str, task: str, kernel: str | None, model_name: str) -> RunConfig:
    """A run of `arm` on `task` (from `kernel`, else the task's own starting kernel) by a script."""
    cfg = RunConfig(arm=arm, task=task, task_options={"kernel": kernel} if kernel else {})
    cfg.model.name = model_name
    return cfg


@dataclass
class SelfCheckOptions:
    task: str = "fa-fwd-sm90"
    kernel: str | None = None  # the starting kernel (default: the task's own)
    trace: str | Path | None = None  # the trace file (default: in a temporary folder)
    sandbox: str = "auto"  # auto, landlock or none
    allow_unsandboxed: bool = False  # pass even when a protection is missing (it is still named)


def selfcheck(opts: SelfCheckOptions, say: Callable[[str], None]) -> int:
    """Runs the self-check; `say` gets each line of its report. Returns the exit code."""
    trace_path = trace_path_for(opts.trace, "ks-selfcheck-")
    outside = trace_path.parent / "written-from-the-workspace.txt"
    cfg = scripted_config("general", opts.task, opts.kernel, "selfcheck-script")
    cfg.tools.sandbox = opts.sandbox
    kernel = make_task(cfg.task, **cfg.task_options).kernel
    agent = new_run(cfg, trace_path, model=ScriptedModel(script_for(kernel, outside)))
    ws = agent.ctx.workspace
    result = agent.run()

    events = read_trace(trace_path).events
    for ev in events:
        if ev["type"] == "tool_result":
            say(f"--- {ev['tool']} {ev['arguments']}\n{ev['output'][:1500]}")
    shells = [ev["output"] for ev in events if ev["type"] == "tool_result" and ev["tool"] == "shell"]
    prot = events[0].get("protections")
    lacking = missing(prot)
    say(f"\nsandbox: {ws.describe()}")
    say(f"protections complete: {bool(prot and prot.get('complete')) and not lacking}")
    for m in lacking:
        say(f"missing protection: {m.what}; to have it: {m.remedy}")
    say(f"write outside the workspace: {'REFUSED' if not outside.exists() else 'ALLOWED (no sandbox here)'}")
    say(
        f"read the repository's kernels: "
        f"{'ALLOWED (no sandbox here)' if any('READ-REPOSITORY' in o for o in shells) else 'REFUSED'}"
    )
    say(f"trace: {trace_path} ({len(events)} events); exit {result.exit_reason}")
    evals = [e for e in events if e["type"] == "harness_eval"]
    if not evals:
        say("SELFCHECK FAIL: no evaluation ran")
        return FAIL
    return _verdict(evals[-1], [m.what for m in lacking], opts.allow_unsandboxed, say)


def _verdict(ev: dict, lacking: list[str], allow_unsandboxed: bool, say: Callable[[str], None]) -> int:
    """The last evaluation and the protections missing, as the check's last lines and its exit code."""
    gm = ev["geomean"]
    say(
        f"evaluation: status {ev['status']}, correct {ev['scenarios_correct']}/{ev['scenarios_total']}, extended "
        f"{ev.get('extended_correct')}/{ev.get('extended_total')}, geomean vs {ev['baseline']}: "
        f"{'-' if gm is None else f'{gm:.4f}x'} (slowest {ev.get('min_ratio')} at {ev.get('min_ratio_scenario')})"
    )
    if ev["status"] == "no_gpu":
        say(f"SELFCHECK SKIPPED: {ev.get('error')}")
        return NO_GPU
    if ev["status"] == "error":  # the evaluator's own failure: no verdict on the kernel
        say(f"SELFCHECK FAIL: the evaluator failed, not the kernel: {ev.get('error')}")
        return EVALUATOR
    if not (ev["correct"] and gm is not None):
        say("SELFCHECK FAIL: the evaluation is not correct everywhere or has no speed-up")
        return FAIL
    if lacking and not allow_unsandboxed:
        say(
            f"SELFCHECK FAIL: {len(lacking)} protection(s) missing ({', '.join(lacking)}); "
            "--allow-unsandboxed accepts that"
        )
        return FAIL
    say("SELFCHECK PASS" + (" (protections incomplete, allowed by --allow-unsandboxed)" if lacking else ""))
    return OK
