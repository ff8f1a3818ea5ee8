"""The model_type tables (specreg/normalization/model_types.py) are transformers' own
answer: regenerated from the transformers installed beside the engine, and the claim behind it
(no top-level vocab_size, so vLLM's draft classes cannot read one) shown on a real config object."""

import pytest

pytestmark = pytest.mark.engine


def composite_model_types():
    from transformers import CONFIG_MAPPING

    found = set()
    for model_type in CONFIG_MAPPING.keys():
        try:
            cls = CONFIG_MAPPING[model_type]
            instance = cls()
        except Exception:  # noqa: BLE001 - a config class that needs arguments is not a default instance
            continue
        if "text_config" in (getattr(cls, "sub_configs", None) or {}) and not hasattr(instance, "vocab_size"):
            found.add(model_type)
    return found


def test_the_table_is_what_the_installed_transformers_says():
    import transformers

    from specreg.normalization.model_types import COMPOSITE_MODEL_TYPES, TRANSFORMERS_VERSION

    assert transformers.__version__ == TRANSFORMERS_VERSION
    assert composite_model_types() == set(COMPOSITE_MODEL_TYPES)


def test_a_qwen2_5_vl_draft_config_has_no_vocab_size_for_vllm_to_read():
    from transformers import AutoConfig

    config = AutoConfig.for_model("qwen2_5_vl", vocab_size=151936, hidden_size=2048, num_hidden_layers=1)
    assert type(config).__name__ == "Qwen2_5_VLConfig" and not hasattr(config, "vocab_size")
    text = AutoConfig.for_model("qwen2", vocab_size=151936, hidden_size=2048, num_hidden_layers=1)
    assert text.vocab_size == 151936


def test_the_known_model_types_are_the_installed_transformers_config_mapping():
    from transformers import CONFIG_MAPPING

    from specreg.normalization.model_types import TRANSFORMERS_MODEL_TYPES

    assert set(CONFIG_MAPPING.keys()) == set(TRANSFORMERS_MODEL_TYPES)
