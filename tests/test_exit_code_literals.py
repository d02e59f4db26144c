"""No exit code is a bare number outside the contracts (suite/contracts/exitcodes.py): what a command
or one of the suite's own child processes exits with, and what a parent compares a child's code
with, are named there, so that two meanings cannot share a number unseen (the worker's "CUDA context
lost" once was 3, which is NO_GPU). A comparison with 0 stays allowed: it is any tool's success."""

from __future__ import annotations

import ast
from pathlib import Path

SUITE = Path(__file__).resolve().parent.parent / "suite"
CONTRACT = SUITE / "contracts" / "exitcodes.py"
EXIT_CALLS = {"exit", "_exit", "SystemExit", "fail"}  # sys.exit, os._exit, SystemExit, cli.common.fail
CODE_NAMES = {"returncode", "exit_code", "rc"}  # (an HTTP status_code is no exit code)


def _int(node) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return None if inner is None else -inner
    return None


def _name(node) -> str | None:
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return None


def _numbers(node) -> list[int]:
    """The integer literals a comparison's right side holds (one, or a tuple/list/set of them)."""
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        return [v for v in (_int(e) for e in node.elts) if v is not None]
    v = _int(node)
    return [] if v is None else [v]


def literals(source: str) -> list[tuple[int, str]]:
    """(line, what) for each exit code written as a number."""
    found = []
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _name(node.func) in EXIT_CALLS:
            args = node.args[1:2] if _name(node.func) == "fail" else node.args[:1]
            if any(_int(a) is not None for a in args):
                found.append((node.lineno, f"{_name(node.func)}(<number>)"))
        elif isinstance(node, ast.Compare) and _name(node.left) in CODE_NAMES:
            for right in node.comparators:
                if any(v != 0 for v in _numbers(right)):
                    found.append((node.lineno, f"{_name(node.left)} compared with a number"))
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "main":
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and ret.value is not None and _int(ret.value) is not None:
                    found.append((ret.lineno, "main returns a number"))
    return found


def test_the_finder_finds_each_form():
    source = (
        "import sys\n"
        "def main():\n"
        "    return 3\n"
        "def f(p, rc):\n"
        "    sys.exit(2)\n"
        "    raise SystemExit(4)\n"
        "    fail('no', 6)\n"
        "    if p.returncode == 3 or p.returncode not in (0, 1) or rc == 2:\n"
        "        pass\n"
        "    if p.returncode != 0 or p.returncode == exitcodes.FAIL:\n"
        "        pass\n"
    )
    assert [line for line, _ in literals(source)] == [3, 5, 6, 7, 8, 8, 8]


def test_no_exit_code_is_a_bare_number_outside_the_contracts():
    found = []
    for path in sorted(SUITE.rglob("*.py")):
        if path == CONTRACT:
            continue
        found += [f"{path.relative_to(SUITE.parent)}:{line}: {what}" for line, what in literals(path.read_text())]
    assert found == [], "\n".join(found)
