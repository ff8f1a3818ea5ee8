"""Native formats (z-lab DFlash, DeepSpec DSpark, native EAGLE-3): detection, normalization to the
same plan as the speculators format, paths that name the native fields, and convert round trips."""

import json
import os
import subprocess
import sys

import pytest

import specreg
from conftest import DATA, NO_TWIN, codes, finding, fixture_config
from hostile_helpers import DATA_NATIVE
from specreg.sources import native
from weights import write_draft

NATIVE = DATA / "native"
FILES = sorted(p.name for p in NATIVE.glob("*.json"))
CONVERTIBLE = [f for f in FILES if f not in NO_TWIN]
VERIFIER = "Qwen/Qwen3-8B"


def native_config(name):
    return json.loads((NATIVE / name).read_text())


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, timeout=60, env=dict(os.environ)
    )


LAYER_KEYS = (
    "hidden_size",
    "num_hidden_layers",
    "vocab_size",
    "layer_types",
    "model_type",
    "head_dim",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "rms_norm_eps",
    "tie_word_embeddings",
    "max_position_embeddings",
    "sliding_window",
)
PLAN_KEYS = (
    "architectures",
    "draft_vocab_size",
    "eagle_aux_hidden_state_layer_ids",
    "dflash_config",
    "target_layer_ids",
    "block_size",
    "mask_token_id",
    "pard_token",
    "markov_rank",
    "markov_head_type",
    "enable_confidence_head",
    "confidence_head_with_markov",
    "sample_from_anchor",
    "dspark_bonus_anchor",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
)


def plan(spec):
    """What a draft is served as: method, length, config fields specreg sets, layers, attention."""
    d = spec.draft_config_dict()
    return {
        "method": spec.method,
        "num_speculative_tokens": spec.num_speculative_tokens,
        "speculative_config": spec.speculative_config_dict(),
        "attention": [a.to_dict() for a in spec.attention],
        "verifier": spec.verifier,
        **{k: d.get(k) for k in PLAN_KEYS + LAYER_KEYS},
    }


@pytest.mark.parametrize(
    "name, expected",
    [
        ("zlab_dflash_qwen3_8b_fixture.json", "zlab"),
        ("zlab_dflash_legacy_schema.json", "zlab"),
        ("zlab_dflash_nested_schema.json", "zlab"),
        ("deepspec_dspark_qwen3_8b.json", "deepspec"),
        ("deepspec_dspark_qwen3_8b_causal.json", "deepspec"),
        ("specforge_qwen3_4b_eagle3.json", "eagle3-native"),
        ("eagle3_release_llama3_70b.json", "eagle3-native"),
        ("modelopt_eagle3_llama4_maverick.json", "eagle3-native"),
    ],
)
def test_detection(name, expected):
    assert native.detect(native_config(name)) == expected


def test_speculators_files_are_not_native():
    assert all(native.detect(fixture_config(n)) is None for n in ("dflash", "eagle3_generated", "dspark_generated"))
    assert native.detect({"model_type": "llama", "hidden_size": 8}) is None


def test_the_zlab_fixture_normalizes_to_the_plan_of_its_speculators_twin():
    twin = specreg.normalize(fixture_config("dflash"), vllm="0.33")
    ours = specreg.normalize(native_config("zlab_dflash_qwen3_8b_fixture.json"), vllm="0.33", verifier=VERIFIER)
    assert ours.format == "zlab" and twin.format == "speculators"
    assert plan(ours) == plan(twin)
    # the twin as speculators' converter wrote it is served with the wrong mask; ours is not
    assert "served-causal-mismatch" in codes(twin) and "served-causal-mismatch" not in codes(ours)


@pytest.mark.parametrize("name", CONVERTIBLE)
@pytest.mark.parametrize("vllm", ["0.26", "0.33"])
def test_each_native_file_normalizes_to_the_plan_of_its_converted_twin(tmp_path, name, vllm):
    out = specreg.convert(NATIVE / name, tmp_path / "twin", verifier=VERIFIER, weights="none", skip_verifier_check=True)
    twin = specreg.load(out.directory, vllm=vllm)
    ours = specreg.normalize(native_config(name), vllm=vllm, verifier=VERIFIER)
    assert twin.format == "speculators"
    assert plan(ours) == plan(twin)


