"""Eagle-3: a one-layer (or few-layer) autoregressive draft fed by three verifier hidden states."""

from specreg import facts
from specreg.normalization.algorithms import register_speculator
from specreg.normalization.eagle_family import Variant, normalize

EAGLE3 = Variant(
    name="eagle3",
    architecture="Eagle3{}ForCausalLM",
    norm_before_residual_default=False,
    vllm_norm_before_residual_default=True,
    norm_flags=("norm_before_fc", "fc_norm", "norm_output"),
)


@register_speculator("eagle3", method="eagle3", vllm_min=str(facts.since("algorithm_eagle3")))
def eagle3(cfg, ctx):
    """Eagle-3 draft, served as method "eagle3".

    | field | type | required / default | why |
    |---|---|---|---|
    | `transformer_layer_config` | object | required | the draft's decoder config: the base of draft_config |
    | `transformer_layer_config.model_type` | str | default qwen3 (speculators >= 0.7) else llama | picks the vLLM class; vLLM assumes llama, so specreg writes the trainer's choice |
    | `transformer_layer_config.num_hidden_layers` | int >= 1 | required | one causal layer per entry of the attention plan |
    | `transformer_layer_config.rope_parameters` | object | checked | an M-RoPE section makes vLLM's drafter refuse DFlash and parallel drafting at startup |
    | `transformer_layer_config.rope_scaling` | object | checked | as rope_parameters (transformers 5 loads it as rope_parameters) |
    | `transformer_layer_config.hidden_size` | int | checked | must be a multiple of the heads for llama layers (transformers' LlamaConfig) or without head_dim |
    | `transformer_layer_config.num_attention_heads` | int >= 1 | checked | a multiple of num_key_value_heads (vLLM's attention groups) |
    | `transformer_layer_config.num_key_value_heads` | int >= 1 | checked | divides num_attention_heads |
    | `transformer_layer_config.head_dim` | int | checked | without it vLLM's head size is hidden_size // heads |
    | `eagle_aux_hidden_state_layer_ids` | list[int] | optional (never guessed) | verifier layers whose input hidden states feed the draft |
    | `draft_vocab_size` | int >= 1 | optional | a reduced draft vocabulary (weights then carry d2t/t2d) |
    | `target_hidden_size` | int >= 1 | optional | the verifier's hidden size when it differs from the draft's |
    | `norm_before_residual` | bool | default false | speculators' class default; vLLM assumes true, so specreg writes it |
    | `norm_before_fc` | bool | default false | speculators' and vLLM's default |
    | `fc_norm` | bool | default false | speculators' and vLLM's default (mapped from vLLM 0.25) |
    | `norm_output` | bool | default false | speculators' and vLLM's default (mapped from vLLM 0.25) |
    """
    return normalize(cfg, ctx, EAGLE3)
