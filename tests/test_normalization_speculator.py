"""specreg/normalization/speculator.py: the Speculator value users serialize."""

import json

import pytest

import specreg


def test_the_python_api_gives_plain_dicts_where_users_serialize(fx):
    spec = specreg.normalize(fx("dflash2"), vllm="0.33")
    with pytest.raises(TypeError):
        json.dumps(spec.draft_config)  # read-only views of a frozen value
    assert json.loads(json.dumps(spec.draft_config_dict())) == spec.draft_config_dict()
    assert json.loads(json.dumps(spec.speculative_config_dict())) == {"method": "dflash", "num_speculative_tokens": 15}
    assert json.loads(json.dumps(spec.to_dict()))["draft_config"] == spec.draft_config_dict()
    kwargs = spec.llm_kwargs(draft="/d")
    assert type(json.loads(json.dumps(kwargs))) is dict and kwargs.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}


# --------------------------------------------------------------------------------------------------
# Fields every speculators config shares, unservable types, and the input-is-never-mutated rule.


def test_speculator_is_frozen(fx):
    spec = specreg.normalize(fx("dflash"))
    with pytest.raises(AttributeError):
        spec.method = "eagle3"


def test_to_dict_has_the_documented_keys(fx):
    d = specreg.normalize(fx("dflash"), vllm="0.33").to_dict()
    assert list(d) == [
        "algorithm",
        "format",
        "method",
        "verifier",
        "num_speculative_tokens",
        "vllm_version",
        "draft_config",
        "speculative_config",
        "attention",
        "findings",
        "provenance",
        "origin",
        "catalog",
        "checks",
        "ledger",
    ]
    assert d["attention"][0] == {"layer": 0, "kind": "full", "window": None, "causal": False}
    assert set(d["findings"][0]) == {"code", "severity", "message", "path", "fix"}
    assert d["provenance"]["draft_config.draft_vocab_size"] == {
        "kind": "source",
        "sources": ["$.draft_vocab_size"],
        "why": None,
    }


def test_every_provenance_kind_is_a_documented_one():
    from conftest import DATA

    from specreg.normalization.speculator import Provenance

    refused = ("domino", "peagle")  # layouts specreg refuses (tests/test_native.py)
    native = [
        json.loads(p.read_text())
        for p in (DATA / "native").glob("*.json")
        if "causal" not in p.name and not any(r in p.name for r in refused)
    ]
    speculators = [json.loads(p.read_text()) for p in (DATA / "speculators").glob("*.json")]
    kinds = {
        prov.kind
        for cfg in native + speculators
        for prov in specreg.normalize(cfg, verifier="Qwen/Qwen3-8B").provenance.values()
    }
    assert kinds == set(Provenance.KINDS)
