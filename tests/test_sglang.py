"""specreg.sglang: the same trained plan, exported for SGLang (config.json + launch flags), its
refusals, the flags after `--`, and the directory it writes. SGLang itself is not needed here: the
SGLang tier (tests/sglang_tier) runs SGLang's own readers on the same exports."""

from __future__ import annotations

import json
import os
from pathlib import Path

import attrs
import pytest

import specreg
from specreg import facts
from specreg.errors import SpecregError
from specreg.sglang import reading
from specreg.sglang.export import differences, export
from specreg.sglang.flags import FlagError, merge
from specreg.sglang.plan import sglang_plan
from specreg.sglang.rules import known, rules

DATA = Path(__file__).parent / "data"
CONFIGS = sorted(
    str(p.relative_to(DATA))
    for p in [*DATA.glob("speculators/*.json"), *DATA.glob("native/*.json"), *DATA.glob("real/*/*.json")]
)
RULES = rules()


def _load(name: str):
    try:
        return specreg.load(DATA / name)
    except specreg.ConfigError:
        return None  # refused by specreg itself (tests/test_real_configs.py, test_native.py say why)


def _settings(flags) -> dict[str, int]:
    return {RULES["options"][n]: int(v) for n, v in zip(flags[::2], flags[1::2]) if v.isdigit()}


@pytest.mark.parametrize("name", CONFIGS)
def test_every_config_is_exported_as_trained_or_refused_in_sglangs_terms(name):
    spec = _load(name)
    if spec is None:
        return  # specreg refuses the file itself, with a ConfigError (its own tests hold why)
    plan = export(spec)
    if not plan.servable:
        assert plan.config == {}
        assert {f.code for f in plan.errors} <= {"sglang-unservable", "draft-length-mismatch", "invalid-draft-shape"}
        return
    config, k, dc = plan.config_dict(), spec.num_speculative_tokens, spec.draft_config
    assert config["architectures"] == [RULES["architectures"][spec.algorithm]["class"]]
    assert isinstance(config["model_type"], str)
    assert plan.flags[:2] == ("--speculative-algorithm", RULES["architectures"][spec.algorithm]["algorithm"])
    assert plan.flags[-2:] == ("--speculative-draft-model-quantization", "unquant")
    if spec.algorithm == "eagle3":
        assert config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [
            i - 1 for i in dc["eagle_aux_hidden_state_layer_ids"]
        ]
        assert plan.flags[2:8] == (
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        )
    else:
        flash = dc.get("dflash_config") or {}
        assert config["dflash_config"]["target_layer_ids"] == list(
            dc.get("target_layer_ids", flash.get("target_layer_ids"))
        )
        anchor = dc.get("sample_from_anchor", flash.get("sample_from_anchor"))
        block = k if spec.algorithm == "dspark" else k + 1
        assert config["dflash_config"]["block_size"] == block
        if spec.algorithm == "dspark":
            assert config["sample_from_anchor"] is anchor
            assert plan.flags[2:4] == ("--speculative-dspark-block-size", str(k))
        else:
            assert anchor is False
            assert plan.flags[2:4] == ("--speculative-dflash-block-size", str(k + 1))
        assert config["layer_types"] == [f"{a.kind}_attention" for a in spec.attention]
        causal = {a.causal for a in spec.attention}
        assert config.get("is_causal") == (causal.pop() if len(causal) == 1 else None)
    got = reading.read(config, spec.algorithm, RULES, flags=_settings(plan.flags))
    assert differences(got, plan.trained) == []


def test_the_fixtures_sglang_serves_are_the_dflash_family_and_eagle3_without_norm_before_residual():
    served = {n for n in CONFIGS if n.startswith("speculators/") and (s := _load(n)) and export(s).servable}
    assert served == {"speculators/dflash.json", "speculators/dflash2.json", "speculators/dspark_generated.json"}


