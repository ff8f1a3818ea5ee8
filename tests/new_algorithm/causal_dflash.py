"""Causal DFlash: a DFlash draft whose `all_causal` field makes every draft layer causal.

The worked example of docs/algorithms.md: a new algorithm is this one file in `algos/` and its fixture
(tests/test_registry.py drops both into a copy of `algos/` and runs the commands and the contract tests). No vLLM release
maps the type itself, so it says `vllm_maps=False`: vLLM serves it through specreg (its plugin, or the
directory `specreg materialize` writes), and the contract tests hold it like every built-in.
"""

import attrs

from specreg.normalization.algorithms import register_speculator, shared_rows
from specreg.normalization.dflash_family import MaskField, Variant, normalize
from specreg.normalization.fields import BOOL


def _all_causal(on, layer):
    """all_causal = true makes the layer causal (its window kept); false leaves the family's rule."""
    return attrs.evolve(layer, causal=True) if on else None


CAUSAL_DFLASH = Variant(
    name="causal_dflash",
    label="Causal DFlash",
    architecture="DFlashDraftModel",
    sample_from_anchor_default=False,
    non_causal_default=True,
    non_causal_why="the field predates causal sliding layers: treated as non-causal",
    mask_fields=(MaskField("all_causal", BOOL, _all_causal, "the trainer masks every layer causally"),),
    # SGLang serves it with its DFlash class and worker, which read one top-level is_causal
    sglang_as="dflash",
)


@register_speculator("causal_dflash", method="dflash", variant=CAUSAL_DFLASH, vllm_maps=False)
@shared_rows
def causal_dflash(cfg, ctx):
    """Causal DFlash draft, served as method "dflash" through specreg.

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
    | `sample_from_anchor` | bool | derived from length vs block, else false | false: the anchor is the bonus token |
    | `sliding_window_non_causal` | bool | default true | sliding layers' mask where all_causal is false |
    | `all_causal` | bool | optional | true: every layer was trained causal (the mask hook) |
    {VOCAB_ROWS}
    | `architectures` | list[str] | optional | read for the family's DSpark Omni class; ignored here |
    """
    return normalize(cfg, ctx, CAUSAL_DFLASH)
