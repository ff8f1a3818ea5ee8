"""DFlash: a block-diffusion draft that fills a block of mask tokens in one forward pass."""

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.dflash_family import Variant, normalize
from specreg.normalization.fields import BOOL, NUMBER

DFLASH = Variant(
    name="dflash",
    architecture="DFlashDraftModel",
    sample_from_anchor_default=False,
    non_causal_default=True,
    non_causal_why="the field predates speculators' causal sliding layers: treated as non-causal",
    # read by vLLM's DFlash model from dflash_config (qwen3_dflash.py: sinks from 0.26, value scale from 0.31)
    extras=(("attention_sink_bias", BOOL, "dflash_config"), ("attention_value_scale", NUMBER, "dflash_config")),
)


@register_speculator("dflash", method="dflash", rule="algorithm_dflash", variant=DFLASH)
@shared_rows
def dflash(cfg, ctx):
    """DFlash draft, served as method "dflash".

    | field | type | required / default | why |
    |---|---|---|---|
    {LAYER_CONFIG_ROW}
    | `transformer_layer_config.num_hidden_layers` | int in 1..4096 | required | one entry of the attention plan per layer |
    {LAYER_SHAPE_ROWS}
    | `transformer_layer_config.model_type` | str | checked | llama layers are validated by transformers' LlamaConfig |
    | `transformer_layer_config.layer_types` | list[str] | default all full_attention | full layers are bidirectional, sliding ones causal unless sliding_window_non_causal |
    | `transformer_layer_config.is_causal` | bool | optional | vLLM >= 0.28 applies it to every layer before any other rule; cleared when layers differ |
    | `transformer_layer_config.sliding_window` | int >= 1 | required with sliding layers | the window of sliding layers |
    | `aux_hidden_state_layer_ids` | list[int] | required (never guessed) | verifier layers feeding the draft; target ids are these minus one |
    | `mask_token_id` | int >= 0 | required | the token that fills the draft block |
    | `block_size` | int in 1..4096 | optional | the trained block: checks the draft length |
    | `sample_from_anchor` | bool | derived from length vs block, else false | false: the anchor is the bonus token, block_size - 1 drafts (speculators' default) |
    | `sliding_window_non_causal` | bool | default true | a missing field predates causal sliding layers; vLLM >= 0.26 reads missing as non-causal too. A native file's `dflash_config.causal` = true (NeMo Automodel's JetSpec stamp) makes every layer causal, even beside `is_causal` = false; JetSpec files from before the stamp cannot be told from DFlash and read bidirectional |
    | `attention_sink_bias` | bool | optional, passed through | into dflash_config: attention sinks in every layer (vLLM >= 0.26) |
    | `attention_value_scale` | number | optional, passed through | into dflash_config: vLLM >= 0.31 scales attention values |
    {VOCAB_ROWS}
    | `architectures` | list[str] | optional | read for the family's DSpark Omni class; ignored here |
    """
    return normalize(cfg, ctx, DFLASH)
