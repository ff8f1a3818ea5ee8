"""DFlash family (dflash, dflash2, dspark): exact normalized values, from DESIGN.md's semantics."""

import pytest

import specreg
from conftest import DROP, codes, finding

AUX = [2, 10, 18, 26, 34]
TARGET = [1, 9, 17, 25, 33]


# -- dflash.json: 5 full layers, sliding_window_non_causal false, block 16, 15 tokens ------------


def test_dflash_at_033_states_the_trained_bidirectional_mask(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.33")
    assert spec.algorithm == "dflash"
    assert spec.method == "dflash"
    assert spec.verifier == "Qwen/Qwen3-8B"
    assert spec.num_speculative_tokens == 15
    assert dict(spec.speculative_config) == {"method": "dflash", "num_speculative_tokens": 15}
    dc = spec.draft_config_dict()
    assert dc["architectures"] == ["DFlashDraftModel"]
    assert dc["eagle_aux_hidden_state_layer_ids"] == AUX
    assert dc["draft_vocab_size"] == 151936
    assert dc["dflash_config"] == {
        "mask_token_id": 151669,
        "target_layer_ids": TARGET,
        "sample_from_anchor": False,
    }
    assert dc["is_causal"] is False  # vLLM >= 0.28 reads is_causal before dflash_config.causal
    assert [(a.layer, a.kind, a.window, a.causal) for a in spec.attention] == [
        (i, "full", None, False) for i in range(5)
    ]


def test_dflash_at_033_reports_that_vllm_would_make_full_layers_causal(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.33")
    f = finding(spec, "served-causal-mismatch")
    assert f.severity == "warning"
    assert f.path == "$.sliding_window_non_causal"
    assert "layers 0, 1, 2, 3, 4 (full attention): trained non-causal, served causal" in f.message
    assert codes(spec) == ["served-causal-mismatch", "auto-map-ignored"]


def test_dflash_at_026_has_the_mismatch_but_no_sample_from_anchor_key(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.26")
    assert spec.draft_config_dict()["dflash_config"] == {
        "mask_token_id": 151669,
        "target_layer_ids": TARGET,
        "causal": False,
    }
    assert "served-causal-mismatch" in codes(spec)


@pytest.mark.parametrize("version", ["0.24", "0.25"])
def test_dflash_before_026_is_served_as_trained(fx, version):
    spec = specreg.normalize(fx("dflash"), vllm=version)
    assert spec.draft_config_dict()["dflash_config"]["causal"] is False
    assert codes(spec) == ["auto-map-ignored"]


def test_dflash_at_021_keeps_aux_ids_unshifted_and_writes_no_causal_flag(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.21")
    assert spec.draft_config_dict()["dflash_config"] == {"mask_token_id": 151669, "target_layer_ids": AUX}
    assert codes(spec) == ["auto-map-ignored"]
    assert spec.provenance["draft_config.dflash_config.target_layer_ids"].kind == "derived"


def test_dflash_at_022_shifts_target_ids(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.22")
    assert spec.draft_config_dict()["dflash_config"]["target_layer_ids"] == TARGET


def test_dflash_before_020_is_not_served(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.19")
    f = finding(spec, "vllm-unsupported-algorithm")
    assert f.severity == "error"
    assert "vLLM >= 0.20" in f.message
    assert not spec.servable


def test_dflash_provenance_names_sources_and_derivations(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.33")
    p = spec.provenance
    assert p["draft_config.hidden_size"].sources == ("$.transformer_layer_config.hidden_size",)
    assert p["draft_config.hidden_size"].kind == "source"
    assert p["draft_config.dflash_config.mask_token_id"].sources == ("$.mask_token_id",)
    assert p["draft_config.dflash_config.sample_from_anchor"].sources == ("$.sample_from_anchor",)
    assert p["num_speculative_tokens"].sources == ("$.speculators_config.proposal_methods[0].speculative_tokens",)
    assert p["speculative_config.method"].kind == "derived"
    assert p["attention[3]"].sources == ("$.transformer_layer_config.layer_types[3]",)

    # every output value has provenance
    def leaves(prefix, value):
        if isinstance(value, dict):
            for k, v in value.items():
                yield from leaves(f"{prefix}.{k}", v)
        else:
            yield prefix

    for leaf in leaves("draft_config", spec.draft_config_dict()):
        assert any(leaf == k or leaf.startswith(k + ".") for k in p), leaf
    for key in spec.speculative_config:
        assert f"speculative_config.{key}" in p


# -- mixed sliding/full layers ----------------------------------------------------------------

MIXED = ["sliding_attention"] * 4 + ["full_attention"]


def mixed_dflash(variant, **more):
    return variant(
        "dflash",
        transformer_layer_config__layer_types=MIXED,
        transformer_layer_config__sliding_window=2048,
        **more,
    )


def test_causal_sliding_and_bidirectional_full_layers_get_no_global_flag(variant):
    spec = specreg.normalize(mixed_dflash(variant), vllm="0.33")
    assert [(a.kind, a.window, a.causal) for a in spec.attention] == [("sliding", 2048, True)] * 4 + [
        ("full", None, False)
    ]
    assert "causal" not in spec.draft_config_dict()["dflash_config"]
    assert "is_causal" not in spec.draft_config_dict()
    f = finding(spec, "served-causal-mismatch")
    assert "layer 4 (full attention): trained non-causal, served causal" in f.message
    assert "needs-v2-model-runner" in codes(spec)
    assert spec.needs_v2_model_runner


@pytest.mark.parametrize("version", ["0.26", "0.27"])
def test_mixed_layers_from_026_are_served_as_trained_by_layer_types(variant, version):
    spec = specreg.normalize(mixed_dflash(variant), vllm=version)
    assert spec.servable
    assert "causal" not in spec.draft_config_dict()["dflash_config"]
    assert "dflash_config.causal = not sliding_window_non_causal" in finding(spec, "served-causal-mismatch").message


@pytest.mark.parametrize("version", ["0.24", "0.25"])
def test_mixed_causal_layers_need_per_layer_masks_from_026(variant, version):
    # 0.25's model computed a per-layer value but left it unused; both runners took one global flag
    spec = specreg.normalize(mixed_dflash(variant), vllm=version)
    assert "Needs vLLM >= 0.26" in finding(spec, "vllm-unsupported-feature").message
    assert "served-causal-mismatch" not in codes(spec)


def test_a_layer_configs_own_is_causal_is_cleared_when_layers_differ(variant):
    spec = specreg.normalize(mixed_dflash(variant, transformer_layer_config__is_causal=True), vllm="0.33")
    assert spec.draft_config_dict()["is_causal"] is None and spec.servable
    assert (
        "applies the layer config's is_causal = true to every layer" in finding(spec, "served-causal-mismatch").message
    )


def all_sliding_dflash(variant):
    """dflash.json with five causal sliding layers (sliding_window_non_causal stays false)."""
    return variant(
        "dflash",
        transformer_layer_config__layer_types=["sliding_attention"] * 5,
        transformer_layer_config__sliding_window=1024,
    )


@pytest.mark.parametrize("version", ["0.23", "0.24", "0.25"])
def test_uniform_causal_layers_at_023_025_are_stated_by_the_global_flag(variant, version):
    spec = specreg.normalize(all_sliding_dflash(variant), vllm=version)
    assert spec.draft_config_dict()["dflash_config"]["causal"] is True
    assert (
        "applies one causal flag, unset in the file, to every layer" in finding(spec, "served-causal-mismatch").message
    )


def test_mixed_causal_layers_before_023_are_told_the_release_that_serves_them(variant):
    """0.22 said ">= 0.23", and 0.23 then said ">= 0.26": name the first release with every rule."""
    spec = specreg.normalize(mixed_dflash(variant), vllm="0.22")
    f = finding(spec, "vllm-unsupported-feature")
    assert "Needs vLLM >= 0.26" in f.message and "0.23" not in f.message
    assert "served-causal-mismatch" not in codes(spec)


def test_all_sliding_causal_layers_get_causal_true(variant):
    spec = specreg.normalize(all_sliding_dflash(variant), vllm="0.33")
    assert spec.draft_config_dict()["is_causal"] is True
    assert (
        specreg.normalize(all_sliding_dflash(variant), vllm="0.27").draft_config_dict()["dflash_config"]["causal"]
        is True
    )
    assert "served-causal-mismatch" not in codes(spec)


def test_missing_non_causal_flag_means_non_causal_sliding_layers(variant):
    cfg = mixed_dflash(variant, sliding_window_non_causal=DROP)
    spec = specreg.normalize(cfg, vllm="0.33")
    assert [a.causal for a in spec.attention] == [False] * 5
    assert spec.draft_config_dict()["is_causal"] is False
    assert "trainer-default-applied" in codes(spec)
    assert "served-causal-mismatch" not in codes(spec)  # vLLM reads missing as non-causal too


# -- draft length -----------------------------------------------------------------------------


def test_missing_sample_from_anchor_is_derived_from_length_and_block(variant):
    spec = specreg.normalize(variant("dflash", sample_from_anchor=DROP), vllm="0.33")
    assert spec.draft_config_dict()["dflash_config"]["sample_from_anchor"] is False
    prov = spec.provenance["draft_config.dflash_config.sample_from_anchor"]
    assert prov.kind == "derived"
    assert prov.why == "speculative_tokens == block_size - 1"
    assert "served-length-mismatch" not in codes(spec)


@pytest.mark.parametrize("version", ["0.26", "0.27", "0.33"])
def test_a_dflash_draft_sampling_from_the_anchor_is_served_by_no_vllm(variant, version):
    cfg = variant("dflash", sample_from_anchor=DROP, speculators_config__proposal_methods__0__speculative_tokens=16)
    spec = specreg.normalize(cfg, vllm=version)
    assert spec.draft_config_dict()["dflash_config"].get("sample_from_anchor", True) is True
    assert spec.num_speculative_tokens == 16
    f = finding(spec, "vllm-unsupported-feature")
    assert "No vLLM release serves this layout" in f.message
    assert ("V2 runner refuses" in f.message) == (version != "0.26")
    assert not spec.servable


# -- the writer's version: speculators < 0.7 had no sample_from_anchor --------------------------


def gemma_like_v05(variant, **more):
    """Shaped like the RedHat gemma-4-31B DFlash release: block 8, 8 speculative tokens, no
    sample_from_anchor, written by speculators 0.5.0."""
    changes = {
        "sample_from_anchor": DROP,
        "block_size": 8,
        "speculators_version": "0.5.0",
        "speculators_config__proposal_methods__0__speculative_tokens": 8,
    }
    return variant("dflash", **{**changes, **more})


def test_a_pre_07_dflash_with_block_size_tokens_keeps_the_anchor_drop_layout(variant):
    # speculators v0.5.0 (f26d8a7) src/speculators/models/dflash/core.py writes
    # speculative_tokens = block_size - 1: "DFlash first position is anchor position, not used during gen"
    spec = specreg.normalize(gemma_like_v05(variant), vllm="0.33")
    assert spec.draft_config_dict()["dflash_config"]["sample_from_anchor"] is False
    prov = spec.provenance["draft_config.dflash_config.sample_from_anchor"]
    assert prov.kind == "default" and "speculators 0.5.0 predates sample_from_anchor" in prov.why
    assert spec.num_speculative_tokens == 7
    assert spec.speculative_config["num_speculative_tokens"] == 7
    f = finding(spec, "served-length-mismatch")
    assert f.path == "$.speculators_config.proposal_methods[0].speculative_tokens"
    assert "drafts block_size - 1 = 7 tokens" in f.message
    assert codes(spec).count("served-length-mismatch") == 1
    assert "vllm-unsupported-feature" not in codes(spec) and spec.servable


def test_a_pre_07_dflash_with_block_size_minus_one_tokens_has_no_length_finding(variant):
    spec = specreg.normalize(
        gemma_like_v05(variant, speculators_config__proposal_methods__0__speculative_tokens=7), vllm="0.33"
    )
    assert spec.num_speculative_tokens == 7
    assert "served-length-mismatch" not in codes(spec) and "draft-length-mismatch" not in codes(spec)


def test_from_07_block_size_tokens_mean_sampling_from_the_anchor(variant):
    spec = specreg.normalize(gemma_like_v05(variant, speculators_version="0.7.0"), vllm="0.33")
    assert spec.draft_config_dict()["dflash_config"]["sample_from_anchor"] is True
    assert spec.provenance["draft_config.dflash_config.sample_from_anchor"].why == "speculative_tokens == block_size"


def test_draft_length_that_disagrees_with_the_block_is_an_error_and_the_trained_length_is_used(variant):
    cfg = variant("dflash", speculators_config__proposal_methods__0__speculative_tokens=10)
    spec = specreg.normalize(cfg, vllm="0.33")
    f = finding(spec, "draft-length-mismatch")
    assert f.severity == "error"
    assert f.path == "$.speculators_config.proposal_methods[0].speculative_tokens"
    assert "drafts block_size - 1 = 15 tokens" in f.message
    assert spec.num_speculative_tokens == 15
    assert spec.speculative_config["num_speculative_tokens"] == 15


# -- dflash2.json: 4 sliding (2048) + 1 full, sliding_window_non_causal true ---------------------


def test_dflash2_at_033(fx):
    spec = specreg.normalize(fx("dflash2"), vllm="0.33")
    assert spec.method == "dflash"
    assert spec.num_speculative_tokens == 15
    dc = spec.draft_config_dict()
    assert dc["architectures"] == ["DFlash2DraftModel"]
    assert dc["dflash_config"] == {
        "mask_token_id": 151669,
        "target_layer_ids": TARGET,
        "sample_from_anchor": False,
        "conv_kernel_size": 2,
        "conv_group_size": 16,
        "selector_rank": 256,
        "selector_top_k": 16,
    }
    assert [(a.kind, a.window, a.causal) for a in spec.attention] == [("sliding", 2048, False)] * 4 + [
        ("full", None, False)
    ]
    assert dc["is_causal"] is False
    assert codes(spec) == ["auto-map-ignored", "needs-v2-model-runner"]


def test_dflash2_needs_vllm_029(fx):
    spec = specreg.normalize(fx("dflash2"), vllm="0.28")
    assert "vLLM >= 0.29" in finding(spec, "vllm-unsupported-algorithm").message


# -- DFlash2 trained with NoPE layers (transformer_layer_config.no_rope_layers: layer indices) ----


def _nope_releases() -> tuple[str, str]:
    """(the newest release that serves DFlash2 but rotates every layer, the first that skips RoPE in the
    listed layers), from the facts (tests/conformance reads both from the wheels)."""
    from specreg import facts

    dflash2 = [r for r in facts.known() if facts.holds("algorithm_dflash2", r)]
    rotates = [r for r in dflash2 if not facts.holds("dflash2_nope_layers", r)]
    return rotates[-1], str(facts.since("dflash2_nope_layers"))


def _nope(fx, layers):
    cfg = fx("dflash2")
    cfg["transformer_layer_config"]["no_rope_layers"] = layers
    return cfg


def test_dflash2_with_nope_layers_is_an_error_where_vllm_rotates_every_layer(fx):
    old, first = _nope_releases()
    spec = specreg.normalize(_nope(fx, [3, 1]), vllm=old)
    f = finding(spec, "vllm-unsupported-feature")
    assert f.severity == "error"
    assert f.path == "$.transformer_layer_config.no_rope_layers"
    assert "trained without RoPE in layers [1, 3]" in f.message
    assert "rotates every DFlash2 layer" in f.message and f"Needs vLLM >= {first}" in f.message


def test_dflash2_with_nope_layers_is_served_as_trained_where_vllm_reads_them(fx):
    _old, first = _nope_releases()
    spec = specreg.normalize(_nope(fx, [1]), vllm=first)
    assert "vllm-unsupported-feature" not in codes(spec)
    # vLLM's hf_config_override gives this config its NoPE class by the field itself: it stays in the
    # draft config with the DFlash2 class name (tests/vllm_tier runs 0.34's own override on it)
    dc = spec.draft_config_dict()
    assert dc["no_rope_layers"] == [1] and dc["architectures"] == ["DFlash2DraftModel"]


@pytest.mark.parametrize("layers", [[], None])
def test_dflash2_without_nope_layers_has_no_rope_finding(fx, layers):
    old, _first = _nope_releases()
    spec = specreg.normalize(_nope(fx, layers) if layers is not None else fx("dflash2"), vllm=old)
    assert "vllm-unsupported-feature" not in codes(spec)


def test_a_nope_layer_the_draft_does_not_have_is_a_config_error(fx):
    with pytest.raises(specreg.ConfigError) as exc:
        specreg.normalize(_nope(fx, [0, 5]), vllm=_nope_releases()[1], source="dflash2.json")
    (problem,) = exc.value.problems
    assert problem.path == "$.transformer_layer_config.no_rope_layers[1]"
    assert "layer 5 is not one of the draft's 5 layers (0..4)" in problem.message


def test_a_per_layer_mask_in_no_rope_layers_is_a_config_error_not_read_as_indices(fx):
    with pytest.raises(specreg.ConfigError) as exc:
        specreg.normalize(_nope(fx, [1, 1, 1, 0, 1]), vllm=_nope_releases()[1], source="dflash2.json")
    (problem,) = exc.value.problems
    assert problem.path == "$.transformer_layer_config.no_rope_layers[1]"
    assert "listed twice" in problem.message and "not as a per-layer 0/1 mask" in problem.message


# -- dspark_generated.json: 3 full layers, sample_from_anchor true, block 8, 8 tokens -----------


def test_dspark_at_033(fx):
    spec = specreg.normalize(fx("dspark_generated"), vllm="0.33")
    assert spec.method == "dspark"
    assert dict(spec.speculative_config) == {"method": "dspark", "num_speculative_tokens": 8}
    dc = spec.draft_config_dict()
    assert "dflash_config" not in dc
    expected = {
        "architectures": ["Qwen3DSparkModel"],
        "eagle_aux_hidden_state_layer_ids": AUX,
        "target_layer_ids": TARGET,
        "mask_token_id": 151669,
        "block_size": 8,
        "markov_rank": 256,
        "markov_head_type": "vanilla",
        "enable_confidence_head": True,
        "confidence_head_with_markov": True,
        "sample_from_anchor": True,
        "dspark_bonus_anchor": False,
        "draft_vocab_size": 151936,
    }
    assert {k: dc[k] for k in expected} == expected
    assert [(a.kind, a.causal) for a in spec.attention] == [("full", False)] * 3
    assert codes(spec) == ["auto-map-ignored", "needs-v2-model-runner"]
    assert spec.serve_env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert "V1 runner refuses it" in finding(spec, "needs-v2-model-runner").message


def test_dspark_at_026_is_forced_to_a_bonus_anchor(fx):
    spec = specreg.normalize(fx("dspark_generated"), vllm="0.26")
    assert "dspark_bonus_anchor=true" in finding(spec, "served-length-mismatch").message
    assert spec.draft_config_dict()["dspark_bonus_anchor"] is False


def test_dspark_missing_sample_from_anchor_is_written_explicitly(variant):
    spec = specreg.normalize(variant("dspark_generated", sample_from_anchor=DROP), vllm="0.33")
    assert spec.draft_config_dict()["sample_from_anchor"] is True
    assert spec.provenance["draft_config.sample_from_anchor"].kind == "derived"
    assert "served-length-mismatch" in codes(spec)


def test_dspark_without_anchor_or_block_uses_the_trainer_default_and_derives_the_block(variant):
    spec = specreg.normalize(variant("dspark_generated", sample_from_anchor=DROP, block_size=DROP), vllm="0.33")
    dc = spec.draft_config_dict()
    assert dc["sample_from_anchor"] is True
    assert dc["block_size"] == 8
    assert spec.provenance["draft_config.sample_from_anchor"].kind == "default"
    assert "trainer-default-applied" in codes(spec)


def test_dspark_names_the_omni_class_when_the_source_does(variant):
    spec = specreg.normalize(variant("dspark_generated", architectures=["Qwen3OmniDSparkModel"]), vllm="0.33")
    assert spec.draft_config_dict()["architectures"] == ["Qwen3OmniDSparkModel"]


def dspark_sliding(variant, non_causal):
    """dspark_generated.json with one sliding layer (window 512) and the trained sliding mask."""
    return variant(
        "dspark_generated",
        transformer_layer_config__layer_types=["sliding_attention", "full_attention", "full_attention"],
        transformer_layer_config__sliding_window=512,
        sliding_window_non_causal=non_causal,
    )


@pytest.mark.parametrize("version", ["0.26", "0.27", "0.33"])
def test_dspark_with_causal_sliding_layers_is_served_by_layer_types_from_026(variant, version):
    spec = specreg.normalize(dspark_sliding(variant, False), vllm=version)
    assert [a.causal for a in spec.attention] == [True, False, False]
    assert spec.servable
    assert "served-causal-mismatch" not in codes(spec)
    dc = spec.draft_config_dict()
    assert "is_causal" not in dc and "dflash_config" not in dc  # layers differ: layer_types decides
    assert "needs-v2-model-runner" in codes(spec)


def test_dspark_with_causal_sliding_layers_cannot_be_served_by_025(variant):
    spec = specreg.normalize(dspark_sliding(variant, False), vllm="0.25")
    assert "Needs vLLM >= 0.26" in finding(spec, "vllm-unsupported-feature").message
    assert not spec.servable


@pytest.mark.parametrize(
    ("version", "field"),
    [("0.26", "dflash_config.causal"), ("0.27", "dflash_config.causal"), ("0.28", "is_causal"), ("0.33", "is_causal")],
)
def test_dspark_with_non_causal_sliding_layers_gets_the_flag_its_version_reads(variant, version, field):
    spec = specreg.normalize(dspark_sliding(variant, True), vllm=version)
    assert [a.causal for a in spec.attention] == [False, False, False]
    node = spec.draft_config_dict()
    for part in field.split("."):
        node = node[part]
    assert node is False
    f = finding(spec, "served-causal-mismatch")
    assert "layer 0 (sliding): trained non-causal, served causal" in f.message
    assert "writes no causal flag for dspark, so layer_types decides" in f.message


def test_dspark_at_025_serves_every_layer_non_causal_which_is_the_non_causal_plan(variant):
    spec = specreg.normalize(dspark_sliding(variant, True), vllm="0.25")
    assert spec.servable and "served-causal-mismatch" not in codes(spec)
    assert "is_causal" not in spec.draft_config_dict() and "dflash_config" not in spec.draft_config_dict()


def test_dspark_needs_vllm_025(fx):
    spec = specreg.normalize(fx("dspark_generated"), vllm="0.24")
    assert "vllm-unsupported-algorithm" in codes(spec)


# -- a variant's mask hook (MaskField) ------------------------------------------------------------------


@pytest.fixture
def hooked():
    """A DFlash variant registered with two mask fields: `all_causal` (every layer causal) and
    `window_all` (every layer's window)."""
    import attrs

    from specreg.normalization import algorithms
    from specreg.normalization.dflash_family import MaskField, Variant, normalize
    from specreg.normalization.fields import BOOL, POS_INT

    variant = Variant(
        name="hooked",
        architecture="DFlashDraftModel",
        sample_from_anchor_default=False,
        non_causal_default=True,
        non_causal_why="as DFlash",
        mask_fields=(
            MaskField("all_causal", BOOL, lambda on, a: attrs.evolve(a, causal=True) if on else None, "all causal"),
            MaskField("window_all", POS_INT, lambda w, a: attrs.evolve(a, window=w), "one window"),
        ),
    )

    @algorithms.register_speculator("hooked", method="dflash", variant=variant, vllm_maps=False)
    def hooked(cfg, ctx):
        """| field | type | required / default | why |"""
        return normalize(cfg, ctx, variant)

    yield lambda **changes: {**specreg_fixture("dflash"), "speculators_model_type": "hooked", **changes}
    algorithms._registered.pop("hooked")


def specreg_fixture(name):
    from conftest import fixture_config

    return fixture_config(name)


def test_a_mask_field_sets_only_the_layers_its_value_changes(hooked):
    """Layer 0 is sliding and trained causal by the family's rule; all_causal = true makes the full
    layer 1 causal too, and the provenance and the finding name the field for layer 1 only."""
    cfg = hooked(all_causal=True, sliding_window_non_causal=False)
    layer = cfg["transformer_layer_config"]
    layer.update(num_hidden_layers=2, layer_types=["sliding_attention", "full_attention"], sliding_window=64)
    spec = specreg.normalize(cfg)
    assert [a.causal for a in spec.attention] == [True, True]
    assert spec.provenance["attention[0]"].sources[-1] == "$.sliding_window_non_causal"
    assert spec.provenance["attention[1]"].sources == ("$.all_causal",)
    assert finding(spec, "mask-set-by-field").message == "all_causal = true sets the mask of layer 1: all causal"
    assert spec.draft_config["is_causal"] is True  # every layer causal now: one flag states it
    assert "vllm-unsupported-feature" not in codes(spec)


def test_a_mask_field_whose_value_leaves_the_mask_is_silent(hooked):
    spec = specreg.normalize(hooked(all_causal=False))
    assert [a.causal for a in spec.attention] == [False] * 5
    assert "mask-set-by-field" not in codes(spec)
    assert spec.provenance["attention[0]"].sources == ("$.transformer_layer_config.layer_types[0]",)


def test_a_mask_field_that_changes_a_window_is_an_error_vllm_cannot_be_told(hooked):
    spec = specreg.normalize(hooked(window_all=128))
    assert [a.window for a in spec.attention] == [128] * 5
    f = finding(spec, "vllm-unsupported-feature")
    assert f.severity == "error" and f.path == "$.window_all"
    assert f.message.startswith("window_all sets the window of layers 0 to 128 (vLLM: None), 1 to 128 (vLLM: None),")
