"""Fields every speculators config shares, unservable types, and the input-is-never-mutated rule."""

import copy
import json

import pytest

import specreg
from conftest import DROP, codes, fixture_config

FIXTURES = [
    "dflash", "dflash2", "dspark_generated", "eagle3_generated", "eagle3_converted",
    "eagle3_v040_generated", "peagle", "mtp", "xpress", "eagle_legacy_v040",
    "independent_v040", "mlp_v040",
]


@pytest.mark.parametrize("name", FIXTURES)
@pytest.mark.parametrize("version", ["0.21", "0.26", "0.33"])
def test_every_fixture_normalizes_without_touching_its_input(name, version):
    cfg = fixture_config(name)
    before = copy.deepcopy(cfg)
    spec = specreg.normalize(cfg, vllm=version)
    assert cfg == before
    assert spec.vllm_version == f"{version}.0" or spec.vllm_version == version
    assert spec.to_dict()["algorithm"] == cfg["speculators_model_type"]


@pytest.mark.parametrize(
    "name, algorithm, tokens, phrase",
    [
        ("mtp", "mtp", 3, "no `mtp` mapping"),
        ("xpress", "xpress", 15, "no `xpress` mapping"),
        ("eagle_legacy_v040", "eagle", 5, "removed in speculators 0.5"),
        ("independent_v040", "independent", 5, "\"method\": \"draft_model\""),
        ("mlp_v040", "mlp", 5, "never produced a loadable checkpoint"),
    ],
)
def test_known_but_unservable_types_say_why(name, algorithm, tokens, phrase):
    spec = specreg.normalize(fixture_config(name), vllm="0.33")
    assert spec.algorithm == algorithm
    assert spec.method is None
    assert spec.num_speculative_tokens == tokens
    assert dict(spec.speculative_config) == {}
    (f,) = [f for f in spec.findings if f.code == "unservable-algorithm"]
    assert f.severity == "error"
    assert phrase in f.message
    assert not spec.servable


def test_the_default_proposal_method_wins_and_the_difference_is_reported(variant):
    cfg = variant(
        "dflash",
        speculators_config__proposal_methods=[
            {"proposal_type": "sampling", "speculative_tokens": 3},
            {"proposal_type": "greedy", "speculative_tokens": 15},
        ],
    )
    spec = specreg.normalize(cfg, vllm="0.33")
    assert spec.num_speculative_tokens == 15
    (f,) = [f for f in spec.findings if f.code == "proposal-method-not-first"]
    assert f.path == "$.speculators_config.default_proposal_method"
    assert spec.provenance["num_speculative_tokens"].sources == (
        "$.speculators_config.proposal_methods[1].speculative_tokens",
    )


def test_a_default_proposal_method_that_is_not_listed_is_bad_input(variant):
    cfg = variant("dflash", speculators_config__default_proposal_method="beam")
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(cfg)
    assert info.value.path == "$.speculators_config.default_proposal_method"


@pytest.mark.parametrize("value", [None, DROP])
def test_a_missing_verifier_is_reported(variant, value):
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path=value))
    assert spec.verifier is None
    assert "verifier-missing" in codes(spec)


def test_a_local_verifier_path_is_reported(variant):
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path="/mnt/ckpt/Qwen3-8B"))
    assert spec.verifier == "/mnt/ckpt/Qwen3-8B"
    (f,) = [f for f in spec.findings if f.code == "verifier-local-path"]
    assert f.path == "$.speculators_config.verifier.name_or_path"


def test_a_top_level_model_type_is_reported(variant):
    spec = specreg.normalize(variant("dflash", model_type="qwen3"))
    (f,) = [f for f in spec.findings if f.code == "top-level-model-type"]
    assert f.path == "$.model_type"
    assert f.severity == "warning"


def test_unknown_keys_are_kept_read_only_and_do_not_crash(variant):
    cfg = variant("dflash", my_trainer_extra={"a": [1, 2]}, transformer_layer_config__custom_flag=True)
    spec = specreg.normalize(cfg)
    assert spec.source_config["my_trainer_extra"]["a"] == (1, 2)
    assert spec.draft_config["custom_flag"] is True
    with pytest.raises(TypeError):
        spec.source_config["my_trainer_extra"]["a"] = 3
    with pytest.raises(TypeError):
        spec.draft_config["custom_flag"] = False


def test_speculator_is_frozen(fx):
    spec = specreg.normalize(fx("dflash"))
    with pytest.raises(AttributeError):
        spec.method = "eagle3"


def test_to_dict_has_the_documented_keys(fx):
    d = specreg.normalize(fx("dflash"), vllm="0.33").to_dict()
    assert list(d) == [
        "algorithm", "format", "method", "verifier", "num_speculative_tokens", "vllm_version", "draft_config",
        "speculative_config", "attention", "findings", "provenance", "origin", "catalog", "checks",
    ]
    assert d["attention"][0] == {"layer": 0, "kind": "full", "window": None, "causal": False}
    assert set(d["findings"][0]) == {"code", "severity", "message", "path", "fix"}
    assert d["provenance"]["draft_config.draft_vocab_size"] == {
        "kind": "source", "sources": ["$.draft_vocab_size"], "why": None,
    }


def test_target_version_defaults_to_the_newest_known_without_vllm(fx, monkeypatch):
    from specreg.normalization import capabilities

    monkeypatch.setattr(capabilities, "installed_vllm", lambda: None)
    assert specreg.normalize(fx("dflash")).vllm_version == str(capabilities.NEWEST_KNOWN)


def test_a_bad_vllm_version_is_bad_input(fx):
    with pytest.raises(specreg.ConfigError, match="not a vLLM version: 'latest'"):
        specreg.normalize(fx("dflash"), vllm="latest")


def test_every_provenance_kind_is_a_documented_one():
    from conftest import DATA

    from specreg.normalization.speculator import Provenance

    refused = ("domino", "peagle")  # layouts specreg refuses (tests/test_native.py)
    native = [json.loads(p.read_text()) for p in (DATA / "native").glob("*.json")
              if "causal" not in p.name and not any(r in p.name for r in refused)]
    speculators = [json.loads(p.read_text()) for p in (DATA / "speculators").glob("*.json")]
    kinds = {prov.kind for cfg in native + speculators
             for prov in specreg.normalize(cfg, verifier="Qwen/Qwen3-8B").provenance.values()}
    assert kinds == set(Provenance.KINDS)
