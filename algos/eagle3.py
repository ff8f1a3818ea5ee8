"""Eagle-3: a one-layer (or few-layer) autoregressive draft fed by three verifier hidden states."""

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.eagle_family import Variant, normalize

EAGLE3 = Variant(
    name="eagle3",
    architecture="Eagle3{}ForCausalLM",
    norm_before_residual_default=False,
    vllm_norm_before_residual_default=True,
    norm_flags=("norm_before_fc", "fc_norm", "norm_output"),
)


@register_speculator("eagle3", method="eagle3", rule="algorithm_eagle3", variant=EAGLE3)
@shared_rows
def eagle3(cfg, ctx):
    """Eagle-3 draft, served as method "eagle3".

    | field | type | required / default | why |
    |---|---|---|---|
    {LAYER_CONFIG_ROW}
    | `transformer_layer_config.model_type` | str | default qwen3 (speculators >= 0.7) else llama | picks the vLLM class; vLLM assumes llama, so specreg writes the trainer's choice |
    | `transformer_layer_config.num_hidden_layers` | int >= 1 | required | one causal layer per entry of the attention plan |
    {LAYER_SHAPE_ROWS}
    | `eagle_aux_hidden_state_layer_ids` | list[int] | optional (never guessed) | verifier layers whose input hidden states feed the draft |
    {VOCAB_ROWS}
    | `norm_before_residual` | bool | default false | speculators' class default; vLLM assumes true, so specreg writes it |
    | `norm_before_fc` | bool | default false | speculators' and vLLM's default |
    | `fc_norm` | bool | default false | speculators' and vLLM's default (mapped from vLLM 0.25) |
    | `norm_output` | bool | default false | speculators' and vLLM's default (mapped from vLLM 0.25) |
    """
    return normalize(cfg, ctx, EAGLE3)
