"""Published draft configs (tests/data/real, SpecForge's configs/ at a pinned commit): each is read as
what it is, with the plan its trainer's rules give (tests/data/real/README.md), or refused with a
line that names its architecture and why."""

import json
from pathlib import Path

import pytest

import specreg

REAL = Path(__file__).parent / "data" / "real" / "specforge"
FILES = sorted(p.name for p in REAL.glob("*.json"))
#: qwen2.5-vl-32b-eagle3.json (hidden 5120, 28 heads, head_dim 128) is one vLLM 0.33 cannot load:
#: transformers' LlamaConfig refuses it (proved on the unmodified file in the vLLM tier)
REFUSED = {"DominoDraftModel": "no vLLM release has a Domino class", "PEagleDraftModel": "holds no mask_token_id"}


def expected(cfg: dict) -> dict:
    """The plan SpecForge's trainer gives this file (see the README), computed from the raw JSON."""
    arch = cfg["architectures"][0]
    if cfg["model_type"] == "llama" and cfg["hidden_size"] % cfg["num_attention_heads"]:
        return {"refused": "invalid-draft-shape"}  # transformers 5's LlamaConfig.validate_architecture
    dflash = cfg.get("dflash_config") or {}
    block = cfg.get("block_size", dflash.get("block_size"))
    n = cfg["num_hidden_layers"]
    types = cfg.get("layer_types") or ["full_attention"] * n
    if arch == "LlamaForCausalLMEagle3":
        return {"algorithm": "eagle3", "tokens": 3, "causal": [True] * n, "class": "Eagle3LlamaForCausalLM"}
    causal = [True] * n if cfg.get("is_causal") else [t == "sliding_attention" for t in types]
    if arch == "DSparkDraftModel":
        return {"algorithm": "dspark", "tokens": block, "causal": causal, "class": "Qwen3DSparkModel"}
    assert arch == "DFlashDraftModel", arch
    return {"algorithm": "dflash", "tokens": block - 1, "causal": causal, "class": "DFlashDraftModel"}


def test_there_are_at_least_30_real_configs():
    assert len(FILES) >= 30


@pytest.mark.parametrize("name", FILES)
def test_a_real_config_is_read_as_its_trainer_wrote_it(name):
    cfg = json.loads((REAL / name).read_text())
    arch = cfg["architectures"][0]
    if arch in REFUSED:
        with pytest.raises(specreg.ConfigError) as info:
            specreg.normalize(cfg, vllm="0.33", verifier="org/verifier", source=name)
        assert info.value.path == "$.architectures"
        assert arch in str(info.value) and REFUSED[arch] in str(info.value)
        return
    spec = specreg.normalize(cfg, vllm="0.33", verifier="org/verifier", source=name)
    want = expected(cfg)
    if "refused" in want:
        assert [f.code for f in spec.errors] == [want["refused"]]
        return
    got = {
        "algorithm": spec.algorithm,
        "tokens": spec.num_speculative_tokens,
        "causal": [a.causal for a in spec.attention],
        "class": spec.draft_config["architectures"][0],
    }
    assert got == want
    assert spec.servable, [f.message for f in spec.errors]
