"""The SGLang releases specreg serves for, each a rules file read from that release's wheel
(specreg/sglang/rules/<version>.json: the draft classes, the flags, what its readers read and where).
The SGLang tier (tests/sglang_tier) runs the release's own code against them."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from specreg.errors import SpecregError, clipped

FOLDER = Path(__file__).resolve().parent / "rules"


def known() -> tuple[str, ...]:
    """The SGLang releases with a rules file, oldest first."""
    return tuple(sorted((p.stem for p in FOLDER.glob("*.json")), key=Version))


def newest() -> str:
    return known()[-1]


def installed() -> str | None:
    """The SGLang installed beside specreg, read from its package metadata (SGLang is never imported)."""
    from importlib import metadata

    try:
        return metadata.version("sglang")
    except metadata.PackageNotFoundError:
        return None


def target(version: str | None = None) -> tuple[str, str | None]:
    """The release whose rules serve (the one asked for, else the installed one, else the newest known),
    and why another was asked for or installed, when so: an installed SGLang newer than the newest known
    is served by the newest rules, with that said (as for vLLM); an older or unknown one is refused."""
    asked = version or installed()
    if asked is None or asked in known():
        return asked or newest(), None
    if version is None and Version(asked) > Version(newest()):
        return newest(), (
            f"SGLang {asked} is installed, newer than the newest release specreg's SGLang rules "
            f"were read from ({newest()}); the plan uses {newest()}'s rules, which a newer SGLang "
            "may have changed"
        )
    return rules(asked)["sglang"], None  # refused by name


@cache
def rules(version: str | None = None) -> dict[str, Any]:
    """The rules of one SGLang release (the newest known when None); an unknown release is refused."""
    version = version or newest()
    if version not in known():
        raise SpecregError(
            f"SGLang {clipped(str(version))} is not a release specreg knows (known: {', '.join(known())}); "
            "its rules are read from each release's code (specreg/sglang/rules/)"
        )
    return json.loads((FOLDER / f"{version}.json").read_text(encoding="utf-8"))
