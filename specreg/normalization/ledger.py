"""The field ledger: every key at every level of a speculators-format draft config, accounted for in one
pass over the keys (DESIGN.md: every field is accounted for; nothing is silent).

Each key is one of:

- ``read``: specreg reads it, with the meaning the targeted vLLM gives it (the readers' `Fields.reads`);
- ``layer``: a key of transformer_layer_config that specreg does not read itself: it is kept in the
  draft's config, which vLLM reads as the transformers config class of its model_type;
- ``carried``: an object specreg copies whole into the draft's config (quantization_config);
- ``transformers``: a top-level key transformers' `PretrainedConfig` writes (save_pretrained);
- ``trainer``: written by a speculators release (`specreg.speculators` facts) at its default, and not
  read by vLLM: nothing trained differs from what vLLM builds;
- ``ignored``: written by a speculators release at another value than its default, and not read by vLLM
  (a `trainer-field-ignored` warning: the draft was trained with it, vLLM builds it without);
- ``near-miss``: not read, and a near miss of a missing field read in the same object (an
  `unread-field` finding: probably that field misspelt);
- ``unknown``: not read, and no known speculators release writes it (an `unknown-field` warning:
  written by a newer speculators than specreg knows, or edited by hand).

The objects inside an unread key are that key's: they are not walked."""

from __future__ import annotations

import difflib
from functools import lru_cache
from collections.abc import Mapping
from typing import Any, NamedTuple

import attrs
from packaging.version import InvalidVersion, Version

from specreg.errors import show_value
from specreg.normalization.speculator import Finding
from specreg.normalization.fields import split_path, child_path, hf_config_keys
from specreg.sources.native.keys import NEAR_MISS_CUTOFF

#: the statuses, in the order `show --fields` groups them
STATUSES = ("read", "layer", "carried", "transformers", "trainer", "ignored", "near-miss", "unknown")
#: statuses that come with a finding
FLAGGED = frozenset({"ignored", "near-miss", "unknown"})
_SCALARS = frozenset({str, int, float, bool, type(None)})
#: top-level objects specreg copies whole into the draft's config (core._carry_quantization)
CARRIED = frozenset({"quantization_config"})


class FieldEntry(NamedTuple):
    """One key of the config and how it is accounted for. (A named tuple, not an attrs class: a
    normalization makes one per key, and this is its hot path.)"""

    path: str
    #: one of STATUSES
    status: str
    #: what the status rests on: the release that writes it, its default, the field it nearly spells
    note: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"path": self.path, "status": self.status, "note": self.note}


@attrs.frozen
class Ledger:
    """The entries of one config, in the config's order, and the warnings they give (near misses are
    `near_misses()`: core words them)."""

    entries: tuple[FieldEntry, ...]
    findings: tuple[Finding, ...]
    #: (JSON path, key, field) of every near miss, listed or not
    misses: tuple[tuple[str, str, str], ...] = ()


#: the most entries of one flagged status a ledger lists (and findings it gives), then one entry (and one
#: finding) counting the rest: 100,000 unknown keys must not give 100,000 warnings (core's
#: MAX_UNREAD_FINDINGS, for the same reason)
MAX_FLAGGED = 20
#: the most entries a ledger lists in all, then one counting the rest (a hostile file's 100,000 layer keys)
MAX_ENTRIES = 2_000


@lru_cache(maxsize=None)
def _trainer(part: str, name: str | None) -> dict[str, tuple[str, dict[str, Any], str]]:
    """`speculators.written(part, name)` with each field's ledger note, worded once."""
    from specreg import speculators

    out = {}
    for field, (release, entry) in speculators.written(part, name).items():
        what = f"default {show_value(entry['default'], 40)}" if "default" in entry else f"{entry['type']}, no default"
        out[field] = (release, entry, f"speculators {release}: {what}")
    return out


