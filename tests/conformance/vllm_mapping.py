"""vLLM's own speculators mapping code, loaded by file path from downloaded wheels (no install).

Wheels are fetched with ``pip download --no-deps vllm==X`` into ~/.cache/specreg/vllm-wheels
(override with SPECREG_VLLM_WHEELS); only `algos.py` and `base.py` of the mapping are extracted.
`base.py` imports transformers and vLLM helpers that its mapping logic never uses; they are
given stand-ins while it is executed, so the logic that runs is vLLM's own.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from functools import lru_cache
import sys
import types
import zipfile
from pathlib import Path

MAPPING = "vllm/transformers_utils/configs/speculators"
CACHE = Path(os.environ.get("SPECREG_VLLM_WHEELS", Path.home() / ".cache" / "specreg" / "vllm-wheels"))


def wheel(version: str) -> Path:
    """vLLM `version`'s own wheel, downloaded once (wheels only: an index holding only an sdist would
    have pip run its build backend). `===` asks for that exact version: a local-version build such as
    `0.34.0+cpu`, which `==` also matches, is a different build with other code, and is refused."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    if not found:
        print(f"downloading vllm=={version} (no deps) into {CACHE} ...", file=sys.stderr, flush=True)
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                f"vllm==={version}", "-d", str(CACHE),
            ],
            check=True,
        )  # fmt: skip
        found = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    if not found:
        others = sorted(p.name for p in CACHE.glob(f"vllm-{version}+*.whl"))
        raise FileNotFoundError(
            f"no wheel of vllm {version} itself in {CACHE}"
            + (f" (only the local-version build {others[0]}, whose code is not the release's)" if others else "")
        )
    return found[-1]


class MovedModuleError(RuntimeError):
    """A file of the wheel is a `sys.modules` shim (the module moved, the old path kept for imports) whose
    new home cannot be read: an extractor reading the shim would find nothing, so it fails loudly."""


#: a module that replaces itself in sys.modules (vLLM PR #54654's pattern for a moved module)
_SHIM = re.compile(r"sys\.modules\[[^\]]+\]\s*=")
_IMPORTS = (
    re.compile(r"import_module\(\s*[\"']([\w.]+)[\"']"),
    re.compile(r"^\s*import\s+([\w.]+)\s+as\s+\w+", re.M),
    re.compile(r"^\s*from\s+([\w.]+)\s+import\s+(\w+)", re.M),
)


def _module_path(names: set[str], module: str) -> str | None:
    base = module.replace(".", "/")
    return next((p for p in (f"{base}.py", f"{base}/__init__.py") if p in names), None)


def _shim_home(z: zipfile.ZipFile, path: str, text: str) -> str:
    """The module a shim at `path` stands for, as a path of the wheel (a package: its folder, "/"-ended)."""
    names = set(z.namelist())
    for pattern in _IMPORTS:
        for found in pattern.finditer(text):
            for module in (".".join(g for g in found.groups() if g), found.group(1)):
                home = _module_path(names, module)
                if home is not None and home != path:
                    return home.removesuffix("__init__.py")
    raise MovedModuleError(
        f"{path} replaces itself in sys.modules, and the module it stands for is not in the wheel: "
        "the extractors cannot read what moved (follow it in vllm_mapping.wheel_file)"
    )


def wheel_file(z: zipfile.ZipFile, path: str, _depth: int = 0) -> str | None:
    """The text of a file of the wheel, a `sys.modules` shim followed to its new home (the file itself,
    or one a shimmed package above it moved); None where the wheel has neither. A shim whose home cannot
    be found raises MovedModuleError: never read as an empty module."""
    if _depth > 4:
        raise MovedModuleError(f"{path}: sys.modules shims lead to more shims")
    names = set(z.namelist())
    if path in names:
        text = z.read(path).decode()
        if not _SHIM.search(text):
            return text
        home = _shim_home(z, path, text)
        if home.endswith("/"):  # a package's __init__.py shimmed to another package
            return wheel_file(z, home + "__init__.py", _depth + 1)
        return wheel_file(z, home, _depth + 1)
    parts = path.split("/")
    for i in range(len(parts) - 1, 0, -1):  # a package above it that moved, its files with it
        init = "/".join(parts[:i]) + "/__init__.py"
        if init in names:
            text = z.read(init).decode()
            if _SHIM.search(text):
                home = _shim_home(z, init, text)
                if not home.endswith("/"):
                    raise MovedModuleError(f"{init} stands for the module {home}, not a package holding {path}")
                return wheel_file(z, home + "/".join(parts[i:]), _depth + 1)
    return None


