"""What changed between two releases' committed facts (`python -m specreg.facts diff OLD NEW`).

A record is one line of a facts file (`fact_files.facts_text`: every object opened one key per line, a
list on one line), so a record here is a leaf of the JSON, its path and its value (an empty object
holds none). The lines name the
harness that computed each file (its `_about`) and the vLLM source of each dated rule (the top
rules.json), for each rule a release's rules.json starts or stops holding.
Pure: reads the committed files, imports nothing heavy.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from specreg import facts

#: fact kind -> its short name in a line, and the vLLM function its harness runs or reads
KINDS = {
    "attention_backends": ("attention", "CudaPlatform.get_valid_backends"),
    "kv_cache": ("kv_cache", "get_kv_cache_groups"),
    "quantization_methods": ("quantization", "get_quantization_config"),
}
MISSING = object()
Key = tuple[str, ...]


def records(data: dict[str, Any]) -> dict[Key, Any]:
    """path -> value for each record (leaf) of a facts document, `_about` left out."""
    return dict(_leaves({k: v for k, v in data.items() if k != "_about"}, ()))


def _leaves(value: Any, path: Key) -> Iterator[tuple[Key, Any]]:
    if isinstance(value, dict):  # an empty object holds no record: what it gains is the change
        for key in sorted(value):
            yield from _leaves(value[key], (*path, key))
    else:
        yield path, value


def changes(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[Key, Any, Any]]:
    """(path, old value, new value) for each record added (old MISSING), removed (new MISSING) or changed."""
    a, b = records(old), records(new)
    return [
        (p, a.get(p, MISSING), b.get(p, MISSING))
        for p in sorted(set(a) | set(b))
        if a.get(p, MISSING) != b.get(p, MISSING)
    ]


def harness(about: str) -> str:
    """The harness an `_about` names (the first tests/... script), else the text itself."""
    found = re.search(r"tests/\S+?\.py", about)
    return found.group(0) if found else about


def _text(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(", ", ": "))


def _is_ranges(value: Any) -> bool:
    return isinstance(value, list) and all(
        isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r) for r in value
    )


def _sizes(ranges: list[list[int]]) -> set[int]:
    return {x for lo, hi in ranges for x in range(lo, hi + 1)}


def _as_ranges(sizes: set[int]) -> str:
    out: list[list[int]] = []
    for x in sorted(sizes):
        if out and out[-1][1] == x - 1:
            out[-1][1] = x
        else:
            out.append([x, x])
    return ", ".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in out)


def _subject(kind: str, path: Key) -> str:
    """A record's path in words: an attention record reads "FLASH_ATTN on sm_90 heads"."""
    if kind == "attention_backends":
        prefix = ""
        if path and path[0] == "cubins":  # what differs with FlashInfer's TRTLLM cubins installed
            prefix, path = "with cubins, ", path[1:]
        if len(path) >= 2 and (re.fullmatch(r"\d+\.\d+", path[0]) or path[0].startswith("{")):
            sm = path[0] if path[0].startswith("{") else "sm_" + path[0].replace(".", "")
            if path[1] == "backends" and len(path) >= 3:
                rest = [
                    json.dumps(p) if " " in p and not p.startswith("{") else p for p in path[3:]
                ]  # a refusal's reason is quoted
                return prefix + " ".join([f"{path[2]} on {sm}", *rest])
            return prefix + " ".join([sm, *path[1:]])
        return prefix + " ".join(path)
    return " ".join(path)


def _change_line(kind: str, path: Key, old: Any, new: Any) -> str:
    subject = _subject(kind, path)
    if old is MISSING:
        return f"{subject} is new: {_text(new)}"
    if new is MISSING:
        return f"{subject} is gone (was {_text(old)})"
    if _is_ranges(old) and _is_ranges(new):
        gained, lost = _sizes(new) - _sizes(old), _sizes(old) - _sizes(new)
        if path[-1] == "heads":
            subject = _subject(kind, path[:-1])
            words = [
                f"now takes head size {_as_ranges(gained)}" if gained else "",
                f"no longer takes head size {_as_ranges(lost)}" if lost else "",
            ]
        else:
            words = [
                f"adds head size {_as_ranges(gained)}" if gained else "",
                f"drops head size {_as_ranges(lost)}" if lost else "",
            ]
        return f"{subject} " + "; ".join(w for w in words if w)
    return f"{subject}: {_text(old)} -> {_text(new)}"