@lru_cache(maxsize=256)
def _read_index(
    reads: frozenset[str],
) -> tuple[frozenset[str], frozenset[str], dict[str, frozenset[str]], frozenset[str]]:
    """From `Fields.reads` paths: the full paths read, every path some read goes through, per object path
    the field names read in it, and every name read anywhere. Cached on the set of reads: every config of
    one algorithm is read through much the same fields, whatever their values."""
    full = {"$" + r if r[:1] == "[" else "$." + r for r in reads}
    inside: set[str] = set()
    wanted: dict[str, set[str]] = {}
    for path in full:
        parent, key = split_path(path)
        if isinstance(key, str):
            wanted.setdefault(parent, set()).add(key)
        while parent and parent != "$" and parent not in inside:
            inside.add(parent)
            parent, _ = split_path(parent)
    names = frozenset(k for keys in wanted.values() for k in keys)
    return frozenset(full), frozenset(inside), {p: frozenset(k) for p, k in wanted.items()}, names


def _claimed(config: Mapping[str, Any]) -> Version | None:
    text = config.get("speculators_version")
    return _version(text) if isinstance(text, str) else None


@lru_cache(maxsize=64)
def _version(text: str) -> Version | None:
    try:
        return Version(text)
    except InvalidVersion:
        return None


def account(config: Mapping[str, Any], reads: set[str], algorithm: str, vllm_label: str) -> Ledger:
    """The ledger of one speculators-format config, given what the readers read (`reads`: `Fields.reads`
    paths) for `algorithm`, targeting `vllm_label` (Context.vllm_label: "vLLM X.Y.Z")."""
    from specreg import speculators

    reads_key = frozenset(reads)
    _, inside, _, _ = _read_index(reads_key)
    claimed = _claimed(config)
    releases = speculators.known()
    span = f"{releases[0]} to {releases[-1]}"
    tally = _Tally()
    entries, flag = tally.entries, tally.flag
    misses: list[tuple[str, str, str]] = []

    def unknown(here: str, key: str, value: Any) -> None:
        if claimed is not None and claimed > speculators.newest():
            why = (
                f"the file says speculators {claimed}, newer than any release specreg knows ({span}): "
                "a field that release may have added, which can change how the draft was trained"
            )
            fix = f"upgrade specreg for facts of speculators {claimed}, or find out what the field does before serving"
        else:
            said = (
                f"the file says speculators {claimed}"
                if claimed is not None
                else "the file names no speculators_version"
            )
            why = f"no speculators release specreg knows ({span}) writes it, and {said}: edited by hand, or written by another tool"
            fix = "find out what wrote the field and whether the draft was trained with it; remove it if not"
        message = (
            f"{key} = {show_value(value, 40)} is not a field {algorithm} is known to have: {why}; "
            f"{vllm_label} does not read it"
        )
        flag(here, "unknown", why, Finding.of("unknown-field", message, here, fix=fix))

    def walk_object(obj: Mapping[str, Any], path: str, layer: bool) -> None:
        kind = obj.get("proposal_type") if path.startswith("$.speculators_config.proposal_methods[") else None
        keys = tuple(obj)  # hashable (a mapping's keys); _object_steps passes over any that is not a str
        args = (reads_key, algorithm, path, layer, kind if isinstance(kind, str) else None, keys)
        steps = _object_steps(*args) if _cacheable(keys) else _object_steps.__wrapped__(*args)
        for step, here, key, extra in steps:
            if step is _ENTRY:
                entries.extend(extra)  # a run of entries that need no value
            elif step is _READ:
                entries.append(extra)
                value = obj[key]
                if type(value) not in _SCALARS:
                    walk(value, here, layer or here == "$.transformer_layer_config")
            elif step is _NEAR:
                misses.append((here, key, extra))
                flag(here, "near-miss", extra)
            elif step is _TRAINER:
                release, entry, note = extra
                value = obj[key]
                if "default" in entry and value != entry["default"]:
                    message = (
                        f"{key} = {show_value(value, 40)} was written by speculators (its default is "
                        f"{show_value(entry['default'], 40)}, speculators {release}), and {vllm_label} does not "
                        "read it: it builds the draft as if the field were absent, not as trained"
                    )
                    fix = f"serve with a vLLM that reads {key}, or check that the draft does not depend on it"
                    flag(here, "ignored", note, Finding.of("trainer-field-ignored", message, here, fix=fix))
                else:
                    entries.append(FieldEntry(here, "trainer", note))
            else:
                unknown(here, key, obj[key])

    def walk(value: Any, path: str, layer: bool) -> None:
        if type(value) is dict or isinstance(value, Mapping):  # parsed JSON: dict, the fast test
            if layer or path in inside or path == "$":
                walk_object(value, path, layer)
        elif type(value) is list and (path in inside or layer):
            for i, item in enumerate(value):
                if type(item) in _SCALARS:  # layer_types: strings, nothing inside
                    continue
                here = child_path(path, i)
                if (here in inside or layer) and isinstance(item, Mapping):
                    walk_object(item, here, layer)

    walk(config, "$", False)
    return Ledger(*tally.close(), tuple(misses))


