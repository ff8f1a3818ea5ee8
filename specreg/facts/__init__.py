"""The vLLM releases specreg models and the version each dated rule starts at, read from the
committed facts (`specreg/vllm/facts/releases.json`, `rules.json`, and each release's
`<X.Y>/rules.json`): the one place a vLLM version is written. Reading them imports nothing heavy.

Whether a release has a rule is a per-release fact: each release's rules.json says it (computed from
its wheel by tests/conformance/rule_facts.py), and code asks `holds(rule, version)`. A rule may start,
stop (a release that removed what it names) and start again; `rule_spans` gives its runs, `since` the
start of a run that lasts to the newest release. Only a rule older than the oldest release specreg
tracks has its version typed, in the top rules.json beside its source."""

from __future__ import annotations

import json
import re
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from packaging.version import Version

from specreg.errors import SpecregError

#: the committed facts: the two lists here, one folder per release beside them
FOLDER = Path(__file__).resolve().parent.parent / "vllm" / "facts"


@cache
def _read(name: str) -> Any:
    return read_json(FOLDER / name)


def read_json(path: Path) -> Any:
    """A committed facts file, parsed; a missing, unreadable or truncated one is a FactsError naming it."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        why = e.strerror if isinstance(e, OSError) and e.strerror else str(e)
        raise FactsError(f"{path}: {DAMAGED} ({type(e).__name__}: {why})") from None


#: what to do about a damaged committed facts file
DAMAGED = "the committed facts are damaged; restore the file (git checkout, or reinstall specreg)"
_MISSING = object()


def _damaged(path: Path, where: str, value: Any, want: str) -> FactsError:
    """One line naming the file, the JSON path and the value found (or that it is missing)."""
    if value is _MISSING:
        return FactsError(f"{path}: {where} is missing; {DAMAGED}")
    text = json.dumps(value)
    text = text if len(text) <= 60 else text[:57] + "..."
    return FactsError(f"{path}: {where}: {text} is not {want}; {DAMAGED}")


def read_releases(path: Path) -> list[dict[str, Any]]:
    """The records of a releases.json, each checked (`release` "X.Y", `wheel` "X.Y.Z", `tested_by` a
    list of names, `plugin_tested` a bool, no release twice): the first that is not is a FactsError
    naming the file, the JSON path and the value."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise _damaged(path, "$", data, "an object")
    records = data.get("releases", _MISSING)
    if not isinstance(records, list) or not records:
        raise _damaged(path, "$.releases", records, "a list of releases")
    seen: set[str] = set()
    for i, record in enumerate(records):
        where = f"$.releases[{i}]"
        if not isinstance(record, dict):
            raise _damaged(path, where, record, "a release's record")
        for key, want, good in _RELEASE_FIELDS:
            value = record.get(key, _MISSING)
            if not good(value):
                raise _damaged(path, f"{where}.{key}", value, want)
        if record["release"] in seen:
            raise _damaged(path, f"{where}.release", record["release"], "listed once (it is listed twice)")
        seen.add(record["release"])
    return records


#: each field of a releases.json record: its key, what it must be, and the test of it
_RELEASE_FIELDS = (
    ("release", 'a release "X.Y"', lambda v: isinstance(v, str) and bool(re.fullmatch(r"\d+\.\d+", v))),
    ("wheel", 'a wheel version "X.Y.Z"', lambda v: isinstance(v, str) and bool(re.fullmatch(r"\d+\.\d+\.\d+", v))),
    ("plugin_tested", "true or false", lambda v: isinstance(v, bool)),
    ("tested_by", "a list of group names", lambda v: isinstance(v, list) and all(isinstance(g, str) and g for g in v)),
)


def _section(name: str, key: str) -> dict[str, Any]:
    """The object under `key` of a committed facts file (a file without it is a FactsError naming it)."""
    data = _read(name)
    found = data.get(key, _MISSING) if isinstance(data, dict) else data
    if not isinstance(found, dict):
        raise _damaged(FOLDER / name, f"$.{key}", found, "an object")
    return found