def sources(version: str) -> dict[str, str] | None:
    """The text of algos.py and base.py of vLLM `version` (None: it has no speculators path)."""
    out = CACHE / "mapping" / version
    names = ("algos.py", "base.py")
    if (out / "NONE").exists():
        return None
    if not all((out / n).exists() for n in names):
        out.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel(version)) as z:
            texts = {n: wheel_file(z, f"{MAPPING}/{n}") for n in names}  # a moved mapping followed
            if any(t is None for t in texts.values()):
                (out / "NONE").write_text("this vLLM has no speculators mapping\n")
                return None
            for n, text in texts.items():
                (out / n).write_text(text)
    return {n: (out / n).read_text() for n in names}


class Mapping:
    """One vLLM version's SUPPORTED_SPECULATORS_TYPES and SpeculatorsConfig classmethods."""

    def __init__(self, version: str):
        self.version = version
        src = sources(version)
        if src is None:
            self.supported: dict = {}
            self.config_class = None
            self.algos = None
            return
        algos = types.ModuleType(f"vllm_{version.replace('.', '_')}_algos")
        exec(compile(src["algos.py"], f"vllm-{version}/{MAPPING}/algos.py", "exec"), algos.__dict__)
        self.supported = dict(algos.SUPPORTED_SPECULATORS_TYPES)
        self.algos = algos  # the module whose table base.py dispatches through (the plugin patches it)

        class PreTrainedConfig:  # stand-in: the mapping logic never calls it
            def __init__(self, **kwargs):
                pass

        stubs = {
            "transformers": types.SimpleNamespace(PreTrainedConfig=PreTrainedConfig, PretrainedConfig=PreTrainedConfig),
            "vllm.transformers_utils.configs.speculators.algos": algos,
            "vllm.transformers_utils.utils": types.SimpleNamespace(without_trust_remote_code=lambda kw: kw),
        }
        saved = {k: sys.modules.get(k) for k in stubs}
        sys.modules.update(stubs)  # type: ignore[arg-type]
        try:
            base = types.ModuleType(f"vllm_{version.replace('.', '_')}_base")
            exec(compile(src["base.py"], f"vllm-{version}/{MAPPING}/base.py", "exec"), base.__dict__)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.config_class = base.SpeculatorsConfig

    def draft_config(self, config: dict) -> dict:
        import copy

        # before extract_transformers_pre_trained_config (0.11-0.19), the one entry point builds the dict
        # the draft's config is constructed from (SpeculatorsConfig.from_pretrained: cls(**vllm_config))
        extract = getattr(self.config_class, "extract_transformers_pre_trained_config", None)
        return (extract or self.config_class.extract_vllm_speculative_config)(copy.deepcopy(config))

    def speculative_config(self, config: dict) -> dict:
        import copy

        return self.config_class.extract_vllm_speculative_config(copy.deepcopy(config))


@lru_cache(maxsize=None)
def mapping(version: str) -> "Mapping":
    """One Mapping per version for the whole test session (each execs two files of a wheel)."""
    return Mapping(version)


AUX_ABOUT = (
    "generated by tests/conformance/test_vllm_conformance.py from the wheel of every known vLLM release and "
    "of every release older than the oldest known one from the first with the speculators format "
    "(vllm_mapping.aux_capture_table; SPECREG_REGENERATE=1 pytest -m conformance -k aux_capture): "
    "architecture -> the runs of releases [first, last or null: through the newest] whose registered class "
    "implements SupportsEagle3; layer_zero: the same for the classes that also capture aux id 0, the state "
    "entering the first layer (the embedding output: vllm_mapping.layer_zero_capture_architectures); do not edit"
)
MODEL_TYPES_ABOUT = (
    "generated by tests/conformance/test_field_coverage.py from each release's vllm/transformers_utils/config.py "
    "_CONFIG_REGISTRY (SPECREG_REGENERATE=1 pytest -m conformance -k union_of_the_wheels); do not edit"
)


