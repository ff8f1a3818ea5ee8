"""specreg/normalization/core.py: normalize() as a whole, from a config to a Speculator or one clear error."""

import subprocess
import sys

import pytest

import specreg
from conftest import fixture_config
from weights import write_draft


def test_a_future_vllm_target_gets_a_warning_finding(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.40")
    (f,) = [f for f in spec.findings if f.code == "vllm-version-unchecked"]
    assert f.severity == "warning" and "vLLM 0.40 is newer than 0.33" in f.message
    assert "vllm-version-unchecked" not in [f.code for f in specreg.normalize(fx("dflash"), vllm="0.33").findings]


def test_an_algorithm_plugins_own_exception_names_the_plugin(tmp_path):
    """A plugin registered through the entry-point group (here: a package dropped on sys.path with its
    dist-info, as pip installs one) that raises is reported by name, exit 2, not as a specreg bug."""
    site = tmp_path / "site"
    (site / "brokenalgo").mkdir(parents=True)
    (site / "brokenalgo" / "__init__.py").write_text(
        "from specreg import register_speculator\n"
        "@register_speculator('medusa-x', method='medusa', vllm_min='0.10')\n"
        "def medusa(cfg, ctx):\n"
        "    raise KeyError('heads')\n")
    dist = site / "brokenalgo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenalgo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[specreg.algorithms]\nmedusa-x = brokenalgo\n")
    cfg = fixture_config("dflash")
    cfg["speculators_model_type"] = "medusa-x"
    src = write_draft(tmp_path / "draft", cfg)
    import os

    out = subprocess.run([sys.executable, "-m", "specreg", "show", str(src)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "the algorithm plugin brokenalgo:medusa for 'medusa-x' failed on this config (KeyError: 'heads')" in out.stderr
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
