"""P-EAGLE: Eagle-3 with parallel drafting of all k tokens from mask-token placeholders."""

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.eagle_family import Variant, normalize

PEAGLE = Variant(
    name="peagle",
    architecture="Peagle{}ForCausalLM",
    norm_before_residual_default=False,
    vllm_norm_before_residual_default=False,
    norm_flags=("norm_before_fc",),
    parallel_drafting=True,
    label="P-EAGLE",
)


@register_speculator("peagle", method="eagle3", rule="algorithm_peagle", variant=PEAGLE)
@shared_rows
def peagle(cfg, ctx):
    """P-EAGLE draft, served as method "eagle3" with parallel_drafting (without it vLLM silently runs plain Eagle-3).

    | field | type | required / default | why |
    |---|---|---|---|
    | `mask_token_id` | int >= 0 | required | the placeholder token of the parallel slots; vLLM calls it pard_token |
    {LAYER_CONFIG_ROW}
    | `transformer_layer_config.model_type` | str | default qwen3 (speculators >= 0.7) else llama | picks the vLLM class; vLLM assumes llama |
    | `transformer_layer_config.num_hidden_layers` | int >= 1 | required | one causal layer per entry of the attention plan |
    {LAYER_SHAPE_ROWS}
    | `eagle_aux_hidden_state_layer_ids` | list[int] | optional (never guessed) | verifier layers whose input hidden states feed the draft |
    {VOCAB_ROWS}
    | `norm_before_residual` | bool | default false | speculators' and vLLM's default for P-EAGLE |
    | `norm_before_fc` | bool | default false | speculators' and vLLM's default |
    """
    return normalize(cfg, ctx, PEAGLE)
