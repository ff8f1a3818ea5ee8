"""Startup refusals specreg predicts (docs/semantics.md, "Startup refusals predicted"), shown on the
real engine: the draft as trained, handed to vLLM's CPU engine without specreg, does not start, with
the message specreg's finding quotes; specreg says so before any engine is started."""

from __future__ import annotations

import json
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
