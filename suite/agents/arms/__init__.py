"""Arms: an agent configuration to compare (its tools and its supervisor). An arm registers itself
with @register_arm; every module of this package is imported when the registry is first read, so a
new arm is one new file here."""
from __future__ import annotations

import importlib
import pkgutil
from dataclasses import dataclass, field
from typing import Callable

from ..context import RunContext
from ..protocols import Supervisor
from ..tools import ToolRegistry


@dataclass
class ArmParts:
    tools: ToolRegistry
    supervisor: Supervisor | None = None
    info: dict = field(default_factory=dict)      # recorded in run_start (e.g. the bank used)


_REGISTRY: dict[str, Callable[[RunContext], ArmParts]] = {}
_LOADED = False


def register_arm(name: str):
    def deco(factory):
        _REGISTRY[name] = factory
        return factory
    return deco


def _load_all() -> None:
    global _LOADED
    if not _LOADED:
        for mod in pkgutil.iter_modules(__path__):
            importlib.import_module(f"{__name__}.{mod.name}")
        _LOADED = True


def arm_names() -> list[str]:
    _load_all()
    return sorted(_REGISTRY)


def build_arm(name: str, ctx: RunContext) -> ArmParts:
    _load_all()
    if name not in _REGISTRY:
        raise KeyError(f"unknown agent {name!r}; known: {', '.join(sorted(_REGISTRY))}")
    return _REGISTRY[name](ctx)
