"""Keys of native draft files that vLLM's draft classes do not read, and what each one means.

Every key of a native file is one of: carried into the draft config (the layer config's own keys,
and the family's fields vLLM reads: `CARRIED`), consumed by specreg to write what vLLM reads instead
(`CONSUMED`), a trained-side key that does not change the served model (`TRAINED_SIDE`), or a
trained-side key that does and that vLLM ignores (`NOT_SERVED`: an error finding). The conformance
tier reads, with ``ast``, the keys each wheel's draft classes read and fails when one of them is not
carried (tests/conformance/test_field_coverage.py).
"""

from __future__ import annotations

from specreg import facts

#: how like a known key an unread one must be (difflib's ratio) to be reported as its near miss
#: (`unread-field`: "sample_from_anchr" for sample_from_anchor, 0.97; "casual" for causal, 0.83)
NEAR_MISS_CUTOFF = 0.8

#: dflash_config keys vLLM's DFlash-family classes read that specreg carries unchanged:
#: family -> key -> what it does in vLLM (vllm/model_executor/models/qwen3_dflash*.py, 0.33)
CARRIED: dict[str, dict[str, str]] = {
    "dflash": {
        "attention_sink_bias": "turns on attention sinks in every draft layer (qwen3_dflash.py, vLLM >= "
        f"{facts.since('sinks_dflash_draft_model')})",
        "attention_value_scale": "scales the attention values of the draft layers (qwen3_dflash.py, vLLM >= "
        f"{facts.since('dflash_attention_value_scale')})",
    },
    "dflash2": {
        "attention_sink_bias": "as for DFlash (DFlash2Qwen3Model subclasses the DFlash model)",
        "attention_value_scale": "as for DFlash",
        "input_embedding_scale": "DFlash2Qwen3Model multiplies the input embeddings by it (default 1.0)",
        "output_multiplier": "the scale of DFlash2's candidate logits (default 1.0)",
        "final_logit_softcapping": "the soft cap of DFlash2's candidate logits (Gemma-style drafts; default none)",
        "conv_kernel_size": "the grouped convolution's kernel",
        "conv_group_size": "the grouped convolution's groups",
        "selector_rank": "the candidate selector's rank",
        "selector_top_k": "the candidates the selector scores",
    },
}

#: keys specreg reads to write what vLLM reads (never passed through as they are)
CONSUMED: dict[str, str] = {
    "target_layer_ids": "the verifier layers, as vLLM's target ids of the targeted version",
    "mask_token_id": "the mask token, into dflash_config (or the top level for DSpark)",
    "block_size": "the trained block: the draft length",
    "causal": "the trained masks, stated in the flag the targeted vLLM reads first",
    "is_causal": "the trained masks, as above",
    "use_swa": "every layer sliding: layer_types",
    "swa_window_size": "the sliding window: sliding_window",
    "projector_type": "which layout this is (dspark, domino)",
    "markov_rank": "DSpark's Markov head",
    "markov_head_type": "DSpark's Markov head",
    "enable_confidence_head": "DSpark's confidence head",
    "confidence_head_with_markov": "DSpark's confidence head",
    "eagle_config": "ModelOpt's aux ids and norms, rewritten in vLLM's convention",
    "eagle_aux_hidden_state_layer_ids": "the aux ids",
    "draft_vocab_size": "the reduced vocabulary",
    "norm_before_residual": "EAGLE-3's residual norm",
    "norm_before_fc": "EAGLE-3's fc norm",
    "fc_norm": "EAGLE-3's fc norm",
    "norm_output": "EAGLE-3's output norm",
    "target_hidden_size": "the verifier's hidden size",
    "architectures": "the vLLM class",
    "use_aux_hidden_state": "EAGLE-3 (true) vs EAGLE-1/2",
}

#: trained-side keys vLLM does not read and that do not change the served model
TRAINED_SIDE: dict[str, str] = {
    "num_target_layers": "the verifier's layer count at training (vLLM reads the verifier's own config)",
    "target_num_hidden_layers": "the verifier's layer count at training",
    "confidence_head_alpha": "the confidence head's loss weight (training only)",
    "attention_mode": "'gqa': the draft's attention, which the layer fields already state ('mla' is refused)",
    "auto_map": "the trainer's modeling code; specreg never runs it (reported)",
    "transformers_version": "the transformers that wrote the file",
    "use_input_layernorm_in_first_layer": "ModelOpt's EAGLE layer norm placement, the one vLLM's class builds",
    "use_last_layernorm": "ModelOpt's final norm, which vLLM's EAGLE-3 class builds",
    "use_mtp_layernorm": "ModelOpt's MTP norm (false: not built)",
    "train_router": "whether the MoE router was trained (MoE drafts are refused)",
    "_torchspec_version": "the TorchSpec that wrote the file",
    "num_anchors": "anchors sampled per sequence in training (training only)",
    "num_draft_layers": "the draft's layer count, as num_hidden_layers",
    "training_mode": "SpecForge's DFlash objective: dflash, or a reweighted loss over the same block "
    "('vp_drafter' trains another block and is refused: OBJECTIVES)",
    "loss_type": "as training_mode (SpecForge reads it when training_mode is unset)",
    "prefix_weight_base": "the VP-drafter's prefix-length prior (training only)",
}

#: dflash_config objective values that train a block vLLM's drafter never builds. SpecForge's DFlash
#: trainer took its objective from --loss-type, else dflash_config.training_mode, else
#: dflash_config.loss_type (scripts/train_dflash.py, 0b948e70 to e1cb99dc, 2026-06-24); its
#: 832263fe (2026-07-13) stopped reading the keys and trains plain DFlash whatever they say.
OBJECTIVES: dict[str, str] = {
    "vp_drafter": "SpecForge trained it as a VP-drafter: each block showed the draft a visible prefix of 2 to "
    "block_size - 1 real tokens and masked the rest (specforge/core/dflash.py "
    '`_sample_prefix_lengths` at e1cb99dc, "avoiding the degenerate fixed-anchor DFlash case"), while '
    "vLLM's DFlash drafter shows the anchor alone, a block the draft never trained on. (SpecForge "
    "from 832263fe, 2026-07-13, no longer reads the key and trains plain DFlash: a draft trained "
    "then is plain DFlash, which the file cannot show; remove the key from such a file)",
}

#: trained-side keys that change what was trained and that no vLLM draft class reads
NOT_SERVED: dict[str, str] = {
    "position_encoding": "the position encoding the draft was trained with; vLLM's DFlash draft applies "
    "the plain RoPE of its layer config",
    "mrope_section": "M-RoPE sections the draft was trained with; vLLM reads M-RoPE only from rope_parameters "
    "/ rope_scaling, and DFlash and parallel drafting refuse M-RoPE at startup",
    "prefix_visibility": "a prefix-visibility training mode vLLM's drafter does not implement",
    "visible_prefix_range": "a prefix-visibility training mode vLLM's drafter does not implement",
}
