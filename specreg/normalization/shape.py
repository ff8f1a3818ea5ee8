"""Structural checks that vLLM (or the transformers config class it loads) makes on a draft's layers.

Each fails only after a GPU has been allocated and weights fetched, so specreg reports it first:
- transformers' `LlamaConfig.validate_architecture` (transformers 5) refuses a hidden size that is not
  a multiple of the attention heads; for any model type, a missing `head_dim` is computed by vLLM as
  hidden_size // num_attention_heads, so the division must be exact there too;
- vLLM's attention layer needs the query heads to be a multiple of the key/value heads (GQA groups).
"""

from __future__ import annotations

from specreg.normalization.fields import Fields
from specreg.normalization.plan import Plan


def _positive_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0


def check_layer_shape(layer_cfg: Fields, plan: Plan) -> None:
    """Error findings (with the JSON path and the values) for layer configs vLLM cannot build."""
    hidden = layer_cfg.raw("hidden_size")
    heads = layer_cfg.raw("num_attention_heads")
    kv_heads = layer_cfg.raw("num_key_value_heads")
    head_dim = layer_cfg.raw("head_dim")
    model_type = layer_cfg.raw("model_type")
    if heads is not None and not _positive_int(heads):
        plan.find("invalid-draft-shape", f"num_attention_heads must be a positive integer, got {heads!r}",
                  layer_cfg.at("num_attention_heads"))
        return
    if _positive_int(hidden) and _positive_int(heads) and hidden % heads:
        if model_type == "llama":
            plan.find("invalid-draft-shape", f"hidden_size {hidden} is not a multiple of num_attention_heads "
                      f"{heads}: transformers' LlamaConfig (transformers 5, which vLLM 0.33 requires) refuses it "
                      "when vLLM loads the draft",
                      layer_cfg.at("hidden_size"))
        elif head_dim is None:
            plan.find("invalid-draft-shape", f"hidden_size {hidden} is not a multiple of num_attention_heads "
                      f"{heads} and there is no head_dim: vLLM's head size hidden_size // heads would not "
                      "cover the hidden size", layer_cfg.at("hidden_size"))
    if kv_heads is not None and not _positive_int(kv_heads):
        plan.find("invalid-draft-shape", f"num_key_value_heads must be a positive integer, got {kv_heads!r}",
                  layer_cfg.at("num_key_value_heads"))
    elif _positive_int(kv_heads) and _positive_int(heads) and heads % kv_heads:
        plan.find("invalid-draft-shape", f"num_attention_heads {heads} is not a multiple of num_key_value_heads "
                  f"{kv_heads}: vLLM's attention groups query heads per key/value head",
                  layer_cfg.at("num_key_value_heads"))
