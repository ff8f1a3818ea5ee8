"""specreg/normalization/fields.py: a malformed field is a ConfigError (also a ValueError) naming its
JSON path, every problem of a config is reported together, and a key nothing read that is a near miss
of a field is an `unread-field` finding."""

import json
from pathlib import Path

import pytest

import specreg
from conftest import DROP
from specreg.normalization.fields import near_misses

TOKENS = "speculators_config__proposal_methods__0__speculative_tokens"


TOKENS_PATH = "$.speculators_config.proposal_methods[0].speculative_tokens"


CASES = [
    # (fixture, changes, expected path, words in the message)
    ("dflash", {"speculators_config": DROP}, "$.speculators_config", "required field is missing"),
    ("dflash", {"speculators_config": None}, "$.speculators_config", "required field is null"),
    ("dflash", {"speculators_config": [1]}, "$.speculators_config", "expected an object, got a list"),
    (
        "dflash",
        {"speculators_config__proposal_methods": []},
        "$.speculators_config.proposal_methods",
        "got an empty list",
    ),
    ("dflash", {"speculators_config__proposal_methods": DROP}, "$.speculators_config.proposal_methods", "missing"),
    (
        "dflash",
        {"speculators_config__proposal_methods": ["greedy"]},
        "$.speculators_config.proposal_methods[0]",
        "expected an object",
    ),
    ("dflash", {TOKENS: DROP}, TOKENS_PATH, "required field is missing"),
    ("dflash", {TOKENS: None}, TOKENS_PATH, "required field is null"),
    ("dflash", {TOKENS: "15"}, TOKENS_PATH, 'expected an integer, got a string "15"'),
    ("dflash", {TOKENS: 15.0}, TOKENS_PATH, "expected an integer, got a number"),
    ("dflash", {TOKENS: True}, TOKENS_PATH, "expected an integer, got a boolean"),
    ("dflash", {TOKENS: 0}, TOKENS_PATH, "expected an integer >= 1, got 0"),
    ("dflash", {TOKENS: -3}, TOKENS_PATH, "expected an integer >= 1, got -3"),
    ("dflash", {TOKENS: 10**30}, TOKENS_PATH, "expected an integer <= 4096"),
    ("dflash", {"speculators_model_type": 42}, "$.speculators_model_type", "expected a string"),
    ("dflash", {"speculators_model_type": None}, "$.speculators_model_type", "required field is null"),
    ("dflash", {"aux_hidden_state_layer_ids": DROP}, "$.aux_hidden_state_layer_ids", "required field is missing"),
    ("dflash", {"aux_hidden_state_layer_ids": None}, "$.aux_hidden_state_layer_ids", "required field is null"),
    ("dflash", {"aux_hidden_state_layer_ids": []}, "$.aux_hidden_state_layer_ids", "expected at least 1 item"),
    ("dflash", {"aux_hidden_state_layer_ids": [2, 10, 10, 26]}, "$.aux_hidden_state_layer_ids[2]", "repeats"),
    (
        "dflash",
        {"aux_hidden_state_layer_ids": [2, 18, 10]},
        "$.aux_hidden_state_layer_ids[2]",
        "smaller than the one before",
    ),
    ("dflash", {"aux_hidden_state_layer_ids": [-1, 10, 18]}, "$.aux_hidden_state_layer_ids", "integer >= 0"),
    (
        "dflash",
        {"aux_hidden_state_layer_ids": [2, "10"]},
        "$.aux_hidden_state_layer_ids",
        "item [1]: expected an integer",
    ),
    (
        "dflash",
        {"aux_hidden_state_layer_ids": [-1, 3]},
        "$.aux_hidden_state_layer_ids",
        "item [0]: expected an integer >= 0",
    ),
    ("dflash", {"aux_hidden_state_layer_ids": 2}, "$.aux_hidden_state_layer_ids", "expected a list of int"),
    ("dflash", {"mask_token_id": -1}, "$.mask_token_id", "expected an integer >= 0, got -1"),
    ("dflash", {"mask_token_id": 2**40}, "$.mask_token_id", "<= 2147483647"),
    ("dflash", {"block_size": 0}, "$.block_size", ">= 1"),
    ("dflash", {"sample_from_anchor": "false"}, "$.sample_from_anchor", "expected true or false"),
    ("dflash", {"sliding_window_non_causal": 0}, "$.sliding_window_non_causal", "expected true or false"),
    ("dflash", {"transformer_layer_config": DROP}, "$.transformer_layer_config", "required field is missing"),
    ("dflash", {"transformer_layer_config": []}, "$.transformer_layer_config", "expected an object"),
    (
        "dflash",
        {"transformer_layer_config__num_hidden_layers": DROP},
        "$.transformer_layer_config.num_hidden_layers",
        "missing",
    ),
    (
        "dflash",
        {"transformer_layer_config__layer_types": ["full_attention"]},
        "$.transformer_layer_config.layer_types",
        "has 1 entries but num_hidden_layers is 5",
    ),
    (
        "dflash",
        {"transformer_layer_config__layer_types": ["full_attention"] * 4 + ["linear_attention"]},
        "$.transformer_layer_config.layer_types[4]",
        "unknown layer type",
    ),
    (
        "dflash",
        {"transformer_layer_config__layer_types": ["sliding_attention"] * 5},
        "$.transformer_layer_config.sliding_window",
        "need a sliding_window",
    ),
    ("dspark_generated", {"markov_rank": -5}, "$.markov_rank", ">= 0"),
    ("dflash2", {"selector_top_k": "16"}, "$.selector_top_k", "expected an integer"),
    (
        "eagle3_generated",
        {"eagle_aux_hidden_state_layer_ids": [29, 16, 2]},
        "$.eagle_aux_hidden_state_layer_ids[1]",
        "smaller",
    ),
    ("eagle3_generated", {"norm_before_residual": "yes"}, "$.norm_before_residual", "expected true or false"),
    ("eagle3_generated", {"draft_vocab_size": 0}, "$.draft_vocab_size", ">= 1"),
    (
        "eagle3_generated",
        {"transformer_layer_config__model_type": ""},
        "$.transformer_layer_config.model_type",
        "non-empty string",
    ),
    ("peagle", {"mask_token_id": None}, "$.mask_token_id", "required field is null"),
    ("mtp", {TOKENS: "3"}, TOKENS_PATH, "expected an integer"),
]


