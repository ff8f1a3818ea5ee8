"""`python -m specreg.speculators list | refresh | diff`: one speculators release's facts, computed by
running that release's own config classes, written to specreg/speculators/facts/<version>.json (see the
package docstring).

    python -m specreg.speculators refresh 0.9.0 --python ENV/bin/python   # downloads the wheel (pip)
    python -m specreg.speculators refresh --wheel speculators-0.9.0-py3-none-any.whl --python ...
    python -m specreg.speculators list
    python -m specreg.speculators diff 0.8.1 0.9.0

speculators is imported only in a child interpreter (`--python`, default this one), which must have the
release's own dependencies (torch, a transformers it accepts, pydantic); the wheel is unpacked and put
first on its path, so it wins over an installed speculators."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from specreg.errors import printable
from specreg.facts import upstream
from specreg.facts.upstream import RefreshError, text  # noqa: F401 (the command's own names)

#: run in the child interpreter: argv = [out file]. Every module under speculators.models and
#: speculators.proposals is imported, so that each config class registers itself (the releases'
#: registries discover them the same way); then each registered class's pydantic fields are read,
#: those declared by speculators' own classes (not transformers' PretrainedConfig's), and the keys a
#: default instance's to_dict() writes (a release's to_dict may let transformers' class attributes
#: through: 0.4.0 under transformers 4.57 writes base_model_ep_plan).
EXTRACT = """
import importlib, importlib.metadata, json, pkgutil, sys, types, typing
import speculators

def render(t):
    origin, args = typing.get_origin(t), typing.get_args(t)
    if t is type(None):
        return "None"
    if origin is typing.Union or origin is getattr(types, "UnionType", None):
        return " | ".join(render(a) for a in args)
    if origin is typing.Literal:
        return "Literal[" + ", ".join(repr(a) for a in args) + "]"
    if origin is typing.Annotated:
        return render(args[0])
    if origin is not None:
        name = getattr(origin, "__name__", str(origin).replace("typing.", ""))
        return name + ("[" + ", ".join(render(a) for a in args) + "]" if args else "")
    if isinstance(t, type):
        return t.__name__
    return str(t).replace("typing.", "")

def declared(cls):
    # the fields speculators' own classes declare: under transformers 5, PretrainedConfig's own
    # attributes (dtype, id2label, ...) are pydantic fields of the subclass too; they are transformers'
    names = set()
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] == "speculators":
            names |= set(klass.__dict__.get("__annotations__", {}))
    return names

def is_config_object(value):
    return any(k.__name__ in ("PretrainedConfig", "PreTrainedConfig") for k in type(value).__mro__)

def fields_of(cls):
    from pydantic_core import PydanticUndefined, to_jsonable_python
    out = {}
    own = declared(cls)
    for name, info in cls.model_fields.items():
        if name not in own:
            continue
        entry = {"type": render(info.annotation)}
        if info.is_required():
            entry["required"] = True
        else:
            try:
                value = info.get_default(call_default_factory=True)
            except TypeError:
                value = info.get_default()
            if value is PydanticUndefined:
                entry["required"] = True
            elif is_config_object(value):  # a transformers config: its class names it
                entry["default_object"] = type(value).__name__
            else:
                try:
                    entry["default"] = json.loads(json.dumps(to_jsonable_python(value)))
                except Exception:
                    entry["default_object"] = type(value).__name__
        if name == "speculators_version":
            entry.pop("default", None)  # the release's own version, read from its metadata
        out[name] = entry
    return out

def version_of(dist):
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None

unreadable = {}
for package in ("speculators.models", "speculators.proposals"):
    try:
        pkg = importlib.import_module(package)
    except Exception as exc:
        unreadable[package] = f"{type(exc).__name__}: {exc}"
        continue
    for mod in pkgutil.walk_packages(pkg.__path__, package + "."):
        try:
            importlib.import_module(mod.name)
        except Exception as exc:
            unreadable[mod.name] = f"{type(exc).__name__}: {exc}".splitlines()[0]

config = importlib.import_module("speculators.config")
base = config.SpeculatorModelConfig
algorithms = {}
for name, cls in sorted((base.registry or {}).items()):
    algorithms[name] = {"class": cls.__name__, "module": cls.__module__, "fields": fields_of(cls)}
    try:  # what save_pretrained writes for a default instance: the fields, and what to_dict adds
        written = sorted(cls().to_dict())
    except Exception as exc:
        written = None
        unreadable[f"{cls.__name__}().to_dict()"] = f"{type(exc).__name__}: {exc}".splitlines()[0]
    algorithms[name]["to_dict_keys"] = written
proposals = {}
token = getattr(config, "TokenProposalConfig", None)
for name, cls in sorted(((token.registry if token is not None else None) or {}).items()):
    proposals[name] = {"class": cls.__name__, "fields": fields_of(cls)}