class _Tally:
    """A ledger's entries and warnings as they are found. Each flagged status lists its first MAX_FLAGGED
    entries (and their findings); `close` adds one entry (and one warning) counting the rest of each, and
    keeps the first MAX_ENTRIES entries then one counting the rest (a hostile file's 100,000 layer keys)."""

    def __init__(self) -> None:
        self.entries: list[FieldEntry] = []
        self.findings: list[Finding] = []
        self._counts: dict[str, int] = {}
        self._first_over: dict[str, str] = {}  # status -> the path of its first entry not listed

    def flag(self, here: str, status: str, note: str, finding: Finding | None = None) -> None:
        n = self._counts[status] = self._counts.get(status, 0) + 1
        if n > MAX_FLAGGED:
            self._first_over.setdefault(status, here)
            return
        self.entries.append(FieldEntry(here, status, note))
        if finding is not None:
            self.findings.append(finding)

    def close(self) -> tuple[tuple[FieldEntry, ...], tuple[Finding, ...]]:
        entries, findings = self.entries, self.findings
        for status, here in self._first_over.items():
            rest = self._counts[status] - MAX_FLAGGED
            entries.append(FieldEntry(here, status, f"and {rest:,} more {status} keys from here on, not listed"))
            if status in ("unknown", "ignored"):
                code = "unknown-field" if status == "unknown" else "trainer-field-ignored"
                message = (
                    f"{rest:,} more keys are {status} fields like the ones above; only the first {MAX_FLAGGED} "
                    "are listed"
                )
                findings.append(Finding.of(code, message, here))
        if len(entries) > MAX_ENTRIES:
            rest = len(entries) - MAX_ENTRIES
            first = entries[MAX_ENTRIES]
            entries[MAX_ENTRIES:] = [
                FieldEntry(first.path, first.status, f"and {rest:,} more keys from here on, not listed")
            ]
        return tuple(entries), tuple(findings)


#: what `account` does with one key of an object (`_object_steps`)
_ENTRY, _READ, _NEAR, _TRAINER, _UNKNOWN = "entry", "read", "near", "trainer", "unknown"
#: objects with more keys, or longer keys in all, than these are planned without the cache: a hostile
#: file's 100,000 keys, or a 4 MB key, must not stay in memory after the normalization that read it
_CACHED_KEYS, _CACHED_KEY_CHARS = 256, 16_384


def _cacheable(keys: tuple[Any, ...]) -> bool:
    try:
        return len(keys) <= _CACHED_KEYS and sum(map(len, keys)) <= _CACHED_KEY_CHARS
    except TypeError:  # a key that is not a str (a mapping handed to the API): planned each time
        return False


