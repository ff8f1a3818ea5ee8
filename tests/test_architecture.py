"""The package layout is the data flow: a folder is a stage, and no module imports a later stage,
at module level or inside a function (read from the code with `ast`; only `if TYPE_CHECKING:` blocks,
which never run, are left out). docs/architecture.md draws the stage graph; it must be the one the
imports make."""

from __future__ import annotations

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the stages, earliest first; a module may import its own stage and earlier ones
STAGES = ("base", "sources", "normalization", "entries", "vllm", "api", "sglang", "verify", "cli", "facade")
BASE = {
    "specreg.errors",
    "specreg.atomic",
    "specreg.dirwrite",
    "specreg.version",
    "specreg.facts",
    "specreg.transformers",
    "specreg.speculators",
}
FACADE = {
    "specreg",
    "specreg.__main__",
    "specreg.docs",
    "specreg.facts.__main__",
    "specreg.facts.diff",
    "specreg.facts.refresh",
    "specreg.facts.upstream",
    "specreg.transformers.__main__",
    "specreg.transformers.refresh",
    "specreg.speculators.__main__",
    "specreg.speculators.refresh",
}


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted((ROOT / "specreg").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    for path in sorted((ROOT / "algos").glob("*.py")):
        found["specreg.algos" + ("" if path.stem == "__init__" else f".{path.stem}")] = path
    return found


def stage(module: str) -> str:
    if module in BASE:
        return "base"
    if module in FACADE:
        return "facade"
    part = module.split(".")[1]
    if part == "algos":  # an algorithm module is normalization's, one file each
        return "normalization"
    assert part in STAGES, f"{module} is in no stage"
    return part


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines |= set(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The specreg modules a file imports (anywhere in it), resolved to module names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    out = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "specreg"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "specreg":
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                out.add(sub if sub in known else node.module)
    return out


def edges() -> set[tuple[str, str, str, str]]:
    known = modules()
    return {(m, stage(m), t, stage(t)) for m, path in known.items() for t in imports(path, known)}


def test_every_module_is_in_a_stage():
    assert {stage(m) for m in modules()} <= set(STAGES)


def test_no_module_imports_a_later_stage():
    late = sorted(f"{m} ({s}) imports {t} ({ts})" for m, s, t, ts in edges() if STAGES.index(ts) > STAGES.index(s))
    assert late == []


def test_the_architecture_diagram_is_the_import_graph():
    text = (ROOT / "docs" / "architecture.md").read_text()
    (block,) = re.findall(r"```mermaid\n(.*?)```", text, re.S)
    drawn = set(re.findall(r"^\s*(\w+) --> (\w+)\s*$", block, re.M))
    made = {(s, ts) for _m, s, _t, ts in edges() if s != ts and "facade" not in (s,)}
    assert drawn == made, f"draw: {sorted(made - drawn)}; remove: {sorted(drawn - made)}"


def private_imports(path: Path, module: str) -> list[str]:
    """`from <specreg module> import _name` in a file, where the module is not the file itself
    (dunders such as __version__ are public)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        source = node.module or ""
        if node.level:  # a relative import, resolved against the file's package
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            source = ".".join([*base, *([source] if source else [])])
        if source.split(".")[0] != "specreg" or source == module:
            continue
        for alias in node.names:
            name = alias.name
            if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
                where = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
                found.append(f"{where}:{node.lineno}: from {source} import {name}")
    return found


def test_no_module_imports_another_modules_private_name():
    found = [line for m, path in modules().items() for line in private_imports(path, m)]
    assert found == []


def test_the_private_import_check_sees_absolute_and_relative_imports(tmp_path):
    pkg = tmp_path / "specreg" / "cli"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    path = pkg / "thing.py"
    path.write_text(
        "from specreg.cli.common import _load, ok\nfrom .common import _fmt\nfrom specreg import __version__\n"
    )
    got = [line.split(": ", 1)[1] for line in private_imports(path, "specreg.cli.thing")]
    assert got == ["from specreg.cli.common import _load", "from specreg.cli.common import _fmt"]


#: how long a module may grow before docs/architecture.md must say what its one job is (issue 48)
LONG = 400


def test_every_long_module_says_its_one_job():
    """docs/architecture.md's table "Modules over 400 lines" has a row for every module over LONG lines
    and no row for one that is shorter or gone (a stale row would describe a module nobody reads)."""
    doc = (ROOT / "docs" / "architecture.md").read_text()
    section = doc.split("## Modules over 400 lines", 1)[1].split("\n## ", 1)[0]
    rows = {m: job for m, job in re.findall(r"^\| `([\w/.]+\.py)` \| (.+) \|$", section, re.M)}
    lines = {
        str(p.relative_to(ROOT / "specreg")): len(p.read_text().splitlines()) for p in (ROOT / "specreg").rglob("*.py")
    }
    long = {m for m, n in lines.items() if n > LONG}
    assert not long - rows.keys(), f"over {LONG} lines, no row: {sorted((m, lines[m]) for m in long - rows.keys())}"
    stale = sorted((m, lines.get(m)) for m in rows.keys() - long)
    assert not stale, f"rows for modules of {LONG} lines or fewer, or gone (module, lines): {stale}"
    assert all(len(job.split()) >= 8 for job in rows.values()), "say the module's job in a sentence"
