"""Drafts published outside the speculators format, and their conversion to it.

Formats (detected from the config alone):

- ``zlab``: z-lab DFlash. A plain HF config of the draft layers plus ``dflash_config``
  (``target_layer_ids``: the output of layer t; ``mask_token_id``; ``block_size`` here or at the
  top level; optional ``causal``, ``use_swa``, ``swa_window_size``) and ``num_target_layers``.
  The anchor is the bonus token: ``block_size - 1`` draft tokens.
- ``zlab-dflash2``: z-lab DFlash2 (``DFlash2DraftModel``): the z-lab DFlash layout plus the
  convolution and candidate-selector knobs (``conv_kernel_size``, ``conv_group_size``,
  ``selector_rank``, ``selector_top_k``) in ``dflash_config`` or at the top level; normalized as
  dflash2. z-lab's MuseGlimmer assistants (``MuseGlimmerAssistantModel``, which vLLM's registry
  maps to its DFlash class) are z-lab DFlash, with their fields in ``dflash_config`` or flat.
- ``deepspec``: DeepSpec DSpark, the same layout with the Markov and confidence fields
  (``markov_rank``, ``markov_head_type``, ``enable_confidence_head``,
  ``confidence_head_with_markov``; in ``dflash_config`` or at the top level) and
  ``architectures: ["DSparkDraftModel"]``. Drafts ``block_size`` tokens (sample from the anchor).
- ``eagle3-native``: EAGLE-3 drafts as SpecForge, SGLang and the original release write them
  (``LlamaForCausalLMEagle3`` and kin, ``draft_vocab_size``), optionally with a ModelOpt-style
  ``eagle_config`` whose ``eagle_aux_hidden_state_layer_ids`` count the *output* of layer t
  (ModelOpt hooks the decoder layer's output), so speculators' id is t + 1. A top-level
  ``eagle_aux_hidden_state_layer_ids`` is already in vLLM's convention. These files carry no
  draft length.

Layouts recognized but refused, each with the reason (`refusal`): SpecForge Domino
(``DominoDraftModel``: no vLLM class; serving it as DFlash would be another model) and SpecForge
P-EAGLE (``PEagleDraftModel``: its config holds no mask token; vLLM's registry serves it as plain
Eagle-3). Any other architecture gets one line naming it and the layouts specreg reads.

A native file names no verifier: the caller supplies it (or the catalog entry does).
`to_speculators` writes the speculators-format config that `normalize` reads, and a map from
its JSON paths back to the native file's, so errors and provenance name the native fields.
"""

from __future__ import annotations

import copy
from typing import Any, Mapping

import attrs

from specreg.errors import ConfigError, Problem

#: the most layers a config may declare (normalization.fields.MAX_COUNT, which reports a larger
#: value; this stage comes before it and must not build a layer list from such a value first)
_MAX_LAYERS = 4096

FORMATS = ("zlab", "zlab-dflash2", "deepspec", "eagle3-native")
#: the layouts specreg reads, as `specreg show` names them in an error
LAYOUTS = ("the speculators format (speculators_model_type)", "z-lab DFlash (DFlashDraftModel, "
           "MuseGlimmerAssistantModel)", "z-lab DFlash2 (DFlash2DraftModel)", "DeepSpec DSpark (DSparkDraftModel)",
           "EAGLE-3 as SpecForge, SGLang, the EAGLE-3 release and ModelOpt write it (LlamaForCausalLMEagle3, eagle_config)")
#: architectures vLLM's registry serves with its DFlash class (vllm/model_executor/models/registry.py, 0.33)
ZLAB_DFLASH_ARCHITECTURES = ("DFlashDraftModel", "MuseGlimmerAssistantModel", "DFlashMuseGlimmerAssistantModel")
DFLASH2_FIELDS = ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k")
#: recognized layouts no vLLM release serves: architecture -> why
REFUSED = {
    "DominoDraftModel": (
        "a SpecForge Domino draft (a GRU projector over the DFlash block, dflash_config.projector_type "
        "'domino'); no vLLM release has a Domino class (vLLM 0.33's model registry has none), and serving it "
        "as DFlash would be a different model"
    ),
    "PEagleDraftModel": (
        "a SpecForge P-EAGLE draft; its config holds no mask_token_id (SpecForge keeps the parallel-drafting "
        "token in its training arguments), which vLLM needs as pard_token, and vLLM's registry maps "
        "PEagleDraftModel to its plain Eagle-3 class, so the unmodified file is served without parallel "
        "drafting. Convert it with the speculators library's P-EAGLE converter, naming the mask token"
    ),
}
#: keys of the native file that are not the draft layers' HF config
_NOT_LAYER_CONFIG = {
    "dflash_config", "eagle_config", "block_size", "num_target_layers", "auto_map", "architectures",
    "draft_vocab_size", "is_causal", "mask_token_id", "target_layer_ids", "markov_rank",
    "markov_head_type", "enable_confidence_head", "confidence_head_with_markov",
    "confidence_head_alpha", "projector_type", "eagle_aux_hidden_state_layer_ids",
    "norm_before_residual", "norm_before_fc", "fc_norm", "norm_output", "target_hidden_size",
    "transformers_version", "use_aux_hidden_state", *("conv_kernel_size", "conv_group_size", "selector_rank",
                                                      "selector_top_k"),
}
_DSPARK_FIELDS = ("markov_rank", "markov_head_type", "enable_confidence_head", "confidence_head_with_markov")
EAGLE3_DEFAULT_TOKENS = 3


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
        best = max((p for p in self.paths if path == p or path.startswith(p + ".") or path.startswith(p + "[")),
                   key=len, default=None)
        if best is not None:
            return self.paths[best] + path[len(best):]
        if path.startswith("$.transformer_layer_config."):
            return "$." + path[len("$.transformer_layer_config."):]
        return path