def test_dspark_writes_sample_from_anchor_at_the_top_and_gamma_as_the_trained_proposals():
    plan = export(specreg.load(DATA / "speculators/dspark_generated.json"))
    config = plan.config_dict()
    # sglang/srt/speculative/dspark_components/dspark_config.py: get_dspark_sample_from_anchor reads the top level
    assert config["sample_from_anchor"] is True
    assert config["dflash_config"] == {"target_layer_ids": [1, 9, 17, 25, 33], "mask_token_id": 151669, "block_size": 8}
    assert config["is_causal"] is False and config["model_type"] == "qwen3"
    assert (
        "--speculative-dspark-block-size" in plan.flags
        and plan.flags[plan.flags.index("--speculative-dspark-block-size") + 1] == "8"
    )
    assert (plan.trained.proposals, plan.trained.query_rows) == (8, 8)


def test_dspark_trained_after_the_anchor_keeps_its_query_rows(fx):
    cfg = fx("dspark_generated")
    cfg["sample_from_anchor"] = False
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 7
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert plan.servable
    assert plan.config["sample_from_anchor"] is False and plan.config["dflash_config"]["block_size"] == 7
    got = reading.read(plan.config_dict(), "dspark", RULES, flags=_settings(plan.flags))
    assert (got.proposals, got.query_rows) == (7, 8)  # gamma + 1 rows when the anchor row is not sampled


def test_dflash2_knobs_are_under_dflash_config():
    plan = export(specreg.load(DATA / "speculators/dflash2.json"))
    flash = plan.config["dflash_config"]
    assert {k: flash[k] for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")} == {
        "conv_kernel_size": 2,
        "conv_group_size": 16,
        "selector_rank": 256,
        "selector_top_k": 16,
    }
    assert plan.config["architectures"] == ["DFlash2DraftModel"]
    assert plan.config["sliding_window"] == 2048 and plan.config["use_sliding_window"] is True
    assert plan.config["is_causal"] is False


def test_eagle3_is_a_chain_of_the_trained_length_with_ids_in_layer_output_convention(fx):
    cfg = fx("eagle3_generated")
    cfg["norm_before_residual"] = False
    plan = export(specreg.normalize(cfg, source="eagle3.json"))
    assert plan.servable, [f.message for f in plan.errors]
    assert plan.config["eagle_config"] == {
        "eagle_aux_hidden_state_layer_ids": [1, 15, 28],
        "use_aux_hidden_state": True,
    }
    assert plan.config["architectures"] == ["LlamaForCausalLMEagle3"]
    assert list(plan.flags[:8]) == [
        "--speculative-algorithm",
        "EAGLE3",
        "--speculative-num-steps",
        "3",
        "--speculative-eagle-topk",
        "1",
        "--speculative-num-draft-tokens",
        "4",
    ]


def test_eagle3_without_ids_is_refused_unless_the_verifiers_layer_count_is_known(fx):
    cfg = fx("eagle3_generated")
    cfg["norm_before_residual"] = False
    del cfg["eagle_aux_hidden_state_layer_ids"]
    spec = specreg.normalize(cfg, source="eagle3.json")
    assert [f.path for f in export(spec).errors] == ["$.eagle_aux_hidden_state_layer_ids"]
    plan = export(spec, target_layers=32)
    assert plan.servable and plan.config["eagle_config"]["eagle_aux_hidden_state_layer_ids"] == [1, 15, 28]


@pytest.mark.parametrize(
    "change, path, words",
    [
        ({"norm_before_residual": True}, "$.norm_before_residual", "never reads it"),
        (
            {"transformer_layer_config": {"model_type": "qwen3"}},
            "$.transformer_layer_config.model_type",
            "llama layers",
        ),
    ],
)
def test_eagle3_refusals(fx, change, path, words):
    cfg = fx("eagle3_generated")
    cfg["norm_before_residual"] = False
    for key, value in change.items():
        cfg[key] = {**cfg[key], **value} if isinstance(value, dict) else value
    plan = export(specreg.normalize(cfg, source="eagle3.json"))
    assert [(f.code, f.path) for f in plan.errors] == [("sglang-unservable", path)]
    assert words in plan.errors[0].message and plan.config == {}


