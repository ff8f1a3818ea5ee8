"""Typed, path-aware, read-recording access to a parsed config.json.

Algorithm modules read their input only through `Fields`, which
- names every value by its JSON path (``$.speculators_config.proposal_methods[0].speculative_tokens``),
- collects every problem instead of stopping at the first (`Fields.done` raises them together),
- records which fields were read, so a test can hold each module's docstring table to the truth.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any, Callable, Iterator, Mapping

import attrs

from specreg.errors import ConfigError, Problem, show_value
from specreg.sources.native.keys import NEAR_MISS_CUTOFF

MAX_COUNT = 4096  # draft lengths, block sizes, layer counts: far above any real draft
MAX_ID = 2**31 - 1  # token ids, vocab sizes, widths: int32, as the kernels index them

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\Z")
_MISSING: Any = object()


@lru_cache(maxsize=4096)
def child_path(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    if _IDENT.match(key):
        return f"{parent}.{key}"
    return f"{parent}[{json.dumps(key, ensure_ascii=False)}]"


@lru_cache(maxsize=4096)  # the same few dozen fields of every config: one string each, built once
def _read_name(parent: str, key: str) -> str:
    """`Fields.reads`' name of `key` in the object at `parent`: its JSON path without the leading "$."."""
    rel = child_path(parent, key)
    return rel[2:] if rel.startswith("$.") else rel


def type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


@attrs.frozen
class Kind:
    """What a field must hold: a name for docs and messages, and a test that returns a complaint."""

    name: str
    test: Callable[[Any], str | None]

    def check(self, value: Any) -> str | None:
        return self.test(value)


def _int_in(lo: int, hi: int) -> Callable[[Any], str | None]:
    def test(v: Any) -> str | None:
        if isinstance(v, bool) or not isinstance(v, int):
            return f"expected an integer, got {type_name(v)} {show_value(v)}"
        if v < lo:
            return f"expected an integer >= {lo}, got {v}"
        if v > hi:
            return f"expected an integer <= {hi}, got {show_value(v)}"
        return None

    return test


def _bool(v: Any) -> str | None:
    if not isinstance(v, bool):
        return f"expected true or false, got {type_name(v)} {show_value(v)}"
    return None


def _number(v: Any) -> str | None:
    import math

    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return f"expected a number, got {type_name(v)} {show_value(v)}"
    if not math.isfinite(v):
        return f"expected a finite number, got {show_value(v)}"
    return None


def _str(v: Any) -> str | None:
    if not isinstance(v, str):
        return f"expected a string, got {type_name(v)} {show_value(v)}"
    if not v.strip():
        return "expected a non-empty string, got an empty one"
    return None


def _list_of(item: Kind, *, min_len: int = 1, max_len: int = MAX_COUNT) -> Callable[[Any], str | None]:
    def test(v: Any) -> str | None:
        if not isinstance(v, list):
            return f"expected a list of {item.name}, got {type_name(v)} {show_value(v)}"
        if len(v) < min_len:
            return f"expected at least {min_len} item{'s' * (min_len > 1)}, got an empty list"
        if len(v) > max_len:
            return f"expected at most {max_len} items, got {len(v)}"
        for i, x in enumerate(v):
            bad = item.check(x)
            if bad:
                return f"item [{i}]: {bad}"
        return None

    return test


POS_INT = Kind("int >= 1", _int_in(1, MAX_ID))
NONNEG_INT = Kind("int >= 0", _int_in(0, MAX_ID))
COUNT = Kind(f"int in 1..{MAX_COUNT}", _int_in(1, MAX_COUNT))
BOOL = Kind("bool", _bool)
STR = Kind("str", _str)
NUMBER = Kind("number", _number)
LAYER_ID = Kind("int >= 0", _int_in(0, MAX_COUNT))
LAYER_IDS = Kind("list[int]", _list_of(LAYER_ID))
LAYER_IDS_OR_EMPTY = Kind("list[int]", _list_of(LAYER_ID, min_len=0))
STR_LIST = Kind("list[str]", _list_of(STR, min_len=0))


