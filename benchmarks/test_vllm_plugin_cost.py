"""What the vLLM plugin costs inside vLLM's startup (run in a vLLM environment:
`~/.cache/specreg/vllm-venv/bin/python -m pytest benchmarks -q -s -m vllm`)."""

from __future__ import annotations

import json
import sys

import pytest

from conftest import ROOT, process, record

pytestmark = pytest.mark.vllm
LOAD = "from vllm.plugins import load_general_plugins; load_general_plugins()"
#: the step as `vllm serve` reaches it: EngineArgs' module (and what it imports) is loaded already
AT_STARTUP = """
import time, vllm.engine.arg_utils
from vllm.plugins import load_general_plugins
start = time.perf_counter(); load_general_plugins(); print(time.perf_counter() - start)
"""


def test_plugin_load_inside_vllm_startup():
    """vLLM's own plugin loading step in a fresh process, with the plugin and with it switched off."""
    on, on_mib = process([sys.executable, "-c", LOAD], runs=7)
    off, off_mib = process([sys.executable, "-c", LOAD], runs=7, env={"SPECREG_VLLM_PLUGIN": "0"})
    record(
        "vLLM load_general_plugins(), plugin on vs off",
        f"+{(on - off) * 1000:.0f} ms, +{on_mib - off_mib:.1f} MiB",
        f"({on * 1000:.0f} vs {off * 1000:.0f} ms whole process)",
    )


def test_plugin_load_at_the_point_vllm_serve_loads_it():
    import os
    import statistics
    import subprocess

    def median(env):
        runs = [
            float(
                subprocess.run(
                    [sys.executable, "-c", AT_STARTUP],
                    capture_output=True,
                    text=True,
                    timeout=600,
                    env={**os.environ, **env},
                )
                .stdout.strip()
                .splitlines()[-1]
            )
            for _ in range(7)
        ]
        return statistics.median(runs)

    on, off = median({}), median({"SPECREG_VLLM_PLUGIN": "0"})
    record(
        "plugin load inside vLLM after EngineArgs is imported",
        f"{on * 1000:.1f} ms (off: {off * 1000:.1f} ms)",
        "in-process, median of 7",
    )


def test_planning_a_draft_when_vllm_reads_it(benchmark):
    """The work the plugin adds when vLLM maps a speculators config: specreg's plan for it."""
    from vllm.transformers_utils.configs.speculators import algos, base

    from specreg.vllm import plugin as vllm_plugin

    vllm_plugin.install(algos, base.SpeculatorsConfig, "0.33.0")
    cfg = json.loads((ROOT / "tests" / "data" / "speculators" / "dflash.json").read_text())
    try:
        benchmark(lambda: base.SpeculatorsConfig.extract_transformers_pre_trained_config(json.loads(json.dumps(cfg))))
    finally:
        vllm_plugin.uninstall(algos, base.SpeculatorsConfig)
    record("plugin: draft config mapped by specreg, median", f"{benchmark.stats.stats.median * 1e6:.0f} us", "")
