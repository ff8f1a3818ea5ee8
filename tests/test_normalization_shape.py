"""specreg/normalization/shape.py: draft shapes vLLM cannot build are error findings before any GPU time."""

import pytest

import specreg


@pytest.mark.parametrize(
    ("name", "changes", "path", "words"),
    [
        (
            "eagle3_generated",
            {"hidden_size": 4100},
            "$.transformer_layer_config.hidden_size",
            "hidden_size 4100 is not a multiple of num_attention_heads 32: transformers' LlamaConfig",
        ),
        (
            "dflash",
            {"hidden_size": 4100, "head_dim": None},
            "$.transformer_layer_config.hidden_size",
            "there is no head_dim",
        ),
        (
            "dflash",
            {"num_key_value_heads": 7},
            "$.transformer_layer_config.num_key_value_heads",
            "num_attention_heads 32 is not a multiple of num_key_value_heads 7",
        ),
        (
            "peagle",
            {"num_attention_heads": 0},
            "$.transformer_layer_config.num_attention_heads",
            "must be a positive integer, got 0",
        ),
        (
            "dspark_generated",
            {"num_key_value_heads": 64},
            "$.transformer_layer_config.num_key_value_heads",
            "not a multiple of num_key_value_heads 64",
        ),
    ],
)
def test_a_draft_shape_vllm_cannot_build_is_an_error_finding(variant, name, changes, path, words):
    cfg = variant(name)
    for key, value in changes.items():
        if value is None:
            cfg["transformer_layer_config"].pop(key, None)
        else:
            cfg["transformer_layer_config"][key] = value
    spec = specreg.normalize(cfg, vllm="0.33")
    (f,) = [f for f in spec.findings if f.code == "invalid-draft-shape"]
    assert f.severity == "error" and f.path == path and words in f.message
    assert not spec.servable


def test_a_qwen3_draft_with_head_dim_need_not_divide_its_hidden_size(variant):
    cfg = variant("dflash", transformer_layer_config__hidden_size=4100)
    assert "invalid-draft-shape" not in [f.code for f in specreg.normalize(cfg, vllm="0.33").findings]
