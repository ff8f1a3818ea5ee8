"""The facts computed from each vLLM wheel, one folder per release: `facts/<X.Y>/<kind>.json`
(`attention_backends`, `kv_cache`, `quantization_methods`; a release has the kinds computed for it).

Each file carries its own `_about` (which harness computed it and the command that regenerates it),
so a file read alone, in a diff or a pull request, says it is generated and how. The text is sorted
JSON with every object opened one key per line and every list on one line: a changed fact (a
backend's head sizes, a method's minimum capability) is one changed line in `git diff`.
`write_facts` is the only writer; a test holds every committed file to it byte for byte.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from packaging.version import Version

from specreg import atomic, facts

ABOUT = "_about"


def releases(kind: str) -> list[str]:
    """The releases whose folder holds `kind`'s facts, oldest first."""
    found = [d.name for d in facts.FOLDER.iterdir() if d.is_dir() and (d / f"{kind}.json").is_file()]
    return sorted(found, key=Version)


def read_facts(version: str, kind: str) -> dict[str, Any]:
    """One release's facts of one kind, without `_about`."""
    data = json.loads((facts.folder(version) / f"{kind}.json").read_text(encoding="utf-8"))
    data.pop(ABOUT, None)
    return data


def read_all(kind: str) -> dict[str, dict[str, Any]]:
    """release -> its facts of `kind`, for every release that has them, oldest first."""
    return {v: read_facts(v, kind) for v in releases(kind)}


def facts_text(data: Any) -> str:
    """`data` as a facts file holds it (see the module's docstring)."""
    return _dump(data, 0) + "\n"


def _dump(value: Any, depth: int) -> str:
    if isinstance(value, dict) and value:
        pad = " " * (depth + 1)
        items = [f"{pad}{json.dumps(k)}: {_dump(value[k], depth + 1)}" for k in sorted(value)]
        return "{\n" + ",\n".join(items) + "\n" + " " * depth + "}"
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def write_facts(path: Path, data: dict[str, Any]) -> None:
    """Write one facts file whole (its folder is made if missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(path, facts_text(data).encode("utf-8"))


def write_releases(root: Path, kind: str, about: str, versions: dict[str, dict[str, Any]]) -> None:
    """The regenerate paths' writer: each release's facts of `kind` into `root/<release>/<kind>.json`."""
    for version, data in versions.items():
        write_facts(root / version / f"{kind}.json", {ABOUT: about, **data})