def detect(config: Mapping[str, Any], *, source: str | None = None) -> str | None:
    """The native format of a parsed config, or None (speculators format, or not a draft we know).

    Raises ConfigError for a recognized layout that no vLLM release serves (`REFUSED`)."""
    if not isinstance(config, Mapping) or "speculators_model_type" in config or "speculators_config" in config:
        return None
    archs = config.get("architectures")
    archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), Mapping) else {}
    refused = next((a for a in archs if a in REFUSED), None)
    if refused is None and dflash.get("projector_type") == "domino":
        refused = "DominoDraftModel"
    if refused is not None:
        raise ConfigError(f"{refused}: {REFUSED[refused]}", "$.architectures" if refused in archs
                          else "$.dflash_config.projector_type", source=source)
    if (any("DSpark" in a for a in archs) or dflash.get("projector_type") == "dspark"
            or "markov_rank" in dflash or "markov_rank" in config):
        return "deepspec"
    if "DFlash2DraftModel" in archs or any(k in dflash for k in DFLASH2_FIELDS):
        return "zlab-dflash2"
    if (any("DFlash" in a for a in archs) or any(a in ZLAB_DFLASH_ARCHITECTURES for a in archs) or dflash
            or ("target_layer_ids" in config and "mask_token_id" in config and "block_size" in config)):
        return "zlab"
    if (any(a.endswith("Eagle3") or a.startswith("Eagle3") for a in archs)
            or isinstance(config.get("eagle_config"), Mapping)):
        return "eagle3-native"
    return None


def not_a_draft(config: Mapping[str, Any]) -> str:
    """The one-line reason a config is none of the layouts specreg reads."""
    archs = config.get("architectures") if isinstance(config, Mapping) else None
    named = f"architectures {archs!r}" if archs else "no architectures"
    return (f"not a draft config specreg reads ({named}, no speculators_model_type); specreg reads "
            + "; ".join(LAYOUTS))


def _get(config: Mapping[str, Any], name: str) -> tuple[Any, str | None]:
    """A field from dflash_config, else the top level: (value, native path)."""
    dflash = config.get("dflash_config")
    if isinstance(dflash, Mapping) and name in dflash:
        return dflash[name], f"$.dflash_config.{name}"
    if name in config:
        return config[name], f"$.{name}"
    return None, None


def _layer_config(config: Mapping[str, Any]) -> dict[str, Any]:
    return {k: copy.deepcopy(v) for k, v in config.items() if k not in _NOT_LAYER_CONFIG}


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


def _note(code: str, message: str, path: str | None) -> tuple[str, str, str | None]:
    """A finding the conversion reports (made into a `Finding` once the Speculator exists)."""
    return code, message, path


def _require(problems: list[Problem], value: Any, path: str, what: str) -> None:
    if value is None:
        problems.append(Problem(path, f"missing: {what}"))


def to_speculators(config: Mapping[str, Any], fmt: str, *, verifier: str | None = None,
                   source: str | None = None) -> Converted:
    """The speculators-format equivalent of a native config (raises ConfigError naming native paths)."""
    if fmt == "eagle3-native":
        return _eagle3(config, verifier, source)
    return _dflash_family(config, fmt, verifier, source)


def _arch(config: Mapping[str, Any]) -> str | None:
    archs = config.get("architectures")
    return next((a for a in archs if isinstance(a, str)), None) if isinstance(archs, list) else None