@pytest.mark.parametrize("name, changes, path, words", CASES, ids=[f"{c[0]}:{c[2]}:{c[3][:24]}" for c in CASES])
def test_malformed_field_gives_config_error_naming_the_path(variant, name, changes, path, words):
    cfg = variant(name, **changes)
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(cfg, source="draft/config.json")
    exc = info.value
    assert isinstance(exc, ValueError)
    assert exc.path == path
    assert words in str(exc)
    assert str(exc).startswith(f"draft/config.json: {path}: ")


def test_every_problem_is_reported_together(variant):
    cfg = variant("dflash", mask_token_id=DROP, aux_hidden_state_layer_ids="2", block_size=-1)
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(cfg)
    paths = [p.path for p in info.value.problems]
    assert paths == ["$.aux_hidden_state_layer_ids", "$.mask_token_id", "$.block_size"]
    assert "(and 2 more problems)" in str(info.value)


# --------------------------------------------------------------------------------------------------
# No silent misreads (issue 40): a key nothing read that is a near miss of a missing field is reported
# as an `unread-field` info finding naming the field, and never on a real config.

DATA = Path(__file__).parent / "data"


EXAMPLES = Path(__file__).parent.parent / "examples"


VERIFIER = "org/verifier"


def dflash():
    return json.loads((DATA / "speculators" / "dflash.json").read_text())


def unread(spec):
    return [(f.path, f.severity, f.fix) for f in spec.findings if f.code == "unread-field"]


def test_a_misspelt_sample_from_anchor_is_reported_with_the_field_it_misses():
    config = dflash()
    config.pop("sample_from_anchor", None)
    config["sample_from_anchr"] = True
    spec = specreg.normalize(config, vllm="0.33")
    assert unread(spec) == [("$.sample_from_anchr", "info", "rename sample_from_anchr to sample_from_anchor")]
    found = next(f for f in spec.findings if f.code == "unread-field")
    assert "did you mean sample_from_anchor?" in found.message
    assert spec.draft_config["dflash_config"]["sample_from_anchor"] is False  # the default, as the finding says
    assert spec.servable


def test_a_misspelt_sliding_window_non_causal_is_reported():
    config = dflash()
    config.pop("sliding_window_non_causal", None)
    config["sliding_window_non_casual"] = False
    assert unread(specreg.normalize(config, vllm="0.33")) == [
        ("$.sliding_window_non_casual", "info", "rename sliding_window_non_casual to sliding_window_non_causal")
    ]


def test_a_misspelt_key_in_the_layer_config_is_reported_at_its_path():
    config = dflash()
    layer = config["transformer_layer_config"]
    layer["layer_type"] = layer.pop("layer_types", ["full_attention"] * layer["num_hidden_layers"])
    assert [p for p, _, _ in unread(specreg.normalize(config, vllm="0.33"))] == [
        "$.transformer_layer_config.layer_type"
    ]


def test_a_misspelt_envelope_key_is_reported():
    config = dflash()
    spec_cfg = config["speculators_config"]
    spec_cfg["verifer"] = spec_cfg.pop("verifier")
    spec = specreg.normalize(config, vllm="0.33")
    assert [p for p, _, _ in unread(spec)] == ["$.speculators_config.verifer"]


def test_a_misspelt_key_in_a_list_item_is_reported_at_its_index():
    config = dflash()
    methods = config["speculators_config"]["proposal_methods"]
    methods.append({"proposal_typ": "sample", "speculative_tokens": methods[0]["speculative_tokens"]})
    spec = specreg.normalize(config, vllm="0.33")
    assert [p for p, _, _ in unread(spec)] == ["$.speculators_config.proposal_methods[1].proposal_typ"]


