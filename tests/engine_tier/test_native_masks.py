"""Issue 40 against the installed vLLM and transformers: the masks specreg plans for native DFlash files
read by structure (AngelSlim) or by NeMo's JetSpec stamp are what vLLM's own per-layer resolver gives the
directory specreg materializes, and the transformers key table unread-field skips is transformers' own."""

import json
from pathlib import Path

import pytest

import specreg

pytestmark = pytest.mark.engine

DATA = Path(__file__).parent.parent / "data"


def vllm_masks(directory):
    from transformers import AutoConfig
    from vllm.model_executor.models.qwen3_dflash import _dflash_layer_causal

    config = AutoConfig.from_pretrained(str(directory))
    return [_dflash_layer_causal(config, i) for i in range(config.num_hidden_layers)]


#: the trained masks, from the trainers' code: NeMo's JetSpecTrainerModule builds its block mask with
#: causal=True (nemo_automodel/components/speculative/dflash/jetspec_core.py at 36044ad); AngelSlim's
#: QwenDFlashDraftModel drafts its block with is_causal=False (qwen_dflash.py at 67394ce)
TRAINED = {"native/nemo_jetspec_qwen3_8b.json": [True] * 5, "real/angelslim/qwen3_dflash.json": [False] * 5}


@pytest.mark.parametrize("name", sorted(TRAINED))
def test_vllm_serves_the_materialized_native_draft_with_the_trained_masks(tmp_path, name):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "config.json").write_bytes((DATA / name).read_bytes())
    spec = specreg.load(str(tmp_path / "src"), verifier="Qwen/Qwen3-8B")  # for the installed vLLM
    spec.materialize(tmp_path / "out", weights="none")
    assert [a.causal for a in spec.attention] == TRAINED[name]
    assert vllm_masks(tmp_path / "out") == TRAINED[name]


def test_nemos_own_export_of_a_jetspec_draft_is_served_bidirectional(tmp_path):
    # NeMo's serve_vllm rewrites architectures only: vLLM reads is_causal = false first (docs/semantics.md)
    config = json.loads((DATA / "native" / "nemo_jetspec_qwen3_8b.json").read_text())
    config["architectures"] = ["DFlashDraftModel"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    assert vllm_masks(tmp_path) == [False] * 5


def test_the_transformers_key_table_holds_the_installed_transformers_keys():
    import transformers
    from transformers import CONFIG_MAPPING, PretrainedConfig

    from specreg import transformers as facts
    from specreg.normalization.fields import HF_CONFIG_KEYS, HF_CONFIG_MODEL_TYPES

    keys = set(PretrainedConfig().to_dict())
    for model_type in HF_CONFIG_MODEL_TYPES:
        keys |= set(CONFIG_MAPPING[model_type]().to_dict())
    assert keys == set(facts.facts(transformers.__version__)["config_keys"]) and keys <= HF_CONFIG_KEYS