def aux_capture_table(releases: list[str]) -> dict:
    """The aux-capture table (aux_capture.json's content but its "_about") over `releases` ("X.Y", each read
    from its wheel, `facts.wheel`): every architecture some release's class captures aux hidden states for,
    with the runs of releases it does, as `specreg.facts.spans` makes them."""
    from specreg import facts

    # a release older than the oldest known one (older_releases.json) is read from its X.Y.0 wheel
    per_release = {r: _capture_tables(facts.wheel(r) if r in facts.known() else f"{r}.0") for r in releases}

    def runs(which: int) -> dict:
        names = sorted(set().union(*(got[which] for got in per_release.values())))
        return {
            a: [list(run) for run in facts.spans(a, {r: a in per_release[r][which] for r in releases})] for a in names
        }

    return {"releases": list(releases), "architectures": runs(0), "layer_zero": runs(1)}


def write_aux_table(path: Path, data: dict) -> None:
    """aux_capture.json, one architecture a line."""
    from specreg import atomic

    def lines(table: dict) -> str:
        return ",\n".join(f"    {json.dumps(a)}: {json.dumps(runs)}" for a, runs in table.items())

    text = (
        f'{{\n  "_about": {json.dumps(AUX_ABOUT)},\n  "architectures": {{\n{lines(data["architectures"])}\n  }},\n'
        f'  "layer_zero": {{\n{lines(data["layer_zero"])}\n  }},\n'
        f'  "releases": {json.dumps(data["releases"])}\n}}\n'
    )
    assert json.loads(text) == {"_about": AUX_ABOUT, **data}
    atomic.write_bytes(path, text.encode())


def write_table(path: Path, about: str, data: dict) -> None:
    """One of the facts home's tables, a list item per line (the regenerate paths' writer)."""
    from specreg import atomic

    atomic.write_bytes(path, (json.dumps({"_about": about, **data}, indent=2, sort_keys=True) + "\n").encode())


MODELS = "vllm/model_executor/models"


def _module_of(path: str) -> str:
    """vllm/model_executor/models/transformers/base.py -> vllm.model_executor.models.transformers.base"""
    parts = path[: -len(".py")].split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _last_name(node) -> str:
    """`nn.Module` -> "Module", `Generic[T]` -> "Generic": the name a base is looked up by."""
    import ast

    return ast.unparse(node).split("[")[0].rsplit(".", 1)[-1]


def aux_capture_architectures(version: str) -> set[str]:
    """Architecture names whose registered vLLM class implements SupportsEagle3 (`_capture_tables`)."""
    return set(_capture_tables(version)[0])


def layer_zero_capture_architectures(version: str) -> set[str]:
    """Of those, the architectures whose class captures aux id 0, the state entering its first layer
    (the embedding output): `_capture_tables`."""
    return set(_capture_tables(version)[1])


_SUMMARIES: dict[tuple[str, str], dict] = {}


def _file_summary(module: str, init: bool, text: str) -> dict:
    """What `_capture_tables` needs of one source file, by its text (files the releases share are read
    once): its classes with their bases, its imports, what each class's code builds, and which classes'
    `forward` captures aux id 0 (`_captures_entry`)."""
    import ast
    import hashlib

    key = (module, hashlib.sha1(text.encode()).hexdigest())
    if key in _SUMMARIES:
        return _SUMMARIES[key]
    tree = ast.parse(text)
    package = module if init else module.rsplit(".", 1)[0]
    own: dict[str, list[list[str]]] = {}
    names_in: dict[str, list[str]] = {}
    builds: dict[str, list[list[str]]] = {}
    entry: list[str] = []
    setters: list[str] = []  # classes defining set_aux_hidden_state_layers (before SupportsEagle3: 0.10)
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            own.setdefault(node.name, []).append([_last_name(b) for b in node.bases])
            if any(isinstance(f, ast.FunctionDef) and f.name == "set_aux_hidden_state_layers" for f in node.body):
                setters.append(node.name)
            items = builds.setdefault(node.name, [])
            for item in node.body:  # `model_cls = DeepseekV2Model`
                if isinstance(item, ast.Assign) and isinstance(item.value, ast.Name) and item.value.id[:1].isupper():
                    items.append(["name", item.value.id])
            for call in (c for c in ast.walk(node) if isinstance(c, ast.Call)):
                if isinstance(call.func, ast.Name) and call.func.id[:1].isupper():
                    items.append(["name", call.func.id])
                for kw in call.keywords:
                    if kw.arg == "architectures" and isinstance(kw.value, (ast.List, ast.Tuple)):
                        items += [["arch", e.value] for e in kw.value.elts if isinstance(e, ast.Constant)]
            if any(
                isinstance(fn, ast.FunctionDef) and fn.name == "forward" and _captures_entry(fn) for fn in node.body
            ):
                entry.append(node.name)
        elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = node.value
            bound = [value] if isinstance(value, (ast.Name, ast.Attribute)) else []
            if isinstance(value, ast.Call):
                bound = [a for a in value.args if isinstance(a, (ast.Name, ast.Attribute))]
            if bound:
                own.setdefault(node.targets[0].id, []).append([_last_name(b) for b in bound])
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                names_in[alias.asname or alias.name] = [base, alias.name]
    _SUMMARIES[key] = {"classes": own, "imported": names_in, "builds": builds, "entry": entry, "setters": setters}
    return _SUMMARIES[key]


