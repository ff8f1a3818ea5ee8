"""The draft against its verifier beyond widths and ids (RoPE, head size, aux id 0) and the draft length
the user serves with (specreg.vllm.agreement, verifier_check, the CLI's --num-speculative-tokens and
the vLLM plugin's reading of the K vLLM was given)."""

import json
import logging
import os
import subprocess
import sys

import pytest

import specreg
import tiny
from specreg.vllm.agreement import rope_findings, rope_view, served_with, tokens_findings
from specreg.vllm.preflight import preflight
from specreg.vllm.verifier_check import facts_of, verifier_findings


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )


def spec_of(algo, change=None, vllm=None):
    cfg = tiny.draft_config(algo)
    if change:
        change(cfg)
    return specreg.normalize(cfg, vllm=vllm) if vllm else specreg.normalize(cfg)


# -- RoPE ---------------------------------------------------------------------------------------------


def test_the_rope_view_folds_the_legacy_names_as_vllms_patch_rope_parameters_does():
    view = rope_view({"rotary_emb_base": 500000, "rotary_pct": 0.5, "rope_scaling": {"type": "yarn", "factor": 4.0}})
    assert view == {"rope_type": "yarn", "factor": 4.0, "rope_theta": 500000, "partial_rotary_factor": 0.5}
    # a config stating both is read by its rope_parameters
    assert rope_view({"rope_parameters": {"rope_theta": 1.0}, "rope_scaling": {"type": "yarn"}}) == {"rope_theta": 1.0}


def test_a_rope_difference_names_both_values_and_the_positions_it_costs():
    spec = spec_of("dflash")  # rope_parameters {"rope_theta": 1000000, "rope_type": "default"}
    found = rope_findings(spec, "org/verifier", {"rope_theta": 10000.0})
    assert [f.code for f in found] == ["verifier-rope-mismatch"]
    assert "rope_theta: draft 1000000, verifier 10000.0" in found[0].message
    assert "every position after the first" in found[0].message
    dynamic = {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4096}}
    found = rope_findings(spec, "org/verifier", dynamic)
    assert "rope_type: draft 'default', verifier 'dynamic'" in found[0].message
    assert "positions from 4096 on" in found[0].message


def test_what_only_one_side_states_is_its_class_default_and_not_compared():
    """vLLM's models default rope_theta per class (set_default_rope_theta), so an unstated key is not a
    difference; a verifier that states nothing about RoPE is not compared at all."""
    spec = spec_of("dflash")
    assert rope_findings(spec, "v", {"partial_rotary_factor": 1.0}) == []
    assert rope_findings(spec, "v", {}) == []
    assert rope_findings(spec, "v", {"rope_theta": 1000000}) == []


def test_a_head_size_difference_names_the_rotated_dimensions():
    spec = spec_of("dflash")  # head_dim 2
    found = rope_findings(spec, "v", {"hidden_size": 64, "num_attention_heads": 8})
    assert [f.code for f in found] == ["verifier-head-dim-mismatch"]
    assert "head size is 2, v's 8" in found[0].message and "rotates 2 dimensions" in found[0].message


def test_the_verifier_check_carries_the_rope_rules():
    spec = spec_of("dflash")
    config = {**tiny.verifier_config("dflash"), "rope_theta": 10000.0}
    codes = [f.code for f in verifier_findings(spec, facts_of(config, "v"))]
    assert "verifier-rope-mismatch" in codes


# -- aux id 0 ----------------------------------------------------------------------------------------


def _zero_table():
    return json.loads((specreg.facts.FOLDER / "aux_capture.json").read_text())["layer_zero"]


def test_a_dflash_draft_reading_the_embedding_output_is_planned_with_target_id_minus_one():
    spec = spec_of("dflash", lambda c: c.update(aux_hidden_state_layer_ids=[0, 1, 2, 3, 4]))
    assert list(spec.draft_config["dflash_config"]["target_layer_ids"]) == [-1, 0, 1, 2, 3]
    assert list(spec.draft_config["eagle_aux_hidden_state_layer_ids"]) == [0, 1, 2, 3, 4]
    assert [f.code for f in spec.findings if f.code == "aux-layer-zero"] == ["aux-layer-zero"]
    assert spec.servable


def test_aux_id_0_is_accepted_beside_a_verifier_whose_class_captures_it():
    spec = spec_of("dflash", lambda c: c.update(aux_hidden_state_layer_ids=[0, 1, 2, 3, 4]))
    assert "Qwen3ForCausalLM" in _zero_table()
    config = tiny.verifier_config("dflash")  # Qwen3ForCausalLM
    codes = [f.code for f in verifier_findings(spec, facts_of(config, "v"))]
    assert "verifier-no-layer-zero-capture" not in codes and "verifier-layer-out-of-range" not in codes


def test_aux_id_0_is_refused_beside_a_verifier_whose_class_does_not_capture_it():
    from test_preflight import no_layer_zero_architecture

    spec = spec_of("dflash", lambda c: c.update(aux_hidden_state_layer_ids=[0, 1, 2, 3, 4]))
    arch = no_layer_zero_architecture()
    config = {**tiny.verifier_config("dflash"), "architectures": [arch]}
    found = [f for f in verifier_findings(spec, facts_of(config, "v")) if f.code == "verifier-no-layer-zero-capture"]
    assert found and found[0].severity == "error"
    assert arch in found[0].message and "does not capture it" in found[0].message


