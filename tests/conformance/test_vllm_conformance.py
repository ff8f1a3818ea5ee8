"""specreg's output against vLLM's own speculators mapping, per vLLM version (pytest -m conformance)."""

import json
import os
import re
from pathlib import Path

import pytest
from packaging.version import Version

import specreg
from specreg import facts
from specreg.normalization import algorithms
from specreg.normalization.capabilities import RULES

from conftest import DATA, fixture_config
from conformance.rule_facts import HOLDS, MAPPING_PROBES, MASK_PROBES, SOURCE_PROBES, holds

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
        theirs = {
            **_flat(mapping.draft_config(cfg), "draft_config"),
            **_flat(mapping.speculative_config(cfg), "speculative_config"),
        }
    except ValueError:
        return "refused", spec
    ours = {
        **_flat(spec.draft_config_dict(), "draft_config"),
        **_flat(spec.speculative_config_dict(), "speculative_config"),
    }
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
                assert {f.code for f in spec.errors} & {
                    "unservable-algorithm",
                    "vllm-unsupported-algorithm",
                    "vllm-removed-algorithm",
                }
                continue
            assert spec.method is not None and "vllm-unsupported-algorithm" not in {f.code for f in spec.errors}, (
                f"vLLM {version} maps {name}, specreg says it cannot"
            )
            for field, theirs, ours in diffs:
                match = [
                    i
                    for i, (lo, hi, fx, fld, v, s) in enumerate(rows)
                    if lo <= Version(version) <= hi
                    and fx == name
                    and fld == field
                    and _canon(v) == _canon(theirs)
                    and _canon(s) == _canon(ours)
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

ALGORITHM_FIXTURE = {
    "eagle3": "eagle3_generated",
    "peagle": "peagle",
    "dflash": "dflash",
    "dflash2": "dflash2",
    "dspark": "dspark_generated",
}


#: a rule older than every tracked release (its version typed in the top rules.json): that wheel and
#: the one before it, where the rule is checked to start
TYPED_EDGES = {"0.10.1": ("0.10.1", "0.10.0"), "0.18": ("0.18.0", "0.17.1")}


def boundaries(rule: str) -> list[tuple[str, bool]]:
    """(wheel, whether `rule` holds there) at each edge of its runs in the committed facts: the first
    release of each run and the one before it, the last release of a run that stops and the one after."""
    typed = facts.metadata()[rule].get("since")
    if typed is not None:
        first, before = TYPED_EDGES[typed]
        return [(first, True), (before, False)]
    known = facts.known()
    edges = []
    for first, last in facts.rule_spans(rule):
        i = known.index(first)
        edges += [(facts.wheel(first), True)] + ([(facts.wheel(known[i - 1]), False)] if i else [])
        if last is not None:
            j = known.index(last)
            edges += [(facts.wheel(last), True), (facts.wheel(known[j + 1]), False)]
    return edges


def starts_and_stops_where_the_facts_say(rule: str) -> None:
    for wheel, expected in boundaries(rule):
        assert holds(rule, wheel) == expected, f"{rule}: {'not ' if expected else ''}in vLLM {wheel}"


@pytest.mark.parametrize("name", sorted(ALGORITHM_FIXTURE))
def test_an_algorithm_is_served_where_the_facts_say_and_not_beside(name):
    assert algorithms.get(name).rule == f"algorithm_{name}"
    starts_and_stops_where_the_facts_say(f"algorithm_{name}")


@pytest.mark.parametrize("rule", sorted(MAPPING_PROBES))
def test_a_mapping_rule_starts_in_its_version(rule):
    starts_and_stops_where_the_facts_say(rule)


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


# Mask rules: the served masks of a probe config, computed by the wheel's own code
# (conformance/vllm_serving.py), differ between the first version and the one before.
@pytest.mark.parametrize("rule", sorted(MASK_PROBES))
def test_a_mask_rule_starts_in_its_version(rule):
    starts_and_stops_where_the_facts_say(rule)


def test_every_rule_is_probed():
    """Each rule capabilities.py reads has its extractor (mrope_refused_with_extra_slots: read with ast
    in test_field_coverage.py)."""
    assert set(RULES) == set(MAPPING_PROBES) | set(SOURCE_PROBES) | set(MASK_PROBES) | {
        "mrope_refused_with_extra_slots",
        "eagle_arch_by_model_type",
    }
    assert set(RULES) <= set(HOLDS)


# Rules that live outside the mapping (the proposer, the model, the config loader): each is
# recognised by a line of vLLM's own source, present from its first version and absent before.
@pytest.mark.parametrize("rule", sorted(SOURCE_PROBES))
def test_a_source_rule_starts_in_its_version(rule):
    starts_and_stops_where_the_facts_say(rule)


def test_the_aux_capture_table_is_every_known_wheels():
    """specreg/vllm/facts/aux_capture.json is read from every known release's wheel (SPECREG_REGENERATE=1
    writes it; about a minute: each wheel's model files are parsed with ast)."""
    from conformance.rule_facts import older_releases
    from conformance.vllm_mapping import aux_capture_table, write_aux_table

    got = aux_capture_table([*older_releases(), *facts.known()])  # from the speculators format's first release
    path = facts.FOLDER / "aux_capture.json"
    if os.environ.get("SPECREG_REGENERATE") == "1":
        write_aux_table(path, got)
    assert {k: v for k, v in json.loads(path.read_text()).items() if k != "_about"} == got


def _rope_aliases(version: str) -> dict[str, tuple[str, ...]]:
    """The `names = [...]` lists of the wheel's patch_rope_parameters (vllm/transformers_utils/config.py),
    by the name each folds into (the first of the list), read with ast."""
    import ast
    import zipfile

    from conformance.vllm_mapping import wheel

    with zipfile.ZipFile(wheel(version)) as z:
        tree = ast.parse(z.read("vllm/transformers_utils/config.py").decode())
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "patch_rope_parameters")
    lists = [
        tuple(e.value for e in node.value.elts)
        for node in ast.walk(fn)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List) and ast.unparse(node.targets[0]) == "names"
    ]
    return {names[0]: names for names in lists}


@pytest.mark.parametrize("release", list(facts.known()))
def test_the_rope_names_compared_are_each_wheels_patch_rope_parameters(release):
    """specreg.vllm.agreement compares the RoPE names vLLM folds into rope_parameters: the lists of every
    known wheel's patch_rope_parameters, not a list of its own."""
    from specreg.vllm.agreement import ROPE_ALIASES

    assert _rope_aliases(facts.wheel(release)) == ROPE_ALIASES


def test_layer_zero_is_captured_where_the_class_records_the_state_before_its_first_layer():
    """The issue's reading of 0.34: qwen2.py and llama.py call `_maybe_add_hidden_state(...,
    self.start_layer, ...)` before the layer loop, so Qwen2/Qwen3/Llama verifiers give aux id 0; the
    Transformers backend records layer `i - 1`'s output (transformers/base.py) and DeepSeek-V4 captures
    `idx + 1` after each layer (models/deepseek_v4): neither gives it."""
    from conformance.vllm_mapping import layer_zero_capture_architectures

    newest = facts.wheel(facts.known()[-1])
    zero = layer_zero_capture_architectures(newest)
    assert {"Qwen2ForCausalLM", "Qwen3ForCausalLM", "LlamaForCausalLM", "Qwen3MoeForCausalLM"} <= zero
    assert not {"TransformersForCausalLM", "DeepseekV4ForCausalLM"} & zero
