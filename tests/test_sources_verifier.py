"""A verifier's config.json as a source: what its fields state (specreg.sources.decoder), read once
(specreg.sources.verifier), and what the vllm stage builds from that reading."""

from __future__ import annotations

import json

from hypothesis import given
from hypothesis import strategies as st

from specreg.sources import decoder
from specreg.sources.verifier import VerifierConfig, read_verifier
from specreg.vllm.verifier_check import facts_of

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=8,
)


@given(JSON)
def test_a_json_bool_is_no_int(value):
    got, positive = decoder.int_value(value), decoder.positive_int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        assert got is None and positive is None
    else:
        assert got == value and positive == (value if value > 0 else None)


def test_head_size_is_head_dim_else_hidden_over_heads():
    assert decoder.head_size({"head_dim": 256, "hidden_size": 4096, "num_attention_heads": 32}) == 256
    assert decoder.head_size({"hidden_size": 4096, "num_attention_heads": 32}) == 128
    # a head_dim that is no positive int is not taken; heads that are a bool are no count
    assert decoder.head_size({"head_dim": 0, "hidden_size": 4096, "num_attention_heads": 32}) == 128
    assert decoder.head_size({"head_dim": True, "hidden_size": 4096, "num_attention_heads": 32}) == 128
    assert decoder.head_size({"hidden_size": 4096, "num_attention_heads": True}) is None
    assert decoder.head_size({"hidden_size": 4096}) is None


def test_dtype_mla_latent_and_state_layers():
    assert decoder.config_dtype({"torch_dtype": "float16"}, {"dtype": "bfloat16"}) == "float16"
    assert decoder.config_dtype({}, {"dtype": "bfloat16"}) == "bfloat16"
    assert decoder.config_dtype({"dtype": None}, None) is None
    assert decoder.mla_latent({"kv_lora_rank": 512, "qk_rope_head_dim": 64}) == 576
    assert decoder.mla_latent({"kv_lora_rank": 512}) == 512
    assert decoder.mla_latent({"kv_lora_rank": 0, "qk_rope_head_dim": 64}) is None
    types = ["linear_attention", "linear_attention", "linear_attention", "full_attention"] * 2
    assert decoder.state_layers({"layer_types": types, "num_hidden_layers": 8}) == (0, 1, 2, 4, 5, 6)
    assert decoder.state_layers({"layer_types": types, "num_hidden_layers": 2}) == (0, 1)
    assert decoder.state_layers({"layer_types": types}) == ()


#: a multimodal verifier as transformers writes Gemma 3's: the language model under text_config, the
#: vocabulary at the top level only in some releases
GEMMA3 = {
    "architectures": ["Gemma3ForConditionalGeneration", 7],
    "torch_dtype": "bfloat16",
    "vocab_size": 262208,
    "text_config": {
        "model_type": "gemma3_text",
        "hidden_size": 5376,
        "num_hidden_layers": 62,
        "num_attention_heads": 32,
        "num_key_value_heads": 16,
        "head_dim": 128,
        "max_position_embeddings": 131072,
        "sliding_window": 1024,
    },
}


def test_a_multimodal_verifier_is_read_from_its_text_config():
    read = VerifierConfig.of(GEMMA3, "google/gemma-3-27b-it")
    assert read.text_config and read.body is GEMMA3["text_config"]
    assert read.architectures == ("Gemma3ForConditionalGeneration",)  # a name that is no string is dropped
    assert (read.num_hidden_layers, read.hidden_size, read.head_size, read.kv_heads) == (62, 5376, 128, 16)
    assert read.vocab_size == 262208  # not under text_config: the top level's
    assert read.dtype == "bfloat16"  # not under text_config: the top level's
    assert (read.max_position_embeddings, read.sliding_window, read.mla_latent) == (131072, 1024, None)


def test_the_vllm_facts_take_the_sources_reading(tmp_path):
    """What the vllm stage builds names the same values as the reading, from a file and from a dict;
    the quantization method and the layer groups are vLLM's names for them."""
    (tmp_path / "config.json").write_text(json.dumps(GEMMA3))
    read = read_verifier(str(tmp_path), source="test")
    assert read == VerifierConfig.of(GEMMA3, str(tmp_path))
    facts = facts_of(GEMMA3, str(tmp_path))
    for name in ("num_hidden_layers", "hidden_size", "vocab_size", "head_size", "dtype", "kv_heads", "sliding_window"):
        assert getattr(facts, name) == getattr(read, name), name
    assert facts.quantization is None
    assert sum(len(g.layers) for g in facts.layers) == 62