def test_zlab_ids_lengths_and_masks():
    legacy = specreg.normalize(native_config("zlab_dflash_legacy_schema.json"), verifier=VERIFIER)
    assert legacy.num_speculative_tokens == 15  # block_size 16 at the top level, bonus anchor
    assert legacy.draft_config["eagle_aux_hidden_state_layer_ids"] == (2, 11, 20, 29, 38)
    assert legacy.draft_config["dflash_config"]["target_layer_ids"] == (1, 10, 19, 28, 37)
    nested = specreg.normalize(native_config("zlab_dflash_nested_schema.json"), vllm="0.33", verifier=VERIFIER)
    assert nested.num_speculative_tokens == 15  # block_size inside dflash_config
    assert [(a.kind, a.causal) for a in nested.attention] == [("sliding", True)] * 5 + [("full", False)]
    assert nested.needs_v2_model_runner
    # how vLLM's speculators mapping would read the twin is not reported for the native file
    assert "served-causal-mismatch" not in codes(nested)
    assert nested.materialize_reason.startswith("a zlab config")


def test_zlab_optional_causal_and_use_swa():
    cfg = native_config("zlab_dflash_legacy_schema.json")
    cfg["dflash_config"]["use_swa"] = True
    cfg["sliding_window"] = 2048
    swa = specreg.normalize(cfg, verifier=VERIFIER)
    assert {(a.kind, a.window, a.causal) for a in swa.attention} == {("sliding", 2048, False)}
    cfg["dflash_config"]["causal"] = True
    causal = specreg.normalize(cfg, verifier=VERIFIER)
    assert {a.causal for a in causal.attention} == {True}
    assert causal.provenance["attention[0]"].sources[-1] == "$.dflash_config.causal"


def test_deepspec_dspark_drafts_the_whole_block_from_the_anchor():
    spec = specreg.normalize(native_config("deepspec_dspark_qwen3_8b.json"), vllm="0.33", verifier=VERIFIER)
    assert spec.algorithm == "dspark" and spec.method == "dspark"
    assert spec.num_speculative_tokens == 16
    d = spec.draft_config
    assert d["target_layer_ids"] == (1, 9, 17, 25, 33)
    assert (d["markov_rank"], d["markov_head_type"], d["enable_confidence_head"]) == (256, "vanilla", True)
    assert spec.provenance["draft_config.markov_rank"].sources == ("$.dflash_config.markov_rank",)
    assert spec.provenance["draft_config.sample_from_anchor"].kind == "default"


def test_a_dspark_causal_everywhere_is_stated_by_the_flag_each_version_reads():
    cfg = native_config("deepspec_dspark_qwen3_8b_causal.json")
    spec = specreg.normalize(cfg, vllm="0.33", verifier=VERIFIER)
    assert {a.causal for a in spec.attention} == {True}
    assert spec.provenance["attention[0]"].sources == ("$.is_causal",)
    assert spec.draft_config["is_causal"] is True and spec.servable
    assert specreg.normalize(cfg, vllm="0.27", verifier=VERIFIER).draft_config["dflash_config"]["causal"] is True
    old = specreg.normalize(cfg, vllm="0.25", verifier=VERIFIER)
    f = finding(old, "vllm-unsupported-feature")
    assert f.path == "$.is_causal" and "DSparkSpeculator sets dflash_causal = False" in f.message
    assert not old.servable


def test_a_zlab_draft_causal_everywhere_is_served_with_the_flag_each_version_reads():
    cfg = native_config("zlab_dflash_legacy_schema.json")
    cfg["dflash_config"]["causal"] = True
    new = specreg.normalize(cfg, vllm="0.33", verifier=VERIFIER)
    assert {a.causal for a in new.attention} == {True}
    assert new.draft_config["is_causal"] is True and new.servable
    assert "causal" not in new.draft_config["dflash_config"]
    mid = specreg.normalize(cfg, vllm="0.24", verifier=VERIFIER)
    assert mid.draft_config["dflash_config"]["causal"] is True and mid.servable
    old = specreg.normalize(cfg, vllm="0.22", verifier=VERIFIER)
    assert "Needs vLLM >= 0.23" in finding(old, "vllm-unsupported-feature").message


