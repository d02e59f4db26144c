"""The agent loop: one message list, one model call per step, the tools it asks for, the supervisor's
word, a checkpoint in the trace. Control flow goes through exceptions (exceptions.py); every limit is
checked before each model call; the conversation is kept inside the model's context window
(compaction.py); the run can be resumed from any checkpoint (runner.py). The lifecycle around the
steps (the opening, a resume, the checkpoint, the end) is lifecycle.py's, shared with external.py."""

from __future__ import annotations

import time

from . import layers
from .compaction import ContextManager
from .context import RunContext
from .exceptions import ContextTooLong, ModelError, Submitted
from .lifecycle import RunLifecycle
from .model import ModelResponse, ToolCall
from .protocols import Model, Supervisor
from .records import RunResult, StepRecord
from .tools import ToolRegistry, ToolResult

__all__ = ["Agent", "RunResult", "StepRecord"]


class Agent(RunLifecycle):
    def __init__(self, ctx: RunContext, model: Model, tools: ToolRegistry, supervisor: Supervisor | None = None):
        super().__init__(ctx, supervisor)
        self.model, self.tools = model, tools
        self.window = ContextManager(ctx.config.context, ctx.config.model.max_output_tokens)
        self._files: dict[str, bytes] | None = None  # the workspace's text files as the last step left them

    def restore(self, messages: list[dict], context: dict) -> None:
        """The conversation and the context window's state of a resumed run."""
        super().restore(messages, context)
        self.window.load(context)

    def _waits_for_user(self, last: dict) -> bool:
        return last["role"] == "assistant" and not last.get("tool_calls")

    def step(self) -> None:
        ctx = self.ctx
        ctx.check_limits()
        ctx.trace.step = ctx.totals.steps + 1
        n_evals = len(ctx.evals)
        before = self._files if self._files is not None else layers.diffable_files(ctx.workspace.files())
        response = self._query()
        ctx.totals.steps += 1
        self.messages.append(response.message())
        record = StepRecord(ctx.trace.step, response)
        for call in response.tool_calls:
            record.results.append((call, self._execute(call)))
        record.evals = ctx.evals[n_evals:]
        self._files = layers.diffable_files(ctx.workspace.files())
        record.layer_scores = layers.step_scores(before, self._files, _step_text(record))
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
        context = {k: v for k, v in self.window.state.to_dict().items() if k not in ("summary_lines", "turn_lines")}
        self._checkpoint(record, context=context)
        if accepted:
            raise Submitted(" ".join((response.content or "").split())[:500] or "stopped")

    # refusals of a request as too long, in one step, before the run gives up
    MAX_CONTEXT_REFUSALS = 3

    def _query(self) -> ModelResponse:
        tools = self.tools.schemas()
        refusals = 0
        while True:
            if self.window.needs_compaction(self.messages, tools):
                self._compact("budget", tools, int(self.window.config.compact_to * self.window.room))
            try:
                return self._call(tools)
            except ContextTooLong as e:
                refusals += 1
                refused = self.window.tokens(self.messages, tools)
                if e.requested_tokens:
                    self.window.calibrate(self.messages, tools, e.requested_tokens)
                    refused = e.requested_tokens
                if refusals > self.MAX_CONTEXT_REFUSALS:
                    raise ModelError(
                        f"the endpoint still refuses the request as too long for the model's context "
                        f"window after {refusals - 1} compaction(s): {e}",
                        kind="context_length",
                    ) from e
                self.window.set_window(e.limit_tokens or int(refused * 0.9), "refusal")
                room = self.window.room or refused
                target = min(
                    int(self.window.config.compact_to * room), int(0.75 * self.window.tokens(self.messages, tools))
                )
                self._compact("endpoint", tools, target, error=str(e)[:1000], refused_tokens=refused)

    def _call(self, tools: list[dict]) -> ModelResponse:
        before = len(self.messages)
        sent = self.messages
        sha = self.ctx.trace.messages_sha256(self.messages)
        response = self.model.query(self.messages, tools)
        self.ctx.totals.add_usage(response.usage)
        self.window.calibrate(sent, tools, int(response.usage.get("prompt_tokens") or 0))
        self.ctx.trace.emit(
            "llm_call",
            call=self.ctx.totals.steps + 1,
            messages_count=before,
            messages_sha256=sha,
            messages_delta=self._take_delta(),
            request=self.model.request_params() if hasattr(self.model, "request_params") else {},
            response={
                "content": response.content,
                "tool_calls": [c.to_dict() for c in response.tool_calls],
                "finish_reason": response.finish_reason,
                "reasoning": response.reasoning,
            },
            usage=response.usage,
            latency_s=response.latency_s,
            attempts=response.attempts,
            **({"adjusted": response.extra["adjusted"]} if response.extra.get("adjusted") else {}),
        )
        return response

    def _compact(self, reason: str, tools: list[dict], target: int, **info) -> None:
        """The conversation compacted to `target` tokens; the `context` event holds all of it, so that a
        resume (and any reader) takes the conversation up from there."""
        w = self.window
        result = w.compact(self.messages, tools, target, w.state.dropped_through_step + 1)
        w.accept(result)
        self.messages = result.messages
        self._logged = len(self.messages)
        self.ctx.totals.compactions += 1
        summary = next(
            (m["content"] for m in self.messages[2:3] if str(m.get("content") or "").startswith("[Context summary]")),
            None,
        )
        self.ctx.trace.emit(
            "context",
            reason=reason,
            window_tokens=w.state.window_tokens,
            window_source=w.state.window_source,
            room_tokens=w.room,
            target_tokens=target,
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
            fits=result.fits,
            elided=result.elided,
            summary=summary,
            messages=self.messages,
            messages_count=len(self.messages),
            messages_sha256=self.ctx.trace.messages_sha256(self.messages),
            state=w.state.to_dict(),
            **info,
        )

    def _execute(self, call: ToolCall) -> ToolResult:
        """Runs one tool call. Every call gets a result, so the conversation stays well formed: a call
        the model got wrong gets an error (counted), and once the wall time is spent the remaining
        calls of the step get 'not run'."""
        t0 = time.monotonic()
        if call.error:
            result = ToolResult(
                f"error: this {call.name} call was not run: {call.error}. It was sent as: "
                f"{call.raw_arguments[:400]!r}. Call the tool again with its arguments as one JSON "
                "object.",
                is_error=True,
                call_error="malformed",
            )
        elif self._wall_spent():
            result = ToolResult(
                "error: not run: the run's wall-time limit is reached", is_error=True, data={"not_run": "wall"}
            )
        else:
            result = self.tools.call(call.name, call.arguments, self.ctx)
        if result.call_error:
            self.ctx.totals.tool_call_errors += 1
        self.ctx.trace.emit(
            "tool_result",
            call_id=call.id,
            tool=call.name,
            arguments=call.arguments,
            output=result.output,
            is_error=result.is_error,
            duration_s=round(time.monotonic() - t0, 3),
            data=result.data,
            call_error=result.call_error,
        )
        self.messages.append({"role": "tool", "tool_call_id": call.id, "content": result.output})
        return result


def _step_text(record: StepRecord) -> str:
    """What a step wrote and ran, for the layer classifier when it changed no file it can diff: its
    text, commands and the lines its edits added."""
    parts = [record.response.content or ""]
    for call, result in record.results:
        if call.name == "shell":
            parts.append(str(call.arguments.get("command", "")))
        elif result.data and "added" in result.data:
            parts.append(result.data["added"])
    return "\n".join(parts)
