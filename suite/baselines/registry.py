"""A baseline's adapter (`Baseline`), `Unsupported`, and the registry the adapters' modules add
themselves to (`register`); the package (baselines/__init__.py) imports every adapter module."""

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
