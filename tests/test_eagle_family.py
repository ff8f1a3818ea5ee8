"""Eagle-3 and P-EAGLE: exact normalized values."""

import specreg
from conftest import DROP, codes, finding


def test_eagle3_generated_at_033(fx):
    spec = specreg.normalize(fx("eagle3_generated"), vllm="0.33")
    assert spec.method == "eagle3"
    assert spec.verifier == "meta-llama/Llama-3.1-8B-Instruct"
    assert dict(spec.speculative_config) == {"method": "eagle3", "num_speculative_tokens": 3}
    dc = spec.draft_config_dict()
    assert dc["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert dc["eagle_aux_hidden_state_layer_ids"] == [2, 16, 29]
    assert "num_aux_hidden_states" not in dc
    assert dc["draft_vocab_size"] == 32000
    assert (dc["norm_before_residual"], dc["norm_before_fc"], dc["fc_norm"], dc["norm_output"]) == (
        True,
        False,
        False,
        False,
    )
    assert dc["rope_parameters"]["rope_type"] == "llama3"
    assert [(a.kind, a.causal) for a in spec.attention] == [("full", True)]
    assert codes(spec) == ["auto-map-ignored"]


def test_eagle3_converted_without_aux_ids_never_guesses_them(fx):
    spec = specreg.normalize(fx("eagle3_converted"), vllm="0.33")
    dc = spec.draft_config_dict()
    assert "eagle_aux_hidden_state_layer_ids" not in dc
    assert dc["draft_vocab_size"] == 31960
    assert dc["norm_before_residual"] is False
    f = finding(spec, "aux-layers-missing")
    assert f.path == "$.eagle_aux_hidden_state_layer_ids"


def test_eagle3_v040_fields_missing_from_old_files_get_defaults(fx):
    spec = specreg.normalize(fx("eagle3_v040_generated"), vllm="0.33")
    dc = spec.draft_config_dict()
    assert (dc["norm_before_fc"], dc["fc_norm"], dc["norm_output"]) == (False, False, False)
    assert spec.provenance["draft_config.norm_before_fc"].kind == "default"
    assert dc["rope_theta"] == 10000.0
    assert codes(spec) == ["auto-map-ignored"]


def test_missing_norm_before_residual_takes_the_trainer_default_and_warns(variant):
    spec = specreg.normalize(variant("eagle3_generated", norm_before_residual=DROP), vllm="0.33")
    assert spec.draft_config_dict()["norm_before_residual"] is False
    f = finding(spec, "served-default-mismatch")
    assert f.path == "$.norm_before_residual"
    assert "vLLM assumes true" in f.message


def test_aux_layer_count_other_than_three_sets_num_aux_hidden_states(variant):
    spec = specreg.normalize(variant("eagle3_generated", eagle_aux_hidden_state_layer_ids=[2, 10, 18, 29]), vllm="0.33")
    assert spec.draft_config_dict()["num_aux_hidden_states"] == 4
    assert spec.provenance["draft_config.num_aux_hidden_states"].sources == ("$.eagle_aux_hidden_state_layer_ids",)


def test_missing_layer_model_type_is_qwen3_for_speculators_07_and_later(variant):
    spec = specreg.normalize(variant("eagle3_generated", transformer_layer_config__model_type=DROP), vllm="0.33")
    dc = spec.draft_config_dict()
    assert dc["model_type"] == "qwen3"
    assert dc["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert "vLLM assumes llama" in finding(spec, "served-default-mismatch").message


def test_missing_layer_model_type_is_llama_before_speculators_07(variant):
    cfg = variant("eagle3_v040_generated", transformer_layer_config__model_type=DROP)
    spec = specreg.normalize(cfg, vllm="0.33")
    assert spec.draft_config_dict()["architectures"] == ["Eagle3LlamaForCausalLM"]
    assert "served-default-mismatch" not in codes(spec)


def test_other_layer_model_types_are_refused(variant):
    spec = specreg.normalize(variant("eagle3_generated", transformer_layer_config__model_type="mistral"), vllm="0.33")
    f = finding(spec, "vllm-unsupported-feature")
    assert "got model_type 'mistral'" in f.message
    assert f.path == "$.transformer_layer_config.model_type"


def test_qwen3_eagle3_layers_need_vllm_024(variant):
    cfg = variant("eagle3_generated", transformer_layer_config__model_type="qwen3")
    assert "vllm-unsupported-feature" in codes(specreg.normalize(cfg, vllm="0.23"))
    assert specreg.normalize(cfg, vllm="0.24").draft_config_dict()["architectures"] == ["Eagle3Qwen3ForCausalLM"]


def test_fc_norm_true_needs_vllm_025(variant):
    cfg = variant("eagle3_generated", fc_norm=True)
    assert "vllm-unsupported-feature" in codes(specreg.normalize(cfg, vllm="0.24"))
    assert specreg.normalize(cfg, vllm="0.25").draft_config_dict()["fc_norm"] is True


def test_peagle_at_033_is_eagle3_with_parallel_drafting(fx):
    spec = specreg.normalize(fx("peagle"), vllm="0.33")
    assert spec.algorithm == "peagle"
    assert spec.method == "eagle3"
    assert dict(spec.speculative_config) == {"method": "eagle3", "num_speculative_tokens": 8, "parallel_drafting": True}
    dc = spec.draft_config_dict()
    assert dc["architectures"] == ["PeagleQwen3ForCausalLM"]
    assert dc["pard_token"] == 151669
    assert dc["eagle_aux_hidden_state_layer_ids"] == [2, 18, 33]
    assert (dc["norm_before_residual"], dc["norm_before_fc"]) == (False, False)
    assert [a.causal for a in spec.attention] == [True, True]
    assert spec.provenance["draft_config.pard_token"].sources == ("$.mask_token_id",)
    assert codes(spec) == ["auto-map-ignored"]


def test_peagle_needs_vllm_022_and_qwen3_layers_need_024(fx):
    assert "vllm-unsupported-algorithm" in codes(specreg.normalize(fx("peagle"), vllm="0.21"))
    assert "vllm-unsupported-feature" in codes(specreg.normalize(fx("peagle"), vllm="0.22"))


def test_peagle_without_mask_token_is_bad_input(variant):
    try:
        specreg.normalize(variant("peagle", mask_token_id=DROP))
    except specreg.ConfigError as exc:
        assert exc.path == "$.mask_token_id"
        assert "required field is missing" in str(exc)
    else:
        raise AssertionError("no ConfigError")


def test_eagle3_generated_before_025_leaves_out_the_norm_flags_vllm_does_not_know(fx):
    at_033 = specreg.normalize(fx("eagle3_generated"), vllm="0.33").draft_config_dict()
    assert specreg.normalize(fx("eagle3_generated"), vllm="0.26").draft_config_dict() == at_033
    at_021 = specreg.normalize(fx("eagle3_generated"), vllm="0.21").draft_config_dict()
    assert {k: v for k, v in at_033.items() if k not in at_021} == {"fc_norm": False, "norm_output": False}
    for version in ("0.21", "0.26"):
        spec = specreg.normalize(fx("eagle3_generated"), vllm=version)
        assert dict(spec.speculative_config) == {"method": "eagle3", "num_speculative_tokens": 3}
        assert [f.code for f in spec.findings] == ["auto-map-ignored"]


def test_peagle_at_026(fx):
    spec = specreg.normalize(fx("peagle"), vllm="0.26")
    assert spec.draft_config_dict()["architectures"] == ["PeagleQwen3ForCausalLM"]
    assert spec.speculative_config["parallel_drafting"] is True
