"""vLLM's CI test files for one release, read from its sdist on PyPI (cached), parsed with `ast`.

The sdist of vllm==X ships `tests/` as of the release commit (`vllm/_version.py` names it), so
"the gate vLLM's CI applies" is read from the file that CI runs, not from a summary of it.
"""

from __future__ import annotations

import ast
import json
import os
import tarfile
import urllib.parse
import urllib.request
from functools import lru_cache
from pathlib import Path
from typing import Any

CACHE = Path(os.environ.get("SPECREG_VLLM_SDISTS", Path.home() / ".cache" / "specreg" / "vllm-sdists"))


def _sdist_url(version: str) -> str:
    """The sdist's URL from PyPI's JSON API, or from the simple index where only that is reachable."""
    import re
    import urllib.error

    try:
        with urllib.request.urlopen(f"https://pypi.org/pypi/vllm/{version}/json", timeout=60) as r:
            return [u for u in json.load(r)["urls"] if u["packagetype"] == "sdist"][0]["url"]
    except urllib.error.HTTPError:
        with urllib.request.urlopen("https://pypi.org/simple/vllm/", timeout=60) as r:
            page = r.read().decode()
        href = re.search(rf'href="([^"]*/vllm-{re.escape(version)}\.tar\.gz)(#[^"]*)?"', page)
        if href is None:
            raise
        return urllib.parse.urljoin("https://pypi.org/simple/vllm/", href.group(1).replace("&amp;", "&"))


def sdist(version: str) -> Path:
    path = CACHE / f"vllm-{version}.tar.gz"
    if not path.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".part")
        urllib.request.urlretrieve(_sdist_url(version), tmp)
        tmp.rename(path)
    return path


@lru_cache(maxsize=None)
def read(version: str, member: str) -> str:
    with tarfile.open(sdist(version)) as t:
        f = t.extractfile(f"vllm-{version}/{member}")
        assert f is not None, member
        return f.read().decode()


def commit(version: str) -> str:
    """The release commit, as the sdist's vllm/_version.py states it (without vcs-versioning's 'g')."""
    tree = ast.parse(read(version, "vllm/_version.py"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and any(isinstance(t, ast.Name) and t.id == "commit_id" for t in ast.walk(node))
        ):
            return str(node.value.value).removeprefix("g")
    raise AssertionError("no commit_id in vllm/_version.py")


def _value(node: ast.expr, names: dict[str, Any]) -> Any:
    if isinstance(node, ast.Name) and node.id in names:
        return names[node.id]
    if isinstance(node, ast.JoinedStr):
        return "".join(str(v.value) for v in node.values if isinstance(v, ast.Constant))
    try:
        return ast.literal_eval(node)
    except ValueError:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):  # implicit string concatenation in parens
            return _value(node.left, names) + _value(node.right, names)
        return ast.unparse(node)


def constants(text: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for node in ast.parse(text).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                out[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                pass
    return out


def calls(text: str, name: str) -> list[dict[str, Any]]:
    """The keyword arguments of every call to `name` in a file (literals evaluated, module constants resolved)."""
    names = constants(text)
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", None)) == name:
            found.append({k.arg: _value(k.value, names) for k in node.keywords if k.arg})
    return found


def compares(text: str, function: str) -> list[str]:
    """Every comparison inside `function`, as source text (how a gate is written)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [ast.unparse(n) for n in ast.walk(node) if isinstance(n, ast.Compare)]
    raise AssertionError(f"no function {function}")


def dataclass_defaults(text: str, name: str) -> dict[str, Any]:
    """The field defaults of a dataclass in a file (`field: T = value`)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                n.target.id: ast.literal_eval(n.value)
                for n in node.body
                if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name) and n.value is not None
            }
    raise AssertionError(f"no class {name}")


def instances(text: str, cls: str) -> dict[str, dict[str, Any]]:
    """Module-level `NAME = cls(...)` instances: NAME -> the dataclass defaults overlaid with the call's keywords."""
    names, defaults = constants(text), dataclass_defaults(text, cls)
    out = {}
    for node in ast.parse(text).body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "id", None) == cls
        ):
            out[node.targets[0].id] = {**defaults, **{k.arg: _value(k.value, names) for k in node.value.keywords}}
    return out


def function_defaults(text: str, name: str) -> dict[str, Any]:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == name:
            args = node.args.args[len(node.args.args) - len(node.args.defaults) :]
            return {a.arg: ast.literal_eval(d) for a, d in zip(args, node.args.defaults)}
    raise AssertionError(f"no function {name}")


def functions(text: str, *names: str, namespace: dict[str, Any]) -> dict[str, Any]:
    """Execute the named top-level functions of a file in `namespace` (which supplies what they use)."""
    tree = ast.parse(text)
    body = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in names]
    assert {n.name for n in body} == set(names), names
    exec(compile(ast.Module(body=body, type_ignores=[]), "<vllm ci>", "exec"), namespace)
    return namespace


def keyword_dicts(text: str, function: str, name: str) -> list[dict[str, Any]]:
    """The literal keys of every `name = {...}` dict built inside `function` (e.g. runner_config)."""
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef) and node.name == function:
            return [
                {ast.literal_eval(k): ast.unparse(v) for k, v in zip(n.value.keys, n.value.values) if k is not None}
                for n in ast.walk(node)
                if isinstance(n, ast.Assign)
                and isinstance(n.value, ast.Dict)
                and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)
            ]
    raise AssertionError(f"no function {function}")
