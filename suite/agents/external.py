"""Any coding agent in the KernelSeek harness: an existing coding-agent command line (Codex CLI's
`codex exec`, Claude Code's `claude -p`, aider, or any program that takes a prompt) is run in the
workspace with the task; when it exits, or is stopped at its time-out or the run's wall limit, the
harness evaluates the kernel; if the goal is unmet and budget remains, it runs the command again in
its continue/resume form with the evaluation and one question (from the bank, or typed with
--human). Every invocation (its command, prompt, output), question and evaluation goes into the
trace, and the run resumes from its trace like any other.

A step is one invocation. The command brings its own model, tools and system prompt; its token use
and cost are read from the tool's own report of each session (Claude Code's `--output-format json`
result, codex's `exec --json` turn.completed events, aider's `Tokens:` and `Cost:` lines) into the
invocation event and the run's totals, so that --max-tokens and --max-cost bind between sessions
(`parse_session`). The Claude adapter allows the tools the task needs (`--allowedTools`: reading and
editing files, and the shell commands that build, run and time a kernel: `CLAUDE_TOOLS`), since its
documented `--permission-mode acceptEdits` refuses every shell command. What a tool leaves in the
workspace that is not the task's (aider's `.aider*` files) is moved out into the trace's folder after
each session, and aider's chat history is kept there (`{state}`) rather than in the workspace.

It runs with the user's environment (it needs its own credentials; every value of a secret-looking
variable is redacted from the trace), in a process group of its own that is killed when it is
stopped, and, where Landlock is available (the run's --sandbox, or the arm option `sandbox`), in
the same sandbox as the built-in arms' shell: it writes only the workspace, its scratch folder
(its TMPDIR), the run's state folder for it and the paths given with the option `write` (a CLI's own
session folder, e.g. `write=[~/.codex]`), and reads only those, system folders, the toolchain, the
folders of its own executable and the paths given with `read`; not the repository, not the user's
home (docs/threat-model.md). Its network is not limited. Where it cannot have the sandbox (no
Landlock, `--sandbox none`, `--agent-opt sandbox=none`) it runs as the user: the run's protections
are recorded as incomplete, and `compare` takes it only with --allow-unsandboxed. Its evaluations go
through the sealed evaluator, in the sandbox, as any other.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

from . import layers
from . import policy as _policy
from . import sandbox as _sandbox
from .childenv import SECRET_NAME, user_environment
from .context import RunContext
from .exceptions import LimitExceeded, Submitted, ToolError
from .lifecycle import RunLifecycle
from .model import ModelResponse, priced
from .procgroup import process_group
from .protocols import CommandSupervisor
from .records import StepRecord
from .tools import evaluation_text

# how a coding-agent CLI is started with the task and resumed with the harness's message:
# {cmd} is the command as given (--agent-cmd), {prompt} the text, {kernel} the file to improve,
# {allowed_tools} the tools Claude Code may use without asking (comma-separated), {state} a folder of
# the run's, outside the workspace, kept across sessions. These follow each CLI's documented
# non-interactive and continue forms, with its machine-readable report of the session; `start` and
# `resume` (--agent-opt) replace them for another CLI or version.
ADAPTERS = {
    "codex": (
        "{cmd} --json --skip-git-repo-check {prompt}",
        "{cmd} --json --skip-git-repo-check resume --last {prompt}",
    ),
    "claude": (
        "{cmd} {prompt} --output-format json --allowedTools {allowed_tools}",
        "{cmd} --continue {prompt} --output-format json --allowedTools {allowed_tools}",
    ),
    "aider": (
        "{cmd} --yes-always --no-git --chat-history-file {state}/aider.chat.history.md "
        "--input-history-file {state}/aider.input.history --message {prompt} {kernel}",
        "{cmd} --yes-always --no-git --chat-history-file {state}/aider.chat.history.md "
        "--input-history-file {state}/aider.input.history --restore-chat-history --message {prompt} {kernel}",
    ),
    "generic": ("{cmd} {prompt}", "{cmd} {prompt}"),
}

# what Claude Code may do without asking in print mode: read, search and edit files, and the shell
# commands that build, run, time and inspect a kernel (a rule `Bash(cmd:*)` allows `cmd` with any
# arguments; `Bash(./*)` a program built in the workspace)
CLAUDE_TOOLS = (
    "Read",
    "Edit",
    "MultiEdit",
    "Write",
    "Glob",
    "Grep",
    "LS",
    *(
        f"Bash({c}:*)"
        for c in (
            "gcc",
            "cc",
            "g++",
            "clang",
            "nvcc",
            "make",
            "cmake",
            "python",
            "python3",
            "time",
            "taskset",
            "perf",
            "objdump",
            "nm",
            "ncu",
            "nsys",
            "cuobjdump",
            "nvdisasm",
            "nvidia-smi",
            "ls",
            "cat",
            "head",
            "tail",
            "grep",
            "diff",
            "wc",
            "mkdir",
            "cp",
            "mv",
        )
    ),
    "Bash(./*)",
)

# the adapters whose session report carries its cost (so that --max-cost binds without --price)
COST_REPORTING = ("claude", "aider")

# what a CLI leaves in the workspace that is not the task's: moved out after each session
LEFTOVERS = {"aider": (".aider*",), "codex": (), "claude": (), "generic": ()}

OPTIONS: dict = {
    "command": None,
    "adapter": None,
    "start": None,
    "resume": None,
    "invocation_timeout_s": None,
    "output_chars": 4000,
    "allowed_tools": None,  # Claude Code's --allowedTools (a list); None: CLAUDE_TOOLS
    "leftovers": [],  # more file patterns to move out of the workspace after each session
    "sandbox": None,  # auto, landlock or none; None: the run's --sandbox
    "read": [],  # more paths the command may read in the sandbox (its installation, its configuration)
    "write": [],  # more paths it may write there (its own session folder, e.g. ~/.codex)
}

PROMPT_ADDENDUM = """

