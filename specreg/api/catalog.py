"""The catalog operations as Python values: what `specreg catalog list | show | check | pin` print,
for a program to use (`specreg.catalog_list`, `catalog_entry`, `catalog_check`, `catalog_pin`)."""

from __future__ import annotations

import difflib
import os
from typing import Any

import attrs

from specreg.entries import CheckReport, Entry, Pinned, catalog, check, pin
from specreg.errors import SpecregError

Registry = str | os.PathLike[str] | None


@attrs.frozen
class Listing:
    """The entries a filter chose, in the order shown, out of how many the catalog holds."""

    entries: tuple[Entry, ...] = attrs.field(converter=tuple)
    total: int

    def to_dict(self) -> dict[str, Any]:
        return {"entries": [e.to_dict() for e in self.entries], "total": self.total}


def best_acceptance(entry: Entry) -> tuple[float, float] | None:
    """The entry's best published acceptance: (the highest acceptance length, the highest draft
    acceptance rate), each -1 where no baseline gives one; None where none gives either."""
    lengths = [m.value for b in entry.baselines if (m := b.metrics.acceptance_length) and m.value is not None]
    rates = [m.value for b in entry.baselines if (m := b.metrics.draft_acceptance_rate) and m.value is not None]
    if not lengths and not rates:
        return None
    return max(lengths, default=-1.0), max(rates, default=-1.0)


def catalog_list(
    pattern: str | None = None,
    *,
    algorithm: str | None = None,
    verifier: str | None = None,
    tag: str | None = None,
    registry: Registry = None,
) -> Listing:
    """The entries matching every filter given (pattern: shell-style on the id, case-insensitively).
    An algorithm, tag or verifier no entry has is a typo, not an empty answer: a SpecregError naming
    what exists. With `verifier` ("which drafts exist for my model"), the entries come best published
    acceptance first: the highest acceptance length, then the highest draft acceptance rate; entries
    with no published figure last (otherwise in catalog order)."""
    cat = catalog(registry)
    for name, value, known in (
        ("--algorithm", algorithm, {e.algorithm for e in cat.values()}),
        ("--tag", tag, {t for e in cat.values() for t in e.tags}),
        ("--verifier", verifier, {e.verifier.id for e in cat.values()}),
    ):
        if value is not None and value not in known:
            close = difflib.get_close_matches(value, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecregError(f"{name} {value!r}: no catalog entry has it (known: {', '.join(sorted(known))}){hint}")
    chosen = cat.filter(algorithm=algorithm, verifier=verifier, tag=tag, pattern=pattern)
    if verifier is not None:
        chosen = sorted(chosen, key=lambda e: (best_acceptance(e) is None, [-x for x in best_acceptance(e) or ()]))
    return Listing(entries=chosen, total=len(cat))


def catalog_entry(entry_id: str, *, registry: Registry = None) -> Entry:
    """One entry with its baselines; a SpecregError naming the closest id for one the catalog lacks."""
    cat = catalog(registry)
    entry = cat.get(entry_id)
    if entry is None:
        close = difflib.get_close_matches(entry_id, list(cat), n=1)
        raise SpecregError(f"no catalog entry {entry_id}" + (f" (did you mean {close[0]}?)" if close else ""))
    return entry


def catalog_check(*, registry: Registry = None) -> CheckReport:
    """Every problem and warning of every entry and of the config snapshots beside them (offline)."""
    return check(registry)


def catalog_pin(entry_id: str, *, revision: str | None = None, registry: Registry = None) -> Pinned:
    """Pin an entry to a Hub commit: its config's sha256 and a snapshot written beside the entry."""
    return pin(entry_id, revision=revision, directory=registry)