def test_convert_refuses_a_draft_causal_everywhere(tmp_path):
    with pytest.raises(specreg.SpecregError, match="no speculators-format twin"):
        specreg.convert(NATIVE / "deepspec_dspark_qwen3_8b_causal.json", tmp_path / "o", weights="none")
    assert not (tmp_path / "o").exists()


def test_native_eagle3_defaults_say_so():
    spec = specreg.normalize(native_config("specforge_qwen3_4b_eagle3.json"), verifier="Qwen/Qwen3-4B")
    assert spec.method == "eagle3" and spec.num_speculative_tokens == 3
    assert spec.draft_config["draft_vocab_size"] == 32000
    assert spec.draft_config["architectures"] == ("Eagle3LlamaForCausalLM",)
    assert spec.provenance["num_speculative_tokens"].kind == "default"
    assert spec.provenance["draft_config.norm_before_residual"].kind == "default"
    # SpecForge keeps the residual from before hidden_norm (llama3_eagle.py LlamaDecoderLayer.forward)
    assert spec.draft_config["norm_before_residual"] is False
    assert {"native-draft-length-default", "aux-layers-missing", "native-format"} <= set(codes(spec))


def test_modelopt_eagle_config_ids_are_output_of_layer_ids():
    spec = specreg.normalize(native_config("modelopt_eagle3_llama4_maverick.json"), verifier="meta-llama/L4")
    assert spec.draft_config["eagle_aux_hidden_state_layer_ids"] == (2, 24, 45)
    prov = spec.provenance["draft_config.eagle_aux_hidden_state_layer_ids"]
    assert (prov.kind, prov.sources) == ("derived", ("$.eagle_config.eagle_aux_hidden_state_layer_ids",))
    f = finding(spec, "served-layer-ids-mismatch")
    assert f.path == "$.eagle_config.eagle_aux_hidden_state_layer_ids"
    assert spec.materialize_reason and "served-layer-ids-mismatch" in spec.materialize_reason


def test_without_a_verifier_a_finding_says_so():
    spec = specreg.normalize(native_config("zlab_dflash_legacy_schema.json"))
    assert spec.verifier is None
    assert "verifier-missing" in codes(spec)


def test_errors_name_native_paths():
    cfg = native_config("zlab_dflash_legacy_schema.json")
    del cfg["dflash_config"]["target_layer_ids"]
    with pytest.raises(specreg.ConfigError) as err:
        specreg.normalize(cfg)
    assert err.value.path == "$.dflash_config.target_layer_ids"
    cfg = native_config("zlab_dflash_legacy_schema.json")
    cfg["num_hidden_layers"] = "eight"
    with pytest.raises(specreg.ConfigError) as err:
        specreg.normalize(cfg)
    assert err.value.path == "$.num_hidden_layers"
    cfg = native_config("zlab_dflash_legacy_schema.json")
    cfg["dflash_config"]["target_layer_ids"] = [10, 1]
    with pytest.raises(specreg.ConfigError) as err:
        specreg.normalize(cfg)
    assert err.value.path.startswith("$.dflash_config.target_layer_ids")


def test_the_catalog_supplies_the_verifier_of_a_native_hub_draft(hub):
    hub.add("z-lab/Qwen3-8B-DFlash-b16", {"config.json": (NATIVE / "zlab_dflash_qwen3_8b_fixture.json").read_bytes()})
    spec = specreg.load("z-lab/Qwen3-8B-DFlash-b16", vllm="0.33")
    assert spec.format == "zlab"
    assert spec.verifier == "Qwen/Qwen3-8B"  # from registry/z-lab/Qwen3-8B-DFlash-b16.toml
    assert spec.catalog.id == "z-lab/Qwen3-8B-DFlash-b16"


# -- convert --------------------------------------------------------------------------------------