class Fields:
    """A read-only view of one JSON object of the source config."""

    def __init__(
        self,
        data: Mapping[str, Any],
        path: str = "$",
        *,
        problems: list[Problem] | None = None,
        reads: set[str] | None = None,
    ):
        self._data = data
        self.path = path
        self.problems: list[Problem] = [] if problems is None else problems
        self.reads: set[str] = set() if reads is None else reads

    # -- bookkeeping -------------------------------------------------------------------------
    def at(self, key: str) -> str:
        """The JSON path of `key` in this object."""
        return child_path(self.path, key)

    def _note(self, key: str) -> None:
        self.reads.add(_read_name(self.path, key))

    def problem(self, path: str, message: str) -> None:
        self.problems.append(Problem(path, message))

    def done(self) -> None:
        """Raise every problem found so far, together."""
        if self.problems:
            raise ConfigError(list(self.problems))

    # -- access ------------------------------------------------------------------------------
    def has(self, key: str) -> bool:
        """Whether the key is present with a non-null value."""
        self._note(key)
        return self._data.get(key) is not None

    def present(self, key: str) -> bool:
        """Whether the key is present at all (null counts as present)."""
        self._note(key)
        return key in self._data

    def raw(self, key: str, default: Any = None) -> Any:
        """The value as found, unchecked (for pass-through fields)."""
        self._note(key)
        return self._data.get(key, default)

    def get(self, key: str, kind: Kind, default: Any = _MISSING, *, required: bool = False) -> Any:
        """A checked value. Missing or null gives `default`; a required field must be there.

        A wrong value is recorded as a problem and gives None (call `done` before using it).
        """
        self._note(key)
        value = self._data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                what = "is null" if value is None else "is missing"
                self.problem(self.at(key), f"required field {what}; expected {kind.name}")
                return None
            return None if default is _MISSING else default
        bad = kind.check(value)
        if bad:
            self.problem(self.at(key), bad)
            return None
        return value

    def obj(self, key: str, *, required: bool = False) -> "Fields | None":
        """A nested object as Fields sharing this view's problem list and read log."""
        self._note(key)
        value = self._data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                what = "is null" if value is None else "is missing"
                self.problem(self.at(key), f"required field {what}; expected an object")
            return None
        if not isinstance(value, dict):
            self.problem(self.at(key), f"expected an object, got {type_name(value)} {show_value(value)}")
            return None
        return Fields(value, self.at(key), problems=self.problems, reads=self.reads)

    def objects(self, key: str, *, required: bool = False) -> list["Fields"] | None:
        """A non-empty list of objects, each as Fields."""
        self._note(key)
        value = self._data.get(key, _MISSING)
        if value is _MISSING or value is None:
            if required:
                what = "is null" if value is None else "is missing"
                self.problem(self.at(key), f"required field {what}; expected a list of objects")
            return None
        if not isinstance(value, list) or not value:
            got = "an empty list" if value == [] else f"{type_name(value)} {show_value(value)}"
            self.problem(self.at(key), f"expected a non-empty list of objects, got {got}")
            return None
        out = []
        for i, item in enumerate(value):
            path = child_path(self.at(key), i)
            if not isinstance(item, dict):
                self.problem(path, f"expected an object, got {type_name(item)} {show_value(item)}")
                return None
            out.append(Fields(item, path, problems=self.problems, reads=self.reads))
        return out

    def keys(self) -> Iterator[str]:
        return iter(self._data)

    def copy_data(self) -> dict[str, Any]:
        """A deep copy for pass-through (the source is never mutated): a JSON round trip's result."""
        try:
            return _json_copy(self._data)
        except _NotPlain:
            return json.loads(json.dumps(self._data))


class _NotPlain(Exception):  # a value a JSON round trip would change (a tuple, a non-string key)
    pass


def _json_copy(value: Any) -> Any:
    kind = type(value)
    if kind is dict:
        out = {}
        for k, v in value.items():
            if type(k) is not str:
                raise _NotPlain
            out[k] = v if type(v) in _PLAIN else _json_copy(v)
        return out
    if kind is list:
        return [v if type(v) in _PLAIN else _json_copy(v) for v in value]
    if kind in _PLAIN:
        return value
    raise _NotPlain


_PLAIN = frozenset({str, int, float, bool, type(None)})


#: the decoder configs draft layers are built from, whose default keys `hf_config_keys()` holds
HF_CONFIG_MODEL_TYPES = (
    "llama",
    "qwen2",
    "qwen3",
    "qwen3_moe",
    "qwen3_next",
    "mistral",
    "mixtral",
    "phi3",
    "gemma2",
    "gemma3_text",
    "deepseek_v2",
    "deepseek_v3",
    "gpt_oss",
    "glm4_moe",
    "qwen2_moe",
    "minimax",
    "kimi_linear",
    "llama4_text",
    "qwen3_5_text",
    "qwen3_5_moe_text",
    "lfm2",
    "longcat_flash",
)
#: keys transformers 4 configs wrote that transformers 5 renamed or stopped writing by default
HF_CONFIG_KEYS_V4 = ("rope_theta", "rope_scaling", "torch_dtype", "quantization_config", "auto_map", "tokenizer_class")


