"""Fuzzing normalize: for any mutation of any fixture (speculators and native formats), the result
is a Speculator or a ConfigError naming a JSON path, never another exception.

The default run tries SPECREG_FUZZ_FAST examples (300); the long profile is one command away:

    .venv/bin/python -m pytest -q -m fuzz_long          # 100,000 examples (SPECREG_FUZZ_LONG)
"""

import copy
import json
import os
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import specreg
from specreg import facts
from conftest import DATA, fixture_config

SPECULATORS = [
    "dflash",
    "dflash2",
    "dspark_generated",
    "eagle3_generated",
    "eagle3_converted",
    "peagle",
    "mtp",
    "xpress",
    "eagle_legacy_v040",
]
NATIVE = sorted(p.name for p in (DATA / "native").glob("*.json"))

ODD_TEXT = st.text(alphabet=st.characters(codec=None, exclude_categories=()), max_size=12) | st.sampled_from(
    ["", "\u0000", "\ud800", "\u202e", "💥" * 40, "a" * 2_000, "null", "NaN", "1e999", "-0"]
)
NUMBERS = (
    st.integers(min_value=-(2**200), max_value=2**200)
    | st.floats(allow_nan=False)
    | st.sampled_from([0, -1, 1, 2**31, 2**63, -(2**63), 10**100, 1e308, -1e308, 0.5])
)
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | NUMBERS | ODD_TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(ODD_TEXT, inner, max_size=4),
    max_leaves=12,
)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, prefix + (i,))


def _base(name):
    if name.endswith(".json"):
        return json.loads((DATA / "native" / name).read_text())
    return fixture_config(name)


@st.composite
def mutated(draw):
    cfg = _base(draw(st.sampled_from(SPECULATORS + NATIVE)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(cfg) if p]
        if not paths:
            break
        path = draw(st.sampled_from(paths))
        node = cfg
        for p in path[:-1]:
            node = node[p]
        key, old = path[-1], node[path[-1]]
        action = draw(st.sampled_from(["drop", "replace", "nest", "empty", "duplicate", "deep", "retype"]))
        if action == "drop":
            del node[key]
        elif action == "replace":
            node[key] = draw(JSON_VALUES)
        elif action == "nest":
            node[key] = {"x": old}
        elif action == "empty":
            node[key] = type(old)() if isinstance(old, (list, dict, str)) else None
        elif action == "duplicate":  # the value again, under another key or twice in its list
            # a copy, as a second occurrence in a JSON file is: with the same object twice, later
            # mutations would change both places, a graph no parsed file can be
            twice = copy.deepcopy(old)
            if isinstance(node, list):
                node.insert(key, twice)
            else:
                node[draw(ODD_TEXT)] = twice
        elif action == "deep":
            for _ in range(draw(st.integers(2, 200))):
                old = [old] if draw(st.booleans()) else {"d": old}
            node[key] = old
        else:  # retype a number, string or bool as another JSON type
            node[key] = str(old) if not isinstance(old, str) else ([old] if draw(st.booleans()) else 1)
    return cfg


def check(cfg, version, verifier):
    try:
        spec = specreg.normalize(cfg, vllm=version, verifier=verifier)
    except specreg.ConfigError as exc:
        assert exc.path.startswith("$") or exc.path in ("source", "verifier")
        assert exc.problems
    else:
        json.dumps(spec.to_dict())  # the result is always plain JSON


VERSIONS = st.sampled_from(facts.known())  # every release specreg models
VERIFIERS = st.sampled_from([None, "Qwen/Qwen3-8B"])


@settings(
    max_examples=int(os.environ.get("SPECREG_FUZZ_FAST", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutated(), VERSIONS, VERIFIERS)
def test_any_mutation_returns_or_raises_config_error_with_a_path(cfg, version, verifier):
    check(cfg, version, verifier)


LONG = int(os.environ.get("SPECREG_FUZZ_LONG", "100000"))
CHUNK = 5000  # hypothesis keeps a tree of every choice it made per run: fresh runs keep memory flat
_long = {"examples": 0, "started": None}


@pytest.mark.fuzz_long
@pytest.mark.parametrize("chunk", range((LONG + CHUNK - 1) // CHUNK))
def test_long_fuzz_profile(chunk):
    from hypothesis import seed

    _long["started"] = _long["started"] or time.perf_counter()
    size = min(CHUNK, LONG - chunk * CHUNK)

    @seed(chunk)
    @settings(
        max_examples=size,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(mutated(), VERSIONS, VERIFIERS)
    def run(cfg, version, verifier):
        _long["examples"] += 1
        check(cfg, version, verifier)

    run()
    print(f"\nlong fuzz profile: {_long['examples']} examples in {time.perf_counter() - _long['started']:.0f} s")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300) | ODD_TEXT.map(lambda t: t.encode("utf-8", "surrogatepass")))
def test_any_bytes_as_a_config_file_is_a_config_error_or_a_speculator(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("f") / "config.json"
    path.write_bytes(data)
    try:
        specreg.load(path)
    except specreg.ConfigError as exc:
        assert exc.path.startswith("$")
