"""specreg/normalization/core.py: normalize() as a whole, from a config to a Speculator or one clear error."""

import copy
import subprocess
import sys

import pytest

import specreg
from conftest import DROP, codes, fixture_config
from weights import write_draft


def test_a_future_vllm_target_gets_a_warning_finding(fx):
    from specreg import facts

    newest = facts.known()[-1]
    future = f"{facts.newest().major}.{facts.newest().minor + 6}"
    spec = specreg.normalize(fx("dflash"), vllm=future)
    (f,) = [f for f in spec.findings if f.code == "vllm-version-unchecked"]
    assert f.severity == "warning" and f"vLLM {future} is newer than {newest}" in f.message
    assert "vllm-version-unchecked" not in [f.code for f in specreg.normalize(fx("dflash"), vllm=newest).findings]


def test_an_algorithm_plugins_own_exception_names_the_plugin(tmp_path):
    """A plugin registered through the entry-point group (here: a package dropped on sys.path with its
    dist-info, as pip installs one) that raises is reported by name, exit 2, not as a specreg bug."""
    site = tmp_path / "site"
    (site / "brokenalgo").mkdir(parents=True)
    (site / "brokenalgo" / "__init__.py").write_text(
        "from specreg import register_speculator\n"
        "@register_speculator('medusa-x', method='medusa', vllm_min='0.10')\n"
        "def medusa(cfg, ctx):\n"
        "    raise KeyError('heads')\n"
    )
    dist = site / "brokenalgo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenalgo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[specreg.algorithms]\nmedusa-x = brokenalgo\n")
    cfg = fixture_config("dflash")
    cfg["speculators_model_type"] = "medusa-x"
    src = write_draft(tmp_path / "draft", cfg)
    import os

    out = subprocess.run(
        [sys.executable, "-m", "specreg", "show", str(src)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(site)},
        timeout=120,
    )
    assert out.returncode == 2, out.stderr
    assert (
        "the algorithm plugin brokenalgo:medusa for 'medusa-x' failed on this config (KeyError: 'heads')" in out.stderr
    )
    assert "internal error" not in out.stderr


@pytest.mark.parametrize("value", [[1, 2], "config", 3, None])
def test_a_top_level_that_is_not_an_object_is_refused(value):
    with pytest.raises(specreg.ConfigError) as info:
        specreg.normalize(value)
    assert info.value.path == "$"


def test_deep_nesting_is_a_config_error():
    cfg = fixture_config("dflash")
    node = cfg["transformer_layer_config"]
    for _ in range(5000):
        node["x"] = {}
        node = node["x"]
    with pytest.raises(specreg.ConfigError, match="nested too deeply") as info:
        specreg.normalize(cfg)
    assert info.value.path == "$"


# --------------------------------------------------------------------------------------------------
# Fields every speculators config shares, unservable types, and the input-is-never-mutated rule.

FIXTURES = [
    "dflash",
    "dflash2",
    "dspark_generated",
    "eagle3_generated",
    "eagle3_converted",
    "eagle3_v040_generated",
    "peagle",
    "mtp",
    "xpress",
    "eagle_legacy_v040",
    "independent_v040",
    "mlp_v040",
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
        ("independent_v040", "independent", 5, '"method": "draft_model"'),
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


@pytest.mark.parametrize("value", [None, DROP, "", "  "])
def test_a_missing_verifier_is_reported(variant, value):
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path=value))
    assert spec.verifier is None
    assert "verifier-missing" in codes(spec)


def test_a_local_verifier_path_is_reported(variant):
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path="/mnt/ckpt/Qwen3-8B"))
    assert spec.verifier == "/mnt/ckpt/Qwen3-8B"
    (f,) = [f for f in spec.findings if f.code == "verifier-local-path"]
    assert f.path == "$.speculators_config.verifier.name_or_path"


@pytest.mark.parametrize("recorded", ["verifier", "Qwen3-8B", "models/base/Qwen3-8B", "./models/Qwen3-8B"])
def test_a_verifier_recorded_as_any_path_but_org_name_is_local(variant, recorded):
    """A relative path from training was once taken for a Hub id (`vllm serve verifier ...`)."""
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path=recorded))
    assert "verifier-local-path" in codes(spec)


def test_an_org_name_verifier_is_a_hub_id(variant):
    spec = specreg.normalize(variant("dflash", speculators_config__verifier__name_or_path="Qwen/Qwen3-8B"))
    assert "verifier-local-path" not in codes(spec)


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


def test_target_version_defaults_to_the_newest_known_without_vllm(fx, monkeypatch):
    from specreg.normalization import capabilities

    monkeypatch.setattr(capabilities, "installed_vllm", lambda: None)
    assert specreg.normalize(fx("dflash")).vllm_version == str(capabilities.NEWEST_KNOWN)


def test_a_bad_vllm_version_is_bad_input(fx):
    with pytest.raises(specreg.ConfigError, match="not a vLLM version: 'latest'"):
        specreg.normalize(fx("dflash"), vllm="latest")


def test_many_near_miss_keys_give_the_first_twenty_findings_and_one_counting_the_rest(fx):
    """100,000 near misses of a missing field gave 100,000 unread-field findings (41 MB of JSON)."""
    from specreg.normalization.core import MAX_UNREAD_FINDINGS

    config = fx("dflash")
    config.pop("sample_from_anchor", None)
    config.update({f"sample_from_anchr{i}": True for i in range(1_000)})
    spec = specreg.normalize(config, vllm="0.33")
    unread = [f for f in spec.findings if f.code == "unread-field"]
    assert MAX_UNREAD_FINDINGS == 20 and len(unread) == 21
    assert [f.path for f in unread[:2]] == ["$.sample_from_anchr0", "$.sample_from_anchr1"]
    assert unread[-1].message == (
        "980 more keys are not fields dflash reads and are near misses of missing fields "
        "(sample_from_anchor); only the first 20 are listed"
    )
    # 1,000 findings were about 400 kB; the ledger (every key, 20 near misses listed) adds about 7 kB
    assert len(spec.to_json()) < 30_000
