"""specreg's vLLM plugin installed into each wheel's own speculators mapping (pytest -m conformance).

`specreg.vllm.plugin.install` takes the two things it patches (the module holding
SUPPORTED_SPECULATORS_TYPES and the SpeculatorsConfig class); here they are each wheel's own code,
executed from the wheel (conformance/vllm_mapping.py). With the plugin, the mapping's output is
specreg's plan, and the masks that version serves from it (conformance/vllm_serving.py) are the
trained ones; without it, the known differences come back.
"""

from __future__ import annotations

import pytest

import specreg
from conftest import fixture_config
from conformance.test_vllm_serving import CASES, case_config
from specreg import facts
from specreg.vllm import plugin as vllm_plugin

pytestmark = pytest.mark.conformance

VERSIONS = [facts.wheel(r) for r in facts.tested_by("vllm_plugin")]
EAGLE = {
    "eagle3": ("eagle3_generated", {}),
    "eagle3-no-norm-flag": ("eagle3_generated", {"norm_before_residual": None}),
    "peagle": ("peagle", {}),
}


def config_for(case: str) -> dict:
    if case in EAGLE:
        name, changes = EAGLE[case]
        cfg = fixture_config(name)
        for k, v in changes.items():
            cfg.pop(k) if v is None else cfg.__setitem__(k, v)
        return cfg
    return case_config(case)


@pytest.fixture
def fresh():
    """A Mapping of its own (the plugin patches it), uninstalled afterwards."""
    from conformance.vllm_mapping import Mapping

    made = []

    def get(version):
        m = Mapping(version)
        made.append(m)
        return m

    yield get
    for m in made:
        vllm_plugin.uninstall(m.algos, m.config_class)


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES) + sorted(EAGLE))
def test_with_the_plugin_vllms_mapping_serves_the_trained_plan(fresh, version, case):
    from conformance.vllm_serving import serving

    cfg = config_for(case)
    spec = specreg.normalize(cfg, vllm=version)
    m = fresh(version)
    if spec.algorithm not in m.supported:
        return
    vllm_plugin.install(m.algos, m.config_class, version)
    if spec.errors:
        with pytest.raises(ValueError, match="cannot be served as it was trained"):
            m.draft_config(cfg)
        return
    draft = m.draft_config(cfg)
    assert draft == spec.draft_config_dict()
    assert m.speculative_config(cfg) == spec.speculative_config_dict()
    if spec.method in ("dflash", "dspark"):
        served = serving(version).layer_causal(draft, dspark=spec.method == "dspark")
        assert served == [a.causal for a in spec.attention]


@pytest.mark.parametrize("version", VERSIONS)
def test_install_is_idempotent_and_uninstall_restores_vllms_mapping(fresh, version):
    m = fresh(version)
    cfg = fixture_config("dflash")
    before = m.draft_config(cfg)
    assert vllm_plugin.install(m.algos, m.config_class, version)
    assert vllm_plugin.install(m.algos, m.config_class, version) == []  # already ours
    assert m.draft_config(cfg) != before  # vLLM's mapping makes the bidirectional layers causal; specreg does not
    vllm_plugin.uninstall(m.algos, m.config_class)
    assert m.draft_config(cfg) == before


def test_a_config_specreg_calls_invalid_is_refused_where_vllms_own_mapping_would_serve_it(fresh):
    """DFlash aux ids out of order name other layers than the trained order: vLLM's own mapping serves
    them anyway; the plugin stops it with specreg's error and the way out (issue 45)."""
    m = fresh("0.33.0")
    cfg = fixture_config("dflash")
    cfg["aux_hidden_state_layer_ids"] = [5, 2]  # specreg refuses ids that do not increase; vLLM maps them
    vllm_plugin.uninstall(m.algos, m.config_class)
    m.draft_config(cfg)
    vllm_plugin.install(m.algos, m.config_class, "0.33.0")
    with pytest.raises(vllm_plugin.Refusal, match=r"smaller than the one before(.|\n)*SPECREG_VLLM_PLUGIN=0"):
        m.draft_config(cfg)


def test_a_draft_that_needs_the_v2_runner_says_so_at_startup(fresh, caplog, monkeypatch):
    monkeypatch.delenv("VLLM_USE_V2_MODEL_RUNNER", raising=False)
    vllm_plugin._logged.clear()
    m = fresh("0.33.0")
    vllm_plugin.install(m.algos, m.config_class, "0.33.0")
    with caplog.at_level("WARNING", logger="vllm.specreg"):
        m.draft_config(case_config("dflash-mixed-causal-sliding"))
    assert caplog.text.count("relaunch with VLLM_USE_V2_MODEL_RUNNER=1") == 1
    caplog.clear()
    vllm_plugin._logged.clear()
    monkeypatch.setenv("VLLM_USE_V2_MODEL_RUNNER", "1")
    with caplog.at_level("WARNING", logger="vllm.specreg"):
        m.draft_config(case_config("dflash-mixed-causal-sliding"))
    assert "VLLM_USE_V2_MODEL_RUNNER" not in caplog.text