def kind_lines(kind: str, old: dict[str, Any] | None, new: dict[str, Any] | None, names: tuple[str, str]) -> list[str]:
    """The lines of one fact kind between two releases `names` (old, new); a missing file is None."""
    short, function = KINDS.get(kind, (kind, ""))
    if old is None and new is None:
        return []
    about = harness(str((new if new is not None else old).get("_about", "")))
    source = f"{function}, by {about}" if function else about
    if old is None or new is None:
        has = names[1] if new is not None else names[0]
        lacks = names[0] if new is not None else names[1]
        count = len(records(new if new is not None else old))
        return [f"{short}: only {has} has these facts ({count} records; {lacks} has none) [{source}]"]
    found = changes(old, new)
    if not found:
        return [f"{short}: unchanged [{source}]"]
    head = f"{short}: {len(found)} record{'s' if len(found) != 1 else ''} changed [{source}]"
    return [head, *(f"{short}: {line}" for line in grouped(kind, found))]


#: the fewest records changed the same way that make one line instead of one each
GROUP = 3


def grouped(kind: str, found: list[tuple[Key, Any, Any]]) -> list[str]:
    """The changes in words, records that changed the same way on one line: a key renamed under records
    whose values stayed (a reworded refusal), then one change made to several records that differ in one
    key (`block_first` of eight backends turned false); the rest one line each, in path order."""
    lines, rest = _renamed(kind, found)
    while True:
        group = _same_change(rest)
        if group is None:
            break
        i, members = group
        rest = [c for c in rest if c not in members]
        path, old, new = members[0]
        keys = [m[0][i] for m in members]
        shown = ", ".join(keys[:10]) + (f" and {len(keys) - 10} more" if len(keys) > 10 else "")
        subject = _subject(kind, (*path[:i], "*", *path[i + 1 :]))
        change = _change_line(kind, path, old, new).removeprefix(_subject(kind, path))
        if old is not MISSING and new is not MISSING and not (_is_ranges(old) and _is_ranges(new)):
            change = f": {_text(old)} -> {_text(new)}"
        lines.append(f"{subject}{change}, for * = {shown} ({len(members)} records)")
    return lines + [_change_line(kind, p, a, b) for p, a, b in rest]


def _renamed(kind: str, found: list[tuple[Key, Any, Any]]) -> tuple[list[str], list[tuple[Key, Any, Any]]]:
    """Lines for the records that only moved: each gone record with a new one of the same value whose path
    differs in one key, grouped by (position, old key, new key) where GROUP or more records moved alike."""
    added: dict[tuple[int, Key, str], list[Key]] = {}
    for p, a, b in found:
        if a is MISSING:
            for i in range(len(p)):
                added.setdefault((i, (*p[:i], *p[i + 1 :]), _text(b)), []).append(p)
    moves: dict[tuple[int, str, str], list[tuple[Key, Key]]] = {}
    for p, a, b in found:
        if b is MISSING:
            for i in range(len(p)):
                for q in added.get((i, (*p[:i], *p[i + 1 :]), _text(a)), []):
                    moves.setdefault((i, p[i], q[i]), []).append((p, q))
    used: set[Key] = set()
    lines = []
    for (i, was, now), pairs in sorted(moves.items(), key=lambda m: (-len(m[1]), m[0])):
        pairs = [(p, q) for p, q in pairs if p not in used and q not in used]
        if len(pairs) < GROUP:
            continue
        used |= {x for pair in pairs for x in pair}
        where = _subject(kind, _pattern([p for p, _ in pairs], i))
        lines.append(
            f"{where}: * renamed {json.dumps(was)} -> {json.dumps(now)}, the values unchanged ({len(pairs)} records)"
        )
    return lines, [c for c in found if c[0] not in used]


