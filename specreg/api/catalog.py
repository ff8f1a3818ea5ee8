"""The catalog operations as Python values: what `specreg catalog list | show | check | pin` print,
for a program to use (`specreg.catalog_list`, `catalog_entry`, `catalog_check`, `catalog_pin`)."""

from __future__ import annotations

import difflib
import os
from typing import Any

import attrs

from specreg.api import validation
from specreg.entries import CheckReport, Entry, Pinned, catalog, check, pin
from specreg.errors import SpecregError
from specreg.normalization.speculator import as_tuple

Registry = str | os.PathLike[str] | None


#: the metrics a listing ranks, in the order their groups are shown
RANKED = ("acceptance_length", "draft_acceptance_rate")


@attrs.frozen
class Figure:
    """One published or measured number of one baseline, with what it is comparable on: figures are
    ranked only against figures of the same metric, k, dataset and engine (an acceptance length at
    k = 7 is not better than one at k = 3)."""

    entry_id: str
    baseline: int
    metric: str
    value: float
    k: int | None
    #: the harness's dataset, with its subset after a colon ("RedHatAI/speculator_benchmarks:HumanEval")
    dataset: str | None
    engine: str | None
    #: the entry's algorithm (shown beside the figure; figures of different algorithms are compared)
    algorithm: str | None = None

    @property
    def group(self) -> tuple[str, int | None, str | None, str | None]:
        """What makes two figures comparable (dataset and engine names case-blind)."""
        return (self.metric, self.k, _fold(self.dataset), _fold(self.engine))

    @property
    def ranked(self) -> bool:
        """Whether the figure is ranked at all: one whose k or dataset the source does not give is
        comparable with none (an unknown engine is shown, and is a group of its own)."""
        return self.k is not None and self.dataset is not None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def _fold(name: str | None) -> str | None:
    return None if name is None else name.casefold()


def engine_of(harness: Any) -> str | None:
    """The engine a figure was measured with: the harness's `engine`, else vLLM where it names a vLLM
    version; None where the source does not say."""
    if harness.engine is not None:
        return harness.engine
    return "vllm" if harness.vllm_version is not None else None


def figures(entry: Entry) -> list[Figure]:
    """The entry's single-valued figures of the ranked metrics (a range or a floor is a gate, not a
    figure to rank), in baseline order."""
    out = []
    for i, b in enumerate(entry.baselines):
        for metric in RANKED:
            m = getattr(b.metrics, metric)
            if m is not None and m.value is not None:
                h = b.harness
                dataset = h.dataset if h.dataset is None or h.subset is None else f"{h.dataset}:{h.subset}"
                out.append(Figure(entry.id, i, metric, m.value, h.k, dataset, engine_of(h), entry.algorithm))
    return out


def rank(found: list[Figure]) -> list[Figure]:
    """Per metric, the ranked figures grouped by k, dataset and engine (groups in that order, an
    unknown engine after the known ones), best first within each group (ties in catalog order); then
    that metric's figures that are not ranked, in catalog order."""

    def key(f: Figure) -> tuple:
        metric, k, dataset, engine = f.group
        if not f.ranked:
            return (RANKED.index(metric), 1)
        return (RANKED.index(metric), 0, k, dataset, engine is None, engine or "", -f.value)

    return sorted(found, key=key)


@attrs.frozen
class Listing:
    """The entries a filter chose, in catalog order, out of how many the catalog holds; with a
    verifier, their figures ranked within groups of the same metric, k, dataset and engine."""

    entries: tuple[Entry, ...] = attrs.field(converter=as_tuple)
    total: int
    figures: tuple[Figure, ...] = attrs.field(default=(), converter=as_tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "entries": [e.to_dict() for e in self.entries],
            "total": self.total,
            "figures": [f.to_dict() for f in self.figures],
        }


def catalog_list(
    pattern: str | None = None,
    *,
    algorithm: str | None = None,
    verifier: str | None = None,
    tag: str | None = None,
    k: int | None = None,
    registry: Registry = None,
) -> Listing:
    """The entries matching every filter given (pattern: shell-style on the id, case-insensitively).
    An algorithm, tag or verifier no entry has is a typo, not an empty answer: a SpecregError naming
    what exists. The verifier matches case-blind (Hub ids are). With `verifier` ("which drafts exist
    for my model"), `figures` ranks the entries' figures best first within each group of the same
    metric, k, dataset and engine: figures measured otherwise are not compared. With `k`, only the
    entries with a baseline measured at that k, and only those figures."""
    for name, value in (("pattern", pattern), ("algorithm", algorithm), ("verifier", verifier), ("tag", tag)):
        validation.text(name, value)
    cat = catalog(registry)
    verifiers = {e.verifier.id for e in cat.values()}
    for name, value, known in (
        ("--algorithm", algorithm, {e.algorithm for e in cat.values()}),
        ("--tag", tag, {t for e in cat.values() for t in e.tags}),
        ("--verifier", verifier, verifiers),
    ):
        if value is not None and value not in known and not (name == "--verifier" and _folded(value, known)):
            close = difflib.get_close_matches(value, sorted(known), n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise SpecregError(f"{name} {value!r}: no catalog entry has it (known: {', '.join(sorted(known))}){hint}")
    if k is not None and (isinstance(k, bool) or not isinstance(k, int)):
        raise SpecregError(f"k: expected a whole number of draft tokens, got {k!r}")
    chosen = cat.filter(algorithm=algorithm, tag=tag, pattern=pattern)
    if k is not None:
        chosen = [e for e in chosen if k in baseline_ks(e)]
    if verifier is None:
        return Listing(entries=chosen, total=len(cat))
    chosen = [e for e in chosen if e.verifier.id.casefold() == verifier.casefold()]
    found = [f for e in chosen for f in figures(e) if k is None or f.k == k]
    return Listing(entries=chosen, total=len(cat), figures=rank(found))


def baseline_ks(entry: Entry) -> list[int]:
    """The k of each of the entry's baselines that states one, each once, in order."""
    return sorted({b.harness.k for b in entry.baselines if b.harness.k is not None})


def _folded(value: str, known: set[str]) -> bool:
    return value.casefold() in {k.casefold() for k in known}


def catalog_entry(entry_id: str, *, registry: Registry = None) -> Entry:
    """One entry with its baselines; a SpecregError naming the closest id for one the catalog lacks."""
    if validation.text("entry_id", entry_id) is None:
        raise SpecregError("entry_id must be a catalog id such as org/name, got None")
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
    if validation.text("entry_id", entry_id) is None:
        raise SpecregError("entry_id must be a catalog id such as org/name, got None")
    validation.text("revision", revision)
    return pin(entry_id, revision=revision, directory=registry)