You work in the current directory, which holds `{kernel}`. When you stop, the harness evaluates \
`{kernel}` with the task's evaluator (correctness on every scenario, then speed against the \
baseline) and, while the goal is unmet and budget remains, resumes this session with the result."""

STOP_GRACE_S = 5.0


def adapter_for(command: str, name: str | None) -> str:
    if name:
        if name not in ADAPTERS:
            raise ValueError(f"unknown adapter {name!r}; known: {', '.join(ADAPTERS)}")
        return name
    words = shlex.split(command)
    first = Path(words[0]).name if words else ""
    return first if first in ADAPTERS else "generic"


def expand(
    template: str, command: str, prompt: str, kernel: str, state: str = "", allowed_tools: str = ""
) -> list[str]:
    out: list[str] = []
    for tok in shlex.split(template):
        if tok == "{cmd}":
            out += shlex.split(command)
        elif tok == "{prompt}":
            out.append(prompt)
        else:
            out.append(
                tok.replace("{kernel}", kernel).replace("{state}", state).replace("{allowed_tools}", allowed_tools)
            )
    return out


# ---------------------------------------------------------------- what a session reports


@dataclass
class SessionReport:
    reply: str | None = None  # the agent's own last words, where the report separates them from the rest
    usage: dict | None = None  # prompt, completion, total and cached tokens, cost, and `source`
    denied: list[str] | None = None  # tool uses the CLI refused (Claude's permission_denials; None: not said)


def _json_lines(text: str) -> list[dict]:
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


def _claude(text: str) -> SessionReport:
    """`claude -p --output-format json` (one result object) or `stream-json` (its last line is one)."""
    result = next((o for o in reversed(_json_lines(text)) if o.get("type") == "result"), None)
    if result is None:
        return SessionReport()
    u = result.get("usage") or {}
    fresh, created, read = (
        int(u.get(k) or 0) for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    )
    out = int(u.get("output_tokens") or 0)
    usage = {
        "prompt_tokens": fresh + created + read,
        "completion_tokens": out,
        "total_tokens": fresh + created + read + out,
        "cached_tokens": read,
        "cost": result.get("total_cost_usd", result.get("cost_usd")),
        "source": "claude --output-format json",
    }
    denied = [str(d.get("tool_name", "?")) for d in result.get("permission_denials") or [] if isinstance(d, dict)]
    reply = result.get("result") if isinstance(result.get("result"), str) else None
    return SessionReport(reply, usage if u or usage["cost"] is not None else None, denied)


