"""What a draft config says its layers are: attention kind, MLP kind, position encoding.

Read from the fields the layer classes are built from (the same fields transformers' and vLLM's
DeepSeek, Qwen-MoE and Kimi-Linear classes read), never from a name:

- attention: ``mla`` when ``kv_lora_rank`` or ``q_lora_rank`` is set (DeepSeek-V2/V3, Kimi K2/K3 MLA)
  or ``dflash_config.attention_mode`` is ``"mla"``; ``linear`` when a ``layer_types`` entry is a
  linear-attention kind or ``linear_attn_config`` is set (Kimi Linear KDA); else ``gqa`` (MHA is GQA
  with one query head per key/value head);
- MLP: ``moe`` when ``use_moe`` is true or any expert count (``num_experts``, ``n_routed_experts``,
  ``num_local_experts``, ``moe_num_experts``) is above 0; else ``dense``.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

MLA_KEYS = ("kv_lora_rank", "q_lora_rank")
EXPERT_KEYS = ("num_experts", "n_routed_experts", "num_local_experts", "moe_num_experts")
LINEAR_LAYER_TYPES = ("linear_attention", "kda", "kimi_delta_attention", "mamba", "gated_delta_net")


@attrs.frozen
class Evidence:
    """One structural fact about the layers and the field that shows it."""

    kind: str
    path: str | None
    value: Any = None


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def attention(config: Mapping[str, Any]) -> Evidence:
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), Mapping) else {}
    for key in MLA_KEYS:
        if config.get(key) is not None:
            return Evidence("mla", f"$.{key}", config[key])
    if dflash.get("attention_mode") == "mla":
        return Evidence("mla", "$.dflash_config.attention_mode", "mla")
    types = config.get("layer_types")
    if isinstance(types, list):
        for i, t in enumerate(types):
            if isinstance(t, str) and t in LINEAR_LAYER_TYPES:
                return Evidence("linear", f"$.layer_types[{i}]", t)
    if config.get("linear_attn_config") is not None:
        return Evidence("linear", "$.linear_attn_config", "set")
    return Evidence("gqa", None)


def mlp(config: Mapping[str, Any]) -> Evidence:
    if config.get("use_moe") is True:
        return Evidence("moe", "$.use_moe", True)
    for key in EXPERT_KEYS:
        if _count(config.get(key)):
            return Evidence("moe", f"$.{key}", config[key])
    return Evidence("dense", None)


NAMES = {
    "gqa": "GQA/MHA attention",
    "mla": "multi-head latent attention (MLA)",
    "linear": "linear attention",
    "dense": "a dense MLP",
    "moe": "a mixture-of-experts MLP",
}
