"""Each wheel's quantization methods, read with `ast`: the class `get_quantization_config(method)`
returns, its `get_min_capability()` and its `get_supported_act_dtypes()`, which
`VllmConfig._get_quantization_config` checks for the draft's own quantization config (the draft
classes take `get_draft_quant_config`). specreg/vllm/facts/<X.Y>/quantization_methods.json hold the result
(tests/conformance/test_deployment_rules.py compares it; SPECREG_REGENERATE=1 writes it)."""

from __future__ import annotations

import ast
import zipfile
from pathlib import Path

from specreg.vllm.fact_files import write_releases
from tests.conformance.vllm_mapping import wheel, wheel_file

PACKAGE = "vllm/model_executor/layers/quantization"
#: torch's names for the dtypes, as the classes write them
TORCH_DTYPES = {
    "half": "float16",
    "float16": "float16",
    "bfloat16": "bfloat16",
    "float": "float32",
    "float32": "float32",
    "float8_e4m3fn": "float8_e4m3fn",
}


class Wheel:
    def __init__(self, version: str) -> None:
        self.zip = zipfile.ZipFile(wheel(version))
        self.names = set(self.zip.namelist())
        self._trees: dict[str, ast.Module] = {}

    def tree(self, module: str) -> ast.Module | None:
        """vllm.a.b -> the parsed vllm/a/b.py (or vllm/a/b/__init__.py)."""
        base = module.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path not in self._trees:
                text = wheel_file(self.zip, path)  # a module moved behind a sys.modules shim is followed
                if text is None:
                    continue
                self._trees[path] = ast.parse(text)
            return self._trees[path]
        return None


def _absolute(module: str | None, level: int, package: str) -> str:
    parts = package.split(".")
    base = parts[: len(parts) - level + 1] if level else []
    return ".".join([*base, *([module] if module else [])]) if level else module or ""


def _imports(nodes: list[ast.AST], package: str) -> dict[str, tuple[str, str]]:
    """name -> (module, class) for the `from X import Y [as Z]` among `nodes`."""
    out = {}
    for node in nodes:
        for n in ast.walk(node):
            if isinstance(n, ast.ImportFrom):
                module = _absolute(n.module, n.level, package)
                for alias in n.names:
                    out[alias.asname or alias.name] = (module, alias.name)
    return out


def _returns(fn: ast.FunctionDef) -> list[ast.expr]:
    return [n.value for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value is not None]


def _lookup(w: Wheel, module: str, name: str, method: str, depth: int = 0) -> ast.FunctionDef | None:
    """The definition of `method` on class `name` of `module`, following its bases (by name) there."""
    tree = w.tree(module)
    if tree is None or depth > 4:
        return None
    cls = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if cls is None:
        imported = _imports(tree.body, module).get(name)
        return _lookup(w, *imported, method, depth + 1) if imported else None
    fn = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == method), None)
    if fn is not None:
        return fn
    imports = _imports(tree.body, module)
    for base in cls.bases:
        if isinstance(base, ast.Name):
            where = imports.get(base.id, (module, base.id))
            found = _lookup(w, *where, method, depth + 1)
            if found is not None:
                return found
    return None


def methods(version: str) -> dict[str, dict]:
    """method -> {"min_capability": int, "act_dtypes": [...]} for each method whose class states both
    as literals (the others are left out: specreg then says nothing of them)."""
    w = Wheel(version)
    package = PACKAGE.replace("/", ".")
    tree = w.tree(package)
    (fn,) = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "get_quantization_config"]
    imports = _imports(fn.body, package)
    table = next(
        n.value
        for n in ast.walk(fn)
        if isinstance(n, (ast.Assign, ast.AnnAssign))
        and isinstance(n.value, ast.Dict)
        and ast.unparse(n.targets[0] if isinstance(n, ast.Assign) else n.target) == "method_to_config"
    )
    out = {}
    for key, value in zip(table.keys, table.values):
        if not (isinstance(key, ast.Constant) and isinstance(value, ast.Name) and value.id in imports):
            continue
        module, name = imports[value.id]
        cap_fn = _lookup(w, module, name, "get_min_capability")
        act_fn = _lookup(w, module, name, "get_supported_act_dtypes")
        caps = _returns(cap_fn) if cap_fn else []
        acts = _returns(act_fn) if act_fn else []
        if (
            len(caps) != 1
            or not isinstance(caps[0], ast.Constant)
            or len(acts) != 1
            or not isinstance(acts[0], ast.List)
        ):
            continue
        dtypes = [e.attr for e in acts[0].elts if isinstance(e, ast.Attribute) and ast.unparse(e.value) == "torch"]
        if len(dtypes) != len(acts[0].elts) or not all(d in TORCH_DTYPES for d in dtypes):
            continue
        out[key.value] = {
            "class": name,
            "min_capability": caps[0].value,
            "act_dtypes": sorted({TORCH_DTYPES[d] for d in dtypes}),
        }
    return out


FACTS = Path(__file__).resolve().parents[2] / "specreg" / "vllm" / "facts"
ABOUT = (
    "read with ast from each vLLM wheel's get_quantization_config and its classes by "
    "tests/conformance/quantization_methods.py (SPECREG_REGENERATE=1 pytest -m conformance "
    "tests/conformance/test_deployment_rules.py -k quantization_methods); do not edit"
)


def regenerate(got: dict[str, dict], root: Path = FACTS) -> None:
    """SPECREG_REGENERATE=1: release -> its methods, one file per release under `root`."""
    write_releases(root, "quantization_methods", ABOUT, got)