def _trainer_fields(algorithm: str, path: str, kind: str | None) -> dict[str, tuple[str, dict[str, Any], str]]:
    """The fields a speculators release writes in the object at `path` (`kind`: a proposal's type)."""
    if path == "$":
        return _trainer("algorithms", algorithm)
    if path == "$.speculators_config":
        return _trainer("speculators_config", None)
    if path == "$.speculators_config.verifier":
        return _trainer("verifier", None)
    if path.startswith("$.speculators_config.proposal_methods["):
        return _trainer("proposal_methods", kind)
    return {}


@lru_cache(maxsize=512)
def _object_steps(
    reads: frozenset[str], algorithm: str, path: str, layer: bool, kind: str | None, keys: tuple[Any, ...]
) -> tuple[tuple[str, str, str, Any], ...]:
    """What `account` does with each key of one object, in its order: (step, JSON path, key, what the step
    needs); an `_ENTRY` step is a run of keys whose entries need no value (their FieldEntry tuples, the
    path and key being the run's first). It depends on the keys, not their values (those are looked at
    when the steps run), so one algorithm's configs, which share their keys, plan each object once."""
    full, inside, wanted, read_names = _read_index(reads)
    hf_keys = hf_config_keys()
    known = {} if layer else _trainer_fields(algorithm, path, kind)
    missing = sorted(wanted.get(path, set()) - set(keys))
    prefix = path + "."
    steps: list[tuple[str, str, str, Any]] = []
    for key in keys:
        if not isinstance(key, str):
            continue
        here = prefix + key if key.isascii() and key.isidentifier() else child_path(path, key)
        if here in full or here in inside:
            steps.append((_READ, here, key, FieldEntry(here, "read")))
            continue
        # a field read in another object (an alias, a fallback) or a transformers key is no misspelling
        if missing and key not in read_names and key not in hf_keys:
            match = difflib.get_close_matches(key, missing, n=1, cutoff=NEAR_MISS_CUTOFF)
            if match:
                steps.append((_NEAR, here, key, match[0]))
                continue
        if layer:
            static = FieldEntry(here, "layer")
        elif path == "$" and key in CARRIED:
            static = FieldEntry(here, "carried")
        elif path == "$" and key in hf_keys:  # architectures, dtype: transformers' own, whoever declares it
            static = FieldEntry(here, "transformers")
        elif key in known:
            steps.append((_TRAINER, here, key, known[key]))
            continue
        else:
            steps.append((_UNKNOWN, here, key, None))
            continue
        if steps and steps[-1][0] is _ENTRY:  # runs of entries are added in one step
            steps[-1][3].append(static)
        else:
            steps.append((_ENTRY, here, key, [static]))
    return tuple(
        (step, here, key, tuple(extra)) if step is _ENTRY else (step, here, key, extra)
        for step, here, key, extra in steps
    )


def near_misses(ledger: Ledger) -> list[tuple[str, str, str]]:
    """(JSON path, key, field) for each key that is a near miss of a missing field."""
    return list(ledger.misses)


#: the objects of a native config whose keys the native ledger accounts for one by one (the others are
#: values of their key: rope_scaling, quantization_config)
NATIVE_OBJECTS = ("$", "$.dflash_config", "$.eagle_config")


