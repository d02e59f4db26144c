"""The lifecycle every driver of a run shares (protocols.Driver): the opening conversation and the
`run_start` event, the conversation taken up again on a resume, one step after another until a
Terminate (an interrupt or an unexpected error ends the run as one), a checkpoint after a step, and
the end: the `exit` and `run_end` events, the finalizers, the workspace removed or kept, the task
closed. A driver brings its own step: one model call and its tools (agent.py), one session of an
agent command (external.py)."""

from __future__ import annotations

import traceback

from .context import RunContext
from .exceptions import Interrupted, LimitExceeded, Terminate
from .protocols import Supervisor
from .records import RunResult, StepRecord

RESUMED = "The run was resumed. Continue with the task."


class RunLifecycle:
    """The shared part of a driver; a subclass gives `step` (and may change `opening` and
    `_waits_for_user`)."""

    def __init__(self, ctx: RunContext, supervisor: Supervisor | None):
        self.ctx, self.supervisor = ctx, supervisor
        self.messages: list[dict] = []
        self._logged = 0  # messages already written to the trace

    # ---- the opening, or a resumed conversation ----
    def start(self, run_start: dict, system: str, task: str) -> None:
        self.messages = self.opening(system, task)
        self.ctx.trace.emit("run_start", **run_start)

    def opening(self, system: str, task: str) -> list[dict]:
        return [{"role": "system", "content": system}, {"role": "user", "content": task}]

    def restore(self, messages: list[dict], context: dict) -> None:
        """The conversation of a resumed run; where it ended waiting for the user, it is told to go on."""
        self.messages, self._logged = messages, len(messages)
        if self._waits_for_user(self.messages[-1]):
            self.messages.append({"role": "user", "content": RESUMED})

    def _waits_for_user(self, last: dict) -> bool:
        return last["role"] != "user"

    # ---- the loop ----
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
        raise NotImplementedError

    def _wall_spent(self) -> bool:
        try:
            self.ctx.wall_left()
            return False
        except LimitExceeded:
            return True

    # ---- the trace ----
    def _take_delta(self) -> list[dict]:
        delta = self.messages[self._logged :]
        self._logged = len(self.messages)
        return delta

    def _stored_files(self) -> dict[str, str]:
        """The workspace's files, stored in the trace's blobs: relative path -> sha256."""
        return {rel: self.ctx.trace.put_file(p) for rel, p in self.ctx.workspace.files().items()}

    def _checkpoint(self, record: StepRecord, **extra) -> None:
        ctx = self.ctx
        files = self._stored_files()
        ctx.totals.wall_s = ctx.trace.elapsed()
        ctx.trace.emit(
            "step",
            messages_delta=self._take_delta(),
            messages_count=len(self.messages),
            messages_sha256=ctx.trace.messages_sha256(self.messages),
            totals=ctx.totals.to_dict(),
            best=ctx.best.to_dict() if ctx.best else None,
            layers=record.layer_scores,
            dominant_layer=record.dominant_layer,
            workspace=files,
            supervisor=self.supervisor.state() if self.supervisor else {},
            **extra,
        )
        ctx.trace.sync()

    # ---- the end ----
    def _finish(self, stop: Terminate) -> RunResult:
        ctx = self.ctx
        stop = ctx.verify_at_end(stop)
        ctx.totals.wall_s = ctx.trace.elapsed()
        limit = stop.details.get("limit")
        details = {k: v for k, v in stop.details.items() if k != "limit"}
        ctx.trace.emit(
            "exit", reason=stop.reason, message=stop.message, goal_met=ctx.goal_met, limit=limit, details=details
        )
        best = ctx.best.to_dict() if ctx.best else None
        ctx.trace.emit(
            "run_end", totals=ctx.totals.to_dict(), best=best, goal_met=ctx.goal_met, exit_reason=stop.reason
        )
        ctx.trace.sync()
        self._release()
        totals, trace = ctx.totals.to_dict(), str(ctx.trace.path)
        return RunResult(stop.reason, limit, stop.message, ctx.goal_met, best, totals, trace, details)

    def _release(self) -> None:
        """The run's finalizers, its workspace (removed, or kept with --keep-workspace) and its task."""
        ctx = self.ctx
        for fn in ctx.finalizers:
            fn()
        if not ctx.config.tools.keep_workspace:
            ctx.workspace.cleanup()
        else:
            ctx.workspace.keep()
        if hasattr(ctx.task, "close"):
            ctx.task.close()