def test_a_negative_aux_id_is_still_refused():
    with pytest.raises(specreg.ConfigError, match="expected an integer >= 0, got -1"):
        spec_of("dflash", lambda c: c.update(aux_hidden_state_layer_ids=[-1, 1, 2]))


# -- the draft length the user serves with --------------------------------------------------------------


def test_a_dflash_draft_produces_its_blocks_positions_and_no_more():
    spec = spec_of("dflash")  # block_size 16, speculative_tokens 15
    assert tokens_findings(spec, 15) == [] and tokens_findings(spec, 3) == []
    (found,) = tokens_findings(spec, 16)
    assert found.code == "speculative-tokens-beyond-draft" and found.severity == "error"
    assert "at most 15 tokens" in found.message


def test_an_eagle3_draft_drafts_further_than_trained_with_a_warning_naming_the_trained_length():
    spec = spec_of("eagle3")  # speculative_tokens 3
    assert tokens_findings(spec, 3) == []
    (found,) = tokens_findings(spec, 4)
    assert found.code == "speculative-tokens-untrained" and found.severity == "warning"
    assert "trained for 3" in found.message


def test_serving_with_a_k_puts_it_in_the_speculative_config_and_an_error_makes_it_unservable():
    spec = served_with(spec_of("eagle3"), 5)
    assert spec.speculative_config["num_speculative_tokens"] == 5 and spec.servable
    assert spec.provenance["speculative_config.num_speculative_tokens"].sources == ("--num-speculative-tokens",)
    assert not served_with(spec_of("dflash"), 16).servable
    assert served_with(spec_of("dflash"), None) == spec_of("dflash")


def test_check_and_serve_take_the_k_the_user_serves_with(tmp_path):
    draft, ver = tiny.write_pair(tmp_path, "dflash")
    done = run("check", str(draft), "--verifier", str(ver), "--no-weights", "--num-speculative-tokens", "16")
    assert done.returncode == 1, done.stderr
    assert "speculative-tokens-beyond-draft" in done.stdout
    assert (
        run("check", str(draft), "--verifier", str(ver), "--no-weights", "--num-speculative-tokens", "15").returncode
        == 0
    )
    refused = run("serve", str(draft), "--num-speculative-tokens", "16", "--config-only", "--dir", str(tmp_path / "d"))
    assert refused.returncode == 1 and "speculative-tokens-beyond-draft" in refused.stderr
    bad = run("check", str(draft), "--num-speculative-tokens", "0")
    assert bad.returncode == 2 and "--num-speculative-tokens" in bad.stderr


def test_preflight_holds_the_k_to_the_drafts_limits(tmp_path):
    draft, ver = tiny.write_pair(tmp_path, "eagle3")
    spec = preflight(specreg.load(draft), verifier=str(ver), check_weights=False, num_speculative_tokens=6)
    assert "speculative-tokens-untrained" in [f.code for f in spec.checks.found]


class _SpeculativeConfig:
    def __init__(self, k):
        self.num_speculative_tokens, self.model = k, "org/draft"


def test_the_plugin_refuses_a_k_past_the_block_and_logs_one_past_training(caplog):
    from specreg.vllm import plugin

    with pytest.raises(plugin.Refusal, match="speculative-tokens-beyond-draft"):
        plugin._check_tokens(_SpeculativeConfig(16), spec_of("dflash"))
    plugin._check_tokens(_SpeculativeConfig(15), spec_of("dflash"))
    with caplog.at_level(logging.WARNING):
        plugin._check_tokens(_SpeculativeConfig(7), spec_of("eagle3"))
    assert any(
        "speculative-tokens-untrained" in r.getMessage() and "trained for 3" in r.getMessage() for r in caplog.records
    )


def test_the_plugin_refuses_aux_id_0_beside_a_verifier_that_does_not_capture_it():
    from test_preflight import no_layer_zero_architecture
    from specreg.vllm import plugin

    spec = spec_of("dflash", lambda c: c.update(aux_hidden_state_layer_ids=[0, 1, 2, 3, 4]))

    class Hf:
        def __init__(self, arch):
            self.config = {**tiny.verifier_config("dflash"), "architectures": [arch]}

        def to_dict(self):
            return self.config

    class Target:
        def __init__(self, arch):
            self.hf_config, self.model = Hf(arch), "org/verifier"

    with pytest.raises(plugin.Refusal, match="verifier-no-layer-zero-capture"):
        plugin._check_verifier(spec, Target(no_layer_zero_architecture()))
    plugin._check_verifier(spec, Target("Qwen3ForCausalLM"))


def test_the_rotated_width_is_exact_for_any_integer_and_none_for_what_is_no_number():
    """`int(head * float(factor))` overflowed on a 4,000-digit head size (exit 3) and raised on a string."""
    from specreg.vllm.agreement import rotated

    assert rotated(128, 0.5) == 64 and rotated(96, 1) == 96
    assert rotated(10**4000, 0.5) == 5 * 10**3999
    assert rotated(128, "half") is None and rotated(128, float("nan")) is None and rotated(128, True) is None
    assert rotated(None, 0.5) is None