found = {
    "speculators": importlib.metadata.version("speculators"),
    "run_with": {d: version_of(d) for d in ("transformers", "pydantic", "torch")},
    "algorithms": algorithms,
    "speculators_config": fields_of(config.SpeculatorsConfig),
    "verifier": fields_of(config.VerifierConfig),
    "proposal_methods": proposals,
    "unreadable_modules": unreadable,
}
with open(sys.argv[1], "w", encoding="utf-8") as fh:
    json.dump(found, fh)
"""


def extract(python: str, wheel: Path | None = None) -> dict:
    """The facts of the speculators in `wheel` (else the one `python` has installed), as computed by its
    own config classes in a child `python`."""
    found = upstream.run_child("speculators", EXTRACT, python, wheel)
    algorithms = found.get("algorithms")
    if not isinstance(algorithms, dict) or not all(
        isinstance(a, str) and isinstance(v, dict) and isinstance(v.get("fields"), dict) for a, v in algorithms.items()
    ):
        raise RefreshError(
            f"reported $.algorithms = {printable(repr(algorithms))[:80]}: not an object of algorithms", source=python
        )
    if not algorithms:
        unreadable = found.get("unreadable_modules") or {}
        raise RefreshError(
            "registers no speculator config class that could be imported"
            + (f" ({'; '.join(f'{m}: {e}' for m, e in sorted(unreadable.items()))})" if unreadable else ""),
            source=str(wheel or python),
        )
    return found


def refresh(version: str | None, wheel: Path | None, python: str, out: Path) -> Path:
    """Compute and write one release's facts; returns the file written."""
    found = upstream.acquire("speculators", version, wheel, out, lambda w: extract(python, w))
    return upstream.write(out, found["speculators"], found)


def diff(old: dict, new: dict) -> list[str]:
    """What changed from one release's facts to another's, one line each: algorithms, and per algorithm
    (and per shared object) the fields added, removed, or whose type or default changed."""
    lines: list[str] = []

    def fields(where: str, a: dict, b: dict) -> None:
        for name in sorted(set(a) | set(b)):
            if name not in a:
                lines.append(f"+ {where}.{name}: {_describe(b[name])}")
            elif name not in b:
                lines.append(f"- {where}.{name}: {_describe(a[name])}")
            elif a[name] != b[name]:
                lines.append(f"~ {where}.{name}: {_describe(a[name])} -> {_describe(b[name])}")

    for algo in sorted(set(old["algorithms"]) | set(new["algorithms"])):
        if algo not in old["algorithms"]:
            lines.append(f"+ algorithm {algo} ({new['algorithms'][algo]['class']})")
        elif algo not in new["algorithms"]:
            lines.append(f"- algorithm {algo} ({old['algorithms'][algo]['class']})")
        else:
            fields(algo, old["algorithms"][algo]["fields"], new["algorithms"][algo]["fields"])
    for part in ("speculators_config", "verifier"):
        fields(part, old[part], new[part])
    for method in sorted(set(old["proposal_methods"]) | set(new["proposal_methods"])):
        a = old["proposal_methods"].get(method, {}).get("fields", {})
        b = new["proposal_methods"].get(method, {}).get("fields", {})
        fields(f"proposal_methods[{method}]", a, b)
    return lines


def _describe(entry: dict) -> str:
    if entry.get("required"):
        return f"{entry['type']}, required"
    if "default" in entry:
        return f"{entry['type']} = {json.dumps(entry['default'])}"
    if "default_object" in entry:
        return f"{entry['type']} = a {entry['default_object']}"
    return entry["type"]


def main(argv: list[str] | None = None) -> int:
    from specreg import speculators

    p = argparse.ArgumentParser(prog="python -m specreg.speculators", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the speculators releases with committed facts, oldest first")
    d = commands.add_parser("diff", help="what changed between two known releases' committed facts")
    d.add_argument("old")
    d.add_argument("new")
    upstream.add_refresh_parser(commands, "speculators", speculators.FOLDER, "0.9.0", "the release's dependencies")
    args = p.parse_args(argv)
    if args.command == "list":
        for release in speculators.known():
            found = speculators.facts(release)
            print(f"{release}  {', '.join(sorted(found['algorithms']))}")
        return 0
    if args.command == "diff":
        for release in (args.old, args.new):
            if release not in speculators.known():
                known = ", ".join(speculators.known())
                print(f"error: {release}: no committed speculators facts (known: {known})", file=sys.stderr)
                return 2
        for line in diff(speculators.facts(args.old), speculators.facts(args.new)):
            print(line)
        return 0
    return upstream.run_refresh(refresh, args)
