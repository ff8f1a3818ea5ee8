"""Native layouts recognized by what they are (issue 23): exact architecture names, the structure of
the class vLLM builds for each, the fields vLLM's draft classes read, startup refusals, and the 40
configs of tests/data/real other than SpecForge's, each served or refused with its reason."""

import copy
import json
import subprocess
import sys
from pathlib import Path

import pytest

import specreg
from specreg.sources import native
from specreg.sources.native import keys

DATA = Path(__file__).parent / "data"
VERIFIER = "org/verifier"


def cfg(path):
    return json.loads((DATA / path).read_text())


def zlab():
    return cfg("native/zlab_dflash_qwen3_8b_fixture.json")


def eagle():
    return cfg("native/specforge_qwen3_4b_eagle3.json")


def refused(config, **kw):
    with pytest.raises(specreg.ConfigError) as err:
        specreg.normalize(config, vllm="0.33", verifier=VERIFIER, **kw)
    return err.value


# -- no substring matching ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name, field",
    [
        ("MyDSparkDraft", {"dflash_config": {"markov_rank": 8, "mask_token_id": 1, "target_layer_ids": [1]}}),
        (
            "OtherDFlash2DraftModel",
            {"dflash_config": {"conv_kernel_size": 2, "mask_token_id": 1, "target_layer_ids": [1]}},
        ),
        ("QwenDraftEagle3", {"eagle_config": {"eagle_aux_hidden_state_layer_ids": [1, 2, 3]}}),
    ],
)
def test_a_name_that_only_contains_a_layout_name_is_not_that_layout(name, field):
    config = {**zlab(), "architectures": [name], **field}
    err = refused(config)
    assert err.path == "$.architectures" and name in err.message and "name no layout" in err.message


# -- recognized by structure (issue 40) -------------------------------------------------------------


def test_angelslims_dflash_is_read_by_its_fields_as_zlab_dflash():
    config = cfg("real/angelslim/qwen3_dflash.json")  # architectures: QwenDFlashDraftModel
    spec = specreg.normalize(config, vllm="0.33", verifier="Qwen/Qwen3-4B")
    assert spec.format == "zlab" and spec.servable
    assert spec.draft_config_dict()["architectures"] == ["DFlashDraftModel"]
    assert spec.num_speculative_tokens == 15  # block_size - 1, z-lab's anchor rule
    assert spec.draft_config_dict()["dflash_config"]["target_layer_ids"] == [1, 9, 17, 25, 33]
    found = [f for f in spec.findings if f.code == "recognized-by-structure"]
    assert [(f.severity, f.path) for f in found] == [("warning", "$.architectures")]
    assert "QwenDFlashDraftModel" in found[0].message


@pytest.mark.parametrize(
    "fixture", ["native/zlab_dflash_qwen3_8b_fixture.json", "native/zlab_dflash2_museglimmer.json"]
)
def test_a_file_naming_a_listed_class_gets_no_structure_warning(fixture):
    spec = specreg.normalize(cfg(fixture), vllm="0.33", verifier=VERIFIER)
    assert "recognized-by-structure" not in {f.code for f in spec.findings}


def test_angelslims_dflare_look_alike_is_refused_by_name():
    err = refused(cfg("real/angelslim/qwen3_dflare.json"))
    assert err.path == "$.architectures" and "k_proj_target" in err.message


def test_a_name_no_layout_lists_with_another_layouts_fields_is_still_refused():
    config = {
        **zlab(),
        "architectures": ["KVFusionDraftModel"],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": [1]},
    }
    assert "name no layout" in refused(config).message


def test_recognized_by_structure_still_checks_the_layers():
    config = {**cfg("real/angelslim/qwen3_dflash.json"), "num_experts": 8}
    assert "mixture-of-experts" in refused(config).message


# -- how a draft was trained, read from the file (issue 40) -------------------------------------------


