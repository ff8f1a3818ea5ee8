"""Startup refusals specreg predicts (docs/semantics.md, "Startup refusals predicted"), shown on the
real engine: the draft as trained, handed to vLLM's CPU engine without specreg, does not start, with
the message specreg's finding quotes; specreg says so before any engine is started."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

import constructed
import specreg
from engines import collect, require_engine, start_engines

pytestmark = pytest.mark.engine
VLLM = "0.32"


@pytest.fixture(scope="module", autouse=True)
def engine_installed():
    require_engine()


def test_an_mrope_dflash_is_refused_by_specreg_and_by_the_engine(tmp_path):
    verifier = constructed.verifier(tmp_path / "verifier", "zero")
    draft = constructed.dflash(
        tmp_path / "mrope", verifier, layer_type="sliding_attention", sliding_window_non_causal=True
    )
    config = json.loads((draft / "config.json").read_text())
    layer = config["transformer_layer_config"]
    layer["rope_parameters"] = {
        "rope_type": "default",
        "rope_theta": layer.get("rope_theta", 10000.0),
        "mrope_section": [2, 1, 1],
    }
    (draft / "config.json").write_text(json.dumps(config))

    plan = specreg.load(draft, vllm=VLLM)
    found = [f for f in plan.findings if f.code == "vllm-startup-refusal"]
    assert [f.path for f in found] == ["$.transformer_layer_config.rope_parameters.mrope_section"]
    cli = subprocess.run(
        [sys.executable, "-m", "specreg", "show", str(draft), "--vllm", VLLM],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert cli.returncode == 1 and "does not support M-RoPE" in cli.stdout + cli.stderr

    job = {"name": "mrope/vllm", "model": str(draft), "prompts": [[10, 11, 12]], "max_tokens": 4}
    results = collect(start_engines([(False, [job])], tmp_path), tmp_path)
    error = results["mrope/vllm"].get("error", "")
    assert "does not support M-RoPE yet" in error, results["mrope/vllm"]


def test_the_plugin_stops_a_draft_specreg_calls_invalid_or_one_that_does_not_fit_the_verifier_vllm_runs(tmp_path):
    """Issue 45, as issue 56 left it. A DFlash whose aux ids name layer 0 (the embedding output) is served
    beside a verifier whose class captures it, with the plugin and without. An
    EAGLE-3 reading verifier layers up to 3, named beside a verifier of 2 layers: refused at startup."""
    zero = constructed.verifier(tmp_path / "verifier", "zero")
    layer_zero = constructed.dflash(tmp_path / "layer-zero", zero, aux=(0, 2, 3))
    verifier = constructed.verifier(tmp_path / "next", "next_token")
    eagle = constructed.eagle3(tmp_path / "eagle", verifier, head="qwen3", norm_before_residual=False)
    small = tmp_path / "small"
    shutil.copytree(verifier, small)
    config = json.loads((small / "config.json").read_text())
    config["num_hidden_layers"] = 2
    (small / "config.json").write_text(json.dumps(config))
    job = {"prompts": [[10, 11, 12]], "max_tokens": 4}
    on = [
        {"name": "layer-zero", "model": str(layer_zero), **job},
        {"name": "small-verifier", "model": str(small), "speculative_config": {"model": str(eagle)}, **job},
    ]
    off = [{"name": "layer-zero/vllm", "model": str(layer_zero), **job}]
    results = collect(start_engines([(True, on), (False, off)], tmp_path), tmp_path)
    refused = "specreg: this draft cannot be served as it was trained by this vLLM"
    error = results["layer-zero"].get("error", "")
    # issue 56: aux id 0 is the embedding output, which this verifier's class (Qwen3) captures in the
    # releases the tier runs (aux_capture.json's layer_zero): served as trained, with and without the plugin
    assert "error" not in results["layer-zero"], results["layer-zero"]
    assert "error" not in results["layer-zero/vllm"], results["layer-zero/vllm"]  # vLLM alone serves it
    error = results["small-verifier"].get("error", "")
    assert (
        refused in error and f"verifier-layer-out-of-range: aux layer ids [3] are outside {small}'s 2 layers" in error
    ), results["small-verifier"]
