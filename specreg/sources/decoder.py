"""Facts a decoder's config.json states in its own fields (a verifier's, or a draft's layer config),
read as they are written: no engine's rule is applied here. What vLLM or SGLang make of them (the
attention backend, the KV-cache pages, the quantization class) is their stage's."""

from __future__ import annotations

from typing import Any, Mapping


def int_value(value: Any) -> int | None:
    """`value` where it is an int (a JSON bool is not), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def positive_int(value: Any) -> int | None:
    """`value` where it is an int above 0 (a JSON bool is not), else None."""
    number = int_value(value)
    return number if number is not None and number > 0 else None


def head_size(config: Mapping[str, Any]) -> int | None:
    """The attention head size: head_dim, else hidden_size // num_attention_heads (as vLLM and
    transformers take it when head_dim is absent)."""
    head = positive_int(config.get("head_dim"))
    if head is not None:
        return head
    hidden, heads = int_value(config.get("hidden_size")), positive_int(config.get("num_attention_heads"))
    return hidden // heads if hidden is not None and heads is not None else None


def config_dtype(*configs: Mapping[str, Any] | None) -> str | None:
    """The first `dtype` (transformers 5) or `torch_dtype` (4) string the configs state."""
    for config in configs:
        for key in ("dtype", "torch_dtype"):
            value = (config or {}).get(key)
            if isinstance(value, str):
                return value
    return None


def mla_latent(config: Mapping[str, Any]) -> int | None:
    """An MLA model's per-token KV width, kv_lora_rank + qk_rope_head_dim; None: not MLA."""
    lora = positive_int(config.get("kv_lora_rank"))
    return lora + (positive_int(config.get("qk_rope_head_dim")) or 0) if lora else None


#: layer_types values of layers that keep a recurrent state, not a KV cache: Qwen3-Next's GatedDeltaNet
#: ("linear_attention"), and "mamba"
STATE_LAYER_TYPES = ("linear_attention", "mamba")


def state_layers(config: Mapping[str, Any]) -> tuple[int, ...]:
    """The indices of the layers `layer_types` names as state layers (`STATE_LAYER_TYPES`), among the
    first num_hidden_layers."""
    types, n = config.get("layer_types"), positive_int(config.get("num_hidden_layers"))
    if not isinstance(types, list) or n is None:
        return ()
    return tuple(i for i, t in enumerate(types[:n]) if t in STATE_LAYER_TYPES)
