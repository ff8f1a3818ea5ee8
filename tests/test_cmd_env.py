"""`specreg env`: the versions, the vLLM plugin's state, the Hub settings and the caches, as a bug report
needs them; vLLM is never imported (its version comes from the distribution that provides it)."""

from __future__ import annotations

import json

import pytest

from conftest import run_specreg
from specreg import facts


def fake_vllm(tmp_path, version: str):
    """A site directory with a `vllm` package that refuses to be imported, and its dist-info."""
    site = tmp_path / "site"
    (site / "vllm").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text("raise ImportError('vLLM must not be imported')\n")
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n\n")
    (info / "top_level.txt").write_text("vllm\n")
    return site


def env_json(**env):
    r = run_specreg("env", "--json", env=env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_without_vllm_the_plugin_is_inactive_and_plans_target_the_newest_known():
    doc = env_json()
    assert doc["vllm"]["installed"] is None
    assert doc["vllm"]["target"] == facts.known()[-1]
    assert doc["vllm"]["plugin"] == {
        "tested": f"{facts.plugin_tested()[0]}-{facts.plugin_tested()[-1]}",
        "active": False,
        "why": "no vLLM installed",
    }


def test_a_vllm_in_the_tested_range_has_the_plugin_active(tmp_path):
    newest = facts.plugin_tested()[-1]
    doc = env_json(PYTHONPATH=str(fake_vllm(tmp_path, f"{newest}.1")))
    assert doc["vllm"]["installed"] == f"{newest}.1"
    assert doc["vllm"]["plugin"]["active"] is True


def test_a_vllm_below_the_tested_range_is_named_with_the_range(tmp_path):
    older = facts.before(facts.plugin_tested()[0])
    r = run_specreg("env", env={"PYTHONPATH": str(fake_vllm(tmp_path, f"{older}.0"))})
    tested = f"{facts.plugin_tested()[0]}-{facts.plugin_tested()[-1]}"
    line = next(line for line in r.stdout.splitlines() if line.startswith("vLLM plugin"))
    assert line == (
        f"vLLM plugin      inactive: vLLM {older}.0 is outside the tested range: vLLM maps drafts itself "
        f"(tested on vLLM {tested})"
    )


@pytest.mark.parametrize(
    "env, why",
    [
        ({"SPECREG_VLLM_PLUGIN": "0"}, "turned off: SPECREG_VLLM_PLUGIN=0"),
        ({"VLLM_PLUGINS": "other_plugin"}, "VLLM_PLUGINS=other_plugin leaves specreg out"),
    ],
)
def test_the_switches_that_turn_the_plugin_off_are_named(tmp_path, env, why):
    site = fake_vllm(tmp_path, f"{facts.plugin_tested()[-1]}.0")
    doc = env_json(PYTHONPATH=str(site), **env)
    assert doc["vllm"]["plugin"]["active"] is False and doc["vllm"]["plugin"]["why"] == why


def test_the_hub_settings_and_caches_are_those_of_the_environment(tmp_path):
    doc = env_json(
        HF_ENDPOINT="http://127.0.0.1:9/",
        HF_HUB_OFFLINE="1",
        HF_HUB_CACHE=str(tmp_path / "hf"),
        SPECREG_CACHE=str(tmp_path / "ours"),
    )
    assert doc["hub"] == {"endpoint": "http://127.0.0.1:9", "offline": True}
    assert doc["caches"] == {
        "huggingface": str(tmp_path / "hf"),
        "specreg": str(tmp_path / "ours"),
        "specreg_drafts": 0,
    }
    assert doc["sglang"] == {"installed": None, "rules": doc["sglang"]["rules"]} and doc["sglang"]["rules"]


def test_the_text_names_every_part_on_its_own_line(tmp_path):
    r = run_specreg("env", env={"HF_HUB_OFFLINE": "1", "SPECREG_CACHE": str(tmp_path)})
    assert r.returncode == 0 and r.stderr == ""
    heads = [line[:17].rstrip() for line in r.stdout.splitlines()]
    assert heads == [
        "specreg",
        "python",
        "platform",
        "vLLM",
        "vLLM plugin",
        "SGLang",
        "huggingface_hub",
        "Hub endpoint",
        "offline",
        "HF cache",
        "specreg cache",
        "catalog",
    ]
    assert "offline          yes (HF_HUB_OFFLINE)\n" in r.stdout
    assert f"specreg cache    {tmp_path} (0 materialized drafts; `specreg cache list`)\n" in r.stdout