def test_convert_links_weights_and_round_trips(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # load(verifier=) reads the verifier: a warning here, no request
    src = write_draft(tmp_path / "src", native_config("zlab_dflash_nested_schema.json"))
    out = specreg.convert(src, tmp_path / "out", verifier=VERIFIER, skip_verifier_check=True)
    assert out.files == ("config.json", "model.safetensors", "specreg.json")
    assert os.readlink(out.directory / "model.safetensors") == str((src / "model.safetensors").resolve())
    written = json.loads((out.directory / "config.json").read_text())
    assert written["speculators_model_type"] == "dflash"
    assert written["sliding_window_non_causal"] is False  # sliding layers were trained causal
    back = specreg.load(out.directory, vllm="0.33")
    ours = specreg.load(src, vllm="0.33", verifier=VERIFIER)
    assert plan(back) == plan(ours)
    manifest = json.loads((out.directory / "specreg.json").read_text())
    assert (manifest["format"], manifest["verifier"]) == ("zlab", VERIFIER)


def test_convert_refuses_a_speculators_file_and_a_non_empty_dir(tmp_path):
    r = run("convert", str(DATA / "speculators" / "dflash.json"), str(tmp_path / "o"))
    assert r.returncode == 2 and "already in the speculators format" in r.stderr
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    r = run(
        "convert",
        str(NATIVE / "zlab_dflash_legacy_schema.json"),
        str(tmp_path / "full"),
        "--verifier",
        VERIFIER,
        "--skip-verifier-check",
    )
    assert r.returncode == 2 and "is not empty" in r.stderr
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


def test_cli_convert_and_show_of_the_result(tmp_path):
    r = run(
        "convert",
        str(NATIVE / "deepspec_dspark_qwen3_8b.json"),
        str(tmp_path / "o"),
        "--verifier",
        VERIFIER,
        "--skip-verifier-check",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(f"wrote {tmp_path / 'o'}: the speculators-format twin of a deepspec draft")
    shown = run("show", str(tmp_path / "o"), "--json")
    doc = json.loads(shown.stdout)
    assert (doc["format"], doc["algorithm"], doc["num_speculative_tokens"]) == ("speculators", "dspark", 16)


# -- layouts recognized by what they are (z-lab DFlash2, MuseGlimmer, Domino, P-EAGLE, others) ---


def test_a_zlab_dflash2_file_is_dflash2_and_keeps_its_knobs():
    # expected from z-lab's layout: the DFlash knobs in dflash_config, block 16 with the anchor as
    # the bonus token (15 drafts), five full layers trained bidirectional
    spec = specreg.normalize(native_config("zlab_dflash2_museglimmer.json"), vllm="0.33", verifier=VERIFIER)
    assert (spec.algorithm, spec.format, spec.method) == ("dflash2", "zlab-dflash2", "dflash")
    dc = spec.draft_config
    assert dc["architectures"] == ("DFlash2DraftModel",)
    assert {
        k: dc["dflash_config"][k] for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
    } == {"conv_kernel_size": 2, "conv_group_size": 16, "selector_rank": 256, "selector_top_k": 16}
    assert list(dc["dflash_config"]["target_layer_ids"]) == [1, 13, 25, 37, 49]
    assert spec.num_speculative_tokens == 15
    assert [a.causal for a in spec.attention] == [False] * 5
    assert spec.provenance["draft_config.dflash_config.conv_kernel_size"].sources == (
        "$.dflash_config.conv_kernel_size",
    )


def test_a_museglimmer_assistant_with_flat_fields_is_zlab_dflash():
    spec = specreg.normalize(native_config("zlab_museglimmer_assistant.json"), vllm="0.33", verifier=VERIFIER)
    assert (spec.algorithm, spec.format) == ("dflash", "zlab")
    assert spec.num_speculative_tokens == 15
    assert list(spec.draft_config["dflash_config"]["target_layer_ids"]) == [1, 13, 25, 37, 49]
    assert spec.draft_config["dflash_config"]["mask_token_id"] == 201818
    assert spec.provenance["draft_config.dflash_config.mask_token_id"].sources == ("$.mask_token_id",)


@pytest.mark.parametrize(
    ("name", "arch", "why"),
    [
        ("specforge_qwen3_8b_domino.json", "DominoDraftModel", "no vLLM release has a Domino class"),
        ("specforge_qwen3_8b_peagle.json", "PEagleDraftModel", "holds no mask_token_id"),
    ],
)
def test_a_layout_vllm_cannot_serve_is_refused_naming_it(name, arch, why):
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(native_config(name), verifier=VERIFIER, source=name)
    assert info.value.path == "$.architectures"
    assert str(info.value).startswith(f"{name}: $.architectures: {arch}: ") and why in str(info.value)


def test_a_domino_projector_without_the_architecture_is_refused_too():
    cfg = native_config("specforge_qwen3_8b_domino.json")
    cfg["architectures"] = ["SomethingElse"]
    with pytest.raises(specreg.ConfigError, match="DominoDraftModel") as info:
        specreg.normalize(cfg, verifier=VERIFIER)
    assert info.value.path == "$.dflash_config.projector_type"


def test_an_unknown_architecture_gets_one_line_naming_it_and_the_layouts_specreg_reads():
    cfg = {"architectures": ["MedusaHeadModel"], "model_type": "llama", "hidden_size": 8}
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(cfg, source="x/config.json")
    text = str(info.value)
    assert "\n" not in text and "['MedusaHeadModel']" in text
    for layout in (
        "speculators format",
        "DFlashDraftModel",
        "DFlash2DraftModel",
        "DSparkDraftModel",
        "LlamaForCausalLMEagle3",
    ):
        assert layout in text


@pytest.mark.parametrize(
    ("name", "model_type"), [("specforge_phi4_eagle3.json", "phi3"), ("specforge_qwq_32b_eagle3.json", "qwen2")]
)
def test_a_native_eagle3_of_any_model_type_is_served_with_the_llama_eagle3_class(name, model_type):
    # vLLM loads the native file through its registry entry LlamaForCausalLMEagle3 ->
    # Eagle3LlamaForCausalLM; the llama/qwen3 model_type rule is its speculators mapping's only
    spec = specreg.normalize(native_config(name), vllm="0.33", verifier=VERIFIER)
    assert spec.servable, [f.message for f in spec.errors]
    assert spec.draft_config["model_type"] == model_type
    assert spec.draft_config["architectures"] == ("Eagle3LlamaForCausalLM",)
    assert spec.provenance["draft_config.architectures"].sources == ("$.architectures",)


def test_a_speculators_eagle3_of_another_model_type_is_still_refused(variant):
    spec = specreg.normalize(variant("eagle3_generated", transformer_layer_config__model_type="phi3"), vllm="0.33")
    assert "accepts llama or qwen3 layers" in finding(spec, "vllm-unsupported-feature").message


def test_markov_rank_zero_means_no_markov_head():
    cfg = native_config("deepspec_dspark_qwen3_8b.json")
    cfg["dflash_config"]["markov_rank"] = 0
    cfg["dflash_config"]["confidence_head_with_markov"] = False
    spec = specreg.normalize(cfg, vllm="0.33", verifier=VERIFIER)
    assert spec.draft_config["markov_rank"] == 0 and spec.servable
    assert "no Markov head" in finding(spec, "markov-head-off").message


def test_markov_rank_zero_with_a_markov_confidence_head_is_bad_input(variant):
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(variant("dspark_generated", markov_rank=0, confidence_head_with_markov=True))
    assert info.value.path == "$.confidence_head_with_markov" and "markov_rank is 0" in str(info.value)


def test_convert_refuses_an_eagle3_whose_twin_vllms_mapping_would_refuse(tmp_path):
    with pytest.raises(specreg.SpecregError, match="'phi3': vLLM's speculators mapping serves Eagle-3 twins"):
        specreg.convert(
            NATIVE / "specforge_phi4_eagle3.json",
            tmp_path / "o",
            verifier=VERIFIER,
            weights="none",
            skip_verifier_check=True,
        )
    assert not (tmp_path / "o").exists()


def test_a_file_that_is_not_a_speculators_config_says_so():
    with pytest.raises(specreg.ConfigError, match="not a draft config specreg reads"):
        specreg.normalize({"model_type": "llama", "hidden_size": 4096})


# -- values that would allocate ---------------------------------------------------------------------


@pytest.mark.parametrize("n", [300_000_000, 10**30])
def test_a_huge_native_layer_count_is_refused_before_anything_is_built_from_it(n):
    """120 bytes of config once built a 300-million-entry layer list (2.3 GB) before the range check."""
    import tracemalloc

    cfg = json.loads((DATA_NATIVE / "zlab_dflash_qwen3_8b_fixture.json").read_text())
    cfg["num_hidden_layers"] = n
    tracemalloc.start()
    try:
        with pytest.raises(specreg.ConfigError, match=r"num_hidden_layers"):
            specreg.normalize(cfg)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20, f"{peak / 2**20:.0f} MiB allocated"
