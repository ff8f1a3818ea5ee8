"""example_eagle3: an Eagle-3 draft as an in-house trainer writes it (illustrative format).

The file is a speculators envelope (`speculators_config` with the draft length and the verifier)
around one or more Llama or Qwen3 decoder layers; the trainer names two Eagle-3 fields its own way.
"""

import specreg

#: a code of this plugin's own, namespaced "package/name" so it never collides with specreg's
NO_DRAFT_VOCAB = specreg.register_finding(
    "example/full-draft-vocabulary", "info", "the draft predicts over the verifier's whole vocabulary"
)

#: vLLM's Eagle-3 class for the layers' model_type (vLLM's model registry names)
CLASSES = {"llama": "Eagle3LlamaForCausalLM", "qwen3": "Eagle3Qwen3ForCausalLM"}


@specreg.register_speculator("example_eagle3", method="eagle3", vllm_min="0.24")
def normalize(cfg: specreg.Fields, ctx: specreg.Context) -> specreg.Plan:
    """Eagle-3 from an in-house trainer, served as method "eagle3".

    | field | type | required / default | why |
    |---|---|---|---|
    | `transformer_layer_config` | object | required | the draft's decoder config: the base of draft_config |
    | `transformer_layer_config.model_type` | str | required (llama or qwen3) | picks vLLM's Eagle-3 class |
    | `transformer_layer_config.num_hidden_layers` | int >= 1 | required | one causal layer each |
    | `feature_layers` | list[int] | required | verifier layers feeding the draft (vLLM's eagle_aux_hidden_state_layer_ids) |
    | `residual_norm_first` | bool | default false | the trainer's norm_before_residual; vLLM assumes true |
    | `draft_vocab_size` | int >= 1 | optional | a reduced draft vocabulary (weights carry d2t/t2d) |
    """
    plan = specreg.Plan()
    layer = cfg.obj("transformer_layer_config", required=True)
    model_type = layer.get("model_type", specreg.STR, required=True) if layer else None
    layers = layer.get("num_hidden_layers", specreg.POS_INT, required=True) if layer else None
    ids = cfg.get("feature_layers", specreg.LAYER_IDS, required=True)
    specreg.check_layer_ids(cfg, "feature_layers", ids)
    residual_norm_first = cfg.get("residual_norm_first", specreg.BOOL)
    draft_vocab = cfg.get("draft_vocab_size", specreg.POS_INT)
    if model_type is not None and model_type not in CLASSES:
        layer.problem(
            layer.at("model_type"),
            f"must be one of {', '.join(sorted(CLASSES))} (vLLM's Eagle-3 classes), got {model_type!r}",
        )
    cfg.done()  # every problem above, together, naming its JSON path

    plan.base(layer.copy_data(), "$.transformer_layer_config")
    plan.derive(
        "draft_config.architectures",
        [CLASSES[model_type]],
        [layer.at("model_type")],
        f"vLLM's Eagle-3 class for {model_type} layers",
    )
    plan.copy("draft_config.eagle_aux_hidden_state_layer_ids", list(ids), cfg.at("feature_layers"))
    if residual_norm_first is None:
        plan.default(
            "draft_config.norm_before_residual",
            False,
            "the trainer's default; vLLM's Eagle-3 classes assume true when the key is missing",
        )
    else:
        plan.copy("draft_config.norm_before_residual", residual_norm_first, cfg.at("residual_norm_first"))
    if draft_vocab is None:
        plan.find(NO_DRAFT_VOCAB.code, "no draft_vocab_size: the draft's head covers the verifier's vocabulary")
    else:
        plan.copy("draft_config.draft_vocab_size", draft_vocab, cfg.at("draft_vocab_size"))
    for n in range(layers):
        plan.layer(
            specreg.LayerAttention(layer=n, kind="full", window=None, causal=True),
            [layer.at("num_hidden_layers")],
            "Eagle-3 draft layers are causal decoder layers",
        )
    plan.copy("num_speculative_tokens", ctx.envelope.num_speculative_tokens, ctx.envelope.tokens_path)
    return plan