def _codex(text: str) -> SessionReport:
    """`codex exec --json`: JSON lines; each turn.completed has the turn's usage (input tokens, the
    cached among them, output tokens); the agent's messages are item.completed agent_message items."""
    events = _json_lines(text)
    turns = [e.get("usage") or {} for e in events if e.get("type") == "turn.completed"]
    said = [
        str(e["item"].get("text", ""))
        for e in events
        if e.get("type") == "item.completed"
        and isinstance(e.get("item"), dict)
        and e["item"].get("type") == "agent_message"
    ]
    if not turns:
        return SessionReport("\n".join(said) or None)
    prompt = sum(int(t.get("input_tokens") or 0) for t in turns)
    completion = sum(int(t.get("output_tokens") or 0) for t in turns)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_tokens": sum(int(t.get("cached_input_tokens") or 0) for t in turns),
        "cost": None,
        "source": "codex exec --json",
    }
    return SessionReport("\n".join(said) or None, usage)


_AIDER_TOKENS = re.compile(r"^Tokens: (?P<body>.*?)\.(?:\s+Cost: .*)?$", re.MULTILINE)
_AIDER_COUNT = re.compile(r"([\d.]+)(k?) (sent|received|cache hit|cache read|cache write)")
_AIDER_SESSION_COST = re.compile(r"Cost: \$[\d.]+ message, \$([\d.]+) session\.")


def _aider_number(value: str, k: str) -> int:
    return round(float(value) * (1000 if k else 1))


def _aider(text: str) -> SessionReport:
    """aider's report after each exchange: `Tokens: 2.4k sent, 1.2k cache hit, 512 received. Cost:
    $0.0061 message, $0.0061 session.`, summed over the session (aider rounds above 1,000 to 0.1k or
    to 1k: the counts are approximate); the cost is the session's, the last said."""
    prompt = completion = cached = 0
    seen = False
    for m in _AIDER_TOKENS.finditer(text):
        seen = True
        for value, k, what in _AIDER_COUNT.findall(m.group("body")):
            n = _aider_number(value, k)
            if what == "sent":
                prompt += n
            elif what == "received":
                completion += n
            elif what in ("cache hit", "cache read"):
                cached += n
    if not seen:
        return SessionReport()
    costs = _AIDER_SESSION_COST.findall(text)
    usage = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "cached_tokens": cached,
        "cost": float(costs[-1]) if costs else None,
        "source": "aider Tokens: lines (rounded by aider)",
    }
    return SessionReport(None, usage)


PARSERS = {"claude": _claude, "codex": _codex, "aider": _aider}


# adapters whose resumed session reports the usage of the whole thread so far (codex-cli 0.171's `exec
# resume`: its turn.completed counts the earlier sessions' turns too), not the session's own
THREAD_USAGE = ("codex",)
_COUNTS = ("prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens")


def _session_part(usage: dict, before: dict | None) -> dict:
    """A resumed session's own usage: the thread's so far less what the previous session reported."""
    if not before:
        return usage
    return {**usage, **{k: max(0, int(usage.get(k) or 0) - int(before.get(k) or 0)) for k in _COUNTS}}


def parse_session(adapter: str, text: str) -> SessionReport:
    """What a CLI's output says of its session (nothing for the generic adapter)."""
    parse = PARSERS.get(adapter)
    return parse(text) if parse else SessionReport()


def command_sandbox(config) -> tuple[bool, str]:
    """(sandboxed, detail): whether the run's agent command runs in the sandbox, and why not. Its arm
    option `sandbox` decides, else the run's --sandbox; `landlock` where it is unavailable is an error."""
    mode = config.arm_options.get("sandbox") or config.tools.sandbox
    if mode not in ("auto", "landlock", "none"):
        raise ValueError(f"sandbox must be auto, landlock or none, not {mode!r}")
    available, detail = _sandbox.landlock_status()
    if mode == "landlock" and not available:
        raise RuntimeError(f"sandbox 'landlock' requested for the agent command but unavailable: {detail}")
    if mode == "none":
        return False, "disabled by configuration"
    return available, detail


def _paths(value) -> list[Path]:
    items = [value] if isinstance(value, str) else list(value or [])
    return [Path(os.path.expanduser(str(p))).resolve() for p in items]


def _own_folders(command: str) -> list[Path]:
    """Where the command's executable lives (its folder, and the one above it: an installation's
    prefix), unless that is the user's home, the repository or the root."""
    words = shlex.split(command)
    found = shutil.which(words[0]) if words else None
    if not found:
        return []
    exe = Path(os.path.realpath(found))
    too_wide = {Path("/"), Path.home().resolve()}
    from .. import config as suite_config

    repo = suite_config.REPO_ROOT.resolve()
    out = [exe.parent]
    if exe.parent.parent not in too_wide and not (exe.parent.parent == repo or exe.parent.parent in repo.parents):
        out.append(exe.parent.parent)
    return out


