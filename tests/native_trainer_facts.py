"""Read the fields each native trainer's config writer writes, from its code at a cited commit, into
specreg/sources/native/facts/<trainer>.json (the data the field ledger of native configs rests on).

    python tests/native_trainer_facts.py            # rewrite every trainer's facts from the git mirrors
    python tests/native_trainer_facts.py --check    # exit 1 when a committed file differs from its code

Each trainer is a repository at one commit and the files of it that write (or, for z-lab's
inference-only release, read) a draft's config.json. Nothing is typed by hand: a Python file is read
with ``ast`` (`python_fields`), a JSON config the trainer ships is read as JSON (`json_fields`). The
repositories are read from git directories (`--mirror DIR` holds ``owner+name/repo``, as the search
tool's ``fetch`` leaves them); the files are read with ``git show COMMIT:PATH``.

What counts as a written field, per Python file:
- a dict literal assigned to one of the trainer's config names (``config = {...}``,
  ``llama_eagle_template_config = {...}``): its keys, the literal under ``dflash_config`` /
  ``eagle_config`` being that object's;
- ``NAME["key"] = value`` and ``NAME.key = value`` for a config name, and ``X["dflash_config"].update({...})``,
  ``X.dflash_config = {...}``, ``dflash_config["key"] = value``: that object's keys;
- read sites of the draft's config object (``config.key``, ``getattr(config, "key", default)``,
  ``dflash_config.get("key", default)``): keys of the format that the trainer's model class takes.
A value that is a literal (or ``getattr(x, "key", LITERAL)``, ``d.get("key", LITERAL)``) is the
field's default; the type is that default's JSON type, else "any". A None in a dict literal is a slot the
writer fills in (ModelOpt's templates: ``export_spec_ckpt_config`` replaces each None), not a default.
"""

from __future__ import annotations

import argparse
import ast
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
FACTS = ROOT / "specreg" / "sources" / "native" / "facts"
MIRROR = Path("/work/.mirror")
#: casts a writer wraps a default in
CASTS = {"bool": bool, "int": int, "float": float, "str": str}
#: the nested objects of a native config whose keys are recorded as their own
OBJECTS = ("dflash_config", "eagle_config")
#: names of the draft's config object at read sites
CONFIG_NAMES = frozenset({"config", "draft_config"})

#: trainer -> what is read: repository, commit, the native formats it writes, its files
TRAINERS: dict[str, dict[str, Any]] = {
    "specforge": {
        "label": "SpecForge",
        "repo": "sgl-project/SpecForge",
        "commit": "a6b6b0230009d15ec2a97a57384e6f53f0f96946",
        "formats": ["zlab", "deepspec", "eagle3-native"],
        "python": {
            "specforge/algorithms/model_providers.py": {"writes": ["payload"]},
            "specforge/modeling/draft/dflash.py": {"reads": True},
            "specforge/modeling/draft/dspark.py": {"reads": True},
            "specforge/modeling/draft/llama3_eagle.py": {"reads": True},
        },
        "json": "configs/",
    },
    "angelslim": {
        "label": "AngelSlim",
        "repo": "Tencent/AngelSlim",
        "commit": "67394ce55f6b6cfae702575fbc3c7a05c13fdd74",
        "formats": ["zlab"],
        # the DFlash draft config it ships (z-lab's layout under its own class name); its DFlare one is refused
        "json": ["configs/qwen3_dflash.json"],
    },
    "nemo-automodel": {
        "label": "NeMo Automodel",
        "repo": "NVIDIA-NeMo/Automodel",
        "commit": "36044ad3d139363fb6c73c24af2e7c6b65ec52f6",
        "formats": ["zlab", "zlab-dflash2", "deepspec", "eagle3-native"],
        "python": {
            f"nemo_automodel/recipes/llm/{name}.py": {
                "writes": ["draft_config"],
                "objects": {"cfg": "dflash_config"},
                "returns": {"_build_dflash_config": "dflash_config"},
            }
            for name in ("train_dflash", "train_jetspec", "train_dflash2", "train_dspark", "train_eagle3")
        },
    },
    "zlab": {
        "label": "z-lab DFlash",
        "repo": "z-lab/dflash",
        "commit": "44947fbf71114e241c96de194f4b382b5dd330d0",
        "formats": ["zlab"],
        "python": {"dflash/model.py": {"reads": True}},
    },
    "deepspec": {
        "label": "DeepSpec",
        "repo": "deepseek-ai/DeepSpec",
        "commit": "afdfa7c9382a3341a3e6f17756dd816da79f132c",
        "formats": ["deepspec"],
        # build_draft_config: the DSpark draft config its trainer saves (save_pretrained, ckpt_manager.py)
        "python": {
            f"deepspec/modeling/dspark/{family}/config.py": {"writes": ["draft_config"]}
            for family in ("qwen3", "gemma4")
        },
    },
    "modelopt": {
        "label": "ModelOpt export",
        "repo": "NVIDIA/Model-Optimizer",
        "commit": "a2fbac7bad8ab446d3f8783dadb0c3366eb0ad73",
        "formats": ["zlab", "deepspec", "eagle3-native"],
        "python": {
            "modelopt/torch/export/plugins/hf_spec_export.py": {"writes": ["config", "template_config"]},
            "modelopt/torch/export/plugins/hf_spec_configs.py": {
                "writes": ["llama_eagle_template_config", "kimik2_eagle_template_config"]
            },
        },
    },
}