def test_a_specforge_vp_drafter_is_refused_with_the_reason():
    spec = specreg.normalize(cfg("real/specforge-history/qwen3-8b-dta.json"), vllm="0.33", verifier="Qwen/Qwen3-8B")
    found = [f for f in spec.findings if f.code == "trained-key-not-served"]
    assert [(f.severity, f.path) for f in found] == [("error", "$.dflash_config.training_mode")]
    assert "_sample_prefix_lengths" in found[0].message and "anchor alone" in found[0].message
    assert not spec.servable
    assert "unknown-trained-key" not in {f.code for f in spec.findings}  # prefix_weight_base is known


@pytest.mark.parametrize("key", ["training_mode", "loss_type"])
def test_specforges_other_objectives_are_served(key):
    config = zlab()
    config["dflash_config"][key] = "dpace"  # a reweighted loss over the same block
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert spec.servable and not [f for f in spec.findings if f.code.endswith("trained-key")]


def test_loss_type_vp_drafter_is_refused_too():
    config = zlab()
    config["dflash_config"]["loss_type"] = "vp_drafter"
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert [f.path for f in spec.errors] == ["$.dflash_config.loss_type"]


def jetspec():
    return cfg("native/nemo_jetspec_qwen3_8b.json")


def test_a_jetspec_draft_is_trained_causal_in_the_block():
    # the file says is_causal: false (NeMo's DFlash recipe) and dflash_config.causal: true (its JetSpec stamp)
    spec = specreg.normalize(jetspec(), vllm="0.33", verifier="Qwen/Qwen3-8B")
    assert [a.causal for a in spec.attention] == [True] * 5
    assert spec.provenance["attention[0]"].sources == ("$.dflash_config.causal",)
    assert spec.draft_config_dict()["is_causal"] is True  # vLLM >= 0.28 reads it first
    assert spec.servable and spec.draft_config_dict()["architectures"] == ["DFlashDraftModel"]


def test_a_jetspec_draft_cannot_be_served_causal_by_a_vllm_without_causal_layers():
    spec = specreg.normalize(jetspec(), vllm="0.22", verifier="Qwen/Qwen3-8B")
    assert "vllm-unsupported-feature" in {f.code for f in spec.errors}


def test_an_older_jetspec_file_without_the_stamp_reads_as_dflash():
    # JetSpec files written before NeMo stamped dflash_config.causal (71e2dd459) cannot be told apart
    config = jetspec()
    del config["dflash_config"]["causal"]
    spec = specreg.normalize(config, vllm="0.33", verifier="Qwen/Qwen3-8B")
    assert [a.causal for a in spec.attention] == [False] * 5


def test_every_layout_name_is_matched_exactly():
    for layout in native.layouts():
        for name in layout.names:
            assert name.isidentifier()
    assert native.detect({**zlab(), "architectures": ["DFlashDraftModel"]}) == "zlab"
    # another spelling is no name match: only the fields can make it z-lab DFlash, and the finding says so
    spec = specreg.normalize({**zlab(), "architectures": ["dflashdraftmodel"]}, vllm="0.33", verifier=VERIFIER)
    assert "recognized-by-structure" in {f.code for f in spec.findings}


# -- structure the vLLM class does not build --------------------------------------------------------


@pytest.mark.parametrize(
    "base, extra, path, kind",
    [
        (zlab, {"kv_lora_rank": 512, "q_lora_rank": 1536}, "$.kv_lora_rank", "multi-head latent attention"),
        (
            zlab,
            {"dflash_config": {"mask_token_id": 1, "target_layer_ids": [1, 9], "attention_mode": "mla"}},
            "$.dflash_config.attention_mode",
            "multi-head latent attention",
        ),
        (zlab, {"num_experts": 128}, "$.num_experts", "mixture-of-experts"),
        (eagle, {"n_routed_experts": 64, "n_shared_experts": 1}, "$.n_routed_experts", "mixture-of-experts"),
        (eagle, {"use_moe": True}, "$.use_moe", "mixture-of-experts"),
        (eagle, {"q_lora_rank": 1536}, "$.q_lora_rank", "multi-head latent attention"),
        (eagle, {"linear_attn_config": {"kda_layers": [1]}}, "$.linear_attn_config", "linear attention"),
    ],
)
def test_a_structure_the_served_class_does_not_build_is_refused_naming_the_field(base, extra, path, kind):
    config = base()
    config.update(copy.deepcopy(extra))
    err = refused(config)
    assert path in [p.path for p in err.problems]
    message = next(p.message for p in err.problems if p.path == path)
    assert kind in message and "served by vLLM's" in message


