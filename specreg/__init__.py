"""specreg: the model zoo for speculative decoding.

Reads a draft model's config.json (speculators format), normalizes it into the configuration
vLLM needs to serve the draft as it was trained, and says where every value came from.

    import specreg
    spec = specreg.load("RedHatAI/Qwen3-8B-speculator.dflash")
    spec.speculative_config, spec.draft_config, spec.attention, spec.findings
    specreg.serve_plan("RedHatAI/Qwen3-8B-speculator.dflash").argv      # what `specreg serve` prints
    specreg.check("RedHatAI/Qwen3-8B-speculator.dflash", gpu="H100").findings
    specreg.catalog()["RedHatAI/Qwen3-8B-speculator.eagle3"].baselines

Public names are imported lazily, so `import specreg` stays light (no torch, transformers,
vllm or huggingface_hub).
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from specreg.version import __version__

_LAZY = {
    "load": "specreg.api",
    "normalize": "specreg.api",
    "register_speculator": "specreg.normalization.algorithms",
    "register_finding": "specreg.normalization.findings",
    # what an algorithm module (built in or a plugin) is written with
    "Plan": "specreg.normalization.plan",
    "Context": "specreg.normalization.plan",
    "Fields": "specreg.normalization.fields",
    "Kind": "specreg.normalization.fields",
    "POS_INT": "specreg.normalization.fields",
    "NONNEG_INT": "specreg.normalization.fields",
    "COUNT": "specreg.normalization.fields",
    "BOOL": "specreg.normalization.fields",
    "STR": "specreg.normalization.fields",
    "NUMBER": "specreg.normalization.fields",
    "LAYER_IDS": "specreg.normalization.fields",
    "STR_LIST": "specreg.normalization.fields",
    "check_layer_ids": "specreg.normalization.fields",
    "algorithms": "specreg.normalization.algorithms",
    "catalog": "specreg.entries",
    "convert": "specreg.api.conversion",
    # what the commands print, as frozen values with to_dict() (docs/api.md)
    "serve_plan": "specreg.api.serve",
    "materialize": "specreg.api.serve",
    "ServePlan": "specreg.api.serve",
    "Materialization": "specreg.api.serve",
    "NotServable": "specreg.api.serve",
    "check": "specreg.api.check",
    "CheckReport": "specreg.api.check",
    "catalog_list": "specreg.api.catalog",
    "catalog_entry": "specreg.api.catalog",
    "catalog_check": "specreg.api.catalog",
    "catalog_pin": "specreg.api.catalog",
    "sglang_plan": "specreg.sglang.plan",
    "Speculator": "specreg.normalization.speculator",
    "Finding": "specreg.normalization.speculator",
    "Provenance": "specreg.normalization.speculator",
    "LayerAttention": "specreg.normalization.speculator",
    "SpecregError": "specreg.errors",
    "ConfigError": "specreg.errors",
    "UnknownAlgorithmError": "specreg.errors",
    "RegistryError": "specreg.errors",
    "HubError": "specreg.errors",
    "RepoNotFoundError": "specreg.errors",
    "GatedRepoError": "specreg.errors",
    "RevisionNotFoundError": "specreg.errors",
    "FileNotFoundOnHubError": "specreg.errors",
    "OfflineError": "specreg.errors",
}

__all__ = sorted(_LAZY) + ["__version__"]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'specreg' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__
