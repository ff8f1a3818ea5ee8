"""Structural checks that vLLM (or the transformers config class it loads) makes on a draft's layers.

Each fails only after a GPU has been allocated and weights fetched, so specreg reports it first:
- transformers' `LlamaConfig.validate_architecture` (transformers 5) refuses a hidden size that is not
  a multiple of the attention heads; for any model type, a missing `head_dim` is computed by vLLM as
  hidden_size // num_attention_heads, so the division must be exact there too;
- vLLM's attention layer needs the query heads to be a multiple of the key/value heads (GQA groups);
- a composite model_type (vision-language and kin, `model_types`) makes transformers build a
  config with no top-level vocab_size or layers, which vLLM's draft classes read;
- a model_type neither transformers nor vLLM's own config registry knows ends vLLM's config loading.
"""

from __future__ import annotations

from specreg.normalization.capabilities import NEWEST_KNOWN, short
from specreg.normalization.model_types import (
    composite_model_types,
    known_model_types,
    mtp_rewrite,
    transformers_version,
)
from specreg.normalization.fields import POS_INT, Fields
from specreg.normalization.plan import Context, Plan


#: the docstring-table rows of the layer fields check_layer_shape and check_startup read, composed into
#: the table of every algorithm that calls them (specreg.normalization.algorithms.shared_rows)
LAYER_SHAPE_ROWS = (
    "| `transformer_layer_config.rope_parameters` | object | checked | an M-RoPE section makes vLLM's drafter refuse DFlash and parallel drafting at startup |",
    "| `transformer_layer_config.rope_scaling` | object | checked | as rope_parameters (transformers 5 loads it as rope_parameters) |",
    "| `transformer_layer_config.hidden_size` | int | checked | must be a multiple of the heads for llama layers (transformers' LlamaConfig) or without head_dim |",
    "| `transformer_layer_config.num_attention_heads` | int >= 1 | checked | a multiple of num_key_value_heads (vLLM's attention groups) |",
    "| `transformer_layer_config.num_key_value_heads` | int >= 1 | checked | divides num_attention_heads |",
    "| `transformer_layer_config.head_dim` | int | checked | without it vLLM's head size is hidden_size // heads |",
)


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_layer_shape(layer_cfg: Fields, plan: Plan) -> None:
    """Error findings (with the JSON path and the values) for layer configs vLLM cannot build, and a
    problem for a hidden size that is no positive integer (the weight checks multiply it)."""
    hidden = layer_cfg.get("hidden_size", POS_INT)
    heads = layer_cfg.raw("num_attention_heads")
    kv_heads = layer_cfg.raw("num_key_value_heads")
    head_dim = layer_cfg.raw("head_dim")
    model_type = layer_cfg.raw("model_type")
    if isinstance(model_type, str) and model_type in composite_model_types():
        plan.find(
            "composite-model-type",
            f"model_type {model_type!r} makes transformers build a composite (vision-language) config whose "
            "language fields sit under text_config: vLLM's draft class then fails reading vocab_size "
            f"(\"'{type_name(model_type)}' object has no attribute 'vocab_size'\"; transformers "
            f"{transformers_version()}). The draft's layers are a text model: give the text model_type "
            "they were trained as",
            layer_cfg.at("model_type"),
            fix="set model_type to the draft layers' text model type (llama, qwen2, qwen3, ...)",
        )
    elif isinstance(model_type, str) and model_type not in known_model_types():
        plan.find(
            "unknown-model-type",
            f"model_type {model_type!r} is known neither to transformers ({transformers_version()}) nor to "
            "vLLM's config registry: vLLM's config loading ends in \"The checkpoint you are trying to load "
            f'has model type `{model_type}` but Transformers does not recognize this architecture"',
            layer_cfg.at("model_type"),
            fix="set model_type to the draft layers' text model type (llama, qwen2, qwen3, ...)",
        )
    if heads is not None and not _positive_int(heads):
        plan.find(
            "invalid-draft-shape",
            f"num_attention_heads must be a positive integer, got {heads!r}",
            layer_cfg.at("num_attention_heads"),
        )
        return
    if _positive_int(hidden) and _positive_int(heads) and hidden % heads:
        if model_type == "llama":
            plan.find(
                "invalid-draft-shape",
                f"hidden_size {hidden} is not a multiple of num_attention_heads "
                f"{heads}: transformers' LlamaConfig (transformers 5, which vLLM {short(NEWEST_KNOWN)} "
                "requires) refuses it when vLLM loads the draft",
                layer_cfg.at("hidden_size"),
            )
        elif head_dim is None:
            plan.find(
                "invalid-draft-shape",
                f"hidden_size {hidden} is not a multiple of num_attention_heads "
                f"{heads} and there is no head_dim: vLLM's head size hidden_size // heads would not "
                "cover the hidden size",
                layer_cfg.at("hidden_size"),
            )
    if kv_heads is not None and not _positive_int(kv_heads):
        plan.find(
            "invalid-draft-shape",
            f"num_key_value_heads must be a positive integer, got {kv_heads!r}",
            layer_cfg.at("num_key_value_heads"),
        )
    elif _positive_int(kv_heads) and _positive_int(heads) and heads % kv_heads:
        plan.find(
            "invalid-draft-shape",
            f"num_attention_heads {heads} is not a multiple of num_key_value_heads "
            f"{kv_heads}: vLLM's attention groups query heads per key/value head",
            layer_cfg.at("num_key_value_heads"),
        )


