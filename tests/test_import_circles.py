"""Arrows that point one way: no two specreg modules import each other, directly or round a longer
circle, counting every import in a file (at module level, inside a function, and under
`if TYPE_CHECKING:`, which a reader follows too). Read from the code with `ast`, as
tests/test_architecture.py reads the stages."""

from __future__ import annotations

import ast
from pathlib import Path

from test_architecture import modules


def every_import(path: Path, known: dict[str, Path]) -> set[str]:
    """The specreg modules a file imports anywhere in it, TYPE_CHECKING blocks included."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            out |= {
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module for a in node.names
            }
    return out & set(known)


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


def test_no_specreg_modules_import_each_other():
    known = modules()
    graph = {m: every_import(path, known) - {m} for m, path in known.items()}
    assert circles(graph) == []


def test_the_circle_finder_sees_a_direct_and_a_longer_circle():
    graph = {"a": {"b"}, "b": {"a", "c"}, "c": set(), "d": {"e"}, "e": {"f"}, "f": {"d"}}
    assert circles(graph) == [["a", "b"], ["d", "e", "f"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_a_type_checking_import_counts(tmp_path):
    # sglang/write.py once imported sglang/export.py under TYPE_CHECKING while export imported write
    path = tmp_path / "m.py"
    path.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from specreg.x import Y\n")
    assert every_import(path, {"specreg.x": path}) == {"specreg.x"}