def _pattern(paths: list[Key], i: int) -> Key:
    """The paths as one: "*" at position i, a key the paths share as it is, other keys as {a,b} (or
    {N keys} past four)."""
    out = []
    for j in range(len(paths[0])):
        keys = sorted({p[j] for p in paths})
        if j == i:
            out.append("*")
        elif len(keys) == 1:
            out.append(keys[0])
        elif all(re.fullmatch(r"\d+\.\d+", k) for k in keys):
            out.append(f"{{{len(keys)} compute capabilities}}")
        else:
            out.append("{" + (",".join(keys) if len(keys) <= 4 else f"{len(keys)} keys") + "}")
    return tuple(out)


def _same_change(found: list[tuple[Key, Any, Any]]) -> tuple[int, list[tuple[Key, Any, Any]]] | None:
    """The largest set (GROUP or more) of records changed from the same old to the same new value whose
    paths differ in one position only: (that position, the records), or None."""
    groups: dict[tuple[int, Key, str, str], list[tuple[Key, Any, Any]]] = {}
    for c in found:
        p, a, b = c
        olds, news = "-" if a is MISSING else _text(a), "-" if b is MISSING else _text(b)
        for i in range(len(p)):
            groups.setdefault((i, (*p[:i], *p[i + 1 :]), olds, news), []).append(c)
    if not groups:
        return None
    key, members = max(groups.items(), key=lambda g: (len(g[1]), [-g[0][0]]))
    return (key[0], members) if len(members) >= GROUP else None


def _holding(value: Any) -> str:
    if value is MISSING:
        return "has no record"
    if isinstance(value, bool):
        return "holds" if value else "does not hold"
    return "is not computed"


def rule_lines(
    meta: dict[str, dict[str, Any]], old: dict[str, Any] | None, new: dict[str, Any] | None, names: tuple[str, str]
) -> list[str]:
    """The dated rules whose record differs between two releases' rules.json (None: no file), each with
    the vLLM source the top rules.json names for it."""
    if old is None and new is None:
        return []
    source = harness(str((new if new is not None else old).get("_about", "")))
    if old is None or new is None:
        has, lacks = (names[1], names[0]) if new is not None else names
        count = len((new if new is not None else old).get("rules", {}))
        return [f"rules: only {has} has these facts ({count} rules; {lacks} has none) [{source}]"]
    a, b = old.get("rules", {}), new.get("rules", {})
    lines = []
    for name in sorted(set(a) | set(b)):
        was, now = a.get(name, MISSING), b.get(name, MISSING)
        if was == now:
            continue
        where = meta.get(name, {}).get("source", "no source: the top rules.json has no record of it")
        if was is False and now is True:
            what = "now holds"
        elif was is True and now is False:
            what = "no longer holds"
        else:
            what = f"{_holding(now)} (in {names[0]} it {_holding(was)})"
            if isinstance(now, dict) and isinstance(now.get("why"), str):
                what += f": {now['why']}"
        lines.append(f"rules: {name} {what} ({where})")
    if not lines:
        return [f"rules: unchanged [{source}]"]
    head = f"rules: {len(lines)} rule{'s' if len(lines) != 1 else ''} changed [{source}]"
    return [head, *lines]


def diff(old: str, new: str, read: Any, rules: dict[str, dict[str, Any]]) -> list[str]:
    """Every line of `diff OLD NEW`. `read(release, kind)` gives a facts document with its `_about`, or
    None when that release has no file of that kind; `rules` is the top rules.json's metadata."""
    out = rule_lines(rules, read(old, "rules"), read(new, "rules"), (old, new))  # what a reviewer reads first
    for kind in KINDS:
        out += kind_lines(kind, read(old, kind), read(new, kind), (old, new))
    return out


def read_committed(release: str, kind: str) -> dict[str, Any] | None:
    """A committed facts document, `_about` kept (None: the release has no file of that kind)."""
    path = facts.folder(release) / f"{kind}.json"
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
