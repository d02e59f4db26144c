"""The agent loop: one message list, one model call per step, the tools it asks for, the supervisor's
word, a checkpoint in the trace. Control flow goes through exceptions (exceptions.py); every limit is
checked before each model call; the run can be resumed from any checkpoint (resume.py)."""
from __future__ import annotations

import time
import traceback
from dataclasses import dataclass, field

from . import layers
from .context import EvalRecord, RunContext
from .exceptions import Interrupted, Submitted, Terminate
from .model import ModelResponse, ToolCall
from .protocols import Model, Supervisor
from .tools import ToolRegistry, ToolResult
from .trace import sha256_json


@dataclass
class StepRecord:
    step: int
    response: ModelResponse
    results: list[tuple[ToolCall, ToolResult]] = field(default_factory=list)
    evals: list[EvalRecord] = field(default_factory=list)
    layer_scores: dict[str, int] = field(default_factory=dict)
    dominant_layer: str | None = None


@dataclass
class RunResult:
    exit_reason: str
    limit: str | None
    message: str
    goal_met: bool
    best: dict | None
    totals: dict
    trace_path: str


class Agent:
    def __init__(self, ctx: RunContext, model: Model, tools: ToolRegistry, supervisor: Supervisor | None = None):
        self.ctx, self.model, self.tools, self.supervisor = ctx, model, tools, supervisor
        self.messages: list[dict] = []
        self._logged = 0          # messages already written to the trace

    def start(self, run_start: dict, system: str, task: str) -> None:
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": task}]
        self.ctx.trace.emit("run_start", **run_start)

    def run(self) -> RunResult:
        while True:
            try:
                self.step()
            except Terminate as e:
                return self._finish(e)
            except KeyboardInterrupt:
                return self._finish(Interrupted("interrupted"))
            except Exception as e:
                stop = Terminate(f"{type(e).__name__}: {e}", traceback=traceback.format_exc()[-6000:])
                return self._finish(stop)

    def step(self) -> None:
        ctx = self.ctx
        ctx.check_limits()
        ctx.trace.step = ctx.totals.steps + 1
        n_evals = len(ctx.evals)
        response = self._query()
        ctx.totals.steps += 1
        self.messages.append(response.message())
        record = StepRecord(ctx.trace.step, response)
        for call in response.tool_calls:
            record.results.append((call, self._execute(call)))
        record.evals = ctx.evals[n_evals:]
        record.layer_scores = layers.scores(_step_text(record))
        record.dominant_layer = layers.dominant(record.layer_scores)
        accepted = False
        if not response.tool_calls:
            refusal = self.supervisor.on_stop(ctx, response) if self.supervisor else None
            accepted = refusal is None
            if refusal:
                self.messages.append({"role": "user", "content": refusal})
        elif self.supervisor:
            for text in self.supervisor.after_step(ctx, record):
                self.messages.append({"role": "user", "content": text})
        self._checkpoint(record)
        if accepted:
            raise Submitted(" ".join((response.content or "").split())[:500] or "stopped")

    def _take_delta(self) -> list[dict]:
        delta = self.messages[self._logged:]
        self._logged = len(self.messages)
        return delta

    def _query(self) -> ModelResponse:
        before = len(self.messages)
        sha = sha256_json(self.messages)
        response = self.model.query(self.messages, self.tools.schemas())
        self.ctx.totals.add_usage(response.usage)
        self.ctx.trace.emit("llm_call", call=self.ctx.totals.steps + 1,
                            messages_count=before, messages_sha256=sha, messages_delta=self._take_delta(),
                            request=self.model.request_params() if hasattr(self.model, "request_params") else {},
                            response={"content": response.content,
                                      "tool_calls": [c.to_dict() for c in response.tool_calls],
                                      "finish_reason": response.finish_reason, "reasoning": response.reasoning},
                            usage=response.usage, latency_s=response.latency_s, attempts=response.attempts)
        return response

    def _execute(self, call: ToolCall) -> ToolResult:
        t0 = time.monotonic()
        result = self.tools.call(call.name, call.arguments, self.ctx)
        self.ctx.trace.emit("tool_result", call_id=call.id, tool=call.name, arguments=call.arguments,
                            output=result.output, is_error=result.is_error, duration_s=round(time.monotonic() - t0, 3),
                            data=result.data)
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
        return result

    def _checkpoint(self, record: StepRecord) -> None:
        ctx = self.ctx
        files = {rel: ctx.trace.put_blob(data) for rel, data in ctx.workspace.snapshot().items()}
        ctx.totals.wall_s = ctx.trace.elapsed()
        ctx.trace.emit("step", messages_delta=self._take_delta(), messages_count=len(self.messages),
                       messages_sha256=sha256_json(self.messages), totals=ctx.totals.to_dict(),
                       best=ctx.best.to_dict() if ctx.best else None, layers=record.layer_scores,
                       dominant_layer=record.dominant_layer, workspace=files,
                       supervisor=self.supervisor.state() if self.supervisor else {})
        ctx.trace.sync()

    def _finish(self, stop: Terminate) -> RunResult:
        ctx = self.ctx
        stop = ctx.verify_at_end(stop)
        ctx.totals.wall_s = ctx.trace.elapsed()
        details = {k: v for k, v in stop.details.items() if k not in ("limit",)}
        ctx.trace.emit("exit", reason=stop.reason, message=stop.message, goal_met=ctx.goal_met,
                       limit=stop.details.get("limit"), details=details)
        best = ctx.best.to_dict() if ctx.best else None
        ctx.trace.emit("run_end", totals=ctx.totals.to_dict(), best=best, goal_met=ctx.goal_met,
                       exit_reason=stop.reason)
        ctx.trace.sync()
        for fn in ctx.finalizers:
            fn()
        if not ctx.config.tools.keep_workspace:
            ctx.workspace.cleanup()
        if hasattr(ctx.task, "close"):
            ctx.task.close()
        return RunResult(stop.reason, stop.details.get("limit"), stop.message, ctx.goal_met, best,
                         ctx.totals.to_dict(), str(ctx.trace.path))


def _step_text(record: StepRecord) -> str:
    """What a step wrote and ran, for the layer classifier: its text, commands and added lines."""
    parts = [record.response.content or ""]
    for call, result in record.results:
        if call.name == "shell":
            parts.append(str(call.arguments.get("command", "")))
        elif result.data and "added" in result.data:
            parts.append(result.data["added"])
    return "\n".join(parts)