def account_native(
    config: Mapping[str, Any], fmt: str, algorithm: str, vllm_label: str, reported: Mapping[str, str]
) -> Ledger:
    """The ledger of a native config (`fmt`: Layout.format), every key of its top level, dflash_config
    and eagle_config accounted for:

    - ``read``: a key specreg reads to write what vLLM reads (`keys.CONSUMED`, `keys.CARRIED`, DFlash2's
      fields) or an object it walks;
    - ``carried``: quantization_config, copied whole;
    - ``layer``: a top-level transformers config key, which vLLM reads as the draft's layer config;
    - ``trainer``: a trained-side key that does not change the served model (`keys.TRAINED_SIDE`), or a
      key a known writer of the layout writes (`specreg.sources.native.trainers`) at its default;
    - ``ignored``: a trained-side key vLLM does not serve (the converter's `trained-key-not-served`), or
      a writer's key at another value than every default its writers' code states
      (`trainer-field-ignored`);
    - ``near-miss`` / ``unknown``: as for the speculators format, the unknown ones naming the layout's
      known writers (`unknown-field`).

    `reported`: native path -> the code of a finding the conversion already gave there; such a key gets
    its status, not a second warning."""
    from specreg.sources.native import keys, trainers
    from specreg.sources.native.common import DFLASH2_FIELDS, DSPARK_FIELDS

    hf_keys = hf_config_keys()
    read_here = set(keys.CONSUMED) | set(keys.CARRIED.get(algorithm, {})) | set(DFLASH2_FIELDS) | set(DSPARK_FIELDS)
    writers = trainers.writers(fmt)
    named = ", ".join(trainers.label(t) for t in writers) or "none"
    tally = _Tally()
    entries = tally.entries

    def flag(here: str, status: str, note: str, finding: Finding | None) -> None:
        tally.flag(here, status, note, None if here in reported else finding)

    def one(obj: str, key: str, value: Any) -> None:
        here = obj + "." + key if key.isascii() and key.isidentifier() else child_path(obj, key)
        code = reported.get(here)
        if obj == "$" and key in ("dflash_config", "eagle_config") and isinstance(value, Mapping):
            entries.append(FieldEntry(here, "read", "walked"))
            return
        if key in read_here:
            entries.append(FieldEntry(here, "read", keys.CONSUMED.get(key, "")))
            return
        if code == "unread-field":
            flag(here, "near-miss", "a near miss of a field specreg reads (unread-field)", None)
            return
        if key in keys.NOT_SERVED or code == "trained-key-not-served":
            flag(here, "ignored", "trained, and not served (trained-key-not-served)", None)
            return
        if obj == "$" and key in CARRIED:
            entries.append(FieldEntry(here, "carried"))
            return
        if key in keys.TRAINED_SIDE:
            entries.append(FieldEntry(here, "trainer", keys.TRAINED_SIDE[key]))
            return
        if obj == "$" and key in hf_keys:
            entries.append(FieldEntry(here, "layer"))
            return
        found = trainers.written(fmt, obj).get(key)
        if found:
            stated = [(t, e["default"]) for t, e in found if "default" in e]
            by = ", ".join(f"{trainers.label(t)} ({e['from']})" for t, e in found)
            if stated and all(value != default for _, default in stated):
                defaults = "; ".join(f"{trainers.label(t)}: {show_value(d, 40)}" for t, d in stated)
                message = (
                    f"{key} = {show_value(value, 40)} was written by a trainer of this layout at another value "
                    f"than its code's default ({defaults}), and {vllm_label} does not read it: it builds the "
                    "draft as if the field were absent, not as trained"
                )
                fix = f"check that the draft does not depend on {key} before serving it"
                flag(here, "ignored", f"written by {by}", Finding.of("trainer-field-ignored", message, here, fix=fix))
            else:
                entries.append(FieldEntry(here, "trainer", f"written by {by}"))
            return
        why = (
            f"no known writer of this layout ({named}) writes it, and neither specreg nor {vllm_label} reads "
            "it: written by a trainer or release whose writer specreg has not read, or edited by hand"
        )
        message = f"{key} = {show_value(value, 40)} is not a field of {algorithm}'s native config: {why}"
        fix = "find out what wrote the field and whether the draft was trained with it; remove it if not"
        flag(here, "unknown", why, Finding.of("unknown-field", message, here, fix=fix))

    for obj in NATIVE_OBJECTS:
        fields = config if obj == "$" else config.get(obj[2:])
        if isinstance(fields, Mapping):
            for key, value in fields.items():
                if isinstance(key, str):
                    one(obj, key, value)
    return Ledger(*tally.close())
