"""What each vLLM version does with a speculators config: the mapping rules and when they began.

Each rule is named and dated by the first vLLM release whose
`vllm/transformers_utils/configs/speculators/algos.py` (or the model code it feeds) has it; the
conformance tier checks every date against the released wheels. Which algorithms a version serves
at all is declared by each algorithm module (`register_speculator(..., vllm_min=...)`).
"""

from __future__ import annotations

import importlib.metadata
from functools import lru_cache

from packaging.version import InvalidVersion, Version

from specreg.errors import ConfigError

#: The newest vLLM release specreg's rules were checked against; the target when none is installed.
NEWEST_KNOWN = Version("0.33.0")

#: rule -> first vLLM version that has it.
RULES: dict[str, Version] = {
    # dflash_config.target_layer_ids = [i - 1 for i in aux] (0.20-0.21 stored aux unchanged).
    "dflash_target_layer_ids_minus_one": Version("0.22"),
    # The DFlash proposer reads one global dflash_config.causal (missing -> non-causal); before,
    # every layer is non-causal. (vllm/v1/spec_decode/dflash.py; 0.23, where DESIGN.md says 0.24.)
    "dflash_causal_layers": Version("0.23"),
    # The DFlash model resolves each layer: is_causal, else dflash_config.causal, else
    # layer_types[i] == "sliding_attention"; before, one flag had to serve every layer.
    # (vllm/model_executor/models/qwen3_dflash.py)
    "dflash_per_layer_causal": Version("0.25"),
    # Eagle-3 and P-EAGLE pick the draft class from the layer model_type (qwen3 or llama);
    # before, every draft got the Llama class.
    "eagle_arch_by_model_type": Version("0.24"),
    # fc_norm and norm_output are mapped for Eagle-3.
    "eagle3_fc_norm_norm_output": Version("0.25"),
    # dflash_config.causal = not sliding_window_non_causal (missing -> not causal), for all layers.
    "dflash_causal_from_sliding_window_non_causal": Version("0.26"),
    # sample_from_anchor mapped for DFlash and DSpark (missing -> false); before, DFlash never read
    # it and DSpark always served a bonus anchor (dspark_bonus_anchor = True).
    "sample_from_anchor_mapped": Version("0.27"),
    # The V2 model runner refuses sample_from_anchor=true for DFlash
    # (vllm/v1/worker/gpu/spec_decode/dflash/speculator.py).
    "dflash_v2_runner_rejects_sample_from_anchor": Version("0.27"),
    # A user --speculative-config is merged on the automatic speculators path (discarded before).
    # (vllm/transformers_utils/config.py: maybe_override_with_speculators; 0.29, not 0.30.)
    "user_speculative_config_merged": Version("0.29"),
}


def since(rule: str, version: Version) -> bool:
    """Whether vLLM `version` has mapping rule `rule`."""
    return version >= RULES[rule]


def parse_version(text: str | Version, *, what: str = "--vllm") -> Version:
    """`0.26`, `0.26.0` or a Version; a clear ConfigError for anything else."""
    if isinstance(text, Version):
        return text
    try:
        v = Version(str(text).strip())
    except InvalidVersion:
        raise ConfigError(f"not a vLLM version: {text!r} (expected e.g. 0.26 or 0.33.0)", what) from None
    return Version(v.base_version)


@lru_cache(maxsize=1)
def installed_vllm() -> Version | None:
    """The installed vLLM's version, read from its metadata (vLLM itself is never imported)."""
    try:
        return parse_version(importlib.metadata.version("vllm"))
    except (importlib.metadata.PackageNotFoundError, ConfigError):
        return None


def target_version(vllm: str | Version | None) -> Version:
    """The vLLM version to target: the one asked for, else the installed one, else the newest known."""
    if vllm is not None:
        return parse_version(vllm)
    return installed_vllm() or NEWEST_KNOWN


def short(version: Version) -> str:
    """0.26.0 -> "0.26"; 0.10.2 stays."""
    parts = version.release + (0, 0)
    return f"{parts[0]}.{parts[1]}" if parts[2] == 0 else f"{parts[0]}.{parts[1]}.{parts[2]}"
