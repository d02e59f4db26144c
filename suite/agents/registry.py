"""A registry of named entries that the modules of a package fill in as they are imported (the arms
of arms/, the tasks of tasks/): every module of the package is imported the first time the registry
is read, so a new entry is one new file there."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, package: str, path: Iterable[str], kind: str):
        self.package, self.path, self.kind = package, list(path), kind  # kind: what an entry is called
        self.entries: dict[str, T] = {}
        self._loaded = False

    def add(self, name: str, entry: T) -> None:
        self.entries[name] = entry

    def _load_all(self) -> None:
        if not self._loaded:
            for mod in pkgutil.iter_modules(self.path):
                importlib.import_module(f"{self.package}.{mod.name}")
            self._loaded = True

    def names(self) -> list[str]:
        self._load_all()
        return sorted(self.entries)

    def get(self, name: str) -> T:
        """The entry; KeyError, naming those known, for a name that is not registered."""
        self._load_all()
        if name not in self.entries:
            raise KeyError(f"unknown {self.kind} {name!r}; known: {', '.join(sorted(self.entries))}")
        return self.entries[name]
