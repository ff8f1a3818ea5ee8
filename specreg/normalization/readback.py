"""A directory specreg materialized, read back as the vLLM-ready layout it is.

`materialize` writes `config.json` in the form vLLM loads directly (no `speculators_config`) and
`specreg.json`, which records the algorithm, the target vLLM and the `speculative_config` vLLM is
given. Reading it back interprets the config the way that vLLM will: each layer's mask is what
`dflash_family.vllm_layer_causal` says that version serves (not what a trainer would have meant),
the ids are the ones vLLM reads, the length is the one vLLM is given. The result is the plan vLLM
will actually execute, expressed as the speculators-format config `normalize` reads (like the
native formats in `specreg.sources.native`), so `specreg show DIR` prints it with findings and provenance.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

from specreg import facts
from specreg.errors import ConfigError
from specreg.sources.native import Converted, speculators_envelope

FORMAT = "materialized"
MANIFEST_WRITER = "specreg"
#: keys materialize adds to the layer config (everything else in config.json is the layer config)
_VLLM_KEYS = {
    "architectures",
    "dflash_config",
    "eagle_aux_hidden_state_layer_ids",
    "draft_vocab_size",
    "target_hidden_size",
    "is_causal",
    "target_layer_ids",
    "block_size",
    "sample_from_anchor",
    "dspark_bonus_anchor",
    "mask_token_id",
    "markov_rank",
    "markov_head_type",
    "enable_confidence_head",
    "confidence_head_with_markov",
    "use_aux_hidden_state",
    "pard_token",
    "norm_before_residual",
    "norm_before_fc",
    "fc_norm",
    "norm_output",
}


def is_manifest(manifest: Any) -> bool:
    """Whether `manifest` (a parsed specreg.json) describes a directory this reader can read: one of an
    algorithm whose family (its registration's variant) this reader knows."""
    return (
        isinstance(manifest, Mapping)
        and manifest.get("written_by") == MANIFEST_WRITER
        and isinstance(manifest.get("speculative_config"), Mapping)
        and _variant(manifest.get("algorithm")) is not None
    )


def _variant(algorithm: Any) -> Any:
    """The family traits of a registered algorithm whose directory this reader can read (None: not one)."""
    from specreg.errors import UnknownAlgorithmError
    from specreg.normalization import algorithms, dflash_family, eagle_family

    if not isinstance(algorithm, str) or not algorithms.NAME.match(algorithm):
        return None
    try:
        variant = algorithms.get(algorithm).variant
    except UnknownAlgorithmError:
        return None
    return variant if isinstance(variant, (dflash_family.Variant, eagle_family.Variant)) else None


def to_speculators(config: Mapping[str, Any], manifest: Mapping[str, Any], *, source: str | None = None) -> Converted:
    """The speculators-format config whose plan is what vLLM serves from this directory."""
    from specreg.normalization.capabilities import parse_version
    from specreg.normalization import eagle_family
    from specreg.normalization.dflash_family import FULL, SLIDING, vllm_layer_causal
    from specreg.normalization.plan import Context

    algorithm = manifest["algorithm"]
    variant = _variant(algorithm)
    eagle = isinstance(variant, eagle_family.Variant)
    # DFlash and DFlash2 keep their fields in dflash_config, DSpark's layout at the top level
    nested = not eagle and not variant.top_level
    sc = manifest["speculative_config"]
    tokens = sc.get("num_speculative_tokens")
    own = {key for key, where in variant.readback_keys if where == "top"}  # the member's, not the layer's
    layer = {k: copy.deepcopy(v) for k, v in config.items() if k not in _VLLM_KEYS and k not in own}
    out: dict[str, Any] = {
        "speculators_model_type": algorithm,
        "transformer_layer_config": layer,
        "draft_vocab_size": config.get("draft_vocab_size"),
        "target_hidden_size": config.get("target_hidden_size"),
        "speculators_config": speculators_envelope(algorithm, tokens, manifest.get("verifier")),
    }
    paths = {
        "$.speculators_config.proposal_methods[0].speculative_tokens": "specreg.json:$.speculative_config",
        "$.speculators_config.verifier.name_or_path": "specreg.json:$.verifier",
    }
    source_keys = config.get("dflash_config") if nested else config
    source_keys = source_keys if isinstance(source_keys, Mapping) else {}
    prefix = "$.dflash_config" if nested else "$"
    flash = config.get("dflash_config") if isinstance(config.get("dflash_config"), Mapping) else {}
    for key, where in variant.readback_keys:
        held, at = (config, "$") if where == "top" else (flash, "$.dflash_config")
        if key in held:
            out[key] = held[key]
            paths[f"$.{key}"] = f"{at}.{key}"
    causal_everywhere = None
    if eagle:
        out["eagle_aux_hidden_state_layer_ids"] = config.get("eagle_aux_hidden_state_layer_ids")
        if variant.parallel_drafting:
            out["mask_token_id"] = config.get("pard_token")
            paths["$.mask_token_id"] = "$.pard_token"
    else:
        if config.get("architectures"):
            out["architectures"] = list(config["architectures"])  # DSpark's Omni class is named there
        out["aux_hidden_state_layer_ids"] = config.get("eagle_aux_hidden_state_layer_ids")
        paths["$.aux_hidden_state_layer_ids"] = "$.eagle_aux_hidden_state_layer_ids"
        out["mask_token_id"] = source_keys.get("mask_token_id")
        paths["$.mask_token_id"] = f"{prefix}.mask_token_id"
        anchor = source_keys.get("sample_from_anchor")
        # materialize always writes a DSpark-layout anchor; vLLM reads DFlash's missing one as false
        out["sample_from_anchor"] = bool(anchor) if anchor is not None else variant.top_level
        paths["$.sample_from_anchor"] = f"{prefix}.sample_from_anchor"
        if "block_size" not in out and isinstance(tokens, int):
            out["block_size"] = tokens if out["sample_from_anchor"] else tokens + 1
        # the masks vLLM serves from this config, stated in the speculators format's terms
        n = layer.get("num_hidden_layers")
        version = parse_version(
            str(manifest.get("vllm_version") or facts.known()[-1]), what="specreg.json:$.vllm_version"
        )
        if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= 4096:
            types = layer.get("layer_types") if isinstance(layer.get("layer_types"), list) else [FULL] * n
            ctx = Context(vllm=version, source=source, envelope=None)
            served = vllm_layer_causal(ctx, variant.top_level, config, n)
            full = [c for t, c in zip(types, served) if t != SLIDING]
            sliding = [c for t, c in zip(types, served) if t == SLIDING]
            flag = "$.is_causal" if "is_causal" in config else "$.dflash_config.causal"
            if any(full):
                if not all(served):
                    raise ConfigError(
                        "serves some full-attention layers causal and others not: no draft "
                        "specreg materializes has that mask",
                        flag,
                        source=source,
                    )
                causal_everywhere = flag
                out["sliding_window_non_causal"] = True
            elif len(set(sliding)) > 1:
                raise ConfigError(
                    "serves some sliding layers causal and others not: no draft specreg materializes has that mask",
                    flag,
                    source=source,
                )
            else:
                out["sliding_window_non_causal"] = not sliding[0] if sliding else True
            paths["$.sliding_window_non_causal"] = flag
    defaults = {"$.speculators_config.verifier.architectures": "not recorded"}
    return Converted(format=FORMAT, config=out, paths=paths, defaults=defaults, causal_everywhere=causal_everywhere)
