"""`general`: the minimal general-purpose coding agent (shell, view, edit, evaluate) with no
supervisor: it stops when it says it is done."""

from __future__ import annotations

from ..context import RunContext
from ..tools import base_tools
from . import ArmParts, register_arm


@register_arm("general", options={})
def build(ctx: RunContext) -> ArmParts:
    return ArmParts(base_tools())
