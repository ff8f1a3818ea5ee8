"""specreg/normalization/fields.py: a malformed field is a ConfigError (also a ValueError) naming its
JSON path, and every problem of a config is reported together."""

import pytest

import specreg
from conftest import DROP

TOKENS = "speculators_config__proposal_methods__0__speculative_tokens"


TOKENS_PATH = "$.speculators_config.proposal_methods[0].speculative_tokens"


CASES = [
    # (fixture, changes, expected path, words in the message)
    ("dflash", {"speculators_config": DROP}, "$.speculators_config", "required field is missing"),
    ("dflash", {"speculators_config": None}, "$.speculators_config", "required field is null"),
    ("dflash", {"speculators_config": [1]}, "$.speculators_config", "expected an object, got a list"),
    ("dflash", {"speculators_config__proposal_methods": []}, "$.speculators_config.proposal_methods", "got an empty list"),
    ("dflash", {"speculators_config__proposal_methods": DROP}, "$.speculators_config.proposal_methods", "missing"),
    ("dflash", {"speculators_config__proposal_methods": ["greedy"]}, "$.speculators_config.proposal_methods[0]", "expected an object"),
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
    ("dflash", {"aux_hidden_state_layer_ids": [2, 18, 10]}, "$.aux_hidden_state_layer_ids[2]", "smaller than the one before"),
    ("dflash", {"aux_hidden_state_layer_ids": [0, 10, 18]}, "$.aux_hidden_state_layer_ids[0]", "below 1"),
    ("dflash", {"aux_hidden_state_layer_ids": [2, "10"]}, "$.aux_hidden_state_layer_ids", "item [1]: expected an integer"),
    ("dflash", {"aux_hidden_state_layer_ids": [-1, 3]}, "$.aux_hidden_state_layer_ids", "item [0]: expected an integer >= 0"),
    ("dflash", {"aux_hidden_state_layer_ids": 2}, "$.aux_hidden_state_layer_ids", "expected a list of int"),
    ("dflash", {"mask_token_id": -1}, "$.mask_token_id", "expected an integer >= 0, got -1"),
    ("dflash", {"mask_token_id": 2**40}, "$.mask_token_id", "<= 2147483647"),
    ("dflash", {"block_size": 0}, "$.block_size", ">= 1"),
    ("dflash", {"sample_from_anchor": "false"}, "$.sample_from_anchor", "expected true or false"),
    ("dflash", {"sliding_window_non_causal": 0}, "$.sliding_window_non_causal", "expected true or false"),
    ("dflash", {"transformer_layer_config": DROP}, "$.transformer_layer_config", "required field is missing"),
    ("dflash", {"transformer_layer_config": []}, "$.transformer_layer_config", "expected an object"),
    ("dflash", {"transformer_layer_config__num_hidden_layers": DROP}, "$.transformer_layer_config.num_hidden_layers", "missing"),
    ("dflash", {"transformer_layer_config__layer_types": ["full_attention"]}, "$.transformer_layer_config.layer_types", "has 1 entries but num_hidden_layers is 5"),
    ("dflash", {"transformer_layer_config__layer_types": ["full_attention"] * 4 + ["linear_attention"]}, "$.transformer_layer_config.layer_types[4]", "unknown layer type"),
    ("dflash", {"transformer_layer_config__layer_types": ["sliding_attention"] * 5}, "$.transformer_layer_config.sliding_window", "need a sliding_window"),
    ("dspark_generated", {"markov_rank": -5}, "$.markov_rank", ">= 0"),
    ("dflash2", {"selector_top_k": "16"}, "$.selector_top_k", "expected an integer"),
    ("eagle3_generated", {"eagle_aux_hidden_state_layer_ids": [29, 16, 2]}, "$.eagle_aux_hidden_state_layer_ids[1]", "smaller"),
    ("eagle3_generated", {"norm_before_residual": "yes"}, "$.norm_before_residual", "expected true or false"),
    ("eagle3_generated", {"draft_vocab_size": 0}, "$.draft_vocab_size", ">= 1"),
    ("eagle3_generated", {"transformer_layer_config__model_type": ""}, "$.transformer_layer_config.model_type", "non-empty string"),
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