def test_an_mla_and_moe_draft_gets_both_problems():
    config = {**eagle(), "kv_lora_rank": 512, "num_experts": 8}
    assert {p.path for p in refused(config).problems} == {"$.kv_lora_rank", "$.num_experts"}


def test_llama_eagle3_with_mla_fields_names_vllms_deepseek_class():
    config = {**eagle(), "model_type": "deepseek_v3", "kv_lora_rank": 512, "q_lora_rank": 1536}
    assert "Eagle3DeepseekV3ForCausalLM builds multi-head latent attention" in refused(config).message


def test_deepseek_eagle3_with_mla_is_served_with_vllms_deepseek_class():
    spec = specreg.normalize(cfg("real/torchspec/kimi_k25_eagle3_mla.json"), vllm="0.33", verifier=VERIFIER)
    assert spec.draft_config_dict()["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]
    assert spec.draft_config_dict()["kv_lora_rank"] == 512
    assert spec.provenance["draft_config.architectures"].sources == ("$.architectures",)


def test_deepseek_eagle3_with_moe_is_refused():
    err = refused(cfg("real/torchspec/kimi_k25_eagle3_moe.json"))
    assert err.path == "$.use_moe" and "no vLLM draft class builds it" in err.message


def test_modelopt_llama_name_is_eagle3_only_with_eagle_config():
    plain = cfg("real/eagle/traineagle3-config.json")  # LlamaForCausalLM + draft_vocab_size, no eagle_config
    assert native.detect(plain) is None
    assert native.detect(cfg("native/modelopt_eagle3_llama4_maverick.json")) == "eagle3-native"


# -- fields vLLM's classes read are carried ---------------------------------------------------------


def dflash2():
    return cfg("native/zlab_dflash2_museglimmer.json")


def test_dflash2_scaling_keys_are_carried_into_dflash_config():
    config = dflash2()
    config["dflash_config"].update(input_embedding_scale=78.38, output_multiplier=0.5, final_logit_softcapping=30.0)
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    d = spec.draft_config_dict()["dflash_config"]
    assert (d["input_embedding_scale"], d["output_multiplier"], d["final_logit_softcapping"]) == (78.38, 0.5, 30.0)
    assert spec.provenance["draft_config.dflash_config.output_multiplier"].sources == (
        "$.dflash_config.output_multiplier",
    )


def test_dflash_attention_sinks_are_carried():
    config = zlab()
    config["dflash_config"]["attention_sink_bias"] = True
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert spec.draft_config_dict()["dflash_config"]["attention_sink_bias"] is True
    assert not [f for f in spec.findings if f.severity == "error"]


def test_speculators_format_carries_them_too():
    config = cfg("speculators/dflash.json")
    config["attention_sink_bias"] = True
    spec = specreg.normalize(config, vllm="0.33")
    assert spec.draft_config_dict()["dflash_config"]["attention_sink_bias"] is True


def test_a_trained_key_vllm_does_not_read_is_an_error():
    spec = specreg.normalize(cfg("real/vdflash/qwen2.5-vl-3b-dflash.json"), vllm="0.33", verifier=VERIFIER)
    bad = {f.path for f in spec.findings if f.code == "trained-key-not-served"}
    assert bad == {"$.dflash_config.position_encoding", "$.dflash_config.mrope_section"}


def test_an_unknown_dflash_config_key_is_a_warning_naming_it():
    config = zlab()
    config["dflash_config"]["prefix_schedule"] = "2..block_size-1"
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert [f.path for f in spec.findings if f.code == "unknown-trained-key"] == ["$.dflash_config.prefix_schedule"]


def test_the_key_tables_do_not_overlap():
    carried = set().union(*keys.CARRIED.values())
    tables = [carried, set(keys.CONSUMED), set(keys.TRAINED_SIDE), set(keys.NOT_SERVED)]
    for i, a in enumerate(tables):
        for b in tables[i + 1 :]:
            assert not (a & b), a & b


# -- startup refusals and composite model types -----------------------------------------------------


def mrope(config):
    config["rope_scaling"] = {"type": "mrope", "mrope_section": [16, 24, 24]}
    return config


@pytest.mark.parametrize("vllm", ["0.22", "0.26", "0.33"])
def test_an_mrope_dflash_is_refused_at_startup(vllm):
    spec = specreg.normalize(mrope(zlab()), vllm=vllm, verifier=VERIFIER)
    found = [f for f in spec.findings if f.code == "vllm-startup-refusal"]
    assert [f.path for f in found] == ["$.rope_scaling.mrope_section"]
    assert "does not support M-RoPE" in found[0].message and found[0].severity == "error"


def test_an_mrope_eagle3_is_not_refused():
    # EAGLE-3 adds no input slot per request, so vLLM never calls _raise_if_mrope for it
    spec = specreg.normalize(cfg("real/vdflash/qwen2.5-vl-3b-eagle3.json"), vllm="0.33", verifier=VERIFIER)
    assert "vllm-startup-refusal" not in {f.code for f in spec.findings}


def test_an_mrope_dflash_exits_1_before_any_gpu_time(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(mrope(zlab())))
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "show", str(tmp_path), "--verifier", VERIFIER, "--vllm", "0.33"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 1, out.stderr + out.stdout
    assert "vllm-startup-refusal" in out.stdout + out.stderr


def test_a_composite_model_type_is_an_error():
    config = {**eagle(), "model_type": "qwen2_5_vl"}
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    found = [f for f in spec.findings if f.code == "composite-model-type"]
    assert [f.path for f in found] == ["$.model_type"] and "Qwen2_5_VLConfig" in found[0].message


def test_a_model_type_neither_transformers_nor_vllm_knows_is_an_error():
    spec = specreg.normalize(cfg("real/torchspec/dspark_draft_config.json"), vllm="0.33", verifier=VERIFIER)
    found = [f for f in spec.findings if f.code == "unknown-model-type"]
    assert [f.path for f in found] == ["$.model_type"] and "'dspark'" in found[0].message
    assert not spec.servable
    fixed = {**cfg("real/torchspec/dspark_draft_config.json"), "model_type": "qwen3"}
    spec = specreg.normalize(fixed, vllm="0.33", verifier=VERIFIER)
    assert not [f for f in spec.findings if f.severity == "error"]
    # a type only vLLM's own registry has is known too
    assert "kimi_k2" in specreg.normalization.model_types.VLLM_MODEL_TYPES


@pytest.mark.parametrize("vllm, refused_there", [("0.33", True), ("0.26", True), ("0.20", True)])
def test_a_deepseek_v3_draft_is_rewritten_to_an_mtp_model_by_vllm(vllm, refused_there):
    spec = specreg.normalize(cfg("real/torchspec/qwen3_8b_eagle3_mla.json"), vllm=vllm, verifier=VERIFIER)
    found = [f for f in spec.findings if f.code == "vllm-startup-refusal"]
    assert bool(found) == refused_there
    assert found[0].path == "$.model_type" and "DeepSeekMTPModel" in found[0].message
    assert "deepseek_v2" in found[0].fix


def test_the_same_draft_as_deepseek_v2_is_served_with_the_mla_class():
    config = {**cfg("real/torchspec/qwen3_8b_eagle3_mla.json"), "model_type": "deepseek_v2"}
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    assert not [f for f in spec.findings if f.severity == "error"]
    assert spec.draft_config_dict()["architectures"] == ["Eagle3DeepseekV2ForCausalLM"]


@pytest.mark.parametrize(
    "model_type, vllm, rewritten",
    [
        ("qwen3_next", "0.33", True),
        ("longcat_flash_ngram", "0.31", True),
        ("longcat_flash_ngram", "0.32", False),
        ("step5", "0.32", False),
        ("step5", "0.33", True),
        ("qwen3", "0.33", False),
        ("kimi_k2", "0.33", False),
    ],
)
def test_the_rewrite_table_is_read_per_version(model_type, vllm, rewritten):
    from specreg.normalization.capabilities import parse_version
    from specreg.normalization.model_types import mtp_rewrite

    assert (mtp_rewrite(model_type, parse_version(vllm)) is not None) == rewritten


def test_show_on_a_written_directory_rechecks_it(tmp_path):
    from tests.weights import write_draft

    src = write_draft(tmp_path / "src", eagle())
    out = tmp_path / "out"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "materialize",
            str(src),
            "--verifier",
            VERIFIER,
            "--skip-verifier-check",
            "--vllm",
            "0.33",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    written = json.loads((out / "config.json").read_text())
    written["model_type"] = "qwen2_5_vl"  # a directory edited after it was written
    (out / "config.json").write_text(json.dumps(written))
    shown = subprocess.run([sys.executable, "-m", "specreg", "show", str(out)], capture_output=True, text=True)
    assert "composite-model-type" in shown.stdout + shown.stderr


# -- every problem shown ----------------------------------------------------------------------------


def test_the_cli_prints_every_problem_with_its_path(tmp_path):
    config = zlab()
    del config["dflash_config"]["target_layer_ids"]
    del config["dflash_config"]["mask_token_id"]
    (tmp_path / "config.json").write_text(json.dumps(config))
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "show", str(tmp_path), "--json"], capture_output=True, text=True
    )
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert (
        len(lines) == 2
        and "$.dflash_config.target_layer_ids" in lines[0]
        and "$.dflash_config.mask_token_id" in lines[1]
    )
    assert [p["path"] for p in json.loads(out.stdout)["problems"]] == [
        "$.dflash_config.target_layer_ids",
        "$.dflash_config.mask_token_id",
    ]


