"""speculators, the trainer, as its own config classes write a draft: the facts read from each speculators
release (specreg/speculators/facts/<version>.json), beside vLLM's (specreg/vllm/facts/) and
transformers' (specreg/transformers/facts/). Each file is written by one command from that release's
wheel (`python -m specreg.speculators refresh VERSION`, specreg/speculators/refresh.py), which imports the
release's config classes in a child interpreter and reads their pydantic fields:

- `algorithms`: per `speculators_model_type` the class registered for it and its fields, each with its
  type and default (or `required`), the top-level keys a draft of that release holds beside the
  transformers config keys `PretrainedConfig` writes; and `to_dict_keys`, the keys a default instance's
  `to_dict()` writes (None where the class has no default instance);
- `speculators_config`, `verifier`, `proposal_methods`: the fields of the objects every draft nests
  (`SpeculatorsConfig`, `VerifierConfig`, each registered `TokenProposalConfig`);
- `run_with`: the transformers, pydantic and torch the classes ran under; `unreadable_modules`: modules
  of the release that could not be imported there (their classes are missing from the file).

The field ledger (`specreg.normalization.ledger`) asks these facts whether a key some reader skipped was
written by a known release. Reading them imports nothing heavy and happens on first use."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import Version

#: the committed facts, one file per speculators release
FOLDER = Path(__file__).resolve().parent / "facts"


@cache
def known() -> tuple[str, ...]:
    """The speculators releases with committed facts, oldest first."""
    return tuple(sorted((p.stem for p in FOLDER.glob("*.json")), key=Version))


@cache
def facts(version: str) -> dict[str, Any]:
    """The committed facts of one speculators release."""
    return json.loads((FOLDER / f"{version}.json").read_text(encoding="utf-8"))


@cache
def newest() -> Version:
    """The newest speculators release with committed facts."""
    return Version(known()[-1])


@cache
def written(part: str, name: str | None = None) -> dict[str, tuple[str, dict[str, Any]]]:
    """Every field some known release writes in one object of a draft, with the newest release that
    writes it and its entry there: `part` is "algorithms" (of algorithm `name`), "speculators_config",
    "verifier" or "proposal_methods" (of proposal type `name`, every type's when None)."""
    out: dict[str, tuple[str, dict[str, Any]]] = {}
    for release in known():
        found = facts(release)[part]
        if part == "algorithms":
            algo = found.get(name, {})
            for key in algo.get("to_dict_keys") or ():  # what to_dict adds beyond the fields
                out[key] = (release, {"type": "written by to_dict()"})
            groups = [algo.get("fields", {})]
        elif part == "proposal_methods":
            groups = [m["fields"] for t, m in found.items() if name is None or t == name]
        else:
            groups = [found]
        for group in groups:
            for field, entry in group.items():
                out[field] = (release, entry)
    return out


@cache
def algorithms() -> frozenset[str]:
    """Every speculators_model_type some known release registers."""
    return frozenset(a for release in known() for a in facts(release)["algorithms"])
