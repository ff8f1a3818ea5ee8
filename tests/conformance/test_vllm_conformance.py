"""specreg's output against vLLM's own speculators mapping, per vLLM version (pytest -m conformance)."""

import json
import re
from pathlib import Path

import pytest
from packaging.version import Version

import specreg
from specreg import facts
from specreg.normalization import algorithms
from specreg.normalization.capabilities import RULES

from conftest import DATA, fixture_config

pytestmark = pytest.mark.conformance

VERSIONS = [facts.wheel(r) for r in facts.tested_by("vllm_conformance")]
FIXTURES = sorted(p.stem for p in (DATA / "speculators").glob("*.json"))
TABLE = Path(__file__).resolve().parents[2] / "docs" / "conformance.md"
ABSENT = "(absent)"


@pytest.fixture(scope="session")
def mappings():
    from conformance.vllm_mapping import mapping

    return mapping


def _flat(d, prefix):
    out = {}
    for k, v in d.items():
        key = f"{prefix}.{k}"
        if isinstance(v, dict) and v:
            out.update(_flat(v, key))
        else:
            out[key] = v
    return out


def differences(mapping, name):
    """(field, vLLM's value, specreg's value) for one fixture, or "refused" when vLLM refuses it."""
    cfg = fixture_config(name)
    spec = specreg.normalize(cfg, vllm=mapping.version)
    try:
        theirs = {**_flat(mapping.draft_config(cfg), "draft_config"),
                  **_flat(mapping.speculative_config(cfg), "speculative_config")}
    except ValueError:
        return "refused", spec
    ours = {**_flat(spec.draft_config_dict(), "draft_config"),
            **_flat(spec.speculative_config_dict(), "speculative_config")}
    diffs = set()
    for key in set(theirs) | set(ours):
        a, b = theirs.get(key, ABSENT), ours.get(key, ABSENT)
        if a != b:
            diffs.add((key, a if a == ABSENT else json.dumps(a), b if b == ABSENT else json.dumps(b)))
    return diffs, spec


def table_rows():
    rows = []
    for line in TABLE.read_text().splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 6 or not re.match(r"^\d", cells[0]):
            continue
        lo, _, hi = cells[0].partition("-")
        rows.append((Version(lo), Version(hi or lo), cells[1], cells[2], cells[3], cells[4]))
    return rows


def _canon(value):
    return value if value == ABSENT else json.dumps(json.loads(value))


def test_every_difference_is_listed_and_every_row_still_occurs(mappings):
    rows = table_rows()
    assert rows, "the divergence table has no rows"
    seen = set()
    unlisted = []
    for version in VERSIONS:
        mapping = mappings(version)
        for name in FIXTURES:
            diffs, spec = differences(mapping, name)
            if diffs == "refused":
                assert not spec.servable, f"vLLM {version} refuses {name}, specreg calls it servable"
                assert {f.code for f in spec.errors} & {"unservable-algorithm", "vllm-unsupported-algorithm"}
                continue
            assert spec.method is not None and "vllm-unsupported-algorithm" not in {f.code for f in spec.errors}, (
                f"vLLM {version} maps {name}, specreg says it cannot"
            )
            for field, theirs, ours in diffs:
                match = [
                    i for i, (lo, hi, fx, fld, v, s) in enumerate(rows)
                    if lo <= Version(version) <= hi and fx == name and fld == field
                    and _canon(v) == _canon(theirs) and _canon(s) == _canon(ours)
                ]
                if match:
                    seen.add((match[0], version))
                else:
                    unlisted.append(f"{version} {name} {field}: vLLM {theirs}, specreg {ours}")
    assert not unlisted, "differences missing from docs/conformance.md:\n" + "\n".join(unlisted)
    stale = [
        f"row {i + 1}: {rows[i][2]} {rows[i][3]} does not occur in vLLM {v}"
        for i, (lo, hi, *_rest) in enumerate(rows)
        for v in VERSIONS
        if lo <= Version(v) <= hi and (i, v) not in seen
    ]
    assert not stale, "\n".join(stale)


# -- the capability table, version by version -------------------------------------------------

ALGORITHM_FIXTURE = {"eagle3": "eagle3_generated", "peagle": "peagle", "dflash": "dflash",
                     "dflash2": "dflash2", "dspark": "dspark_generated"}


def _before(version: Version) -> str:
    """The release just before `version` among those the capability checks download."""
    return {
        "0.10.1": "0.10.0", "0.18": "0.17.1", "0.20": "0.19.1", "0.22": "0.21.0", "0.23": "0.22.0", "0.24": "0.23.0",
        "0.25": "0.24.0", "0.26": "0.25.0", "0.27": "0.26.0", "0.28": "0.27.0", "0.29": "0.28.0",
        "0.31": "0.30.0",
    }[str(version)]


def _release(version: Version) -> str:
    return {"0.10.1": "0.10.1", "0.18": "0.18.0", "0.20": "0.20.0", "0.22": "0.22.0", "0.23": "0.23.0", "0.24": "0.24.0", "0.25": "0.25.0",
            "0.26": "0.26.0", "0.27": "0.27.0", "0.28": "0.28.0", "0.29": "0.29.0",
            "0.31": "0.31.0"}[str(version)]


@pytest.mark.parametrize("name", sorted(ALGORITHM_FIXTURE))
def test_an_algorithm_is_registered_from_its_first_version_and_not_before(mappings, name):
    algo = algorithms.get(name)
    assert name in mappings(_release(algo.vllm_min)).supported
    assert name not in mappings(_before(algo.vllm_min)).supported


