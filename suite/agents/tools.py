"""Tools the model can call, and the registry an arm fills. A tool is a name, a description, a JSON
schema for its arguments and a function (arguments, RunContext) -> ToolResult. The general agent has
exactly four: shell, view_file, edit_file, evaluate; another arm adds its own with
`registry.add(Tool(...))`."""

from __future__ import annotations

import difflib
import json
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from jsonschema import Draft202012Validator

from .context import RunContext
from .exceptions import Terminate, ToolError


@dataclass
class ToolResult:
    output: str
    is_error: bool = False
    data: dict | None = None  # structured facts for the trace (not shown to the model)
    call_error: str | None = None  # the model got the call wrong: malformed, unknown_tool, bad_arguments


@dataclass
class Tool:
    name: str
    description: str
    parameters: dict
    run: Callable[[dict, RunContext], ToolResult]

    def schema(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


class ToolRegistry:
    def __init__(self, tools: list[Tool] = ()):
        self._tools: dict[str, Tool] = {}
        for t in tools:
            self.add(t)

    def add(self, tool: Tool, replace: bool = False) -> None:
        if tool.name in self._tools and not replace:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        Draft202012Validator.check_schema(tool.parameters)
        self._tools[tool.name] = tool

    def remove(self, name: str) -> None:
        del self._tools[name]

    def names(self) -> list[str]:
        return list(self._tools)

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def schemas(self) -> list[dict]:
        return [t.schema() for t in self._tools.values()]

    def call(self, name: str, arguments: dict, ctx: RunContext) -> ToolResult:
        """Runs a tool; every failure except a Terminate becomes an error result for the model. No
        secret of the run reaches the model through a tool's output."""
        result = self._call(name, arguments, ctx)
        result.output = ctx.trace.redact(result.output)
        return result

    def _call(self, name: str, arguments: dict, ctx: RunContext) -> ToolResult:
        tool = self._tools.get(name)
        if tool is None:
            return ToolResult(
                f"error: there is no tool named {name!r}; the tools are: {', '.join(self._tools)}",
                is_error=True,
                call_error="unknown_tool",
            )
        problems = [e.message for e in Draft202012Validator(tool.parameters).iter_errors(arguments)]
        if problems:
            return ToolResult(
                f"error: bad arguments for {name}: {'; '.join(problems)}", is_error=True, call_error="bad_arguments"
            )
        try:
            return tool.run(arguments, ctx)
        except (Terminate, KeyboardInterrupt):
            raise
        except ToolError as e:
            return ToolResult(f"error: {e}", is_error=True)
        except Exception as e:  # a tool's own failure must not end the run
            return ToolResult(
                f"error: {name} failed: {type(e).__name__}: {e}",
                is_error=True,
                data={"traceback": traceback.format_exc()[-4000:]},
            )


def elide(text: str, limit: int) -> str:
    """Keeps the head and the tail of long text."""
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    cut = len(text) - head - tail
    return f"{text[:head]}\n[... {cut} characters elided ...]\n{text[-tail:]}"


# ---------------------------------------------------------------- the general agent's tools


def _shell(args: dict, ctx: RunContext) -> ToolResult:
    cfg = ctx.config.tools
    timeout = min(float(args.get("timeout_s") or cfg.shell_timeout_s), cfg.shell_max_timeout_s)
    left = ctx.wall_left()  # the run's deadline is the command's too
    at_deadline = left is not None and left < timeout
    if at_deadline:
        timeout = max(left, 0.1)
    r = ctx.workspace.run(args["command"], timeout)
    out = elide(r.output, cfg.max_output_chars)
    if r.timed_out:
        why = "the run's wall-time limit was reached" if at_deadline else f"it timed out after {timeout:.0f}s"
        return ToolResult(
            f"killed: {why}; output so far:\n{out}",
            is_error=True,
            data={
                "exit_code": None,
                "timed_out": True,
                "duration_s": round(r.duration_s, 3),
                "wall_limit": at_deadline,
            },
        )
    return ToolResult(
        f"exit code {r.exit_code}\n{out}",
        is_error=r.exit_code != 0,
        data={"exit_code": r.exit_code, "timed_out": False, "duration_s": round(r.duration_s, 3)},
    )


def _view(args: dict, ctx: RunContext) -> ToolResult:
    path = ctx.workspace.resolve(args["path"], must_exist=True)
    lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    start = max(1, int(args.get("start_line") or 1))
    end = min(len(lines), int(args.get("end_line") or len(lines)), start + ctx.config.tools.view_max_lines - 1)
    body = "\n".join(f"{i:>5}  {lines[i - 1]}" for i in range(start, end + 1))
    more = f"\n(lines {start}-{end} of {len(lines)})" if (start, end) != (1, len(lines)) else ""
    return ToolResult(elide(body, ctx.config.tools.max_output_chars) + more)


def _edit(args: dict, ctx: RunContext) -> ToolResult:
    path = ctx.workspace.resolve(args["path"])
    rel = ctx.workspace.relative(path)
    new, old = args["new_text"], args.get("old_text")
    before = path.read_text(encoding="utf-8") if path.is_file() else None
    if old:
        if before is None:
            raise ToolError(f"{rel}: no such file (to create one, call edit_file without old_text)")
        count = before.count(old)
        if count != 1:
            raise ToolError(
                f"{rel}: old_text "
                + (
                    "was not found"
                    if count == 0
                    else f"appears {count} times; include more surrounding text so it is unique"
                )
            )
        after = before.replace(old, new, 1)
        line = before[: before.index(old)].count("\n") + 1
        what = f"replaced 1 occurrence at line {line}"
    else:
        if path.is_dir():
            raise ToolError(f"{rel} is a folder")
        after = new
        what = f"wrote {len(new.encode())} bytes" + (" (new file)" if before is None else "")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(after, encoding="utf-8")
    diff = difflib.unified_diff((before or "").splitlines(), after.splitlines(), lineterm="", n=0)
    added = [l[1:] for l in diff if l.startswith("+") and not l.startswith("+++")]
    return ToolResult(
        f"{rel}: {what}", data={"path": rel, "added": "\n".join(added)[:20000], "lines_added": len(added)}
    )


def _evaluate(args: dict, ctx: RunContext) -> ToolResult:
    rec = ctx.evaluate()
    return ToolResult(
        evaluation_text(rec, ctx),
        is_error=not rec.evaluation.correct,
        data={"eval_index": rec.index, "status": rec.evaluation.status},
    )


def evaluation_text(rec, ctx: RunContext) -> str:
    """What the model reads after an evaluation: the evaluator's report, the goal, the best so far and
    the evaluations left (shared by arms that evaluate their own way)."""
    lines = [rec.evaluation.report()]
    goal = ctx.task.goal
    lines.append(f"goal ({goal.text()}): {'met' if rec.goal_met else 'not met'}")
    if ctx.best:
        lines.append(
            f"best so far: {ctx.best.geomean:.3f}x (evaluation {ctx.best.eval_index})"
            + (" - this one" if rec.new_best else "")
        )
    lim = ctx.config.limits.max_evals
    if lim is not None:
        lines.append(f"evaluations left: {max(0, lim - ctx.totals.evals)}")
    return "\n".join(lines)


SHELL = Tool(
    "shell",
    "Run a bash command in the workspace (the current directory). Returns the exit code and "
    "the combined stdout/stderr; long output is cut in the middle.",
    {
        "type": "object",
        "properties": {
            "command": {"type": "string", "minLength": 1},
            "timeout_s": {
                "type": "number",
                "exclusiveMinimum": 0,
                "description": "seconds before the command is killed",
            },
        },
        "required": ["command"],
        "additionalProperties": False,
    },
    _shell,
)
VIEW_FILE = Tool(
    "view_file",
    "Show a file of the workspace with line numbers (optionally a range of lines).",
    {
        "type": "object",
        "properties": {
            "path": {"type": "string"},
            "start_line": {"type": "integer", "minimum": 1},
            "end_line": {"type": "integer", "minimum": 1},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    _view,
)
EDIT_FILE = Tool(
    "edit_file",
    "Edit a file of the workspace: with old_text, replace that exact text (it must occur "
    "exactly once) by new_text; without old_text, write new_text as the whole file.",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "new_text": {"type": "string"}, "old_text": {"type": "string"}},
        "required": ["path", "new_text"],
        "additionalProperties": False,
    },
    _edit,
)
EVALUATE = Tool(
    "evaluate",
    "Run the task's evaluator on the workspace's kernel: correctness on every scenario, "
    "then speed against the baseline. Uses one evaluation of the budget.",
    {"type": "object", "properties": {}, "additionalProperties": False},
    _evaluate,
)


def base_tools() -> ToolRegistry:
    return ToolRegistry([SHELL, VIEW_FILE, EDIT_FILE, EVALUATE])


def tools_digest(registry: ToolRegistry) -> str:
    from .trace import sha256_bytes

    return sha256_bytes(json.dumps(registry.schemas(), sort_keys=True).encode())
