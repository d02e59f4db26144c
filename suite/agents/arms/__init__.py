"""Arms: an agent configuration to compare (its tools and its supervisor). An arm registers itself
with @register_arm, naming the options it takes (`--agent-opt KEY=VALUE`) and their defaults; an
option an arm does not take is an error, never silently ignored. Every module of this package is
imported when the registry is first read, so a new arm is one new file here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from ..context import RunContext
from ..protocols import Driver, Supervisor
from ..registry import Registry
from ..tools import ToolRegistry


@dataclass
class ArmParts:
    tools: ToolRegistry
    supervisor: Supervisor | None = None
    info: dict = field(default_factory=dict)  # recorded in run_start (e.g. the bank used)
    # an arm that runs without the model loop (agent-cmd): its own driver of the run
    driver: Callable[[RunContext], Driver] | None = None


_ARMS: Registry[tuple[Callable[[RunContext], ArmParts], dict]] = Registry(__name__, __path__, "agent")


class ArmOptionError(ValueError):
    """An option the arm does not take, or a value it cannot use."""


def register_arm(name: str, options: dict | None = None):
    """`options`: the keys the arm takes, with their defaults."""

    def deco(factory):
        _ARMS.add(name, (factory, dict(options or {})))
        return factory

    return deco


def arm_options(name: str) -> dict:
    """The options an arm takes, with their defaults."""
    return dict(_ARMS.get(name)[1])


def check_options(name: str, given: dict) -> dict:
    """The arm's options in force: its defaults with `given` over them; an unknown key is an error."""
    known = arm_options(name)
    unknown = sorted(set(given) - set(known))
    if unknown:
        raise ArmOptionError(
            f"unknown option(s) for the {name} agent: {', '.join(unknown)}; "
            + (f"known: {', '.join(known)}" if known else "it takes none")
        )
    return {**known, **given}


def arm_names() -> list[str]:
    return _ARMS.names()


def build_arm(name: str, ctx: RunContext) -> ArmParts:
    """The arm's tools and supervisor; its options in force go into run_start (`arm_options`)."""
    opts = check_options(name, dict(ctx.config.arm_options))
    parts = _ARMS.get(name)[0](ctx)
    parts.info.setdefault("arm_options", {k: (list(v) if isinstance(v, tuple) else v) for k, v in opts.items()})
    return parts