def test_dflash2_trained_with_nope_layers_is_refused(fx):
    """SGLang 0.5.23's DFlash layers all rotate: a draft trained without RoPE in some is not served as trained."""
    cfg = fx("dflash2")
    cfg["transformer_layer_config"]["no_rope_layers"] = [2]
    plan = export(specreg.normalize(cfg, vllm=str(facts.since("dflash2_nope_layers")), source="dflash2.json"))
    assert [(f.code, f.path) for f in plan.errors] == [
        ("sglang-unservable", "$.transformer_layer_config.no_rope_layers")
    ]
    assert "without RoPE in layers [2]" in plan.errors[0].message and "rotates every layer" in plan.errors[0].message


def test_dflash_trained_from_the_anchor_is_refused(fx):
    cfg = fx("dflash")
    cfg["sample_from_anchor"] = True
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 16
    plan = export(specreg.normalize(cfg, source="dflash.json"))
    assert [f.path for f in plan.errors] == ["$.sample_from_anchor"]
    assert "never reads sample_from_anchor" in plan.errors[0].message


@pytest.mark.parametrize(
    "causal_kind, refused",
    [
        ("full", True),  # sliding non-causal, full causal: the opposite of SGLang's default, and not one is_causal
        ("sliding", False),  # sliding causal, full non-causal: SGLang's default for layer_types, no is_causal needed
    ],
)
def test_per_layer_causality_is_said_with_layer_types_and_is_causal_or_refused(causal_kind, refused):
    spec = specreg.load(DATA / "speculators/dflash2.json")
    masks = [attrs.evolve(a, causal=a.kind == causal_kind) for a in spec.attention]
    plan = export(attrs.evolve(spec, attention=masks))
    assert "is_causal" not in plan.config
    if refused:
        assert [f.path for f in plan.errors] == ["$.transformer_layer_config.layer_types"]
        assert "one top-level is_causal" in plan.errors[0].message
    else:
        assert plan.servable


def test_block_draft_layers_are_written_as_the_qwen3_layers_sglang_builds(fx):
    cfg = fx("dspark_generated")
    cfg["transformer_layer_config"]["model_type"] = "llama"
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert [f.path for f in plan.errors] == ["$.transformer_layer_config.model_type"]
    torchspec = export(specreg.load(DATA / "real/torchspec/dspark_draft_config.json"))  # layers named "dspark"
    assert torchspec.servable and torchspec.config["model_type"] == "qwen3"


def test_a_dflash_draft_with_its_own_pruned_head_is_refused(fx):
    cfg = fx("dflash")
    cfg["draft_vocab_size"] = 32000
    plan = export(specreg.normalize(cfg, source="dflash.json"))
    assert [f.path for f in plan.errors] == ["$.draft_vocab_size"]


@pytest.mark.parametrize("names", [["lm_head.weight"], ["d2t", "t2d"], ["model.embed_tokens.weight"]])
def test_a_dflash_family_checkpoint_with_a_head_sglang_skips_is_refused(names):
    spec = specreg.load(DATA / "speculators/dspark_generated.json")
    plan = export(spec, tensor_names=["fc.weight", *names])
    assert [f.path for f in plan.errors] == ["$"] and names[0] in plan.errors[0].message


def test_dspark_without_a_markov_head_is_refused(fx):
    cfg = fx("dspark_generated")
    cfg["markov_rank"] = 0
    cfg["confidence_head_with_markov"] = False
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert [f.path for f in plan.errors] == ["$.markov_rank"]


def test_dspark_without_a_markov_head_type_is_refused(fx):
    cfg = fx("dspark_generated")
    del cfg["markov_head_type"]
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert [f.path for f in plan.errors] == ["$.markov_head_type"]


@pytest.mark.parametrize(
    "fixture, algorithm", [("peagle", "peagle"), ("xpress", "xpress"), ("mlp_v040", "mlp"), ("mtp", "mtp")]
)
def test_algorithms_sglang_does_not_serve_are_refused_with_the_reason(fixture, algorithm):
    plan = export(specreg.load(DATA / f"speculators/{fixture}.json"))
    assert plan.algorithm == algorithm
    assert [f.code for f in plan.findings] == ["sglang-unservable"]
    assert plan.findings[0].message == RULES["not_served"][algorithm]


