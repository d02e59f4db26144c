"""The seams of the agent runtime. Each is a small Protocol; a component is swapped by passing
another object with the same methods.

- Model: one chat-completions call with tools -> ModelResponse (model.py: OpenAIChatModel).
- Environment: the workspace the tools act in (workspace.py: Workspace).
- Task: starting files, a goal and an evaluator (tasks/: fa-fwd-sm90, cpu-attn).
- Tools: a ToolRegistry of Tool objects (tools.py); an arm adds its own tools to it.
- Supervisor: what an arm does around the loop: accept or refuse a stop, add messages after a step
  (arms/kernelseek.py asks questions at decision points). None: the general agent.
- CommandSupervisor: a Supervisor that also has the word after each session of an agent command
  (arms/agent_cmd.py).
- Driver: runs the run from its opening, or its resumed conversation, to its end (agent.py: Agent,
  the model loop; external.py: ExternalAgent, an agent command's sessions), both on the lifecycle
  of lifecycle.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from .context import RunContext
    from .model import ModelResponse
    from .records import RunResult, StepRecord
    from .workspace import ShellResult


@runtime_checkable
class Model(Protocol):
    def query(self, messages: list[dict], tools: list[dict]) -> ModelResponse: ...
    def describe(self) -> dict: ...


@runtime_checkable
class Environment(Protocol):
    root: Path

    def resolve(self, path: str, must_exist: bool = False) -> Path: ...
    def relative(self, full: Path) -> str: ...
    def run(self, command: str, timeout_s: float) -> ShellResult: ...
    def files(self) -> dict[str, Path]: ...
    def restore_files(self, files: dict[str, Path]) -> None: ...
    def describe(self) -> dict: ...


@runtime_checkable
class Supervisor(Protocol):
    def on_stop(self, ctx: RunContext, response: ModelResponse) -> str | None:
        """None accepts the stop; a string refuses it and is sent to the model."""

    def after_step(self, ctx: RunContext, step: StepRecord) -> list[str]:
        """Messages for the model before its next call."""

    def state(self) -> dict: ...
    def load_state(self, state: dict) -> None: ...


@runtime_checkable
class CommandSupervisor(Supervisor, Protocol):
    def after_session(self, ctx: RunContext, record: StepRecord) -> str | None:
        """The message for the agent command's next session (a question), or None."""


@runtime_checkable
class Driver(Protocol):
    ctx: RunContext

    def start(self, run_start: dict, system: str, task: str) -> None:
        """The opening conversation, and the run_start event."""

    def restore(self, messages: list[dict], context: dict) -> None:
        """The conversation of a resumed run, and the driver's own state of it (`context`)."""

    def run(self) -> RunResult: ...