def test_a_long_list_is_not_walked_item_by_item():
    config = {"ids": [{"field_onez": 1}] * 3, "other": 1}
    assert near_misses(config, {"ids", "ids[0].field_one"}) == [("$.ids[0].field_onez", "field_onez", "field_one")]


@pytest.mark.parametrize(
    "fixture, field, typo",
    [
        ("eagle3_generated.json", "norm_before_residual", "norm_before_residul"),
        ("dspark_generated.json", "enable_confidence_head", "enable_confidense_head"),
        ("dflash2.json", "selector_top_k", "selector_topk"),
        ("peagle.json", "norm_before_residual", "norm_befor_residual"),
    ],
)
def test_each_family_reports_a_misspelt_optional_field(fixture, field, typo):
    config = json.loads((DATA / "speculators" / fixture).read_text())
    config[typo] = config.pop(field, True)
    assert unread(specreg.normalize(config, vllm="0.33")) == [(f"$.{typo}", "info", f"rename {typo} to {field}")]


def test_a_key_beside_the_field_it_resembles_is_not_a_misspelling():
    config = dflash()
    config["sample_from_anchor"] = False
    config["sample_from_anchr"] = True
    assert unread(specreg.normalize(config, vllm="0.33")) == []


def test_a_transformers_config_key_is_never_taken_for_a_misspelling():
    config = dflash()
    layer = config["transformer_layer_config"]
    layer.pop("layer_types", None)
    layer["mlp_layer_types"] = ["dense"] * layer["num_hidden_layers"]  # a near miss of layer_types, and HF's own
    assert unread(specreg.normalize(config, vllm="0.33")) == []


def test_a_field_read_in_another_object_is_not_a_misspelling_here():
    config = {"a": {"field_ones": 1}, "b": {"field_ones": 2}}
    reads = {"a.field_one", "b", "b.field_ones", "a"}
    assert near_misses(config, reads) == []
    assert near_misses({"a": {"field_onez": 1}}, {"a", "a.field_one"}) == [
        ("$.a.field_onez", "field_onez", "field_one")
    ]


def test_an_object_nothing_read_inside_is_not_looked_into():
    assert near_misses({"extra": {"field_onez": 1}}, {"field_one"}) == []


def test_a_native_misspelt_key_is_reported_at_the_native_path():
    config = json.loads((DATA / "native" / "zlab_dflash_nested_schema.json").read_text())
    config["dflash_config"]["casual"] = True
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    found = [f for f in spec.findings if f.code == "unread-field"]
    assert [(f.path, f.severity) for f in found] == [("$.dflash_config.casual", "info")]
    assert "did you mean causal?" in found[0].message
    assert "unknown-trained-key" not in {f.code for f in spec.findings}


def test_a_native_misspelt_layer_key_is_reported_at_the_native_path():
    config = json.loads((DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json").read_text())
    config.pop("sliding_window", None)
    config["sliding_windw"] = 4096
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert "$.sliding_windw" in [f.path for f in spec.findings if f.code == "unread-field"]


def test_show_reports_it_and_exits_0(tmp_path):
    from conftest import run_in_process

    config = dflash()
    config.pop("sample_from_anchor", None)
    config["sample_from_anchr"] = True
    (tmp_path / "config.json").write_text(json.dumps(config))
    out = run_in_process("show", str(tmp_path), "--vllm", "0.33", "--json")
    assert out.returncode == 0, out.stderr
    found = [f for f in json.loads(out.stdout)["findings"] if f["code"] == "unread-field"]
    assert [(f["path"], f["severity"], f["fix"]) for f in found] == [
        ("$.sample_from_anchr", "info", "rename sample_from_anchr to sample_from_anchor")
    ]


def real_configs():
    files = sorted(DATA.rglob("*.json")) + sorted(EXAMPLES.glob("*/config.json"))
    return [str(p.relative_to(DATA.parent.parent)) for p in files]


@pytest.mark.parametrize("name", real_configs())
def test_no_real_config_or_fixture_has_an_unread_field(name):
    config = json.loads((DATA.parent.parent / name).read_text())
    try:
        spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    except (specreg.ConfigError, specreg.SpecregError):
        return  # refused with its reason (tests/test_native_structure.py holds which)
    assert unread(spec) == []


def test_copy_data_is_what_a_json_round_trip_gives_plain_or_not():
    import json as _json

    from specreg.normalization.fields import Fields

    plain = {"a": [1, 2.5, {"b": None, "c": [True, "x"]}], "d": {}}
    copied = Fields(plain).copy_data()
    assert copied == _json.loads(_json.dumps(plain)) and copied["a"][2] is not plain["a"][2]
    odd = {"t": (1, 2), "n": {1: "int key"}}  # not plain JSON: the round trip decides
    assert Fields(odd).copy_data() == {"t": [1, 2], "n": {"1": "int key"}}
