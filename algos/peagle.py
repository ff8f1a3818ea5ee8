"""P-EAGLE: Eagle-3 with parallel drafting of all k tokens from mask-token placeholders."""

from specreg import facts
from specreg.normalization.algorithms import register_speculator
from specreg.normalization.eagle_family import Variant, normalize
from specreg.normalization.fields import NONNEG_INT

PEAGLE = Variant(
    name="peagle",
    architecture="Peagle{}ForCausalLM",
    norm_before_residual_default=False,
    vllm_norm_before_residual_default=False,
    norm_flags=("norm_before_fc",),
)


@register_speculator("peagle", method="eagle3", vllm_min=str(facts.since("algorithm_peagle")))
def peagle(cfg, ctx):
    """P-EAGLE draft, served as method "eagle3" with parallel_drafting (without it vLLM silently runs plain Eagle-3).

    | field | type | required / default | why |
    |---|---|---|---|
    | `mask_token_id` | int >= 0 | required | the placeholder token of the parallel slots; vLLM calls it pard_token |
    | `transformer_layer_config` | object | required | the draft's decoder config: the base of draft_config |
    | `transformer_layer_config.model_type` | str | default qwen3 (speculators >= 0.7) else llama | picks the vLLM class; vLLM assumes llama |
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
    | `norm_before_residual` | bool | default false | speculators' and vLLM's default for P-EAGLE |
    | `norm_before_fc` | bool | default false | speculators' and vLLM's default |
    """
    mask_token = cfg.get("mask_token_id", NONNEG_INT, required=True)
    plan = normalize(cfg, ctx, PEAGLE)
    plan.copy("draft_config.pard_token", mask_token, "$.mask_token_id")
    plan.derive(
        "speculative_config.parallel_drafting",
        True,
        ["$.speculators_model_type"],
        "P-EAGLE drafts all tokens in parallel; without the flag vLLM runs it as plain Eagle-3",
    )
    return plan