@lru_cache(maxsize=1)
def _releases() -> dict[str, dict[str, Any]]:
    records = read_releases(FOLDER / "releases.json")
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
    return _section("rules.json", "rules")


def metadata() -> dict[str, dict[str, Any]]:
    """rule -> its record in the top rules.json (source, read_by, held_by), a copy."""
    return json.loads(json.dumps(_metadata()))


@cache
def _rules_of(release: str) -> dict[str, Any]:
    """A known release's rules as read (cached: read once per release; never handed out)."""
    path = folder(release) / "rules.json"
    if not path.is_file():
        raise FactsError(f"{path} is missing: `python -m specreg.facts refresh {release}` computes it")
    return _section(f"{release}/rules.json", "rules")


def release_rules(release: str) -> dict[str, Any]:
    """rule -> true, false, or the record saying why it was not computed, in a known release: the
    caller's own copy (the parsed file is cached, and a caller changing it would change every later
    answer)."""
    import copy

    return copy.deepcopy(_rules_of(release))


def refused(release: str) -> dict[str, str]:
    """algorithm -> a known release's own refusal of it (its rules.json "refused"; empty: none), a copy."""
    _section(f"{release}/rules.json", "rules")
    return dict(_read(f"{release}/rules.json").get("refused", {}))


def release_for(version: str | Version) -> str | None:
    """The known release whose facts answer for vLLM `version`: its X.Y (a patch release is its X.Y's);
    past the newest known release, the newest; None for a version no known release covers."""
    v = Version(str(version))
    release = f"{v.major}.{v.minor}"
    if release in known():
        return release
    return known()[-1] if v > newest() else None


def refusal(version: str | Version, algorithm: str) -> str | None:
    """What vLLM `version`'s speculators path raises for `algorithm`, in its own words, where its release
    registers the algorithm and refuses it (the release's rules.json "refused"; past the newest known
    release, the newest's); None elsewhere."""
    release = release_for(version)
    return None if release is None else refused(release).get(algorithm)


def not_extracted(record: Any) -> str | None:
    """What is wrong with a record of a rule that was not computed (None: a well-formed one)."""
    if not isinstance(record, dict) or set(record) != NOT_EXTRACTED:
        return f"is neither true, false nor a record with exactly {sorted(NOT_EXTRACTED)}"
    if record["extractable"] is not False or not record["why"] or not isinstance(record["why"], str):
        return 'says "extractable": false and why, in words'
    if not isinstance(record["held_by"], str) or not record["held_by"].startswith("tests/conformance/"):
        return "names the conformance test that holds it in held_by"
    return None


def _values(holds: dict[str, Any]) -> list[tuple[str, bool]]:
    """(release, holds there) for every release of `holds` (oldest first), a release whose rule was not
    computed taking the value of the nearest older computed one (False before the first)."""
    out, last = [], False
    for release, value in holds.items():
        last = value if isinstance(value, bool) else last
        out.append((release, last))
    return out


def spans(rule: str, holds: dict[str, Any]) -> list[tuple[str, str | None]]:
    """The runs of releases in which `rule` holds, from release -> its record (oldest first): (first,
    last), last None when it holds through the newest. A rule may start, stop and start again."""
    runs: list[tuple[str, str | None]] = []
    values = _values(holds)
    for i, (release, value) in enumerate(values):
        if value and (i == 0 or not values[i - 1][1]):
            runs.append((release, None))
        if not value and i and values[i - 1][1]:
            runs[-1] = (runs[-1][0], values[i - 1][0])
    return runs