MAPPING_PROBES = {
    # rule: (fixture, changes, field, predicate on vLLM's draft_config meaning "has the rule")
    "dflash_target_layer_ids_minus_one": ("dflash", {}, lambda d: d["dflash_config"]["target_layer_ids"][0] == 1),
    "dflash_causal_from_sliding_window_non_causal": ("dflash", {}, lambda d: "causal" in d["dflash_config"]),
    "sample_from_anchor_mapped": ("dflash", {}, lambda d: "sample_from_anchor" in d["dflash_config"]),
    "eagle3_fc_norm_norm_output": ("eagle3_generated", {}, lambda d: "fc_norm" in d),
    "eagle_arch_by_model_type": ("peagle", {}, lambda d: d["architectures"] == ["PeagleQwen3ForCausalLM"]),
}


@pytest.mark.parametrize("rule", sorted(MAPPING_PROBES))
def test_a_mapping_rule_starts_in_its_version(mappings, rule):
    fixture, changes, has_rule = MAPPING_PROBES[rule]
    cfg = fixture_config(fixture)
    first = mappings(_release(RULES[rule]))
    before = mappings(_before(RULES[rule]))
    assert has_rule(first.draft_config(cfg))
    assert not has_rule(before.draft_config(cfg))


@pytest.mark.parametrize("version", ["0.22.0", "0.24.0", "0.26.0", "0.29.0", "0.33.0"])
def test_plain_path_class_names_are_the_same_vllm_class(version):
    """materialize renames Peagle* drafts (vLLM's EAGLEConfig would prefix "Eagle3" to them);
    the name written must map to the same (module, class) in that version's model registry."""
    import zipfile

    from conformance.vllm_mapping import wheel
    from specreg.vllm.vllm_config import PLAIN_PATH_ARCHITECTURES

    with zipfile.ZipFile(wheel(version)) as z:
        text = z.read("vllm/model_executor/models/registry.py").decode()
    entries = dict(re.findall(r'"(\w+)":\s*(\("\w+",\s*"\w+"\))', text))
    checked = 0
    for old, new in PLAIN_PATH_ARCHITECTURES.items():
        if old in entries:
            assert entries[new] == entries[old], f"vLLM {version}: {old} -> {entries[old]}, {new} -> {entries.get(new)}"
            checked += 1
    assert checked >= 1


# Rules that live outside the mapping (the proposer, the model, the config loader): each is
# recognised by a line of vLLM's own source, present from its first version and absent before.
SOURCE_PROBES = {
    "dflash_v2_runner_rejects_sample_from_anchor": (
        "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py",
        r"sample_from_anchor=True is not supported for DFlash",
    ),
    "aux_capture_through_last_layer": (
        "vllm/model_executor/models/llama.py",
        r"_maybe_add_hidden_state\(\s*aux_hidden_states, idx \+ 1",
    ),
    "v1_runner_refuses_dflash_candidate_head": ("vllm/config/vllm.py", r'"DFlash candidate-head drafts"'),
    "v1_runner_refuses_dspark": ("vllm/config/vllm.py", r'"dspark speculative decoding"'),
    "user_speculative_config_merged": (
        "vllm/transformers_utils/config.py",
        r"speculative_config\.update\(vllm_speculative_config\)",
    ),
}


def _source(version: str, path: str) -> str:
    import zipfile

    from conformance.vllm_mapping import wheel

    with zipfile.ZipFile(wheel(version)) as z:
        return z.read(path).decode() if path in z.namelist() else ""


# Mask rules: the served masks of a probe config, computed by the wheel's own code
# (conformance/vllm_serving.py), differ between the first version and the one before.
_FULL3 = {"num_hidden_layers": 3, "layer_types": ["full_attention"] * 3}
MASK_PROBES = {
    # rule: (draft config as vLLM loads it, dspark?, served masks that mean "has the rule")
    "dflash_causal_layers": ({**_FULL3, "dflash_config": {"causal": True}}, False, [True] * 3),
    "dflash_per_layer_causal": ({"num_hidden_layers": 3, "sliding_window": 8,
                                 "layer_types": ["sliding_attention", "sliding_attention", "full_attention"]},
                                False, [True, True, False]),
    "dflash_is_causal_first": ({**_FULL3, "is_causal": False, "dflash_config": {"causal": True}}, False, [False] * 3),
    "dspark_per_layer_causal": ({"num_hidden_layers": 2, "sliding_window": 8,
                                 "layer_types": ["sliding_attention"] * 2}, True, [True, True]),
}


@pytest.mark.parametrize("rule", sorted(MASK_PROBES))
def test_a_mask_rule_starts_in_its_version(rule):
    from conformance.vllm_serving import serving

    draft, dspark, with_rule = MASK_PROBES[rule]
    assert serving(_release(RULES[rule])).layer_causal(draft, dspark=dspark) == with_rule
    assert serving(_before(RULES[rule])).layer_causal(draft, dspark=dspark) != with_rule


def test_every_rule_is_probed():
    assert set(RULES) == set(MAPPING_PROBES) | set(SOURCE_PROBES) | set(MASK_PROBES)


@pytest.mark.parametrize("rule", sorted(SOURCE_PROBES))
def test_a_source_rule_starts_in_its_version(rule):
    path, pattern = SOURCE_PROBES[rule]
    assert re.search(pattern, _source(_release(RULES[rule]), path)), f"{rule}: not in vLLM {RULES[rule]} {path}"
    assert not re.search(pattern, _source(_before(RULES[rule]), path)), f"{rule}: already in {_before(RULES[rule])}"


def test_the_aux_capture_architecture_table_is_vllms():
    from conformance.vllm_mapping import aux_capture_architectures
    from specreg.normalization.capabilities import AUX_CAPTURE_ARCHITECTURES, AUX_CAPTURE_VERSION

    assert AUX_CAPTURE_ARCHITECTURES == aux_capture_architectures(str(AUX_CAPTURE_VERSION))
