"""EAGLE-3 drafts as SpecForge, SGLang, TorchSpec, the EAGLE-3 release and ModelOpt write them.

``LlamaForCausalLMEagle3`` and kin, ``draft_vocab_size``, optionally a ModelOpt-style
``eagle_config`` whose ``eagle_aux_hidden_state_layer_ids`` count the *output* of layer t (ModelOpt
hooks the decoder layer's output), so speculators' id is t + 1. A top-level
``eagle_aux_hidden_state_layer_ids`` is already in vLLM's convention. These files carry no draft length.

Names are matched exactly, as vllm/model_executor/models/registry.py (0.33) maps them; each class
builds GQA attention with a dense MLP, except vLLM's DeepSeek EAGLE-3 (``deepseek_eagle3``), which
builds MLA with a dense MLP ("Eagle3 speculative decoding model for DeepseekV2/V3 with MLP (no MoE)").
MoE and linear-attention EAGLE-3 drafts have no vLLM class.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from specreg.errors import ConfigError
from specreg.sources.native.common import EAGLE3_DEFAULT_TOKENS, Converted, layer_config, note, speculators_envelope
from specreg.sources.native.layout import Layout, Serves

_LLAMA = Serves("Eagle3LlamaForCausalLM", module="llama_eagle3")
_DEEPSEEK = Serves("Eagle3DeepseekV2ForCausalLM", attention="mla", module="deepseek_eagle3")


def _modelopt(name: str, config: Mapping[str, Any]) -> bool:
    # ModelOpt exports name the base architecture; it is an EAGLE-3 draft only with its eagle_config
    return name != "LlamaForCausalLM" or isinstance(config.get("eagle_config"), Mapping)


LAYOUT = Layout(
    format="eagle3-native",
    label="native EAGLE-3",
    names={
        # vllm/model_executor/models/registry.py (0.33), _SPECULATIVE_DECODING_MODELS
        "LlamaForCausalLMEagle3": _LLAMA,
        "Eagle3LlamaForCausalLM": _LLAMA,
        "Eagle3MiniMaxM2ForCausalLM": _LLAMA,
        "Eagle3Qwen2_5vlForCausalLM": _LLAMA,
        "Eagle3Qwen3vlForCausalLM": _LLAMA,
        "Eagle3Qwen3ForCausalLM": Serves("Eagle3Qwen3ForCausalLM", module="qwen3_eagle3"),
        "Eagle3DeepseekV2ForCausalLM": _DEEPSEEK,
        "Eagle3DeepseekV3ForCausalLM": _DEEPSEEK,
        "LlamaForCausalLM": _LLAMA,  # ModelOpt, with eagle_config
    },
    accepts=_modelopt,
    alternatives={("mla", "dense"): "Eagle3DeepseekV3ForCausalLM"},
)


def convert(config: Mapping[str, Any], verifier: str | None, source: str | None) -> Converted:
    layer = layer_config(config)
    notes: list[tuple[str, str, str | None]] = []
    paths: dict[str, str] = {
        "$.speculators_config.verifier.name_or_path": "verifier",
        "$.speculators_model_type": "$.architectures",
    }
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
        notes.append(
            note(
                "served-layer-ids-mismatch",
                f"eagle_config.eagle_aux_hidden_state_layer_ids {raw} count the output of layer t (ModelOpt "
                f"hooks the layer's output); vLLM reads them as the hidden state entering layer i, one layer "
                f"early. specreg's draft_config states the trained ids {ids} at the top level, where vLLM reads them first.",
                ids_path,
            )
        )
    if eagle.get("use_aux_hidden_state") is False:
        raise ConfigError(
            "use_aux_hidden_state is false: an EAGLE-1/2 draft, not EAGLE-3",
            "$.eagle_config.use_aux_hidden_state",
            source=source,
        )
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
    # The trainers keep the residual from before the hidden-state norm (`residual = hidden_states`, then
    # `hidden_norm`): SafeAILab EAGLE's eagle/model/cnets.py, SpecForge's
    # specforge/modeling/draft/llama3_eagle.py LlamaDecoderLayer.forward; speculators' converter of
    # those checkpoints defaults to false too (speculators 0.9.0 convert/eagle/eagle3_converter.py), and
    # so does vLLM reading a native config (llama_eagle3.py: getattr(config, "norm_before_residual", False))
    out["norm_before_residual"] = config.get("norm_before_residual", False)
    for name in ("norm_before_fc", "fc_norm", "norm_output"):
        if name in config:
            out[name] = config[name]
            paths[f"$.{name}"] = f"$.{name}"
    if eagle.get("norm_before_fc") is not None and "norm_before_fc" not in config:
        out["norm_before_fc"] = eagle["norm_before_fc"]
        paths["$.norm_before_fc"] = "$.eagle_config.norm_before_fc"
    notes.append(
        note(
            "native-draft-length-default",
            f"the native config has no draft length: {EAGLE3_DEFAULT_TOKENS} tokens assumed (the k vLLM's "
            "Eagle-3 CI measures); set num_speculative_tokens to what you serve",
            None,
        )
    )
    defaults = {
        "$.speculators_config.proposal_methods[0].speculative_tokens": f"native EAGLE-3 configs carry no draft length; {EAGLE3_DEFAULT_TOKENS} is the k vLLM's Eagle-3 CI measures"
    }
    if "norm_before_residual" not in config:
        defaults["$.norm_before_residual"] = (
            "SpecForge and the EAGLE-3 release keep the residual from before "
            "the hidden-state norm (norm_before_residual = false)"
        )
    else:
        paths["$.norm_before_residual"] = "$.norm_before_residual"
    derived = {}
    if ids_path == "$.eagle_config.eagle_aux_hidden_state_layer_ids":
        derived["$.eagle_aux_hidden_state_layer_ids"] = "ModelOpt's output-of-layer id t -> t + 1"
    return Converted(
        format="eagle3-native", config=out, paths=paths, notes=tuple(notes), defaults=defaults, derived=derived
    )


LAYOUT = attrs.evolve(LAYOUT, convert=convert)