#: trainers named by issue 56 whose writers are not read yet
NOT_READ = {
    "torchspec": "lightseekorg/TorchSpec (the mirror at hand stops at 6f21829, before its configs/ci drafts)",
}


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "list"), (dict, "dict")):
        if isinstance(value, kind):
            return name
    return "any"


def _literal(node: ast.AST) -> tuple[bool, Any]:
    """(True, value) for a literal, or for getattr(x, "k", LITERAL) / x.get("k", LITERAL)."""
    try:
        return True, ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, RecursionError):
        pass
    if isinstance(node, ast.Call) and len(node.args) == 3 and isinstance(node.func, ast.Name):
        if node.func.id == "getattr":
            return _literal(node.args[2])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get":
        if len(node.args) == 2:
            return _literal(node.args[1])
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CASTS and len(node.args) == 1:
        ok, value = _literal(node.args[0])  # bool(cfg.get("fc_norm", False)): the default, cast
        if ok:
            try:
                return True, CASTS[node.func.id](value)
            except (TypeError, ValueError):
                pass
    return False, None


def _object_of(node: ast.AST, roots: frozenset[str], objects: dict[str, str] | None = None) -> str | None:
    """ "$" for a config root name, "$.dflash_config" for X["dflash_config"], X.dflash_config, the name
    dflash_config or a name `objects` maps to it; None for anything else."""
    if isinstance(node, ast.Name):
        if node.id in roots:
            return "$"
        if objects and node.id in objects:
            return f"$.{objects[node.id]}"
        return f"$.{node.id}" if node.id in OBJECTS else None
    if isinstance(node, ast.Attribute) and node.attr in OBJECTS:
        return f"$.{node.attr}"
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value in OBJECTS:
        return f"$.{node.slice.value}"
    return None


def _is_config(node: ast.AST) -> bool:
    """config, draft_config, self.config, model.config: the draft's config object at a read site."""
    if isinstance(node, ast.Name):
        return node.id in CONFIG_NAMES
    return isinstance(node, ast.Attribute) and node.attr == "config"


def python_fields(
    text: str,
    path: str,
    writes: tuple[str, ...] | list[str] = (),
    reads: bool = False,
    objects: dict[str, str] | None = None,
    returns: dict[str, str] | None = None,
) -> dict[str, dict[str, dict[str, Any]]]:
    """object path -> key -> {type, default?, from}: the fields one Python file writes (through the
    config names `writes`; `objects`: local name -> the nested object it holds, as NeMo's ``cfg`` holds
    dflash_config; `returns`: function -> the object the dict literal it returns is) or, with `reads`,
    takes from the draft's config object."""
    tree = ast.parse(text)
    names = frozenset(writes)
    out: dict[str, dict[str, dict[str, Any]]] = {}

    def add(obj: str, key: Any, value: ast.AST | None, line: int, placeholder: bool = False) -> None:
        if not isinstance(key, str) or key.startswith("_"):
            return
        entry: dict[str, Any] = {"type": "any"}
        if value is not None:
            ok, default = _literal(value)
            if ok and not (placeholder and default is None):
                entry = {"type": _json_type(default), "default": default}
        entry["from"] = f"{path}:{line}"
        have = out.setdefault(obj, {}).get(key)
        if have is None or ("default" not in have and "default" in entry):
            out[obj][key] = entry

    def add_dict(obj: str, node: ast.Dict) -> None:
        for k, v in zip(node.keys, node.values):
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                if k.value in OBJECTS and isinstance(v, ast.Dict) and obj == "$":
                    add(obj, k.value, None, k.lineno)
                    out[obj][k.value]["type"] = "dict"
                    add_dict(f"$.{k.value}", v)
                else:  # None in a writer's dict literal is a slot the writer fills (ModelOpt's templates)
                    add(obj, k.value, v, k.lineno, placeholder=True)

    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and returns and node.name in returns:
            for inner in ast.walk(node):
                if isinstance(inner, ast.Return) and isinstance(inner.value, ast.Dict):
                    add_dict(f"$.{returns[node.name]}", inner.value)
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                obj = _object_of(target, names, objects)
                if obj is not None and isinstance(node.value, ast.Dict):
                    add_dict(obj, node.value)
                    if obj != "$":
                        add("$", obj[2:], None, node.lineno)
                        out["$"][obj[2:]]["type"] = "dict"
                elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
                    obj = _object_of(target.value, names, objects)
                    if obj is not None:
                        add(obj, target.slice.value, node.value, node.lineno)
                elif isinstance(target, ast.Attribute) and _object_of(target.value, names, objects) == "$":
                    add("$", target.attr, node.value, node.lineno)  # draft_config.block_size = ... (DeepSpec)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            obj = _object_of(node.func.value, names, objects)
            if node.func.attr == "update" and obj is not None and node.args and isinstance(node.args[0], ast.Dict):
                add_dict(obj, node.args[0])
            elif reads and node.func.attr == "get" and obj not in (None, "$") and node.args:
                key = node.args[0]
                if isinstance(key, ast.Constant):
                    add(obj, key.value, node.args[1] if len(node.args) > 1 else None, node.lineno)
        elif not reads:
            continue
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "getattr":
            if len(node.args) >= 2 and _is_config(node.args[0]) and isinstance(node.args[1], ast.Constant):
                add("$", node.args[1].value, node if len(node.args) == 3 else None, node.lineno)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and _is_config(node.value):
            add("$", node.attr, None, node.lineno)
    # a method of the config object (config.to_dict(), config.get(...)) is no field
    for attr in ("get", "to_dict", "update", "to_json_string", "save_pretrained", "keys", "items"):
        out.get("$", {}).pop(attr, None)
    return out


