"""The masks vLLM serves, computed by each wheel's own code (pytest -m conformance).

For every DFlash-family case and vLLM version: the config.json that `materialize` writes must be
served with the trained per-layer masks (or specreg reports that this vLLM cannot serve them), and
the unmodified file, mapped by that version's own `algos.py`, must be served as trained unless
specreg reports `served-causal-mismatch`. The served masks come from `vllm_serving.Serving`.
"""

from __future__ import annotations

import json

import pytest

import specreg
from specreg import facts
from conftest import DATA, fixture_config

pytestmark = pytest.mark.conformance

VERSIONS = [facts.wheel(r) for r in facts.tested_by("vllm_serving")]
MIXED = {
    "transformer_layer_config": {"layer_types": ["sliding_attention"] * 4 + ["full_attention"], "sliding_window": 2048}
}
ALL_SLIDING = {"transformer_layer_config": {"layer_types": ["sliding_attention"] * 5, "sliding_window": 1024}}
DSPARK_SLIDING = {
    "transformer_layer_config": {
        "layer_types": ["sliding_attention", "full_attention", "full_attention"],
        "sliding_window": 512,
    }
}
#: case -> (fixture, changes merged into it); a value of None drops the key
CASES = {
    "dflash": ("dflash", {}),
    "dflash-mixed-causal-sliding": ("dflash", MIXED),
    "dflash-mixed-no-flag": ("dflash", {**MIXED, "sliding_window_non_causal": None}),
    "dflash-all-sliding-causal": ("dflash", ALL_SLIDING),
    "dflash-layer-is-causal": (
        "dflash",
        {**MIXED, "transformer_layer_config": {**MIXED["transformer_layer_config"], "is_causal": True}},
    ),
    "dflash2": ("dflash2", {}),
    "dflash2-causal-sliding": ("dflash2", {"sliding_window_non_causal": False}),
    "dspark": ("dspark_generated", {}),
    "dspark-causal-sliding": ("dspark_generated", {**DSPARK_SLIDING, "sliding_window_non_causal": False}),
    "dspark-non-causal-sliding": ("dspark_generated", {**DSPARK_SLIDING, "sliding_window_non_causal": True}),
    "dspark-all-sliding-causal": (
        "dspark_generated",
        {
            "transformer_layer_config": {"layer_types": ["sliding_attention"] * 3, "sliding_window": 512},
            "sliding_window_non_causal": False,
        },
    ),
}
NATIVE = sorted(p.name for p in (DATA / "native").glob("*.json") if p.name.startswith(("zlab_", "deepspec_")))


def _merge(base: dict, changes: dict) -> dict:
    for key, value in changes.items():
        if value is None:
            base.pop(key, None)
        elif isinstance(value, dict) and isinstance(base.get(key), dict):
            _merge(base[key], value)
        else:
            base[key] = value
    return base


def case_config(case: str) -> dict:
    name, changes = CASES[case]
    return _merge(fixture_config(name), json.loads(json.dumps(changes)))


@pytest.fixture(scope="module")
def serving():
    from conformance.vllm_serving import serving

    return serving


@pytest.fixture(scope="module")
def mapping():
    from conformance.vllm_mapping import mapping

    return mapping


def written_config(tmp_path, spec) -> dict:
    """The config.json vLLM would load: what materialize writes (or draft_config when it refuses)."""
    if not spec.servable:
        return spec.draft_config_dict()
    out = spec.materialize(tmp_path / "draft", weights="none", force=True)
    return json.loads((out.directory / "config.json").read_text())


def mask_errors(spec) -> list:
    return [f for f in spec.errors if f.code == "vllm-unsupported-feature" and "causal" in f.message]


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_served_masks_are_the_trained_ones_or_a_finding_says_why_not(tmp_path, serving, mapping, version, case):
    cfg = case_config(case)
    spec = specreg.normalize(cfg, vllm=version)
    if not mapping(version).supported.get(spec.algorithm):
        assert "vllm-unsupported-algorithm" in {f.code for f in spec.findings}
        return
    dspark = spec.algorithm == "dspark"
    trained = [a.causal for a in spec.attention]
    vllm = serving(version)

    # what specreg writes
    ours = vllm.layer_causal(written_config(tmp_path, spec), dspark=dspark)
    if mask_errors(spec):
        assert ours != trained, f"{case}: specreg says vLLM {version} cannot serve the masks, but it would"
    else:
        assert ours == trained, f"{case}: vLLM {version} serves specreg's config as {ours}, trained {trained}"

    # the unmodified file, through that version's own mapping
    auto = vllm.layer_causal(mapping(version).draft_config(cfg), dspark=dspark)
    reported = {f.code for f in spec.findings} & {"served-causal-mismatch"} or mask_errors(spec)
    if auto != trained:
        assert reported, f"{case}: vLLM {version} serves the file as {auto}, trained {trained}, no finding"
    else:
        assert "served-causal-mismatch" not in {f.code for f in spec.findings}, f"{case}: false alarm at {version}"


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("name", NATIVE)
def test_a_materialized_native_draft_is_served_with_its_trained_masks(tmp_path, serving, version, name):
    cfg = json.loads((DATA / "native" / name).read_text())
    spec = specreg.normalize(cfg, vllm=version, verifier="Qwen/Qwen3-8B")
    if "vllm-unsupported-algorithm" in {f.code for f in spec.findings}:
        return
    trained = [a.causal for a in spec.attention]
    ours = serving(version).layer_causal(written_config(tmp_path, spec), dspark=spec.algorithm == "dspark")
    assert (ours == trained) != bool(mask_errors(spec)), (name, version, ours, trained)


