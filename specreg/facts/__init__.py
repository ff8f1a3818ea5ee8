"""The vLLM releases specreg models and the version each dated rule starts at, read from the
committed facts (`specreg/vllm/facts/releases.json`, `rules.json`, and each release's
`<X.Y>/rules.json`): the one place a vLLM version is written. Reading them imports nothing heavy.

A rule's first version is derived: each release's rules.json says whether that release has the rule
(computed from its wheel by tests/conformance/rule_facts.py), and the rule starts at the first release
from which every later one has it. Only a rule older than the oldest release specreg tracks has its
version typed, in the top rules.json beside its source."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from specreg.errors import SpecregError

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


class FactsError(SpecregError):
    """The committed facts cannot answer: a rule with no first release, a release without its rules."""


#: the keys of a release's record of a rule it could not compute (instead of true or false)
NOT_EXTRACTED = {"extractable", "held_by", "why"}


def _metadata() -> dict[str, dict[str, Any]]:
    return _read("rules.json")["rules"]


@cache
def release_rules(release: str) -> dict[str, Any]:
    """rule -> true, false, or the record saying why it was not computed, in a known release."""
    path = folder(release) / "rules.json"
    if not path.is_file():
        raise FactsError(f"{path} is missing: `python -m specreg.facts refresh {release}` computes it")
    return _read(f"{release}/rules.json")["rules"]


def not_extracted(record: Any) -> str | None:
    """What is wrong with a record of a rule that was not computed (None: a well-formed one)."""
    if not isinstance(record, dict) or set(record) != NOT_EXTRACTED:
        return f"is neither true, false nor a record with exactly {sorted(NOT_EXTRACTED)}"
    if record["extractable"] is not False or not record["why"] or not isinstance(record["why"], str):
        return 'says "extractable": false and why, in words'
    if not isinstance(record["held_by"], str) or not record["held_by"].startswith("tests/conformance/"):
        return "names the conformance test that holds it in held_by"
    return None


def first_release(rule: str, holds: dict[str, Any]) -> str:
    """The first release from which `rule` holds in every later one, from release -> its record there
    (oldest first; a record that is not true or false was not computed and is passed over)."""
    computed = [(r, v) for r, v in holds.items() if isinstance(v, bool)]
    if not computed or not computed[-1][1]:
        raise FactsError(
            f"rule {rule} does not hold in {computed[-1][0] if computed else 'any release'}: "
            "a dated rule holds from its first release on (retire it, or fix its extractor)"
        )
    lacking = [i for i, (_r, v) in enumerate(computed) if not v]
    start = lacking[-1] + 1 if lacking else 0
    again = [r for r, v in computed[:start] if v]
    if again:
        raise FactsError(
            f"rule {rule} holds in {again[0]}, not in {computed[lacking[-1]][0]}, and again from "
            f"{computed[start][0]}: a dated rule has one first release (split it in two rules)"
        )
    releases = list(holds)
    first = releases.index(computed[start][0])
    low = releases.index(computed[start - 1][0]) + 1 if start else 0
    unknown = releases[low:first]
    if unknown:
        raise FactsError(
            f"rule {rule} holds from {computed[start][0]} and is not computed in "
            f"{', '.join(unknown)}: its first release cannot be derived"
        )
    return computed[start][0]


def check(per_release: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """What keeps the facts from dating every rule, one line each (empty: nothing). `per_release`:
    release -> its rules, oldest first (default: the committed ones of every known release)."""
    problems = []
    meta = _metadata()
    if per_release is None:
        per_release = {}
        for release in known():
            try:
                per_release[release] = release_rules(release)
            except FactsError as e:
                problems.append(str(e))
    for release, records in per_release.items():
        for name in sorted(set(records) ^ set(meta)):
            where = "the top rules.json" if name in records else f"{release}/rules.json"
            problems.append(f"{where} has no record of rule {name}")
        for name, record in sorted(records.items()):
            wrong = None if isinstance(record, bool) else not_extracted(record)
            if wrong:
                problems.append(f"{release}/rules.json: rule {name}'s record {wrong}")
    if problems:
        return problems
    for name, record in sorted(meta.items()):
        holds = {release: records[name] for release, records in per_release.items()}
        try:
            _date(name, record, holds)
        except FactsError as e:
            problems.append(str(e))
    return problems


def _date(rule: str, record: dict[str, Any], holds: dict[str, Any]) -> Version:
    if "since" in record:
        lacking = [r for r, v in holds.items() if v is not True]
        if lacking:
            raise FactsError(
                f"rule {rule} is typed as older than every known release but does not hold in {lacking[0]}"
            )
        return Version(record["since"])
    return Version(first_release(rule, holds))


@cache
def since(rule: str) -> Version:
    """The first vLLM version that has the dated rule `rule`: derived from the releases' rules.json, or
    typed in the top rules.json for a rule older than the oldest release specreg tracks (which then
    has it in every known release)."""
    holds = {}
    for release in known():
        if rule not in release_rules(release):
            raise FactsError(f"{release}/rules.json has no record of rule {rule}: refresh {release} computes it")
        holds[release] = release_rules(release)[rule]
    return _date(rule, _metadata()[rule], holds)


def rules(read_by: str) -> dict[str, Version]:
    """The dated rules one file reads (its path, e.g. "specreg/vllm/kv_cache.py"), by name."""
    return {name: since(name) for name, r in _metadata().items() if r["read_by"] == read_by}


def reread() -> None:
    """Forget what was read from the committed files (after `refresh` wrote them)."""
    for cached in (_read, _releases, release_rules, since):
        cached.cache_clear()


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