def test_a_speculators_file_unmodified_is_refused_by_sglang_before_any_weight_loads():
    plan = export(specreg.load(DATA / "speculators/dflash.json"))
    (finding,) = [f for f in plan.findings if f.code == "sglang-served-differently"]
    assert "no model_type" in finding.message and plan.unmodified.refused


def test_an_unmodified_zlab_file_with_sliding_layers_is_refused_by_sglang():
    # transformers' Qwen3Config drops sliding_window when use_sliding_window is false (the file does not
    # say it), and SGLang's get_dflash_attention_sliding_window_size then refuses the sliding layers
    plan = export(specreg.load(DATA / "native/zlab_dflash_nested_schema.json"))
    assert plan.servable and plan.config["use_sliding_window"] is True
    assert "sliding_attention layers have no sliding_window" in plan.unmodified.refused


def test_an_unmodified_eagle3_file_is_drafted_as_sglangs_default_tree():
    spec = specreg.load(DATA / "native/specforge_qwen3_4b_eagle3.json")
    plan = export(spec, target_architecture="LlamaForCausalLM")
    # speculative_hook.py: _auto_choose_speculative_params gives a Llama target (5, 4, 8)
    assert plan.unmodified.eagle_tree == (5, 4, 8)
    assert any("a top-4 tree of 8 draft tokens over 5 steps" in f.message for f in plan.findings)


def test_an_unknown_sglang_release_is_refused_by_name():
    spec = specreg.load(DATA / "speculators/dflash.json")
    with pytest.raises(SpecregError, match=r"SGLang '9.9.9' is not a release specreg knows \(known: 0.5.23\)"):
        export(spec, sglang="9.9.9")
    assert export(spec).sglang_version == known()[-1]


def test_the_installed_sglang_is_targeted_and_a_newer_one_is_said(monkeypatch):
    from specreg.sglang import rules as rules_module

    spec = specreg.load(DATA / "speculators/dspark_generated.json")
    monkeypatch.setattr(rules_module, "installed", lambda: known()[-1])
    assert [f.code for f in export(spec).findings if f.code == "sglang-version-unchecked"] == []
    monkeypatch.setattr(rules_module, "installed", lambda: "99.0.0")
    plan = export(spec)
    assert plan.sglang_version == known()[-1] and plan.servable
    (finding,) = [f for f in plan.findings if f.code == "sglang-version-unchecked"]
    assert finding.severity == "warning" and "SGLang 99.0.0 is installed" in finding.message
    monkeypatch.setattr(rules_module, "installed", lambda: "0.0.1")  # older than any rules: refused by name
    with pytest.raises(SpecregError, match=r"SGLang '0.0.1' is not a release specreg knows"):
        export(spec)


def test_build_target_layer_ids_is_sglangs_guess():
    # sglang/srt/speculative/dflash_utils.py: build_target_layer_ids (0.5.23), worked by hand for 36 target
    # layers: round(1 + i * 32 / 4); the SGLang tier runs the function itself on more shapes
    assert reading.build_target_layer_ids(36, 5) == [1, 9, 17, 25, 33]
    assert reading.build_target_layer_ids(36, 1) == [18]


# -- the flags after `--` ----------------------------------------------------------------------------


def test_other_sglang_flags_pass_through():
    assert merge(["--port", "8000", "--mem-fraction-static", "0.8"], RULES) == [
        "--port",
        "8000",
        "--mem-fraction-static",
        "0.8",
    ]


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--speculative-num-steps", "5"], "--speculative-num-steps after --: specreg writes"),
        (["--model", "x"], "--model after --: specreg writes"),
        (["--speculative-draft-model=x"], "--speculative-draft-model after --: specreg writes"),
        (["--speculative-draft-model-q", "fp8"], "SGLang reads it as --speculative-draft-model-quantization"),
        (["--speculative-num", "5"], "ambiguous option: --speculative-num could match"),
    ],
)
def test_flags_specreg_writes_are_refused_in_any_spelling(flags, message):
    with pytest.raises(FlagError, match=message.replace("(", r"\(")):
        merge(flags, RULES)


