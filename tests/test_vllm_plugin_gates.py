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
