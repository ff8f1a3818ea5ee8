"""No upstream table typed into code: no module of the package (specreg/, algos/) holds a literal of more
than 150 strings. A list generated from an upstream is data in its facts home (specreg/vllm/facts/,
specreg/sglang/rules/, specreg/transformers/facts/), read on first use (issue 48)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 150


def big_literals(source: str, where: str) -> list[str]:
    """`where:line: N strings` for each set, list, tuple or dict literal holding more than LIMIT strings
    (a dict counts its keys and its values)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Set, ast.List, ast.Tuple)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None] + node.values
        else:
            continue
        strings = sum(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in items)
        if strings > LIMIT:
            found.append(f"{where}:{node.lineno}: {strings} strings")
    return found


def test_no_module_holds_a_literal_of_more_than_150_strings():
    paths = sorted((ROOT / "specreg").rglob("*.py")) + sorted((ROOT / "algos").glob("*.py"))
    found = [line for p in paths for line in big_literals(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert found == []


def test_the_check_sees_a_table_of_151_strings():
    table = "TYPES = frozenset({" + ", ".join(f'"t{i}"' for i in range(151)) + "})\n"
    assert big_literals(table, "m.py") == ["m.py:1: 151 strings"]
    assert big_literals(table.replace('"t150", ', "").replace(', "t150"', ""), "m.py") == []
    mapping = "T = {" + ", ".join(f'"k{i}": "v{i}"' for i in range(76)) + "}\n"
    assert big_literals(mapping, "m.py") == ["m.py:1: 152 strings"]
