"""No vLLM version is typed into specreg's code: each one is a fact that goes stale with the next
release, so it lives in specreg/vllm/facts/ (releases.json, rules.json, the release folders) and the
code reads it by name (specreg.facts).

The rule, read with `tokenize` and `ast` from every `.py` file under specreg/ and algos/:
- a string in code (not a docstring), f-strings included, names no vLLM version (0.10-0.39, with or
  without a patch number): a version in code is a date, a range or the newest release, all facts;
- a docstring or a comment may tell a version's history ("0.25 left it unused"), which stays true,
  but names the newest known release only on a line that cites upstream code (a `*.py` file or a
  `vllm/...` path, as "vllm/model_executor/models/registry.py (0.33)"): prose such as "vLLM 0.26-0.33
  sets ..." is stale the day a release ships.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

from specreg import facts

ROOT = Path(__file__).resolve().parents[1]
VERSION = re.compile(r"(?<![\w.])0\.(1[0-9]|2[0-9]|3[0-9])(\.\d+)?(?![\w])")
CITES_UPSTREAM = re.compile(r"\w\.py\b|\bvllm/")
#: files another change is rewriting now, each naming a version in code until that change lands
#: (none at present: the algorithm files another engineer was to fold into one table, algos/mtp.py,
#: xpress.py, eagle.py, independent.py and mlp.py, do not exist in this tree)
ALLOWED: set[str] = set()
#: files whose prose or tables still type a version (finding texts, help texts, docstrings naming the
#: newest release, model_types' generated table): the rest of issue 36, part 1. This list only shrinks:
#: the last test below fails when a file here no longer needs it.
NOT_YET: set[str] = set()


def _docstring_lines(tree: ast.AST) -> set[int]:
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                lines |= set(range(first.lineno, (first.end_lineno or first.lineno) + 1))
    return lines


def _newest_releases() -> set[str]:
    newest = facts.known()[-1]
    return {newest, facts.wheel(newest)}


def offences(path: Path) -> list[str]:
    """`file:line: text` for each version the rule above refuses in one file."""
    text = path.read_text(encoding="utf-8")
    docs = _docstring_lines(ast.parse(text))
    source_lines = text.splitlines()
    newest = _newest_releases()
    found = []
    kinds = {tokenize.STRING, tokenize.COMMENT, getattr(tokenize, "FSTRING_MIDDLE", tokenize.STRING)}
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type not in kinds:
            continue
        for offset, piece in enumerate(tok.string.split("\n")):
            line = tok.start[0] + offset
            for m in VERSION.finditer(piece):
                prose = tok.type == tokenize.COMMENT or line in docs
                if prose and (
                    m.group(0) not in newest
                    and f"0.{m.group(1)}" not in newest
                    or CITES_UPSTREAM.search(source_lines[line - 1])
                ):
                    continue
                found.append(f"{path.relative_to(ROOT)}:{line}: {m.group(0)!r} in {source_lines[line - 1].strip()}")
    return found


def _files() -> list[Path]:
    return sorted([*(ROOT / "specreg").rglob("*.py"), *(ROOT / "algos").glob("*.py")])


def test_no_vllm_version_is_typed_into_the_code():
    found = [o for p in _files() if str(p.relative_to(ROOT)) not in ALLOWED | NOT_YET for o in offences(p)]
    assert not found, "vLLM versions typed into code (read them from specreg.facts):\n" + "\n".join(found)


def test_the_rule_refuses_a_version_in_code_and_newest_prose_but_not_history_or_a_citation(tmp_path):
    newest = facts.known()[-1]
    old = facts.known()[0]
    probe = ROOT / "specreg" / "_version_literal_probe.py"  # a path under ROOT, as offences() reports
    body = (
        f'"""Module docs: {old} did X; vLLM {old}-{newest} does Y."""\n'
        f'A = "{old}"  # {old} history; vllm/config/vllm.py ({newest})\n'
        f'B = f"vLLM {{A}} and {newest}.1"\n'
        f"# vLLM {newest} serves it\n"
    )
    try:
        probe.write_text(body, encoding="utf-8")
        got = [o.split(": ", 1)[1].split(" in ", 1)[0] for o in offences(probe)]
    finally:
        probe.unlink()
    assert got == [repr(newest), repr(old), repr(f"{newest}.1"), repr(newest)]


def test_the_allow_list_names_only_files_that_still_need_it():
    for name in ALLOWED | NOT_YET:
        path = ROOT / name
        assert path.is_file() and offences(path), f"{name} no longer names a version in code: drop it from ALLOWED"
