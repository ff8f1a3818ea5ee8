"""The vLLM plugin's safety rules, in fresh interpreters (no vLLM needed: the version gate reads the
dist-info of the distribution that provides the `vllm` package, which these tests lay on sys.path
with an empty `vllm` package; the mapping itself is tested
against each wheel's code in tests/conformance/test_vllm_plugin.py and in vLLM 0.33 in the vLLM tier)."""

import os
import subprocess
import sys

import pytest

REGISTER = ("import logging, sys; logging.basicConfig(level=logging.INFO, stream=sys.stderr, format='%(message)s');"
            "from specreg.vllm.plugin import register; register(); register()")


def run(tmp_path, version, **env):
    site = tmp_path / "site"
    (site / f"vllm-{version}.dist-info").mkdir(parents=True)
    (site / f"vllm-{version}.dist-info" / "METADATA").write_text(f"Name: vllm\nVersion: {version}\n")
    (site / f"vllm-{version}.dist-info" / "RECORD").write_text("vllm/__init__.py,,\n")
    (site / "vllm" / "engine").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("")
    # what the plugin imports to patch vLLM; imported only when the version gate lets it through
    (site / "vllm" / "engine" / "__init__.py").write_text("print('vllm.engine imported')\n")
    environ = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), **env}
    return subprocess.run([sys.executable, "-c", REGISTER], capture_output=True, text=True, env=environ, timeout=60)


def test_an_untested_vllm_gets_one_line_and_no_change(tmp_path):
    out = run(tmp_path, "0.40.0")
    assert out.returncode == 0
    assert out.stderr.count("outside the tested range") == 1, out.stderr  # register() ran twice
    assert "vllm.engine imported" not in out.stdout


def test_the_switch_turns_it_off_with_one_line(tmp_path):
    out = run(tmp_path, "0.33.0", SPECREG_VLLM_PLUGIN="0")
    assert out.returncode == 0
    assert out.stderr.count("specreg plugin off (SPECREG_VLLM_PLUGIN=0)") == 1
    assert "vllm.engine imported" not in out.stdout


def test_a_failure_inside_the_plugin_never_stops_vllm(tmp_path):
    # a tested version number but no importable vLLM package: the plugin logs why and returns
    out = run(tmp_path, "0.33.0")
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("specreg plugin not installed (ModuleNotFoundError") == 1, out.stderr
    assert "vllm.engine imported" in out.stdout  # the gate let it through: this is the failure path


def test_the_entry_point_is_declared_for_vllm():
    from importlib.metadata import entry_points

    (ep,) = [e for e in entry_points(group="vllm.general_plugins") if e.name == "specreg"]
    assert ep.value == "specreg.vllm.plugin:register"


@pytest.mark.parametrize("value", ["0", "false", "off", "no"])
def test_every_off_spelling_turns_it_off(tmp_path, value):
    assert "specreg plugin off" in run(tmp_path, "0.33.0", SPECREG_VLLM_PLUGIN=value).stderr


class Args:
    """What the plugin reads of vLLM's EngineArgs before `create_speculative_config` (0.22+ names)."""

    def __init__(self, speculative_config=None, spec_model=None, spec_method=None, spec_tokens=None):
        self.speculative_config, self.spec_model = speculative_config, spec_model
        self.spec_method, self.spec_tokens = spec_method, spec_tokens


@pytest.fixture
def dflash_dir(tmp_path):
    import shutil
    from pathlib import Path

    draft = tmp_path / "draft-a"
    draft.mkdir()
    shutil.copy(Path(__file__).parent.parent / "examples" / "qwen3-8b-dflash" / "config.json", draft)
    return str(draft)


def test_a_named_speculators_draft_gets_its_trained_method_and_length_through_the_setting_used(dflash_dir):
    from specreg.vllm.plugin import _fill_named_draft

    given = Args(speculative_config={"model": dflash_dir})
    _fill_named_draft(given, "0.33.0")
    assert given.speculative_config == {"model": dflash_dir, "method": "dflash", "num_speculative_tokens": 15}
    flags = Args(spec_model=dflash_dir, spec_tokens=3)
    _fill_named_draft(flags, "0.33.0")  # vLLM refuses a key given both ways: the --spec-* attributes are filled
    assert (flags.speculative_config, flags.spec_method, flags.spec_tokens) == (None, "dflash", 3)
    told = Args(speculative_config={"model": dflash_dir, "method": "draft_model"})
    _fill_named_draft(told, "0.33.0")
    assert told.speculative_config == {"model": dflash_dir, "method": "draft_model"}  # the user's choice stays


def test_a_named_draft_that_is_not_speculators_is_left_to_vllm(tmp_path):
    import json

    from specreg.vllm.plugin import _fill_named_draft

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}))
    given = Args(speculative_config={"model": str(tmp_path), "num_speculative_tokens": 2})
    _fill_named_draft(given, "0.33.0")
    assert given.speculative_config == {"model": str(tmp_path), "num_speculative_tokens": 2}
    _fill_named_draft(Args(speculative_config={"method": "ngram"}), "0.33.0")  # no model: nothing read