@pytest.mark.parametrize("version", ["0.25.0", "0.26.0", "0.28.0", "0.33.0"])
def test_dspark_layers_are_dflash_layers(version):
    """Qwen3DSparkModel subclasses DFlashQwen3Model and sets no layer's causality itself, so the
    DFlash resolver decides DSpark masks (vLLM's DSpark module docstring says otherwise)."""
    from conformance.vllm_serving import inherits_dflash_layers

    assert inherits_dflash_layers(version, "qwen3_dspark", "Qwen3DSparkModel", "DFlashQwen3Model")


@pytest.mark.parametrize("version", ["0.28.0", "0.29.0", "0.33.0"])
def test_dflash2_layers_are_dflash_layers(version):
    from conformance.vllm_serving import inherits_dflash_layers

    assert inherits_dflash_layers(version, "qwen3_dflash2", "DFlash2Qwen3DecoderLayer", "DFlashQwen3DecoderLayer")


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(c for c in CASES if c.startswith("dspark")) + ["dspark-no-anchor-flag"])
def test_dspark_drafts_from_the_anchor_as_trained(tmp_path, serving, mapping, version, case):
    cfg = (
        case_config(case) if case in CASES else _merge(fixture_config("dspark_generated"), {"sample_from_anchor": None})
    )
    spec = specreg.normalize(cfg, vllm=version)
    if not mapping(version).supported.get("dspark"):
        return
    trained = spec.draft_config_dict()["sample_from_anchor"]
    vllm = serving(version)
    if mask_errors(spec):
        return
    assert vllm.dspark_samples_from_anchor(written_config(tmp_path, spec)) == trained
    auto = vllm.dspark_samples_from_anchor(mapping(version).draft_config(cfg))
    assert (auto != trained) == ("served-length-mismatch" in {f.code for f in spec.findings}), (case, version, auto)


@pytest.mark.parametrize(
    "version", ["0.20.0", "0.22.0", "0.24.0", "0.25.0", "0.26.0", "0.27.0", "0.28.0", "0.29.0", "0.33.0"]
)
def test_no_runner_serves_a_dflash_draft_that_samples_from_the_anchor(serving, version):
    """specreg refuses sample_from_anchor=true for DFlash at every version: the V1 proposer never reads
    the field (it always queries a bonus token) and the V2 speculator, where it exists, refuses it
    (0.27+) or fixes it to False."""
    vllm = serving(version)
    assert not vllm.v1_reads_anchor
    assert vllm.v2_dflash_anchor in (None, False)
    spec = specreg.normalize(
        _merge(
            fixture_config("dflash"),
            {
                "sample_from_anchor": True,
                "speculators_config": {"proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 16}]},
            },
        ),
        vllm=version,
    )
    assert any("No vLLM release serves this layout" in f.message for f in spec.errors)
    assert ("V2 runner refuses" in str([f.message for f in spec.errors])) == vllm.v2_refuses_anchor


def _registry(version: str) -> dict[str, tuple[str, str]]:
    import re
    import zipfile

    from conformance.vllm_mapping import wheel

    with zipfile.ZipFile(wheel(version)) as z:
        text = z.read("vllm/model_executor/models/registry.py").decode()
    return {a: (m, c) for a, m, c in re.findall(r'"(\w+)":\s*\(\s*"([\w.]+)",\s*"(\w+)",?\s*\)', text)}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
def test_the_class_specreg_names_is_the_class_vllms_mapping_names(mapping, version, case):
    cfg = case_config(case)
    spec = specreg.normalize(cfg, vllm=version)
    if not mapping(version).supported.get(spec.algorithm):
        return
    registry = _registry(version)
    ours = spec.draft_config["architectures"][0]
    theirs = mapping(version).draft_config(cfg)["architectures"][0]
    assert ours in registry, f"vLLM {version} has no {ours}"
    assert registry[ours] == registry[theirs]
