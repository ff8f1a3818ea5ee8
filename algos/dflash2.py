"""DFlash2: DFlash with a grouped convolution and a low-rank candidate selector head."""

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.dflash_family import Variant, normalize
from specreg.normalization.fields import BOOL, COUNT, NUMBER, POS_INT

DFLASH2 = Variant(
    name="dflash2",
    architecture="DFlash2DraftModel",
    sample_from_anchor_default=False,
    non_causal_default=True,
    non_causal_why="speculators' default for dflash2 is true: sliding layers non-causal",
    candidate_head=True,
    nope_layers=True,
    label="DFlash2",
    extras=(
        ("conv_kernel_size", POS_INT, "dflash_config"),
        ("conv_group_size", POS_INT, "dflash_config"),
        ("selector_rank", POS_INT, "dflash_config"),
        ("selector_top_k", COUNT, "dflash_config"),
        # read by vLLM's DFlash2 classes (qwen3_dflash2.py, 0.33): embeddings and candidate logits
        ("input_embedding_scale", NUMBER, "dflash_config"),
        ("output_multiplier", NUMBER, "dflash_config"),
        ("final_logit_softcapping", NUMBER, "dflash_config"),
        # read by the DFlash model DFlash2 subclasses (qwen3_dflash.py)
        ("attention_sink_bias", BOOL, "dflash_config"),
        ("attention_value_scale", NUMBER, "dflash_config"),
    ),
)


@register_speculator("dflash2", method="dflash", rule="algorithm_dflash2", variant=DFLASH2)
@shared_rows
def dflash2(cfg, ctx):
    """DFlash2 draft, served as method "dflash" with the DFlash2DraftModel class.

    | field | type | required / default | why |
    |---|---|---|---|
    {LAYER_CONFIG_ROW}
    | `transformer_layer_config.num_hidden_layers` | int in 1..4096 | required | one entry of the attention plan per layer |
    {LAYER_SHAPE_ROWS}
    | `transformer_layer_config.model_type` | str | checked | llama layers are validated by transformers' LlamaConfig |
    | `transformer_layer_config.layer_types` | list[str] | default all full_attention | full layers are bidirectional, sliding ones causal unless sliding_window_non_causal |
    | `transformer_layer_config.is_causal` | bool | optional | vLLM >= 0.28 applies it to every layer before any other rule; cleared when layers differ |
    | `transformer_layer_config.sliding_window` | int >= 1 | required with sliding layers | the window of sliding layers |
    | `transformer_layer_config.no_rope_layers` | list[int] | optional | layers trained without RoPE (indices); served so from vLLM 0.34 (ricursive_dflash2.py), an error where every layer rotates (older vLLM, SGLang) |
    | `aux_hidden_state_layer_ids` | list[int] | required (never guessed) | verifier layers feeding the draft; target ids are these minus one |
    | `mask_token_id` | int >= 0 | required | the token that fills the draft block |
    | `block_size` | int in 1..4096 | optional | the trained block: checks the draft length |
    | `sample_from_anchor` | bool | derived from length vs block, else false | speculators' default for dflash2 |
    | `sliding_window_non_causal` | bool | default true | speculators' default for dflash2 |
    | `conv_kernel_size` | int >= 1 | optional, passed through | into dflash_config |
    | `conv_group_size` | int >= 1 | optional, passed through | into dflash_config |
    | `selector_rank` | int >= 1 | optional, passed through | into dflash_config |
    | `selector_top_k` | int in 1..4096 | optional, passed through | into dflash_config |
    | `input_embedding_scale` | number | optional, passed through | into dflash_config: vLLM scales the input embeddings by it |
    | `output_multiplier` | number | optional, passed through | into dflash_config: the scale of the candidate logits |
    | `final_logit_softcapping` | number | optional, passed through | into dflash_config: the candidate logits' soft cap |
    | `attention_sink_bias` | bool | optional, passed through | into dflash_config: attention sinks in every layer |
    | `attention_value_scale` | number | optional, passed through | into dflash_config: vLLM >= 0.31 scales attention values |
    {VOCAB_ROWS}
    | `architectures` | list[str] | optional | read for the family's DSpark Omni class; ignored here |
    """
    return normalize(cfg, ctx, DFLASH2)