def _captures_entry(fn) -> bool:
    """Whether a `forward` records the aux state entering the first layer (`_capture_tables`)."""
    import ast

    def layer_index(node: ast.AST) -> ast.AST | None:
        if isinstance(node, ast.Call) and _last_name(node.func) == "_maybe_add_hidden_state":
            return node.args[1] if len(node.args) > 1 else None
        if isinstance(node, ast.Compare) and len(node.ops) == 1 and isinstance(node.ops[0], ast.In):
            if ast.unparse(node.comparators[0]).endswith("aux_hidden_state_layers"):
                return node.left
        return None

    def visit(node: ast.AST, counters: tuple[str, ...]) -> bool:
        index = layer_index(node)
        if index is not None:
            text = ast.unparse(index)
            if text in ("0", "self.start_layer") and not counters or text in counters:
                return True
        if isinstance(node, ast.For):
            target = node.target
            names = [target] if isinstance(target, ast.Name) else []
            if isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
                names = [target.elts[0]]  # enumerate's counter
            counters = counters + tuple(n.id for n in names)
        return any(visit(child, counters) for child in ast.iter_child_nodes(node))

    return visit(fn, ())


@lru_cache(maxsize=None)
def _capture_tables(version: str) -> tuple[frozenset[str], frozenset[str]]:
    """Architecture names whose registered vLLM class implements SupportsEagle3, directly or through
    its bases, read from the wheel's source with `ast` (nothing of it is imported).

    Every file under vllm/model_executor/models/ is read, subpackages too: from 0.32 the Transformers
    backend serves many verifiers (GlmForCausalLM, SmolLM3ForCausalLM, ...) through
    `transformers/__init__.py`'s classes, whose `Base` (transformers/base.py) implements SupportsEagle3;
    from 0.34 the registry may name a module by its full path (Qwen3.5: "vllm.models.qwen3_5"). A base is
    looked up where the class's own module finds it: defined there, imported there by name (absolute or
    relative import), else the one class of that name in the package (all of them when several).

    The second set, the architectures that capture aux id 0 (the state entering the first layer: the
    embedding output, DFlash's target id -1), reads the code that collects the aux states: a `forward`
    of the registered class, of its bases, or of a class its code builds (`self.model =
    Qwen2Model(...)`, a class attribute `model_cls = DeepseekV2Model`, `architectures=["Qwen3ForCausalLM"]`
    handed to the language model's builder), and of theirs. A capture site is a `_maybe_add_hidden_state(states, i, ...)` call or an `if i in
    self.aux_hidden_state_layers:` test; it captures id 0 where `i` is the constant 0 or
    `self.start_layer` outside the layer loop (qwen2.py, llama.py: before the loop), or the loop's own
    counter, unshifted, inside it (deepseek_v2.py: `if idx in ...` before the layer runs). A site at `i + 1`
    (after the layer) captures 1..L only; a class that collects aux states another way (the Transformers
    backend's output recorders on layer `i - 1`, which wrap id 0 round to the last layer) is not one."""
    import re

    with zipfile.ZipFile(wheel(version)) as z:
        names = z.namelist()
        registry = z.read(f"{MODELS}/registry.py").decode()
        packages = tuple(m.replace(".", "/") + "/" for m in re.findall(r'"(vllm\.[\w.]+)"', registry))
        files = [n for n in names if n.endswith(".py") and (n.startswith(f"{MODELS}/") or n.startswith(packages))]
        texts = {_module_of(n): (n.endswith("/__init__.py"), z.read(n).decode()) for n in files}
    # module -> class -> its definitions, each the names of its bases: a class may be defined more than
    # once (a stub under `if TYPE_CHECKING:`, the real one in `else:`), and a name may be bound to a class
    # (`_Base = LlamaForCausalLM`, `_Base = as_seq_cls_model(Qwen3_5ForConditionalGeneration)`: vLLM's
    # wrappers return a subclass of the class they are given), which counts as a definition with that base
    classes: dict[str, dict[str, list[list[str]]]] = {}
    imported: dict[str, dict[str, tuple[str, str]]] = {}  # module -> local name -> (module, name)
    built: dict[tuple[str, str], list[list[str]]] = {}  # (module, class) -> [kind, name] it builds
    entries_at: set[tuple[str, str]] = set()  # (module, class) whose forward captures aux id 0
    # before the SupportsEagle3 interface (0.10), the runner calls set_aux_hidden_state_layers on whatever
    # model it has: a class captures aux hidden states when it (or a base) defines that method
    interfaces = texts.get("vllm.model_executor.models.interfaces", (False, ""))[1]
    duck = not re.search(r"^class SupportsEagle3\b", interfaces, re.M)
    setters: set[tuple[str, str]] = set()
    for module, (init, text) in texts.items():
        got = _file_summary(module, init, text)
        classes[module] = got["classes"]
        imported[module] = {k: tuple(v) for k, v in got["imported"].items()}
        for name, items in got["builds"].items():
            built[(module, name)] = items
        entries_at |= {(module, name) for name in got["entry"]}
        setters |= {(module, name) for name in got["setters"]}
    by_name: dict[str, list[tuple[str, str]]] = {}
    for module, own in classes.items():
        for name in own:
            by_name.setdefault(name, []).append((module, name))

    def where(module: str, name: str, depth: int = 0) -> list[tuple[str, str]]:
        if name in classes.get(module, {}):
            return [(module, name)]
        if name in imported.get(module, {}) and depth < 20:
            source, original = imported[module][name]
            if source in classes:
                return where(source, original, depth + 1)
        return by_name.get(name, [])

    memo: dict[tuple[str, str], bool] = {}

    def supports(module: str, name: str, depth: int = 0) -> bool:
        if name == "SupportsEagle3":
            return True
        key = (module, name)
        if duck and key in setters:
            return True
        if key in memo or depth > 40:
            return memo.get(key, False)
        memo[key] = False
        memo[key] = any(
            supports(m, found, depth + 1)
            for bases in classes[module][name]
            for base in bases
            for m, found in where(module, base)
        )
        return memo[key]

    entries = re.findall(r'"(\w+)":\s*\(\s*"([\w.]+)",\s*"(\w+)",?\s*\)', registry)
    registered = {
        arch: where(module if module.startswith("vllm.") else f"vllm.model_executor.models.{module}", cls)
        for arch, module, cls in entries
    }

    @lru_cache(maxsize=None)
    def builds(key: tuple[str, str]) -> tuple[tuple[str, str], ...]:
        """The classes `key`'s own code names as a base, builds, or hands to the builder by architecture."""
        module, name = key
        out = [found for bases in classes[module][name] for base in bases for found in where(module, base)]
        for kind, value in built.get(key, []):
            out += where(module, value) if kind == "name" else registered.get(value, [])
        return tuple(out)

    def reach(start: list[tuple[str, str]]) -> set[tuple[str, str]]:
        """The classes whose code runs for `start`: their bases and what their code builds."""
        seen: set[tuple[str, str]] = set()
        todo = list(start)
        while todo and len(seen) < 400:
            key = todo.pop()
            if key in seen or key[0] not in classes or key[1] not in classes[key[0]]:
                continue
            seen.add(key)
            todo += builds(key)
        return seen

    def entry(key: tuple[str, str]) -> bool:
        return key in entries_at

    found, zero = set(), set()
    for arch, classes_of in registered.items():
        if any(supports(m, c) for m, c in classes_of):  # noqa: SIM102 - the second set is a subset
            found.add(arch)
            if any(entry(key) for key in reach(classes_of)):
                zero.add(arch)
    return frozenset(found), frozenset(zero)