def test_native_provenance_names_the_files_own_fields():
    spec = specreg.normalize(zlab(), vllm="0.33", verifier=VERIFIER)
    assert spec.provenance["draft_config.architectures"].sources == ("$.architectures",)


def test_findings_name_classes_of_vllms_registry():
    # vLLM 0.33 registry keys (vllm/model_executor/models/registry.py), read in the conformance tier too
    registry = {
        layout_serves.vllm_class
        for layout in native.layouts()
        for layout_serves in layout.names.values()
        if layout_serves.vllm_class
    }
    assert registry <= {
        "Eagle3LlamaForCausalLM",
        "Eagle3Qwen3ForCausalLM",
        "Eagle3DeepseekV2ForCausalLM",
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "Qwen3DSparkModel",
    }


# -- the other 40 real configs ------------------------------------------------------------------------

#: file -> "served <class>" or "refused <words of the reason>" (sources: tests/data/real/README.md)
OUTCOMES = {
    "doubleword-torchspec/dflash_draft_config_gpt_oss_20b.json": "refused missing: block_size",
    "doubleword-torchspec/dflash_draft_config_qwen35_9b_ultrachat_magpie.json": "refused missing: block_size",
    "doubleword-torchspec/dflash_draft_config_qwen3_8b_sharegpt_online_5k.json": "refused missing: block_size",
    "eagle/Mixtral_8x7B_config.json": "refused not a draft config",
    "eagle/llama_2_chat_13B_config.json": "refused not a draft config",
    "eagle/llama_2_chat_70B_config.json": "refused not a draft config",
    "eagle/llama_2_chat_7B_config.json": "refused not a draft config",
    "eagle/testbug-model-config.json": "refused not a draft config",
    "eagle/traineagle3-config.json": "refused not a draft config",
    "eagle/vicuna_13B_config.json": "refused not a draft config",
    "eagle/vicuna_33B_config.json": "refused not a draft config",
    "eagle/vicuna_7B_config.json": "refused not a draft config",
    "angelslim/qwen3_dflare.json": "refused AngelSlim's DFlare draft",
    "angelslim/qwen3_dflash.json": "served DFlashDraftModel",
    "mvideet-dflash/gto_mtbench_export_step3900.json": "served DFlashDraftModel",
    "specforge-history/qwen3-8b-dta.json": "error trained-key-not-served",
    "torchspec/ci-qwen3_8_27b_dspark_draft.json": "refused missing: block_size",
    "torchspec/ci-qwen3_8_27b_eagle3_draft.json": "served Eagle3LlamaForCausalLM",
    "torchspec/dflash_draft_config.json": "refused missing: block_size",
    "torchspec/domino_draft_config.json": "refused no vLLM release has a Domino class",
    "torchspec/dspark_draft_config.json": "error unknown-model-type",
    "torchspec/glm4_moe_eagle3.json": "refused name no layout specreg reads",
    "torchspec/glm52_dspark_draft_config.json": "refused missing: block_size",
    "torchspec/kimi_k25_eagle3.json": "served Eagle3LlamaForCausalLM",
    "torchspec/kimi_k25_eagle3_mla.json": "served Eagle3DeepseekV2ForCausalLM",
    "torchspec/kimi_k25_eagle3_moe.json": "refused mixture-of-experts MLP",
    "torchspec/kimi_k3_dflash2_mla_swa.json": "refused multi-head latent attention",
    "torchspec/kimi_k3_dspark_mla.json": "refused K3DSparkForCausalLM, a class specreg has no rules for",
    "torchspec/minimax_m25_eagle3.json": "served Eagle3LlamaForCausalLM",
    "torchspec/qwen3_8b_dflash.json": "refused missing: the target layer ids",
    "torchspec/qwen3_8b_eagle3.json": "served Eagle3LlamaForCausalLM",
    "torchspec/qwen3_8b_eagle3_mla.json": "error vllm-startup-refusal",
    "vdflash/qwen2.5-vl-3b-dflash-h32-depth1.json": "error trained-key-not-served",
    "vdflash/qwen2.5-vl-3b-dflash.json": "error trained-key-not-served",
    "vdflash/qwen2.5-vl-3b-eagle3.json": "served Eagle3LlamaForCausalLM",
    "vdflash/qwen2.5-vl-3b-msd.json": "refused not a draft config",
    "vdflash/qwen2.5-vl-7b-dflash.json": "error trained-key-not-served",
    "vdflash/qwen2.5-vl-7b-eagle3.json": "served Eagle3LlamaForCausalLM",
    "vdflash/vispec-llava_1.6_13B_config.json": "refused not a draft config",
    "vdflash/vispec-llava_1.6_7B_config.json": "refused not a draft config",
    "vdflash/vispec-pangu_mm_pi_7B_config.json": "refused not a draft config",
    "vdflash/vispec-qwen2.5_vl_3B_config.json": "refused not a draft config",
    "vdflash/vispec-qwen2.5_vl_7B_config.json": "refused not a draft config",
}


def test_the_outcome_table_covers_every_new_real_config():
    files = {
        str(p.relative_to(DATA / "real")) for p in (DATA / "real").glob("*/*.json") if p.parent.name != "specforge"
    }
    assert files == set(OUTCOMES) and len(files) >= 40


@pytest.mark.parametrize("name", sorted(OUTCOMES))
def test_each_new_real_config_is_served_as_trained_or_refused_with_its_reason(name):
    verdict, _, what = OUTCOMES[name].partition(" ")
    config = cfg(f"real/{name}")
    if verdict == "refused":
        assert what in refused(config).message
        return
    spec = specreg.normalize(config, vllm="0.33", verifier=VERIFIER)
    errors = {f.code for f in spec.findings if f.severity == "error"}
    if verdict == "error":
        assert what in errors
    else:
        assert not errors and spec.draft_config_dict()["architectures"] == [what]
