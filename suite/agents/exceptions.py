"""Control flow of the agent loop. A Terminate ends the run with an `exit` event that carries its
reason; everything else a step can meet is turned into a message to the model."""

from __future__ import annotations

from dataclasses import dataclass


class Terminate(Exception):
    """Ends the run. `reason` is the trace's exit reason."""

    reason = "error"

    def __init__(self, message: str = "", **details):
        super().__init__(message)
        self.message = message
        self.details = details


class Submitted(Terminate):
    """The agent stopped and the stop was accepted."""

    reason = "submitted"


class LimitExceeded(Terminate):
    """A limit of the run is spent (details: limit, used, max)."""

    reason = "limit"


class ModelError(Terminate):
    """The endpoint failed and retries did not help, or the failure cannot be retried."""

    reason = "model_error"


class Interrupted(Terminate):
    """Ctrl-C or SIGTERM: the run stops where it is and can be resumed."""

    reason = "interrupted"


class HarnessTampered(Terminate):
    """Files the evaluator depends on changed during the run."""

    reason = "harness_tampered"


class EvaluatorFailed(Terminate):
    """The evaluator's own machinery failed (CUDA unusable, its worker unable to start, no suitable
    GPU): not a verdict on the kernel. The run stops here and the model is not told that its kernel
    is wrong (details: evaluator_status, eval_index)."""

    reason = "error"


@dataclass(eq=False, repr=False)
class RetryableModelFault(Exception):
    """A fault of one model request that is worth retrying (kind: rate_limit, server_error, timeout,
    connection)."""

    kind: str
    message: str
    status_code: int | None = None
    retry_after_s: float | None = None
    usage: dict | None = None  # what the failed request used, where the endpoint said ({} when not)

    def __post_init__(self) -> None:
        super().__init__(self.message)
        self.usage = self.usage or {}


@dataclass(eq=False, repr=False)
class ContextTooLong(Exception):
    """The endpoint refused a request as longer than the model's context window. `limit_tokens` and
    `requested_tokens` are read from its message when it says them (None otherwise)."""

    message: str
    limit_tokens: int | None = None
    requested_tokens: int | None = None
    status_code: int | None = None

    def __post_init__(self) -> None:
        super().__init__(self.message)


class ToolError(Exception):
    """A tool call that cannot be carried out (bad arguments, path outside the workspace, ...): the
    message goes back to the model."""


class BudgetSpent(ToolError):
    """A tool that needs budget (an evaluation) was called with none left."""
