"""Detects changes to the files the evaluator depends on (the suite's code, the task's harness, the
question bank) between the start of a run and each evaluation."""

from __future__ import annotations

import hashlib
from pathlib import Path

from .exceptions import HarnessTampered

SKIP_DIRS = {"__pycache__", ".pytest_cache"}
SKIP_SUFFIXES = {".pyc", ".o"}


def _files(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    out = []
    for p in sorted(root.rglob("*")):
        if p.is_file() and not SKIP_DIRS.intersection(p.parts) and p.suffix not in SKIP_SUFFIXES:
            out.append(p)
    return out


def digest_tree(paths: list[Path]) -> dict[str, str]:
    out = {}
    for root in paths:
        root = Path(root)
        if not root.exists():
            continue
        for p in _files(root):
            out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


class HarnessGuard:
    def __init__(self, paths: list[Path]):
        self.paths = [Path(p).resolve() for p in paths]
        self.baseline = digest_tree(self.paths)

    def changes(self) -> list[str]:
        now = digest_tree(self.paths)
        changed = [p for p in self.baseline if now.get(p) != self.baseline[p]]
        added = [p for p in now if p not in self.baseline]
        return sorted(changed + added)

    def check(self) -> None:
        changed = self.changes()
        if changed:
            shown = ", ".join(changed[:5]) + (f" and {len(changed) - 5} more" if len(changed) > 5 else "")
            raise HarnessTampered(f"files the evaluator depends on changed during the run: {shown}", files=changed)

    def describe(self) -> dict:
        return {"paths": [str(p) for p in self.paths], "files": len(self.baseline)}
