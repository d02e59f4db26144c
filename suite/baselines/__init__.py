"""Baselines: adapters with one signature, registered by name. Adding one touches one file.

An adapter's `prepare(scenario)` returns a callable `(q, k, v) -> out` for tensors laid out
(batch, seqlen, heads, headdim), or raises `Unsupported`; `available()` says whether it can run here
and, if not, how to install it. A missing baseline is reported in its column, never a crash."""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable
from dataclasses import dataclass

from ..scenarios import Scenario


class Unsupported(Exception):
    """The baseline does not support this scenario (or is not installed)."""


@dataclass
class Baseline:
    name: str
    description: str
    install_hint: str
    probe: Callable[[], object]  # import what is needed, raise if absent
    prepare_fn: Callable[[object, Scenario], Callable]  # (module, scenario) -> fn(q, k, v)
    packages: tuple[str, ...] = ()

    _module: object = None
    _error: str | None = None

    def available(self) -> tuple[bool, str]:
        if self._module is None and self._error is None:
            try:
                self._module = self.probe()
            except Exception as e:  # any import failure means "not installed here"
                self._error = f"not installed ({type(e).__name__}: {e}): {self.install_hint}"
        return (self._module is not None, self._error or "ok")

    def prepare(self, scn: Scenario) -> Callable:
        ok, msg = self.available()
        if not ok:
            raise Unsupported(msg)
        return self.prepare_fn(self._module, scn)

    def version(self) -> str | None:
        for pkg in self.packages:
            try:
                return f"{pkg}=={importlib.metadata.version(pkg)}"
            except importlib.metadata.PackageNotFoundError:
                continue
        return None


REGISTRY: dict[str, Baseline] = {}


def register(b: Baseline) -> Baseline:
    REGISTRY[b.name] = b
    return b


def get(name: str) -> Baseline:
    if name not in REGISTRY:
        raise KeyError(f"unknown baseline {name!r}; known: {', '.join(sorted(REGISTRY))}")
    return REGISTRY[name]


from . import flash_attn as _flash_attn  # noqa: E402,F401  (registers fa3, fa4)
from . import sdpa as _sdpa  # noqa: E402,F401  (registers cudnn, sdpa-flash)
