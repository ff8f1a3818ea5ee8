"""DSpark: DFlash with a low-rank Markov logit-bias head and an optional confidence head."""

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.dflash_family import Variant, normalize
from specreg.normalization.fields import BOOL, NONNEG_INT, STR

DSPARK = Variant(
    name="dspark",
    architecture="Qwen3DSparkModel",
    sample_from_anchor_default=True,
    non_causal_default=True,
    non_causal_why="the field predates causal sliding layers: treated as non-causal",
    extras=(
        ("markov_rank", NONNEG_INT, "top"),
        ("markov_head_type", STR, "top"),
        ("enable_confidence_head", BOOL, "top"),
        ("confidence_head_with_markov", BOOL, "top"),
        ("use_aux_hidden_state", BOOL, "top"),
    ),
    top_level=True,
)


@register_speculator("dspark", method="dspark", rule="algorithm_dspark", variant=DSPARK)
@shared_rows
def dspark(cfg, ctx):
    """DSpark draft, served as method "dspark" (Qwen3DSparkModel, or Qwen3OmniDSparkModel when named).

    | field | type | required / default | why |
    |---|---|---|---|
    {LAYER_CONFIG_ROW}
    | `transformer_layer_config.num_hidden_layers` | int in 1..4096 | required | one entry of the attention plan per layer |
    {LAYER_SHAPE_ROWS}
    | `transformer_layer_config.model_type` | str | checked | llama layers are validated by transformers' LlamaConfig |
    | `transformer_layer_config.layer_types` | list[str] | default all full_attention | full layers are bidirectional, sliding ones causal unless sliding_window_non_causal; vLLM >= 0.26 resolves DSpark layers like DFlash |
    | `transformer_layer_config.is_causal` | bool | optional | vLLM >= 0.28 applies it to every layer before any other rule; cleared when layers differ |
    | `transformer_layer_config.sliding_window` | int >= 1 | required with sliding layers | the window of sliding layers |
    | `aux_hidden_state_layer_ids` | list[int] | required (never guessed) | verifier layers feeding the draft; target_layer_ids are these minus one |
    | `mask_token_id` | int >= 0 | required | the token that fills the draft block |
    | `block_size` | int in 1..4096 | optional, passed through | the trained block: checks the draft length |
    | `sample_from_anchor` | bool | derived from length vs block, else true | speculators' default for dspark; vLLM assumes false, so it is always written |
    | `sliding_window_non_causal` | bool | default true | vLLM's mapping ignores it for DSpark (layer_types decides), so specreg writes the trained flag |
    | `markov_rank` | int >= 0 | optional, passed through | the Markov head's rank; 0: no Markov head (speculators and DeepSpec) |
    | `markov_head_type` | str | optional, passed through | the Markov head's kind |
    | `enable_confidence_head` | bool | optional, passed through | the confidence head |
    | `confidence_head_with_markov` | bool | optional, passed through | the confidence head's input |
    | `use_aux_hidden_state` | bool | optional, passed through | read by vLLM >= 0.30 |
    {VOCAB_ROWS}
    | `architectures` | list[str] | optional | Qwen3OmniDSparkModel when the source names it |
    """
    rank = cfg.raw("markov_rank")  # checked with its kind in normalize
    rank = 0 if rank == 0 and not isinstance(rank, bool) else None
    if rank == 0 and cfg.raw("confidence_head_with_markov") is True:
        # speculators' DSpark model refuses it: "confidence_head_with_markov=True requires markov_rank > 0"
        cfg.problem(
            cfg.at("confidence_head_with_markov"),
            "is true, but markov_rank is 0: a confidence head that "
            "reads the Markov features needs a Markov head (markov_rank > 0)",
        )
    plan = normalize(cfg, ctx, DSPARK)
    if rank == 0:
        plan.find(
            "markov-head-off",
            "markov_rank is 0: the draft has no Markov head; vLLM builds a zero-width "
            "one, which adds nothing to the logits",
            cfg.at("markov_rank"),
        )
    return plan
