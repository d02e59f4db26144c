"""No import cycle among the suite's modules at any level: imports inside functions count as much as
those at the top of a file (they hide a cycle from the reader, not from the design). The graph is
grimp's, the library that import-linter's contracts (`make lint`) are checked with."""

from __future__ import annotations

import pytest

grimp = pytest.importorskip("grimp")  # the test extra's; a GPU node's bare set of wheels may lack it

PACKAGE = "kernelseek_suite"


def _cycles(graph) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(graph.find_modules_directly_imported_by(root))))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            for child in children:
                if not child.startswith(PACKAGE):
                    continue
                if child not in index:
                    index[child] = low[child] = counter[0]
                    counter[0] += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.find_modules_directly_imported_by(child)))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        m = stack.pop()
                        on_stack.discard(m)
                        component.append(m)
                        if m == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for module in sorted(graph.modules):
        if module.startswith(PACKAGE) and module not in index:
            visit(module)
    return found


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for m in (f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.c", f"{PACKAGE}.d"):
        graph.add_module(m)
    graph.add_import(importer=f"{PACKAGE}.a", imported=f"{PACKAGE}.b")
    graph.add_import(importer=f"{PACKAGE}.b", imported=f"{PACKAGE}.c")
    graph.add_import(importer=f"{PACKAGE}.c", imported=f"{PACKAGE}.a")
    graph.add_import(importer=f"{PACKAGE}.c", imported=f"{PACKAGE}.d")
    assert _cycles(graph) == [[f"{PACKAGE}.a", f"{PACKAGE}.b", f"{PACKAGE}.c"]]


def test_no_import_cycle_at_any_level():
    graph = grimp.build_graph(PACKAGE, include_external_packages=False, cache_dir=None)  # no cache in the checkout
    assert _cycles(graph) == []