def type_name(model_type: str) -> str:
    """The config class name transformers gives a model_type, as vLLM's error names it (best effort)."""
    known = {
        "qwen2_5_vl": "Qwen2_5_VLConfig",
        "qwen2_vl": "Qwen2VLConfig",
        "qwen3_vl": "Qwen3VLConfig",
        "llava": "LlavaConfig",
        "llava_next": "LlavaNextConfig",
        "gemma3": "Gemma3Config",
    }
    return known.get(model_type, "".join(p.capitalize() for p in model_type.replace("-", "_").split("_")) + "Config")


def mrope_section(layer_cfg: Fields) -> tuple[str, object] | None:
    """(path, section) of the M-RoPE section a draft layer config declares, as vLLM finds it
    (vllm/transformers_utils/config.py `_mrope_section`: ``mrope_section`` or ``xdrope_section`` in
    each rope-parameters dict, nested per layer type or not; transformers 5 loads a JSON
    ``rope_scaling`` as ``rope_parameters``)."""
    for key in ("rope_parameters", "rope_scaling"):
        params = layer_cfg.raw(key)
        if not isinstance(params, dict):
            continue
        nested = [(f"{key}.{k}", v) for k, v in params.items() if isinstance(v, dict)]
        for where, d in [(key, params)] + nested:
            for name in ("mrope_section", "xdrope_section"):
                if isinstance(d.get(name), list):
                    return f"{layer_cfg.at(where)}.{name}", d[name]
    return None


def check_startup(layer_cfg: Fields, plan: Plan, ctx: Context, *, parallel_slots: bool, why: str) -> None:
    """Config-dependent refusals on vLLM's drafter startup path (docs/semantics.md lists each).

    `parallel_slots`: the drafter adds input slots per request (DFlash always, parallel drafting
    with k > 1), which is when `LLMBaseProposer.__init__` calls `_raise_if_mrope`
    (vllm/v1/spec_decode/llm_base_proposer.py, vLLM 0.20-0.33)."""
    model_type = layer_cfg.raw("model_type")
    becomes = mtp_rewrite(model_type, ctx.vllm)
    if becomes is not None:
        into = "an MTP model's config it cannot build from a draft" if becomes == "refused" else f"{becomes}"
        plan.find(
            "vllm-startup-refusal",
            f"{ctx.vllm_label}'s SpeculativeConfig.hf_config_override rewrites every draft config with model_type "
            f"{model_type!r} into {into} (vllm/config/speculative.py), so the draft class is never built",
            layer_cfg.at("model_type"),
            fix=_rewrite_fix(model_type),
        )
    found = mrope_section(layer_cfg)
    if found is not None and parallel_slots and ctx.holds("mrope_refused_with_extra_slots"):
        plan.find(
            "vllm-startup-refusal",
            f"the draft's rope parameters declare M-RoPE (mrope_section {found[1]}); {ctx.vllm_label}'s drafter "
            f'raises "Speculative Decoding with draft models or parallel drafting does not support M-RoPE '
            f'yet" at startup for {why}',
            found[0],
            fix="serve a draft trained with plain RoPE, or an EAGLE-3 draft (which M-RoPE does not stop)",
        )


def _rewrite_fix(model_type: str) -> str:
    if model_type.startswith("deepseek_v3"):
        return (
            "set model_type to deepseek_v2 (transformers' DeepseekV2Config reads the same MLA fields) or kimi_k2 "
            "(vLLM's registry maps it to the same DeepseekV3Config); neither is rewritten"
        )
    return "set model_type to a text model type vLLM does not take for an MTP target's (llama, qwen3, ...)"