def json_fields(text: str, path: str) -> dict[str, dict[str, dict[str, Any]]]:
    """object path -> key -> {type, from}: the keys of one JSON config the trainer ships."""
    config = json.loads(text)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for obj, fields in [("$", config)] + [(f"$.{o}", config.get(o)) for o in OBJECTS]:
        if isinstance(fields, dict):
            for key, value in fields.items():
                out.setdefault(obj, {})[key] = {"type": _json_type(value), "from": path}
    return out


def _merge(into: dict[str, dict[str, dict[str, Any]]], found: dict[str, dict[str, dict[str, Any]]]) -> None:
    for obj, fields in found.items():
        have = into.setdefault(obj, {})
        for key, entry in fields.items():
            old = have.get(key)
            if old is None:
                have[key] = entry
                continue
            if "default" not in old and "default" in entry:
                have[key] = {**entry, "type": entry["type"]}
            elif entry["type"] not in old["type"].split("|") and old["type"] != "any" and entry["type"] != "any":
                old["type"] = "|".join(sorted({*old["type"].split("|"), entry["type"]}))


def _git(git_dir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(git_dir), *args], check=True, capture_output=True, text=True).stdout


def read_trainer(name: str, git_dir: Path) -> dict[str, Any]:
    spec = TRAINERS[name]
    commit = spec["commit"]
    fields: dict[str, dict[str, dict[str, Any]]] = {}
    files = []
    for path, how in spec.get("python", {}).items():
        _merge(fields, python_fields(_git(git_dir, "show", f"{commit}:{path}"), path, **how))
        files.append(path)
    if "json" in spec:
        where = spec["json"]
        listed = _git(git_dir, "ls-tree", "--name-only", commit, where).split() if isinstance(where, str) else where
        for path in sorted(p for p in listed if p.endswith(".json")):
            _merge(fields, json_fields(_git(git_dir, "show", f"{commit}:{path}"), path))
            files.append(path)
    date = _git(git_dir, "show", "-s", "--format=%cs", commit).strip()
    return {
        "_about": {
            "trainer": spec["label"],
            "repo": spec["repo"],
            "commit": commit,
            "date": date,
            "formats": spec["formats"],
            "files": files,
            "how": "written by tests/native_trainer_facts.py from the files above at the commit (ast over the "
            "Python, the JSON configs as JSON); do not edit by hand",
        },
        "fields": {obj: dict(sorted(keys.items())) for obj, keys in sorted(fields.items())},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mirror", type=Path, default=MIRROR, help="folder of owner+name/repo git directories")
    parser.add_argument("--check", action="store_true", help="compare with the committed files, write nothing")
    args = parser.parse_args(argv)
    differ = 0
    for name, spec in TRAINERS.items():
        git_dir = args.mirror / spec["repo"].replace("/", "+") / "repo"
        text = json.dumps(read_trainer(name, git_dir), indent=1, sort_keys=False) + "\n"
        target = FACTS / f"{name}.json"
        if args.check:
            if not target.exists() or target.read_text() != text:
                print(f"{target}: differs from {spec['repo']} at {spec['commit'][:9]}")
                differ = 1
        else:
            FACTS.mkdir(parents=True, exist_ok=True)
            target.write_text(text)
            print(f"{target.relative_to(ROOT)}: {sum(len(v) for v in json.loads(text)['fields'].values())} fields")
    return differ


if __name__ == "__main__":
    sys.exit(main())
