"""vLLM's own speculators mapping code, loaded by file path from downloaded wheels (no install).

Wheels are fetched with ``pip download --no-deps vllm==X`` into ~/.cache/specreg/vllm-wheels
(override with SPECREG_VLLM_WHEELS); only `algos.py` and `base.py` of the mapping are extracted.
`base.py` imports transformers and vLLM helpers that its mapping logic never uses; they are
given stand-ins while it is executed, so the logic that runs is vLLM's own.
"""

from __future__ import annotations

import json
import os
import subprocess
from functools import lru_cache
import sys
import types
import zipfile
from pathlib import Path

MAPPING = "vllm/transformers_utils/configs/speculators"
CACHE = Path(os.environ.get("SPECREG_VLLM_WHEELS", Path.home() / ".cache" / "specreg" / "vllm-wheels"))


def wheel(version: str) -> Path:
    """vLLM `version`'s own wheel, downloaded once (wheels only: an index holding only an sdist would
    have pip run its build backend). `===` asks for that exact version: a local-version build such as
    `0.34.0+cpu`, which `==` also matches, is a different build with other code, and is refused."""
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    if not found:
        print(f"downloading vllm=={version} (no deps) into {CACHE} ...", file=sys.stderr, flush=True)
        subprocess.run(
            [
                sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q",
                f"vllm==={version}", "-d", str(CACHE),
            ],
            check=True,
        )  # fmt: skip
        found = sorted(CACHE.glob(f"vllm-{version}-*.whl"))
    if not found:
        others = sorted(p.name for p in CACHE.glob(f"vllm-{version}+*.whl"))
        raise FileNotFoundError(
            f"no wheel of vllm {version} itself in {CACHE}"
            + (f" (only the local-version build {others[0]}, whose code is not the release's)" if others else "")
        )
    return found[-1]


def sources(version: str) -> dict[str, str] | None:
    """The text of algos.py and base.py of vLLM `version` (None: it has no speculators path)."""
    out = CACHE / "mapping" / version
    names = ("algos.py", "base.py")
    if (out / "NONE").exists():
        return None
    if not all((out / n).exists() for n in names):
        out.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel(version)) as z:
            present = set(z.namelist())
            if not all(f"{MAPPING}/{n}" in present for n in names):
                (out / "NONE").write_text("this vLLM has no speculators mapping\n")
                return None
            for n in names:
                (out / n).write_bytes(z.read(f"{MAPPING}/{n}"))
    return {n: (out / n).read_text() for n in names}


class Mapping:
    """One vLLM version's SUPPORTED_SPECULATORS_TYPES and SpeculatorsConfig classmethods."""

    def __init__(self, version: str):
        self.version = version
        src = sources(version)
        if src is None:
            self.supported: dict = {}
            self.config_class = None
            self.algos = None
            return
        algos = types.ModuleType(f"vllm_{version.replace('.', '_')}_algos")
        exec(compile(src["algos.py"], f"vllm-{version}/{MAPPING}/algos.py", "exec"), algos.__dict__)
        self.supported = dict(algos.SUPPORTED_SPECULATORS_TYPES)
        self.algos = algos  # the module whose table base.py dispatches through (the plugin patches it)

        class PreTrainedConfig:  # stand-in: the mapping logic never calls it
            def __init__(self, **kwargs):
                pass

        stubs = {
            "transformers": types.SimpleNamespace(PreTrainedConfig=PreTrainedConfig, PretrainedConfig=PreTrainedConfig),
            "vllm.transformers_utils.configs.speculators.algos": algos,
            "vllm.transformers_utils.utils": types.SimpleNamespace(without_trust_remote_code=lambda kw: kw),
        }
        saved = {k: sys.modules.get(k) for k in stubs}
        sys.modules.update(stubs)  # type: ignore[arg-type]
        try:
            base = types.ModuleType(f"vllm_{version.replace('.', '_')}_base")
            exec(compile(src["base.py"], f"vllm-{version}/{MAPPING}/base.py", "exec"), base.__dict__)
        finally:
            for k, v in saved.items():
                if v is None:
                    sys.modules.pop(k, None)
                else:
                    sys.modules[k] = v
        self.config_class = base.SpeculatorsConfig

    def draft_config(self, config: dict) -> dict:
        import copy

        return self.config_class.extract_transformers_pre_trained_config(copy.deepcopy(config))

    def speculative_config(self, config: dict) -> dict:
        import copy

        return self.config_class.extract_vllm_speculative_config(copy.deepcopy(config))


@lru_cache(maxsize=None)
def mapping(version: str) -> "Mapping":
    """One Mapping per version for the whole test session (each execs two files of a wheel)."""
    return Mapping(version)


AUX_ABOUT = (
    "generated by tests/conformance/test_vllm_conformance.py from the newest known vLLM wheel "
    "(vllm_mapping.aux_capture_architectures; SPECREG_REGENERATE=1 pytest -m conformance -k aux_capture); do not edit"
)
MODEL_TYPES_ABOUT = (
    "generated by tests/conformance/test_field_coverage.py from each release's vllm/transformers_utils/config.py "
    "_CONFIG_REGISTRY (SPECREG_REGENERATE=1 pytest -m conformance -k union_of_the_wheels); do not edit"
)


def write_table(path: Path, about: str, data: dict) -> None:
    """One of the facts home's tables, a list item per line (the regenerate paths' writer)."""
    from specreg import atomic

    atomic.write_bytes(path, (json.dumps({"_about": about, **data}, indent=2, sort_keys=True) + "\n").encode())


def aux_capture_architectures(version: str) -> set[str]:
    """Architecture names whose registered vLLM class implements SupportsEagle3 (directly or
    through a base class defined in vLLM's models package), read from the wheel's source."""
    import re

    with zipfile.ZipFile(wheel(version)) as z:
        names = z.namelist()
        models = {
            n: z.read(n).decode()
            for n in names
            if n.startswith("vllm/model_executor/models/") and n.endswith(".py") and n.count("/") == 3
        }
        registry = models["vllm/model_executor/models/registry.py"]
        # from 0.34 the registry may name a module by its full path (Qwen3.5: "vllm.models.qwen3_5"):
        # that package's files hold the class
        packages = {m.replace(".", "/") + "/" for m in re.findall(r'"(vllm\.[\w.]+)"', registry)}
        models.update({n: z.read(n).decode() for n in names if n.endswith(".py") and n.startswith(tuple(packages))})
    bases: dict[str, list[list[str]]] = {}
    for text in models.values():
        for m in re.finditer(r"^class (\w+)\(([^)]*)\)", text, re.M | re.S):
            names = re.findall(r"\b(\w+)\b", re.sub(r"\[.*?\]", "", m.group(2)))
            bases.setdefault(m.group(1), []).append(names)
    memo: dict[str, bool] = {}

    def supports(cls: str, depth: int = 0) -> bool:
        if cls == "SupportsEagle3":
            return True
        if cls in memo or depth > 30 or cls not in bases:
            return memo.get(cls, False)
        memo[cls] = False
        memo[cls] = any(supports(b, depth + 1) for group in bases[cls] for b in group)
        return memo[cls]

    entries = re.findall(r'"(\w+)":\s*\(\s*"([\w.]+)",\s*"(\w+)",?\s*\)', registry)
    return {arch for arch, _module, cls in entries if supports(cls)}