@lru_cache(maxsize=1)
def hf_config_keys() -> frozenset[str]:
    """Keys a transformers config holds: the default to_dict() of PretrainedConfig and of each of
    `HF_CONFIG_MODEL_TYPES` in every transformers release with committed facts (`specreg.transformers`:
    a config written by any of them holds its keys), and `HF_CONFIG_KEYS_V4`. A key among them is never
    taken for a misspelt field."""
    from specreg import transformers

    keys = set(HF_CONFIG_KEYS_V4)
    for release in transformers.known():
        keys |= set(transformers.facts(release)["config_keys"])
    return frozenset(keys)


def __getattr__(name: str) -> object:
    if name == "HF_CONFIG_KEYS":  # the table's name before it became data
        return hf_config_keys()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def split_path(path: str) -> tuple[str, str | int]:
    """A JSON path's parent and last key ("$.a.b[0]" -> ("$.a.b", 0))."""
    if path.endswith("]"):
        parent, _, inner = path[:-1].rpartition("[")
        return parent, int(inner) if inner.isdigit() else json.loads(inner)
    parent, _, key = path.rpartition(".")
    return parent, key


def near_misses(config: Mapping[str, Any], reads: set[str]) -> list[tuple[str, str, str]]:
    """(JSON path, key, field) for each key of `config` that no reader read and that is a near miss of a
    field read in the same object but missing from it ("sample_from_anchr" for "sample_from_anchor").

    `reads` are `Fields.reads` paths. A key that is a field read anywhere else, or a transformers config
    key, is never reported; objects nothing read inside are not looked into."""
    import difflib

    full = {"$" + r if r.startswith("[") else "$." + r for r in reads}
    inside: set[str] = set()  # every path some read goes through
    items: dict[str, set[int]] = {}  # list path -> the indices some read goes through
    wanted: dict[str, set[str]] = {}  # object path -> the field names read in it
    for r in full:
        parent, key = split_path(r)
        if isinstance(key, str):
            wanted.setdefault(parent, set()).add(key)
        while parent and parent != "$":
            inside.add(parent)
            parent, key = split_path(parent)
            if isinstance(key, int):
                items.setdefault(parent, set()).add(key)
    read_names = {k for names in wanted.values() for k in names}
    found: list[tuple[str, str, str]] = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, list):  # only the items something was read inside (proposal_methods[0])
            for i in sorted(items.get(path, ())):
                if i < len(value):
                    walk(value[i], child_path(path, i))
            return
        if not isinstance(value, Mapping) or (path != "$" and path not in inside):
            return
        missing = sorted(wanted.get(path, set()) - set(value))
        for key, item in value.items():
            here = child_path(path, key) if isinstance(key, str) else None
            if here is None or here in full or here in inside:
                if here is not None:
                    walk(item, here)
                continue
            if key in read_names or key in hf_config_keys():
                continue
            match = difflib.get_close_matches(key, missing, n=1, cutoff=NEAR_MISS_CUTOFF)
            if match:
                found.append((here, key, match[0]))

    walk(config, "$")
    return found


#: docstring-table rows of the fields both families' normalize read alike (eagle_family, dflash_family),
#: composed into each algorithm's table (specreg.normalization.algorithms.shared_rows)
LAYER_CONFIG_ROW = (
    "| `transformer_layer_config` | object | required | the draft's decoder config: the base of draft_config |"
)
VOCAB_ROWS = (
    "| `draft_vocab_size` | int >= 1 | optional | a reduced draft vocabulary (weights then carry d2t/t2d) |",
    "| `target_hidden_size` | int >= 1 | optional | the verifier's hidden size when it differs from the draft's |",
)


def check_layer_ids(cfg: Fields, key: str, ids: list[int] | None, *, minimum: int = 0, why: str = "") -> None:
    """Layer ids must be unique, increasing and >= `minimum`; the first offence is recorded."""
    if not ids:
        return
    for i, v in enumerate(ids):
        if v < minimum:
            cfg.problem(f"{cfg.at(key)}[{i}]", f"layer id {v} is below {minimum}" + (f": {why}" if why else ""))
            return
    for i in range(1, len(ids)):
        if ids[i] <= ids[i - 1]:
            what = "repeats" if ids[i] == ids[i - 1] else "is smaller than the one before"
            cfg.problem(f"{cfg.at(key)}[{i}]", f"layer id {ids[i]} {what}; ids must be unique and increasing")
            return