def ambiguous(rule: str, holds: dict[str, Any]) -> list[str]:
    """Why `rule` cannot be placed in every release (empty: it can): a release where it was not computed
    and its neighbours disagree, or the newest release without a record."""
    problems = []
    releases = list(holds)
    for i, release in enumerate(releases):
        if isinstance(holds[release], bool):
            continue
        older = next((holds[r] for r in reversed(releases[:i]) if isinstance(holds[r], bool)), None)
        newer = next((holds[r] for r in releases[i + 1 :] if isinstance(holds[r], bool)), None)
        if newer is None:
            problems.append(f"rule {rule} is not computed in {release}, and no later release says whether it holds")
        elif older is None and newer or older is not None and older != newer:
            problems.append(
                f"rule {rule} {'holds' if newer else 'does not hold'} in the next computed release and is not "
                f"computed in {release}: whether {release} has it cannot be derived"
            )
    return problems


def check(per_release: dict[str, dict[str, Any]] | None = None) -> list[str]:
    """What keeps the facts from placing every rule in every release, one line each (empty: nothing).
    `per_release`: release -> its rules, oldest first (default: the committed ones of every known release)."""
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
        problems += ambiguous(name, holds)
        if "since" in record and [r for r, v in holds.items() if v is not True]:
            lacking = next(r for r, v in holds.items() if v is not True)
            problems.append(f"rule {name} is typed as older than every known release but does not hold in {lacking}")
    return problems


def _holds_per_release(rule: str) -> dict[str, Any]:
    found = {}
    for release in known():
        records = _rules_of(release)
        if rule not in records:
            raise FactsError(f"{release}/rules.json has no record of rule {rule}: refresh {release} computes it")
        found[release] = records[rule]
    return found


@cache
def _release_values(rule: str) -> dict[str, bool]:
    """release -> whether it has `rule`, every known release (read once per rule: `holds` is asked
    on every normalization)."""
    return dict(_values(_holds_per_release(rule)))


@cache
def rule_spans(rule: str) -> tuple[tuple[str, str | None], ...]:
    """The runs of known releases in which the dated rule `rule` holds ((first, last or None), oldest
    first): a rule may start, stop (a release that removed it) and start again."""
    return tuple(spans(rule, _holds_per_release(rule)))


@lru_cache(maxsize=256)  # a version and its X.Y, parsed once: `holds` is asked dozens of times a normalization
def _parsed(version: str | Version) -> tuple[Version, str]:
    v = Version(str(version))
    return v, f"{v.major}.{v.minor}"


def holds(rule: str, version: str | Version) -> bool:
    """Whether vLLM `version` ("X.Y", "X.Y.Z" or a Version) has the dated rule `rule`: its release's
    record (a patch release is its X.Y's); past the newest known release, the newest's. Before the oldest
    (where `state` says None: not known), a rule typed as older than every tracked release by its typed
    first version, any other as the oldest known release has it: specreg plans as that release would,
    never "needs vLLM >= the oldest release" for a rule whose start the facts do not hold."""
    return answer(rule, _parsed(version)[0])[0]


@lru_cache(maxsize=4096)  # a normalization asks some 30 rules, each twice (`answer`'s two parts)
def answer(rule: str, version: Version) -> tuple[bool, bool]:
    """(`holds(rule, version)`, whether the facts back it: `state` is not None), computed once per rule
    and version."""
    return _holds(rule, version), _state(rule, version) is not None


def _holds(rule: str, version: Version) -> bool:
    v, release = _parsed(version)
    values = _release_values(rule)
    if release in values:
        return values[release]
    if v > newest():
        return values[known()[-1]]
    read = _state(rule, v)
    if read is not None:
        return read
    typed = _metadata()[rule].get("since")
    if typed is not None:
        return v >= Version(typed)
    return values[known()[0]]


def oldest() -> Version:
    """The oldest known release, as its wheel's version: below it, no release's facts were computed."""
    return Version(wheel(known()[0]))


def below(version: str | Version) -> bool:
    """Whether vLLM `version` is older than every known release (what it does is not in the facts)."""
    return _parsed(_parsed(version)[1])[0] < _parsed(known()[0])[0]


def older_releases() -> tuple[str, ...]:
    """The releases older than every known one whose wheels the rule extractors read where they could
    (older_releases.json "releases", oldest first; empty without the file)."""
    return tuple(_older().get("releases", ()))