def _dflash_family(config: Mapping[str, Any], fmt: str, verifier: str | None, source: str | None) -> Converted:
    problems: list[Problem] = []
    ids, ids_path = _get(config, "target_layer_ids")
    block, block_path = _get(config, "block_size")
    mask, mask_path = _get(config, "mask_token_id")
    _require(problems, ids, "$.dflash_config.target_layer_ids", "the target layer ids (never guessed)")
    _require(problems, block, "$.dflash_config.block_size", "block_size (in dflash_config or at the top level)")
    _require(problems, mask, "$.dflash_config.mask_token_id", "mask_token_id")
    if ids is not None and (not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                                 for i in ids)):
        problems.append(Problem(ids_path, f"must be a list of layer indices, got {ids!r}"))
    if block is not None and (not isinstance(block, int) or isinstance(block, bool) or block < 2):
        problems.append(Problem(block_path, f"must be an integer >= 2, got {block!r}"))
    if problems:
        raise ConfigError(problems, source=source)

    layer = _layer_config(config)
    n = layer.get("num_hidden_layers")
    if isinstance(n, int) and not (0 < n <= _MAX_LAYERS):
        n = None  # out of range: the layer list is not built from it (the normalizer reports the value)
    types = layer.get("layer_types")
    use_swa, _ = _get(config, "use_swa")
    # causality: a top-level is_causal, else dflash_config.causal, else sliding layers only
    causal, causal_path = (config["is_causal"], "$.is_causal") if "is_causal" in config else _get(config, "causal")
    if types is None and isinstance(n, int) and not use_swa:
        layer["layer_types"] = ["full_attention"] * n  # what a missing layer_types means (transformers' default)
    if use_swa and isinstance(n, int):
        if types is None or "sliding_attention" not in types:
            layer["layer_types"] = ["sliding_attention"] * n
        window, _ = _get(config, "swa_window_size")
        if window is not None:
            layer["sliding_window"] = window
    types = layer.get("layer_types")
    sliding = isinstance(types, list) and "sliding_attention" in types
    if sliding:
        # transformers' Qwen3Config drops sliding_window unless use_sliding_window is true (speculators
        # writes it so); without it vLLM's DFlash model finds no window for its sliding layers
        layer["use_sliding_window"] = True
    full = not isinstance(types, list) or "full_attention" in types
    causal_everywhere = causal_path if causal is True and full else None
    if causal_everywhere:
        non_causal, nc_path = True, causal_everywhere  # then every layer is set causal (normalization)
    elif causal is None and use_swa:
        non_causal, nc_path = True, "$.dflash_config.use_swa"  # use_swa drafts attend bidirectionally
    elif causal is None:
        # z-lab trains sliding layers causal and full layers bidirectional; with no sliding layer the
        # flag only matters to vLLM's reading, so state "non-causal", which is what was trained.
        non_causal = not sliding
        nc_path = "$.layer_types"
    else:
        non_causal = not causal
        nc_path = causal_path
    defaults: dict[str, str] = {
        "$.sample_from_anchor": "DeepSpec DSpark drafts from the anchor: block_size tokens" if fmt == "deepspec"
        else "z-lab DFlash drafts block_size - 1 tokens after the bonus anchor",
    }
    if fmt == "deepspec" and causal is None:
        non_causal = True  # (also the placeholder of a causal-everywhere draft)
        defaults["$.sliding_window_non_causal"] = "DeepSpec trains the DSpark block bidirectional unless is_causal is set"
    algorithm = {"deepspec": "dspark", "zlab-dflash2": "dflash2"}.get(fmt, "dflash")
    anchor = algorithm == "dspark"
    tokens = block if anchor else block - 1
    dv, dv_path = _get(config, "draft_vocab_size")
    out: dict[str, Any] = {
        "speculators_model_type": algorithm,
        "architectures": [{"dspark": "DSparkSpeculator", "dflash2": "DFlash2Speculator"}.get(algorithm,
                                                                                              "DFlashSpeculator")],
        "transformer_layer_config": layer,
        "aux_hidden_state_layer_ids": [i + 1 for i in ids],
        "block_size": block,
        "mask_token_id": mask,
        "draft_vocab_size": dv if dv is not None else layer.get("vocab_size"),
        "sample_from_anchor": anchor,
        "sliding_window_non_causal": non_causal,
        "target_hidden_size": None,
        "speculators_config": speculators_envelope(algorithm, tokens, verifier),
    }
    paths = {
        "$.aux_hidden_state_layer_ids": ids_path,
        "$.block_size": block_path,
        "$.mask_token_id": mask_path,
        "$.sliding_window_non_causal": nc_path,
        "$.speculators_config.proposal_methods[0].speculative_tokens": block_path,
        "$.speculators_config.verifier.name_or_path": "verifier",
        "$.draft_vocab_size": dv_path or "$.vocab_size",
    }
    if algorithm == "dflash2":
        for name in DFLASH2_FIELDS:
            value, path = _get(config, name)
            if value is not None:
                out[name] = value
                paths[f"$.{name}"] = path
    if anchor:
        for name in _DSPARK_FIELDS:
            value, path = _get(config, name)
            if value is not None:
                out[name] = value
                paths[f"$.{name}"] = path
    derived = {
        "$.aux_hidden_state_layer_ids": "output of layer t -> speculators' id t + 1 (the hidden state entering it)",
        "$.speculators_config.proposal_methods[0].speculative_tokens":
            "block_size" if fmt == "deepspec" else "block_size - 1",
    }
    return Converted(format=fmt, config=out, paths=paths, defaults=defaults, derived=derived,
                     causal_everywhere=causal_everywhere)


