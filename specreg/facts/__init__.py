"""The vLLM releases specreg models and the version each dated rule starts at, read from the
committed facts (`specreg/vllm/facts/releases.json`, `rules.json`): the one place a vLLM version
is written. Reading them imports nothing heavy."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from packaging.version import Version

#: the committed facts: the two lists here, one folder per release beside them
FOLDER = Path(__file__).resolve().parent.parent / "vllm" / "facts"


@cache
def _read(name: str) -> Any:
    return json.loads((FOLDER / name).read_text(encoding="utf-8"))


@lru_cache(maxsize=1)
def _releases() -> dict[str, dict[str, Any]]:
    records = _read("releases.json")["releases"]
    return {r["release"]: r for r in sorted(records, key=lambda r: Version(r["release"]))}


def known() -> tuple[str, ...]:
    """The releases specreg models ("0.20", ...), oldest first."""
    return tuple(_releases())


def wheel(release: str) -> str:
    """The wheel version the facts of `release` were read from ("X.Y" -> "X.Y.0")."""
    return _releases()[release]["wheel"]


def newest() -> Version:
    """The newest known release, as its wheel's version."""
    return Version(wheel(known()[-1]))


def before(release: str) -> str:
    """The known release just before `release`."""
    index = known().index(release)
    if index == 0:
        raise KeyError(f"no known vLLM release before {release}")
    return known()[index - 1]


def plugin_tested() -> tuple[str, ...]:
    """The releases the vLLM plugin is tested on, oldest first."""
    return tuple(r for r, rec in _releases().items() if rec["plugin_tested"])


def tested_by(group: str) -> tuple[str, ...]:
    """The releases a conformance test group runs on, oldest first."""
    found = tuple(r for r, rec in _releases().items() if group in rec["tested_by"])
    if not found:
        raise KeyError(f"no known vLLM release is tested by {group!r}")
    return found


def since(rule: str) -> Version:
    """The first vLLM version that has the dated rule `rule` (rules.json)."""
    return Version(_read("rules.json")["rules"][rule]["since"])


def rules(read_by: str) -> dict[str, Version]:
    """The dated rules one file reads (its path, e.g. "specreg/vllm/kv_cache.py"), by name."""
    return {name: Version(r["since"]) for name, r in _read("rules.json")["rules"].items() if r["read_by"] == read_by}


def release_of(text: str) -> str | None:
    """The known release that `text` names ("X.Y" or its wheel "X.Y.0"), else None."""
    for release, record in _releases().items():
        if text in (release, record["wheel"]):
            return release
    return None


def folder(release: str) -> Path:
    """The folder of a known release's committed facts."""
    return FOLDER / release


def mtp_rewrites() -> dict[str, tuple[str, str | None, str]]:
    """model_type -> (first release, first release without it or None, what the draft becomes): what
    vLLM's `SpeculativeConfig.hf_config_override` does to an MTP draft (mtp_rewrites.json)."""
    return {t: (r["since"], r["until"], r["becomes"]) for t, r in _read("mtp_rewrites.json")["mtp_rewrites"].items()}
