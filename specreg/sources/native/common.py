"""What every native layout shares: the converted config, field lookup, the speculators envelope."""

from __future__ import annotations

import copy
from typing import Any, Mapping

import attrs

from specreg.errors import Problem

DFLASH2_FIELDS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
DSPARK_FIELDS = ("markov_rank", "markov_head_type", "enable_confidence_head", "confidence_head_with_markov")
EAGLE3_DEFAULT_TOKENS = 3
#: keys of the native file that are not the draft layers' HF config
NOT_LAYER_CONFIG = {
    "dflash_config",
    "eagle_config",
    "block_size",
    "num_target_layers",
    "auto_map",
    "architectures",
    "draft_vocab_size",
    "is_causal",
    "mask_token_id",
    "target_layer_ids",
    *DSPARK_FIELDS,
    "confidence_head_alpha",
    "projector_type",
    "eagle_aux_hidden_state_layer_ids",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
    "target_hidden_size",
    "transformers_version",
    "use_aux_hidden_state",
    *DFLASH2_FIELDS,
}


@attrs.frozen
class Converted:
    """A native config in the speculators format, and how its paths map back."""

    format: str
    config: dict[str, Any]
    #: speculators JSON path prefix -> native JSON path (longest prefix wins)
    paths: Mapping[str, str]
    #: (code, message, native path) findings the conversion itself has to report
    notes: tuple[tuple[str, str, str | None], ...] = ()
    #: speculators JSON path -> why: values the native file did not state (a format's default)
    defaults: Mapping[str, str] = attrs.field(factory=dict)
    #: speculators JSON path -> how it was computed from the native field it maps to
    derived: Mapping[str, str] = attrs.field(factory=dict)
    #: the native path saying every layer is causal, full-attention ones included: the speculators
    #: format cannot say that (it trains full attention bidirectional), so `config` carries the
    #: bidirectional plan and normalization then sets every layer causal
    causal_everywhere: str | None = None

    def native_path(self, path: str | None) -> str | None:
        if path is None or not path.startswith("$"):
            return path
        best = max(
            (p for p in self.paths if path == p or path.startswith(p + ".") or path.startswith(p + "[")),
            key=len,
            default=None,
        )
        if best is not None:
            return self.paths[best] + path[len(best) :]
        if path.startswith("$.transformer_layer_config."):
            return "$." + path[len("$.transformer_layer_config.") :]
        return path


def dflash_field(config: Mapping[str, Any], name: str) -> tuple[Any, str | None]:
    """A field from dflash_config, else the top level: (value, native path)."""
    dflash = config.get("dflash_config")
    if isinstance(dflash, Mapping) and name in dflash:
        return dflash[name], f"$.dflash_config.{name}"
    if name in config:
        return config[name], f"$.{name}"
    return None, None


def layer_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in config.items() if k not in NOT_LAYER_CONFIG}


def speculators_envelope(algorithm: str, tokens: int | None, verifier: str | None) -> dict[str, Any]:
    """The `speculators_config` of a speculators-format twin: one greedy proposal of `tokens`."""
    spec: dict[str, Any] = {
        "algorithm": algorithm,
        "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": tokens}],
    }
    # speculators requires the verifier's architectures; unknown ones are left empty, never guessed
    spec["verifier"] = {"name_or_path": verifier, "architectures": []}
    return spec


def note(code: str, message: str, path: str | None) -> tuple[str, str, str | None]:
    """A finding the conversion reports (made into a `Finding` once the Speculator exists)."""
    return code, message, path


def require(problems: list[Problem], value: Any, path: str, what: str) -> None:
    if value is None:
        problems.append(Problem(path, f"missing: {what}"))


def architecture_of(config: Mapping[str, Any]) -> str | None:
    archs = config.get("architectures")
    return next((a for a in archs if isinstance(a, str)), None) if isinstance(archs, list) else None
