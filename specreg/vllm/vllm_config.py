"""The config.json specreg writes for vLLM: the normalized draft_config in the form vLLM's plain config
path loads as it is (no speculators mapping runs on it), with what that form needed changed, and the
draft's quantization from the file older ModelOpt releases wrote beside the config."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specreg.errors import ConfigError, FileNotFoundOnHubError
from specreg.sources import hub
from specreg.sources.files import link_outside, read_config

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: Draft classes that vLLM's plain config path would rename. For method "eagle3", vLLM wraps a
#: plain draft config in EAGLEConfig, which prefixes "Eagle3" to any architecture that neither
#: starts nor ends with it: "PeagleQwen3ForCausalLM" would become an unknown class. vLLM's model
#: registry maps each Peagle name to the same class as the Eagle3 name written instead (checked
#: per version by tests/conformance); P-EAGLE itself comes from `parallel_drafting` and
#: `pard_token`, which are kept.
PLAIN_PATH_ARCHITECTURES = {
    "PeagleLlamaForCausalLM": "Eagle3LlamaForCausalLM",
    "PeagleQwen3ForCausalLM": "Eagle3Qwen3ForCausalLM",
}


def plain_path_config(spec: "Speculator") -> tuple[dict[str, Any], list[str]]:
    """`draft_config` in the form vLLM loads directly (no speculators mapping), and what was changed."""
    config = spec.draft_config_dict()
    changes: list[str] = []
    archs = config.get("architectures")
    if spec.method == "eagle3" and isinstance(archs, list):
        renamed = [PLAIN_PATH_ARCHITECTURES.get(a, a) for a in archs]
        if renamed != archs:
            changes.append(
                f"architectures {archs} -> {renamed}: the same vLLM class, under a name vLLM's "
                "EAGLEConfig does not rename"
            )
            config["architectures"] = renamed
    return config, changes


#: where ModelOpt before 0.31 wrote a checkpoint's quantization (vLLM's get_config reads it when the
#: config.json has no quantization_config: transformers_utils/config.py, 0.20-0.33)
HF_QUANT_CONFIG = "hf_quant_config.json"


def hf_quant_config(spec: "Speculator") -> dict[str, Any] | None:
    """The draft's hf_quant_config.json (local directory or Hub repo), or None where it has none. A
    link out of the draft's directory is refused, as for its weights."""
    origin = spec.origin
    if origin is None:
        return None
    if origin.repo_id:
        try:
            path = hub.fetch_file(
                origin.repo_id,
                HF_QUANT_CONFIG,
                origin.commit or origin.revision,
                source=origin.source,
                quiet_missing=True,
            )
        except FileNotFoundOnHubError:
            return None
        where = f"{origin.repo_id}/{HF_QUANT_CONFIG}"
    elif origin.path:
        directory = Path(origin.path).parent
        path = directory / HF_QUANT_CONFIG
        where = str(path)
        if not os.path.lexists(path):
            return None
        if path.is_symlink() and (real := link_outside(path, directory)) is not None:
            raise ConfigError(
                f"a link to {real}, outside the draft's directory: specreg reads no file a link points out to",
                "$",
                source=where,
            )
    else:
        return None
    quant, _ = read_config(path, source=where)
    return quant