def _older() -> dict[str, Any]:
    return _read(OLDER) if (FOLDER / OLDER).is_file() else {}


#: per rule, its value in each release older than the oldest known one, where its extractor could read
#: that wheel (tests/conformance/test_rule_facts.py writes and holds it)
OLDER = "older_releases.json"


def _older_value(rule: str, v: Version) -> bool | None:
    value = _older().get("rules", {}).get(rule, {}).get(f"{v.major}.{v.minor}")
    return value if isinstance(value, bool) else None


def state(rule: str, version: str | Version) -> bool | None:
    """Whether vLLM `version` has `rule` where the facts back the answer, else None (not known). Below
    the oldest known release: a rule typed as older than every known release holds from its typed
    version on; else the value its extractor read from that release's wheel (older_releases.json), where
    it could; else not known. `holds` answers for every version."""
    v = _parsed(version)[0]
    held, known_here = answer(rule, v)
    return held if known_here else None


def _state(rule: str, v: Version) -> bool | None:
    if not below(v):
        return _holds(rule, v)
    typed = _metadata()[rule].get("since")
    if typed is not None and v >= Version(typed):
        return True
    return _older_value(rule, v)


@cache
def since(rule: str) -> Version:
    """The first vLLM version of the last run of releases that has `rule`, for a rule that holds in the
    newest known release (typed in the top rules.json for a rule older than every tracked release).
    A rule that no longer holds has no such version: ask `holds`, `rule_spans` or `last`."""
    record = _metadata()[rule]
    if "since" in record:
        return Version(record["since"])
    runs = rule_spans(rule)
    if not runs or runs[-1][1] is not None:
        where = f"stopped after {runs[-1][1]}" if runs else "holds in no known release"
        raise FactsError(f"rule {rule} {where}: it has no first version of a run that lasts (ask facts.holds)")
    return Version(runs[-1][0])


def span_text(rule: str) -> str:
    """The releases that have `rule`, in words: "0.23" (from 0.23 on), "0.22-0.33", "0.22-0.25, 0.28"."""
    if "since" in _metadata()[rule]:
        return _metadata()[rule]["since"]
    runs = rule_spans(rule)
    if not runs:
        return "none"
    return ", ".join(a if b is None else (a if a == b else f"{a}-{b}") for a, b in runs)


def last(rule: str) -> str | None:
    """The last known release that has `rule`, when the newest no longer does (None: it still holds, or
    never did)."""
    runs = rule_spans(rule)
    return runs[-1][1] if runs else None


def rules(read_by: str) -> tuple[str, ...]:
    """The dated rules one file reads (its path, e.g. "specreg/vllm/kv_cache.py"), sorted."""
    return tuple(sorted(name for name, r in _metadata().items() if r["read_by"] == read_by))


def reread() -> None:
    """Forget what was read from the committed files (after `refresh` wrote them)."""
    for cached in (_read, _releases, _rules_of, since, rule_spans, _release_values, answer):
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


def vllm_model_types() -> dict[str, Any]:
    """The model types vLLM ships config classes for (`_CONFIG_REGISTRY`), over the releases read
    (vllm_model_types.json: "releases", "model_types")."""
    return _read("vllm_model_types.json")


def aux_capture() -> dict[str, Any]:
    """The verifier architectures whose vLLM class captures aux hidden states, per release read
    (aux_capture.json: "releases", the releases read, and "architectures": name -> its runs of releases,
    [first, last or None], as `spans` makes them)."""
    return _read("aux_capture.json")


def mtp_rewrites() -> dict[str, tuple[str, str | None, str]]:
    """model_type -> (first release, first release without it or None, what the draft becomes): what
    vLLM's `SpeculativeConfig.hf_config_override` does to an MTP draft (mtp_rewrites.json)."""
    return {t: (r["since"], r["until"], r["becomes"]) for t, r in _read("mtp_rewrites.json")["mtp_rewrites"].items()}
