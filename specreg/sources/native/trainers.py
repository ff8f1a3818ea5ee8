"""The fields each native trainer's config writer writes, read from its code at a cited commit
(specreg/sources/native/facts/<trainer>.json, written by tests/native_trainer_facts.py; each file's
``_about`` names the repository, the commit and every file read).

The field ledger of a native config (`specreg.normalization.ledger.account_native`) asks these facts
whether a key specreg does not read is one a known writer of that layout writes (``trainer``), or one
none of them writes (``unknown``: an `unknown-field` warning naming the trainers)."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

#: the committed facts, one file per trainer
FOLDER = Path(__file__).resolve().parent / "facts"


@cache
def known() -> dict[str, dict[str, Any]]:
    """trainer -> its facts, in name order."""
    return {p.stem: json.loads(p.read_text(encoding="utf-8")) for p in sorted(FOLDER.glob("*.json"))}


def label(trainer: str) -> str:
    """ "SpecForge a6b6b02": the trainer and the commit its fields were read at."""
    about = known()[trainer]["_about"]
    return f"{about['trainer']} {about['commit'][:7]}"


@cache
def writers(fmt: str) -> tuple[str, ...]:
    """The trainers known to write native format `fmt` (Layout.format)."""
    return tuple(name for name, facts in known().items() if fmt in facts["_about"]["formats"])


@cache
def written(fmt: str, obj: str) -> dict[str, tuple[tuple[str, dict[str, Any]], ...]]:
    """key -> ((trainer, entry), ...): the keys of object `obj` ("$", "$.dflash_config") that some
    writer of `fmt` writes, with each writer's entry (type, default where its code states one, from)."""
    out: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for name in writers(fmt):
        for key, entry in known()[name]["fields"].get(obj, {}).items():
            out.setdefault(key, []).append((name, entry))
    return {key: tuple(found) for key, found in out.items()}