def _eagle3(config: Mapping[str, Any], verifier: str | None, source: str | None) -> Converted:
    layer = _layer_config(config)
    notes: list[tuple[str, str, str | None]] = []
    paths: dict[str, str] = {"$.speculators_config.verifier.name_or_path": "verifier"}
    ids, ids_path = None, None
    eagle = config.get("eagle_config") if isinstance(config.get("eagle_config"), Mapping) else {}
    if config.get("eagle_aux_hidden_state_layer_ids") is not None:
        ids, ids_path = config["eagle_aux_hidden_state_layer_ids"], "$.eagle_aux_hidden_state_layer_ids"
    elif eagle.get("eagle_aux_hidden_state_layer_ids"):
        raw = eagle["eagle_aux_hidden_state_layer_ids"]
        ids_path = "$.eagle_config.eagle_aux_hidden_state_layer_ids"
        if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
            raise ConfigError(f"must be a list of layer indices, got {raw!r}", ids_path, source=source)
        ids = [t + 1 for t in sorted(set(raw))]
        notes.append(_note(
            "served-layer-ids-mismatch",
            f"eagle_config.eagle_aux_hidden_state_layer_ids {raw} count the output of layer t (ModelOpt "
            f"hooks the layer's output); vLLM reads them as the hidden state entering layer i, one layer "
            f"early. specreg's draft_config states the trained ids {ids} at the top level, where vLLM reads them first.",
            ids_path,
        ))
    if eagle.get("use_aux_hidden_state") is False:
        raise ConfigError("use_aux_hidden_state is false: an EAGLE-1/2 draft, not EAGLE-3",
                          "$.eagle_config.use_aux_hidden_state", source=source)
    out: dict[str, Any] = {
        "speculators_model_type": "eagle3",
        "architectures": ["Eagle3Speculator"],
        "transformer_layer_config": layer,
        "draft_vocab_size": config.get("draft_vocab_size", layer.get("vocab_size")),
        "eagle_aux_hidden_state_layer_ids": ids,
        "target_hidden_size": config.get("target_hidden_size"),
        "speculators_config": speculators_envelope("eagle3", EAGLE3_DEFAULT_TOKENS, verifier),
    }
    paths["$.eagle_aux_hidden_state_layer_ids"] = ids_path or "$.eagle_aux_hidden_state_layer_ids"
    paths["$.draft_vocab_size"] = "$.draft_vocab_size" if "draft_vocab_size" in config else "$.vocab_size"
    # SpecForge and the EAGLE-3 release take the residual after the hidden-state norm
    out["norm_before_residual"] = config.get("norm_before_residual", True)
    for name in ("norm_before_fc", "fc_norm", "norm_output"):
        if name in config:
            out[name] = config[name]
            paths[f"$.{name}"] = f"$.{name}"
    if eagle.get("norm_before_fc") is not None and "norm_before_fc" not in config:
        out["norm_before_fc"] = eagle["norm_before_fc"]
        paths["$.norm_before_fc"] = "$.eagle_config.norm_before_fc"
    notes.append(_note(
        "native-draft-length-default",
        f"the native config has no draft length: {EAGLE3_DEFAULT_TOKENS} tokens assumed (the k vLLM's "
        "Eagle-3 CI measures); set num_speculative_tokens to what you serve",
        None,
    ))
    defaults = {"$.speculators_config.proposal_methods[0].speculative_tokens":
                f"native EAGLE-3 configs carry no draft length; {EAGLE3_DEFAULT_TOKENS} is the k vLLM's Eagle-3 CI measures"}
    if "norm_before_residual" not in config:
        defaults["$.norm_before_residual"] = ("SpecForge and the EAGLE-3 release take the residual after the "
                                              "hidden-state norm (norm_before_residual = true)")
    else:
        paths["$.norm_before_residual"] = "$.norm_before_residual"
    derived = {}
    if ids_path == "$.eagle_config.eagle_aux_hidden_state_layer_ids":
        derived["$.eagle_aux_hidden_state_layer_ids"] = "ModelOpt's output-of-layer id t -> t + 1"
    return Converted(format="eagle3-native", config=out, paths=paths, notes=tuple(notes), defaults=defaults,
                     derived=derived)
