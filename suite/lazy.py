"""Lazy exports for a package: its public names, each loaded from its module on first use, so that
importing the package stays fast (the agents' openai client, the scale-out's Dask)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_exports(package: str, exports: dict[str, tuple[str, ...]]) -> tuple[list[str], Callable[[str], object]]:
    """(`__all__`, `__getattr__`) for `package`, whose `exports` map a submodule to the names it gives."""
    where = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name: str):
        if name in where:
            return getattr(importlib.import_module(f"{package}.{where[name]}"), name)
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    return sorted(where), __getattr__