def env_secrets() -> tuple[str, ...]:
    """Values of the environment's secret-looking variables (for redaction)."""
    return tuple(v for k, v in user_environment().items() if SECRET_NAME.search(k) and len(v) >= 8)


@dataclass
class Invocation:
    exit_code: int | None
    stopped: str  # exited | timeout | wall | interrupted
    duration_s: float
    log: Path  # stdout and stderr, interleaved
    argv: list[str]


def _kill(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, STOP_GRACE_S), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


class ExternalAgent(RunLifecycle):
    """Drives an agent command through sessions (the `agent-cmd` arm's loop); a step is one session."""

    supervisor: CommandSupervisor

    def __init__(self, ctx: RunContext, supervisor: CommandSupervisor, options: dict):
        super().__init__(ctx, supervisor)
        self.opts = options
        self.command = options["command"]
        self.adapter = adapter_for(self.command, options.get("adapter"))
        start, resume = ADAPTERS[self.adapter]
        self.templates = {"start": options.get("start") or start, "resume": options.get("resume") or resume}
        self.allowed_tools = ",".join(options.get("allowed_tools") or CLAUDE_TOOLS)
        self.leftovers = (*LEFTOVERS.get(self.adapter, ()), *(options.get("leftovers") or ()))
        self.state = ctx.trace.artifacts / "agent-state"  # the CLI's own files, kept across sessions
        self.state.mkdir(parents=True, exist_ok=True)
        self.sandboxed, self.sandbox_detail = command_sandbox(ctx.config)
        self.policy: _sandbox.Policy | None = None
        if self.sandboxed:
            ws = ctx.workspace
            write = [ws.root, ws.scratch, self.state, *_paths(options.get("write"))]
            read = [*write, *ws.docs, *_own_folders(self.command), *_paths(options.get("read"))]
            self.policy = _policy.make_policy(read, write, deny_extra=ws.deny)

    def opening(self, system: str, task: str) -> list[dict]:
        return [
            {"role": "system", "content": f"(the agent command's own: {self.command})"},
            {"role": "user", "content": task + PROMPT_ADDENDUM.format(kernel=self.ctx.task.kernel)},
        ]

    # ---- one session: invoke, evaluate, decide ----
    def step(self) -> None:
        ctx = self.ctx
        ctx.check_limits()
        step = ctx.trace.step = ctx.totals.steps + 1
        mode = "start" if self._sessions() == 0 else "resume"
        prompt = self.messages[-1]["content"]
        before, texts_before = self._stored_files(), layers.diffable_files(ctx.workspace.files())
        inv = self._invoke(mode, prompt, step)
        ctx.trace.redact_tree(inv.log)
        ctx.trace.redact_tree(self.state)
        ctx.totals.steps += 1
        moved = self._move_leftovers(step)
        output = inv.log.read_bytes().decode("utf-8", "replace")
        tail = output[-int(self.opts["output_chars"]) :]
        report = parse_session(self.adapter, output)
        if report.usage and mode == "resume" and self.adapter in THREAD_USAGE:
            report.usage = _session_part(report.usage, self._previous_usage(step))
        if report.usage:
            report.usage["cost"] = priced(report.usage, ctx.config.model)
            ctx.totals.add_usage(report.usage)
        reply = (report.reply or tail)[-int(self.opts["output_chars"]) :]
        after = self._stored_files()
        changed = sorted(rel for rel in set(before) | set(after) if before.get(rel) != after.get(rel))
        extra: dict = {}
        if report.usage:
            extra["usage"] = report.usage
        if report.reply is not None:
            extra["reply"] = reply
        if report.denied is not None:
            extra["denied"] = report.denied
        if moved:
            extra["moved"] = moved
        ctx.trace.emit(
            "invocation",
            session=step,
            mode=mode,
            adapter=self.adapter,
            argv=inv.argv,
            prompt=prompt,
            exit_code=inv.exit_code,
            stopped=inv.stopped,
            duration_s=round(inv.duration_s, 3),
            output=tail,
            output_blob=ctx.trace.put_file(inv.log),
            changed=changed,
            **extra,
        )
        tail = reply
        self.messages.append({"role": "assistant", "content": tail or "(no output)"})
        if inv.stopped == "interrupted":
            raise KeyboardInterrupt
        n = len(ctx.evals)
        note = None
        try:
            ctx.evaluate(meta={"session": step, "stopped": inv.stopped})
        except ToolError as e:  # no kernel file, or no evaluations left
            note = str(e)
        record = StepRecord(step, ModelResponse(tail, [], "stop", {}, 0.0), evals=ctx.evals[n:])
        record.layer_scores = layers.step_scores(texts_before, layers.diffable_files(ctx.workspace.files()), tail)
        record.dominant_layer = layers.dominant(record.layer_scores)
        if ctx.goal_met:
            self._checkpoint(record)
            raise Submitted("the goal is met")
        try:
            ctx.check_limits()
        except LimitExceeded:
            self._checkpoint(record)
            raise
        self.messages.append({"role": "user", "content": self._next_message(record, inv, note)})
        self._checkpoint(record)

    def _next_message(self, record: StepRecord, inv: Invocation, note: str | None) -> str:
        ctx = self.ctx
        how = {
            "exited": "You stopped",
            "timeout": "You were stopped at the time limit of one session",
            "wall": "You were stopped at the run's wall-time limit",
        }.get(inv.stopped, "You stopped")
        parts = [f"{how}. The harness evaluated `{ctx.task.kernel}`:"]
        parts.append(evaluation_text(record.evals[-1], ctx) if record.evals else f"(no evaluation: {note})")
        best = f"{ctx.best.geomean:.3f}x" if ctx.best else "no correct evaluation yet"
        parts.append(
            f"The run is not over: the goal ({ctx.task.goal.text()}) is not met yet (best so far: {best}) "
            "and budget remains."
        )
        asked = self.supervisor.after_session(ctx, record)
        parts.append(asked or "Continue.")
        return "\n".join(parts)

    # ---- running the command ----
    def _sessions(self) -> int:
        return sum(m["role"] == "assistant" for m in self.messages)

    def _previous_usage(self, step: int) -> dict | None:
        """What the last session before `step` reported, read again from its kept output (a run
        resumed from its trace has it too)."""
        logs = sorted(p for p in (self.ctx.trace.artifacts / "invocations").glob("*.log") if int(p.stem) < step)
        if not logs:
            return None
        return parse_session(self.adapter, logs[-1].read_bytes().decode("utf-8", "replace")).usage

    def _invoke(self, mode: str, prompt: str, step: int) -> Invocation:
        ctx = self.ctx
        argv = expand(self.templates[mode], self.command, prompt, ctx.task.kernel, str(self.state), self.allowed_tools)
        log = ctx.trace.artifacts / "invocations" / f"{step:04d}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        limit = self.opts.get("invocation_timeout_s")
        t0 = time.monotonic()
        env = user_environment()
        run_argv = argv
        if self.policy is not None:  # its temporary files in the run's scratch folder, the only place it may
            env["TMPDIR"] = str(ctx.workspace.scratch / "tmp")
            run_argv = _sandbox.wrap(argv, self.policy)
        with open(log, "wb") as out, process_group(run_argv, ctx.workspace.root, env, out, subprocess.STDOUT) as proc:
            try:
                stopped = self._wait(proc, t0, limit)
            except KeyboardInterrupt:
                _kill(proc)
                stopped = "interrupted"
        code = proc.returncode if stopped == "exited" else None
        return Invocation(code, stopped, time.monotonic() - t0, log, argv)

    def _wait(self, proc: subprocess.Popen, t0: float, limit: float | None) -> str:
        """`exited` once the command has, or why it was stopped: `timeout` (one session's limit) or
        `wall` (the run's wall-time limit)."""
        while True:
            try:
                proc.wait(timeout=0.2)
                return "exited"
            except subprocess.TimeoutExpired:
                pass
            if limit is not None and time.monotonic() - t0 >= float(limit):
                stopped = "timeout"
            elif self._wall_spent():
                stopped = "wall"
            else:
                continue
            _kill(proc)
            return stopped

    # ---- workspace bookkeeping ----
    def _move_leftovers(self, step: int) -> list[str]:
        """What the CLI left in the workspace that is not the task's (`leftovers` patterns, at its top),
        moved into the trace's folder: the workspace holds only the task's files."""
        root = Path(self.ctx.workspace.root)
        found = sorted(
            {p for pat in self.leftovers for p in root.glob(pat) if p.name != Path(self.ctx.task.kernel).name}
        )
        if not found:
            return []
        dest = self.ctx.trace.artifacts / "agent-files" / f"{step:04d}"
        dest.mkdir(parents=True, exist_ok=True)
        for p in found:
            shutil.move(str(p), str(dest / p.name))
        self.ctx.trace.redact_tree(dest)
        return [p.name for p in found]