@pytest.mark.parametrize("method, flag", [("fp8", "fp8"), ("compressed-tensors", "compressed-tensors")])
def test_a_quantized_draft_is_served_with_its_own_method(fx, method, flag):
    cfg = fx("dspark_generated")
    cfg["transformer_layer_config"]["quantization_config"] = {"quant_method": method}
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert plan.servable and plan.flags[-2:] == ("--speculative-draft-model-quantization", flag)


def test_a_draft_quantization_sglang_does_not_offer_is_refused(fx):
    cfg = fx("dspark_generated")
    cfg["transformer_layer_config"]["quantization_config"] = {"quant_method": "hqq"}
    plan = export(specreg.normalize(cfg, source="dspark.json"))
    assert [f.path for f in plan.errors] == ["$.quantization_config.quant_method"]


def test_the_target_quantization_is_the_users_and_the_draft_keeps_its_own():
    plan = export(specreg.load(DATA / "speculators/dflash.json"))
    argv = plan.argv("/d", extra=merge(["--quantization", "fp8"], RULES))
    assert argv[argv.index("--speculative-draft-model-quantization") + 1] == "unquant"
    assert argv[-2:] == ["--quantization", "fp8"]


# -- the directory ------------------------------------------------------------------------------------


def test_the_directory_holds_the_export_and_links_the_weights(tmp_path):
    from tiny import write_pair

    draft, _verifier = write_pair(tmp_path, "dspark")
    plan = sglang_plan(draft)
    assert plan.servable, [f.message for f in plan.errors]
    done = plan.materialize(tmp_path / "out")
    assert json.loads((tmp_path / "out/config.json").read_text()) == plan.config_dict()
    assert os.path.realpath(tmp_path / "out/model.safetensors") == str((draft / "model.safetensors").resolve())
    assert (tmp_path / "out/model.safetensors").is_symlink()
    manifest = json.loads((tmp_path / "out/specreg.json").read_text())
    assert (manifest["engine"], manifest["sglang_version"]) == ("sglang", RULES["sglang"])
    assert done.argv()[:6] == [
        "python",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "Qwen/Qwen3-8B",
        "--speculative-draft-model-path",
    ]


def test_a_hub_draft_is_checked_by_its_tensor_names_and_its_weights_linked(hub, tmp_path):
    from tiny import draft_config, safetensors_files, weights

    files = {"config.json": json.dumps(draft_config("dflash")).encode(), **safetensors_files(weights("dflash"))}
    hub.add("org/dflash", files)
    assert "lm_head.weight" in sglang_plan("org/dflash").errors[0].message  # read from the safetensors header
    head_free = {n: s for n, s in weights("dflash").items() if not n.startswith("lm_head.")}
    hub.add("org/dflash-shared-head", {"config.json": files["config.json"], **safetensors_files(head_free)})
    plan = sglang_plan("org/dflash-shared-head")
    assert plan.servable, [f.message for f in plan.errors]
    plan.materialize(tmp_path / "out")
    assert (tmp_path / "out/model.safetensors").is_symlink()


def test_a_refused_draft_writes_nothing(tmp_path):
    from tiny import write_pair

    draft, _verifier = write_pair(tmp_path, "dflash")  # its checkpoint holds lm_head.weight
    plan = sglang_plan(draft)
    assert "lm_head.weight" in plan.errors[0].message
    with pytest.raises(SpecregError, match="not servable as trained by SGLang"):
        plan.materialize(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_the_plan_is_a_frozen_value_with_a_json_form():
    plan = export(specreg.load(DATA / "speculators/dspark_generated.json"))
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        plan.flags = ()
    doc = json.loads(json.dumps(plan.to_dict()))
    assert doc["engine"] == "sglang" and doc["servable"] is True and doc["trained"]["proposals"] == 8


def test_sglang_plan_is_public_and_imports_neither_sglang_nor_torch():
    import subprocess
    import sys

    assert specreg.sglang_plan is sglang_plan
    code = (
        "import sys, specreg, specreg.sglang.plan, specreg.sglang.export; "
        "print(sorted(m for m in ('sglang', 'torch', 'transformers') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
