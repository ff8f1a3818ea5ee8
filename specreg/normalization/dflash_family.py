"""The DFlash family: one implementation of the shared rules of the block-diffusion drafts.

Each family member's module describes itself with a `Variant` (its traits: what these rules must do
for it), registers it (`register_speculator(..., variant=)`) and calls `normalize`; a fix here
reaches every member, and no rule here asks for a member by name. The facts (speculators 0.9 training, vLLM from 0.20 serving):

- Layer ids: speculators' aux ids mean "the hidden state entering layer i" (0: the embedding output,
  captured only by some verifier classes: verifier_check); DFlash and DSpark
  target ids mean "the output of layer t" = i - 1 (vLLM >= 0.22; 0.20-0.21 stored aux unchanged).
- Masks as trained: full-attention layers are bidirectional inside the block; a sliding layer is
  causal unless ``sliding_window_non_causal`` (missing: the field predates it, non-causal).
- Masks as vLLM serves a draft config (`vllm_layer_causal`, one model for every version, run on
  both the unmodified file as vLLM's mapping rewrites it and specreg's own draft_config):
  < 0.23 every layer non-causal; 0.23-0.25 one global ``dflash_config.causal`` (unset:
  non-causal); >= 0.26 per layer: ``dflash_config.causal`` when set, else sliding layers causal;
  >= 0.28 a top-level ``is_causal`` first. DSpark layers follow the same rule from 0.26 (0.25's
  DSpark speculator forced every layer non-causal). vLLM's mapping writes
  ``dflash_config.causal = not sliding_window_non_causal`` (missing -> False) for DFlash from 0.26
  and no flag for DSpark.
- Draft length: ``sample_from_anchor`` false -> block_size - 1 tokens, true -> block_size.
"""

from __future__ import annotations

import json
from typing import Any, Callable, ClassVar, Mapping

import attrs
from packaging.version import Version

from specreg.normalization.capabilities import aux_capture, first, layer_zero_capture, short
from specreg.normalization.fields import (
    BOOL,
    COUNT,
    LAYER_IDS,
    LAYER_IDS_OR_EMPTY,
    NONNEG_INT,
    POS_INT,
    STR_LIST,
    Fields,
    Kind,
    check_layer_ids,
)
from specreg.normalization.plan import Context, Plan, TokenLimits
from specreg.normalization.shape import check_layer_shape, check_startup
from specreg.normalization.speculator import LayerAttention

FULL, SLIDING = "full_attention", "sliding_attention"
FIRST_WITH_SAMPLE_FROM_ANCHOR = Version("0.7.0")


@attrs.frozen
class MaskField:
    """A config field that sets layers' masks (a variant's mask hook): `layer` takes the field's value
    and one layer as the family's rules trained it, and returns that layer as the field trains it (None:
    the value leaves it). The plan's attention entry, its provenance and a mask-set-by-field finding
    then name the field; the causality it sets is stated to vLLM by the family's flag, and a window it
    changes is an error (vLLM reads windows from the layer config only)."""

    name: str
    kind: Kind
    layer: Callable[[Any, LayerAttention], LayerAttention | None]
    #: what the field does to the mask, in the words of the trainer that reads it
    why: str


@attrs.frozen
class Variant:
    """What distinguishes one family member: the traits the family's shared rules read."""

    #: the family's name, as `Algorithm.family` gives it
    FAMILY: ClassVar[str] = "dflash"

    name: str
    architecture: str
    #: speculators' default for a missing sample_from_anchor, and why.
    sample_from_anchor_default: bool
    #: speculators' default for a missing sliding_window_non_causal, and why.
    non_causal_default: bool
    non_causal_why: str
    #: extra fields passed through unchanged: name -> (kind, where they go in draft_config).
    extras: tuple[tuple[str, Kind, str], ...] = ()
    #: the DSpark layout: ids and anchor fields at the top level of draft_config, no dflash_config;
    #: vLLM's DSpark rules for masks (dspark_per_layer_causal) and runners (V2 only)
    top_level: bool = False
    #: a candidate-selector head vLLM runs only in its V2 speculator (DFlash2): the V1 runner drafts it
    #: as plain DFlash, or refuses it (v1_runner_refuses_dflash_candidate_head)
    candidate_head: bool = False
    #: reads transformer_layer_config.no_rope_layers (layers trained without RoPE; dflash2_nope_layers)
    nope_layers: bool = False
    #: the entry of SGLang's rules that serves it (its class and worker), where not its own name
    sglang_as: str | None = None
    #: the fields that set layers' masks beyond the family's layer_types rule, applied in order
    mask_fields: tuple[MaskField, ...] = ()
    #: how findings name the member ("DFlash2"); its name when not given
    label: str = attrs.field(default=attrs.Factory(lambda self: self.name, takes_self=True))

    @property
    def readback_keys(self) -> tuple[tuple[str, str], ...]:
        """The fields a materialized directory carries for this member and reading it back restores, each
        with where its config.json holds it ("top" or "dflash_config"): its extras, and DSpark's block."""
        own = tuple((key, where) for key, _kind, where in self.extras)
        return own + ((("block_size", "top"),) if self.top_level else ())


def read_layers(cfg: Fields, layer_cfg: Fields | None) -> tuple[int | None, list[str] | None, int | None]:
    """num_hidden_layers, layer_types (checked against it) and sliding_window of the draft."""
    if layer_cfg is None:
        return None, None, None
    n = layer_cfg.get("num_hidden_layers", COUNT, required=True)
    types = layer_cfg.get("layer_types", STR_LIST)
    window = layer_cfg.get("sliding_window", POS_INT)
    layer_cfg.get("is_causal", BOOL)  # read by vLLM >= 0.28 before any other mask rule
    if types is not None and n is not None:
        if len(types) != n:
            layer_cfg.problem(
                layer_cfg.at("layer_types"),
                f"has {len(types)} entries but num_hidden_layers is {n}",
            )
            return n, None, window
        for i, t in enumerate(types):
            if t not in (FULL, SLIDING):
                layer_cfg.problem(
                    f"{layer_cfg.at('layer_types')}[{i}]",
                    f"unknown layer type {t!r}; a DFlash-family draft has {FULL!r} or {SLIDING!r} layers",
                )
                return n, None, window
        if SLIDING in types and window is None:
            layer_cfg.problem(layer_cfg.at("sliding_window"), "sliding_attention layers need a sliding_window")
    return n, types, window


def vllm_layer_causal(ctx: Context, dspark: bool, draft: Mapping[str, Any], n: int) -> list[bool]:
    """Per layer: is it causal when the targeted vLLM serves `draft`, a draft config as vLLM loads it?

    The rule of each version's model and speculator code; tests/conformance runs the wheels' own
    functions (`_dflash_layer_causal`, the proposers' flags, DSparkSpeculator) against it."""
    if dspark and not ctx.holds("dspark_per_layer_causal"):
        return [False] * n  # 0.25: DSparkSpeculator sets self.dflash_causal = False
    if not ctx.holds("dflash_causal_layers"):
        return [False] * n  # the proposer builds non-causal attention metadata
    flag = (draft.get("dflash_config") or {}).get("causal")
    if not ctx.holds("dflash_per_layer_causal"):
        return [bool(flag)] * n  # one global flag, missing -> False
    if ctx.holds("dflash_is_causal_first") and draft.get("is_causal") is not None:
        return [bool(draft["is_causal"])] * n
    if flag is not None:
        return [bool(flag)] * n
    types = draft.get("layer_types") or []
    return [bool(types) and types[i] == SLIDING for i in range(n)]


def _zero_capturers(ctx: Context) -> str:
    """How many of the verifier architectures whose class captures aux states give aux id 0 too, in the
    targeted release (aux_capture.json, read from each wheel)."""
    zero, aux = layer_zero_capture(ctx.vllm), aux_capture(ctx.vllm)
    if zero is None or aux is None:
        return "no known release says which"
    return f"{len(zero[1])} of the {len(aux[1])} architectures whose class captures aux states"


def mapped_by_vllm(ctx: Context, variant: Variant, layer_data: dict, non_causal_in_file: bool | None) -> dict:
    """The mask-deciding keys of the draft config vLLM's speculators mapping builds from the file."""
    draft = {k: layer_data[k] for k in ("layer_types", "is_causal") if k in layer_data}
    if not variant.top_level and ctx.holds("dflash_causal_from_sliding_window_non_causal"):
        # algos.py update_dflash: causal = not config.get("sliding_window_non_causal", True); after vLLM PR
        # #56692 only true (or absent) sets it (false), and false leaves each layer to its type
        non_causal = True if non_causal_in_file is None else non_causal_in_file
        if non_causal or not ctx.holds("dflash_causal_false_keeps_full_non_causal"):
            draft["dflash_config"] = {"causal": not non_causal}
    return draft


def normalize(cfg: Fields, ctx: Context, variant: Variant) -> Plan:
    plan = Plan()

    layer_cfg = cfg.obj("transformer_layer_config", required=True)
    aux = cfg.get("aux_hidden_state_layer_ids", LAYER_IDS, required=True)
    # aux id 0 (target id -1) is the embedding output: whether vLLM captures it is the verifier class's
    # (verifier_check's `verifier-no-layer-zero-capture`), so it is accepted here and said
    check_layer_ids(cfg, "aux_hidden_state_layer_ids", aux)
    mask_token = cfg.get("mask_token_id", NONNEG_INT, required=True)
    draft_vocab = cfg.get("draft_vocab_size", POS_INT)
    target_hidden = cfg.get("target_hidden_size", POS_INT)
    block = cfg.get("block_size", COUNT)
    anchor_in_file = cfg.get("sample_from_anchor", BOOL)
    non_causal_in_file = cfg.get("sliding_window_non_causal", BOOL)
    extras = {key: cfg.get(key, kind) for key, kind, _ in variant.extras}
    mask_values = {m.name: cfg.get(m.name, m.kind) for m in variant.mask_fields}
    source_archs = cfg.get("architectures", STR_LIST, default=[])
    n, types, window = read_layers(cfg, layer_cfg)
    nope = None
    if layer_cfg is not None:
        check_layer_shape(layer_cfg, plan)
        nope = _nope_layers(layer_cfg, n) if variant.nope_layers else None
    cfg.done()
    assert layer_cfg is not None and aux is not None and n is not None  # guaranteed by done()

    # -- the draft config: the layer config, then the family's fields ------------------------------
    plan.base(layer_cfg.copy_data(), "$.transformer_layer_config")
    arch = variant.architecture
    if variant.top_level and "Qwen3OmniDSparkModel" in (source_archs or []):
        arch = "Qwen3OmniDSparkModel"
        plan.copy("draft_config.architectures", [arch], "$.architectures")
    else:
        plan.derive(
            "draft_config.architectures", [arch], ["$.speculators_model_type"], f"vLLM's class for {variant.name}"
        )
    if draft_vocab is not None:
        plan.copy("draft_config.draft_vocab_size", draft_vocab, "$.draft_vocab_size")
    if target_hidden is not None:
        plan.copy("draft_config.target_hidden_size", target_hidden, "$.target_hidden_size")
    plan.copy("draft_config.eagle_aux_hidden_state_layer_ids", list(aux), "$.aux_hidden_state_layer_ids")

    inner = "draft_config" if variant.top_level else "draft_config.dflash_config"
    plan.copy(f"{inner}.mask_token_id", mask_token, "$.mask_token_id")
    if variant.top_level or ctx.holds("dflash_target_layer_ids_minus_one"):
        plan.derive(
            f"{inner}.target_layer_ids",
            [i - 1 for i in aux],
            ["$.aux_hidden_state_layer_ids"],
            "aux id i is the hidden state entering layer i; the DFlash family reads the output of layer i - 1",
        )
    else:
        plan.derive(
            f"{inner}.target_layer_ids",
            list(aux),
            ["$.aux_hidden_state_layer_ids"],
            f"{ctx.vllm_label} stores aux ids unchanged and shifts them itself (the i - 1 rule starts in "
            f"{short(first('dflash_target_layer_ids_minus_one'))})",
        )
    if variant.top_level and block is not None:
        plan.copy("draft_config.block_size", block, cfg.at("block_size"))
    for key, _kind, where in variant.extras:
        if extras[key] is not None:
            dest = "draft_config" if where == "top" else "draft_config.dflash_config"
            plan.copy(f"{dest}.{key}", extras[key], cfg.at(key))

    if 0 in aux:
        plan.find(
            "aux-layer-zero",
            "aux id 0 is the state entering the verifier's first layer (its embedding output; target id -1): "
            f"{ctx.vllm_label} captures it only where the verifier's class does ({_zero_capturers(ctx)}); "
            "`specreg check` and the vLLM plugin compare it with the verifier served",
            "$.aux_hidden_state_layer_ids",
        )
    if nope and not ctx.holds("dflash2_nope_layers"):
        plan.find(
            "vllm-unsupported-feature",
            f"the draft was trained without RoPE in layers {nope} (no_rope_layers, layer indices as vLLM reads "
            f"them); {ctx.vllm_label} rotates every {variant.label} layer and reads no_rope_layers nowhere. Needs vLLM >= "
            f"{short(first('dflash2_nope_layers'))} (DFlash2RicursiveDraftModel).",
            layer_cfg.at("no_rope_layers"),
        )
    _draft_length(cfg, ctx, variant, plan, block, anchor_in_file)
    # the V1 runner drafts the whole block in parallel slots; a DSpark-layout draft never runs there, a
    # candidate-head draft does only where the V1 runner does not refuse it
    v1 = not variant.top_level and not (variant.candidate_head and ctx.holds("v1_runner_refuses_dflash_candidate_head"))
    check_startup(layer_cfg, plan, ctx, parallel_slots=v1, why="DFlash (it drafts the whole block in one pass)")
    _attention(cfg, ctx, variant, plan, n, types, window, non_causal_in_file, mask_values)
    return plan


def _nope_layers(layer_cfg: Fields, n: int | None) -> list[int] | None:
    """The layers a DFlash2 draft was trained without RoPE (transformer_layer_config.no_rope_layers, layer
    indices: vLLM's DFlash2RicursiveDraftModel skips RoPE in layer i when i is in the list), checked to
    name layers the draft has; None or [] when every layer rotates."""
    nope = layer_cfg.get("no_rope_layers", LAYER_IDS_OR_EMPTY)
    for i, layer in enumerate(nope or ()):
        if layer in nope[:i]:
            # SmolLM3's and Llama 4's no_rope_layers is a per-layer mask (1: rotate), which vLLM's DFlash2
            # class would read as indices: [1, 1, 0] would serve layers 0 and 1 without RoPE
            layer_cfg.problem(
                f"{layer_cfg.at('no_rope_layers')}[{i}]",
                f"layer {layer} is listed twice; vLLM reads no_rope_layers as layer indices (the layers without "
                "RoPE), not as a per-layer 0/1 mask",
            )
            return None
        if n is not None and layer >= n:
            layer_cfg.problem(
                f"{layer_cfg.at('no_rope_layers')}[{i}]",
                f"layer {layer} is not one of the draft's {n} layers (0..{n - 1}); vLLM reads no_rope_layers "
                "as layer indices",
            )
    return sorted(set(nope)) if nope else None


def _draft_length(
    cfg: Fields, ctx: Context, variant: Variant, plan: Plan, block: int | None, anchor_in_file: bool | None
) -> None:
    """num_speculative_tokens, checked against the block; sample_from_anchor written explicitly."""
    env = ctx.envelope
    k = env.num_speculative_tokens
    assert k is not None
    anchor_src = [cfg.at("sample_from_anchor")]
    writer = env.speculators_version
    # speculators added sample_from_anchor in 0.7.0; before, its DFlash trainer always wrote
    # speculative_tokens = block_size - 1 ("DFlash first position is anchor position, not used
    # during gen": src/speculators/models/dflash/core.py at v0.5.0, f26d8a7, and v0.6.0, d1a3ff3).
    predates = writer is not None and writer < FIRST_WITH_SAMPLE_FROM_ANCHOR and not variant.top_level
    if anchor_in_file is not None:
        anchor = anchor_in_file
        plan_anchor = ("copy", anchor_src[0])
    elif predates:
        anchor = False
        plan_anchor = (
            "default",
            f"speculators {writer} predates sample_from_anchor (added in 0.7.0); its "
            f"{variant.name} trainer always drafted block_size - 1 tokens after the anchor",
        )
    elif block is not None and k in (block - 1, block):
        anchor = k == block
        plan_anchor = (
            "derive",
            "speculative_tokens == block_size" if anchor else "speculative_tokens == block_size - 1",
        )
    else:
        anchor = variant.sample_from_anchor_default
        plan_anchor = ("default", f"speculators' default for {variant.name}")
        if block is None:
            plan.find(
                "trainer-default-applied",
                f"sample_from_anchor and block_size are both missing; applied speculators' default "
                f"sample_from_anchor={str(anchor).lower()} for {variant.name}",
                anchor_src[0],
            )

    field = "draft_config.sample_from_anchor" if variant.top_level else "draft_config.dflash_config.sample_from_anchor"
    if variant.top_level or ctx.holds("sample_from_anchor_mapped"):
        if plan_anchor[0] == "copy":
            plan.copy(field, anchor, plan_anchor[1])
        elif plan_anchor[0] == "derive":
            plan.derive(field, anchor, [env.tokens_path, cfg.at("block_size")], plan_anchor[1])
        else:
            plan.default(field, anchor, plan_anchor[1])
    if variant.top_level:
        plan.derive(
            "draft_config.dspark_bonus_anchor",
            not anchor,
            [field],
            "vLLM's DSpark model reads the anchor rule as dspark_bonus_anchor = not sample_from_anchor",
        )

    # What vLLM does with the unmodified file.
    if anchor and not variant.top_level:
        # No runner serves it: the V1 DFlashProposer never reads the field and always queries a bonus
        # token (gpu_model_runner: "DFlash queries one extra token (the bonus token)"); the V2
        # DFlashSpeculator raises on it from 0.27 (tests/conformance checks both in every wheel).
        how = (
            f"{ctx.vllm_label} maps the field, but its V1 runner always drafts after a bonus token"
            if ctx.holds("sample_from_anchor_mapped")
            else f"{ctx.vllm_label} never reads sample_from_anchor for DFlash and drafts after a bonus token"
        )
        if ctx.holds("dflash_v2_runner_rejects_sample_from_anchor"):
            how += " and its V2 runner refuses sample_from_anchor=true for DFlash"
        plan.find(
            "vllm-unsupported-feature",
            f"the draft was trained with sample_from_anchor=true ({'block_size' if block else 'the draft'} "
            f"tokens from the anchor); {how}. No vLLM release serves this layout.",
            anchor_src[0],
        )
    elif anchor and not ctx.holds("sample_from_anchor_mapped"):
        plan.find(
            "served-length-mismatch",
            f"{ctx.vllm_label} maps every speculators DSpark draft with dspark_bonus_anchor=true, "
            f"but this one was trained with sample_from_anchor=true; serve specreg's draft_config, "
            f"which sets dspark_bonus_anchor=false.",
            anchor_src[0],
        )
    elif anchor_in_file is None and anchor:
        plan.find(
            "served-length-mismatch",
            f"sample_from_anchor is missing; {ctx.vllm_label} assumes false, but the draft was trained "
            f"with true ({plan_anchor[1]}). specreg writes sample_from_anchor=true explicitly.",
            anchor_src[0],
        )

    expected = None
    if block is not None:
        expected = block if anchor else block - 1
    rule = "block_size" if anchor else "block_size - 1"
    if expected is not None and k != expected and predates and k == block:
        # the file's length disagrees with the trainer that wrote it: a finding about the length
        plan.find(
            "served-length-mismatch",
            f"speculative_tokens is {k} = block_size, but speculators {writer}, which wrote this file, had no "
            f"sample_from_anchor: its DFlash trainer drafts block_size - 1 = {expected} tokens after the anchor. "
            f"vLLM given the unmodified file drafts {k} tokens after a bonus token, one past the trained "
            f"block; specreg serves {expected}.",
            env.tokens_path,
        )
        plan.derive(
            "num_speculative_tokens",
            expected,
            [cfg.at("block_size"), "$.speculators_version"],
            f"{rule} for the trained block (speculators {writer}'s DFlash trainer)",
        )
    elif expected is not None and k != expected:
        plan.find(
            "draft-length-mismatch",
            f"speculative_tokens is {k}, but a draft trained with block_size {block} and "
            f"sample_from_anchor={str(anchor).lower()} drafts {rule} = {expected} tokens",
            env.tokens_path,
        )
        plan.derive(
            "num_speculative_tokens",
            expected,
            [cfg.at("block_size"), anchor_src[0]],
            f"{rule} for the trained block",
        )
    else:
        plan.copy("num_speculative_tokens", k, env.tokens_path)
    served = plan.num_speculative_tokens
    plan.token_limits = TokenLimits(
        most=served,
        most_why=f"a block of {block if block is not None else 'block_size'} positions drafts {rule} = {served} "
        "after its anchor in one pass; vLLM fills K mask positions and refuses none past the block "
        "(qwen3_dflash.py), where the draft was never trained to predict",
        trained=served,
        trained_why=f"{rule} of the trained block",
    )
    if variant.top_level and block is None:
        derived_block = k if anchor else k + 1
        plan.derive(
            "draft_config.block_size",
            derived_block,
            [env.tokens_path],
            "block_size = speculative_tokens (+1 with a bonus anchor)",
        )


def why_unservable(ctx: Context, dspark: bool, trained: list[bool]) -> str:
    """Why the targeted vLLM cannot be told the trained masks (its rule in `vllm_layer_causal`), and the
    first release that serves them: the one from which every rule the masks need holds, so that
    following the advice does not meet the next missing rule."""
    needed = []
    if any(trained):
        needed.append("dflash_causal_layers")
        if dspark:
            needed.append("dspark_per_layer_causal")
        if not all(trained):
            needed.append("dflash_per_layer_causal")
    serves = f"Needs vLLM >= {short(max(first(r) for r in needed))}." if needed else ""
    if dspark and not ctx.holds("dspark_per_layer_causal"):
        return (
            f"the draft was trained with causal sliding layers; {ctx.vllm_label} serves every DSpark "
            f"layer non-causal (DSparkSpeculator sets dflash_causal = False). {serves}"
        )
    if not ctx.holds("dflash_causal_layers"):
        return (
            f"the draft was trained with causal layers; {ctx.vllm_label} serves every DFlash layer non-causal. {serves}"
        )
    if not ctx.holds("dflash_per_layer_causal"):
        return (
            f"the draft was trained with causal sliding and bidirectional full layers; {ctx.vllm_label} "
            f"applies one causal flag to every layer. {serves}"
        )
    return f"specreg's draft_config does not make {ctx.vllm_label} serve the trained masks {trained}"


def _attention(
    cfg: Fields,
    ctx: Context,
    variant: Variant,
    plan: Plan,
    n: int,
    types: list[str] | None,
    window: int | None,
    non_causal_in_file: bool | None,
    mask_values: Mapping[str, Any],
) -> None:
    """The trained per-layer plan, the mask flag that states it, and what vLLM would do instead."""
    types_path = "$.transformer_layer_config.layer_types"
    if types is None:
        layer_types = [FULL] * n
        types_why = "no layer_types: every layer is full attention"
    else:
        layer_types = list(types)
        types_why = "layer_types"
    non_causal = variant.non_causal_default if non_causal_in_file is None else non_causal_in_file
    nc_path = cfg.at("sliding_window_non_causal")
    if non_causal_in_file is None and SLIDING in layer_types:
        plan.find(
            "trainer-default-applied",
            f"sliding_window_non_causal is missing; {variant.non_causal_why}",
            nc_path,
        )

    trained: list[bool] = []
    set_by: dict[str, list[int]] = {}
    windowed: dict[str, list[str]] = {}
    for i, t in enumerate(layer_types):
        sliding = t == SLIDING
        causal = sliding and not non_causal
        why = (
            f"{types_why}; sliding layers are " + ("non-causal (sliding_window_non_causal)" if non_causal else "causal")
            if sliding
            else f"{types_why}; full-attention layers are bidirectional inside the draft block"
        )
        sources = [f"{types_path}[{i}]"] if types is not None else ["$.transformer_layer_config.num_hidden_layers"]
        if sliding:
            sources.append(nc_path)
        attn = LayerAttention(
            layer=i, kind="sliding" if sliding else "full", window=window if sliding else None, causal=causal
        )
        for m in variant.mask_fields:
            changed = m.layer(mask_values[m.name], attn) if mask_values[m.name] is not None else None
            if changed is not None and changed != attn:
                if changed.window != attn.window:
                    windowed.setdefault(m.name, []).append(f"{i} to {changed.window} (vLLM: {attn.window})")
                attn, sources, why = changed, [cfg.at(m.name)], f"{m.name} = {_json(mask_values[m.name])}: {m.why}"
                set_by.setdefault(m.name, []).append(i)
        trained.append(attn.causal)
        plan.layer(attn, sources, why)
    for name, changes in windowed.items():
        # draft_config states causality (mask_flag); vLLM reads a window only from the layer config
        plan.find(
            "vllm-unsupported-feature",
            f"{name} sets the window of layer{'s' * (len(changes) > 1)} {', '.join(changes)}; vLLM reads each "
            "layer's window from layer_types and sliding_window only, so no draft_config serves it",
            cfg.at(name),
        )
    for m in variant.mask_fields:
        if m.name in set_by:
            ids = set_by[m.name]
            plan.find(
                "mask-set-by-field",
                f"{m.name} = {_json(mask_values[m.name])} sets the mask of layer{'s' * (len(ids) > 1)} "
                f"{', '.join(map(str, ids))}: {m.why}",
                cfg.at(m.name),
            )

    mixed = SLIDING in layer_types and FULL in layer_types
    # What vLLM's mapping builds from the unmodified file, before specreg states the mask.
    base = plan.outputs["draft_config"]
    mapped = mapped_by_vllm(ctx, variant, base, non_causal_in_file)
    flag = mask_flag(ctx, variant.top_level, trained, base)
    if flag is not None:
        plan.derive(flag[0], flag[1], [f"attention[{i}]" for i in range(n)], flag[2])
    unservable = vllm_layer_causal(ctx, variant.top_level, plan.outputs["draft_config"], n) != trained
    if unservable:
        plan.find("vllm-unsupported-feature", why_unservable(ctx, variant.top_level, trained), nc_path)

    # Drafts vLLM serves as trained only on its V2 model runner (Speculator.needs_v2_model_runner); a
    # release without Model Runner V1 (the model_runner_v1 rule) always runs V2 and refuses the variable
    why_v2 = []
    if not ctx.holds("model_runner_v1"):
        pass
    elif mixed:  # qwen3_dflash._resolve_layer_attention (DSpark's layers too) raises on V1
        why_v2.append(
            f"{layer_types.count(SLIDING)} sliding and {layer_types.count(FULL)} full-attention layers "
            "need one KV group each, which only the V2 runner builds"
        )
    if variant.candidate_head and ctx.holds("model_runner_v1"):
        how = (
            'refuses it ("DFlash candidate-head drafts")'
            if ctx.holds("v1_runner_refuses_dflash_candidate_head")
            else "drafts it as plain DFlash without a word (its proposer never calls the candidate head)"
        )
        why_v2.append(
            f"{variant.label}'s candidate selector runs only in the V2 speculator; the V1 runner of {ctx.vllm_label} {how}"
        )
    if variant.top_level and ctx.holds("model_runner_v1"):
        why_v2.append(
            "DSpark is implemented by vLLM's V2 model runner only ("
            + (
                f"{ctx.vllm_label}'s V1 runner refuses it"
                if ctx.holds("v1_runner_refuses_dspark")
                else f"{ctx.vllm_label} selects V2 for it unless VLLM_USE_V2_MODEL_RUNNER=0"
            )
            + ")"
        )
    if why_v2:
        plan.find(
            "needs-v2-model-runner",
            "; ".join(why_v2) + ": serve with VLLM_USE_V2_MODEL_RUNNER=1",
            types_path if mixed else "$.speculators_model_type",
        )

    served = vllm_layer_causal(ctx, variant.top_level, mapped, n)
    wrong = [i for i in range(n) if served[i] != trained[i]]
    # A mask vLLM cannot serve at all is already an error above; report the rest.
    if wrong and not unservable:
        groups: dict[tuple[str, bool, bool], list[int]] = {}
        for i in wrong:
            groups.setdefault((layer_types[i], trained[i], served[i]), []).append(i)
        layers = "; ".join(
            f"layer{'s' * (len(ids) > 1)} {', '.join(map(str, ids))} "
            f"({'sliding' if t == SLIDING else 'full attention'}): trained {'causal' if tr else 'non-causal'}, "
            f"served {'causal' if sv else 'non-causal'}"
            for (t, tr, sv), ids in groups.items()
        )
        plan.find(
            "served-causal-mismatch",
            f"the unmodified file would be served with the wrong mask on {layers}: "
            f"{_served_because(ctx, variant, mapped)}. specreg's draft_config states the trained mask.",
            nc_path,
        )


def mask_flag(ctx: Context, dspark: bool, trained: list[bool], base: Mapping[str, Any]) -> tuple[str, Any, str] | None:
    """The flag (field, value, why) that makes the targeted vLLM serve the trained masks, or None.

    Layers that agree get one flag (`is_causal` from 0.28, where it is read first; else
    `dflash_config.causal`); layers that differ get none, and vLLM's per-layer fallback
    (sliding causal, full bidirectional) is then the trained plan."""
    if len(set(trained)) == 1:
        why = "every layer was trained " + ("causal" if trained[0] else "non-causal") + ": one flag states it"
        if ctx.holds("dflash_is_causal_first"):
            return "draft_config.is_causal", trained[0], why + f" ({ctx.vllm_label} reads is_causal first)"
        if ctx.holds("dflash_causal_layers") and (not dspark or ctx.holds("dspark_per_layer_causal")):
            return "draft_config.dflash_config.causal", trained[0], why
    elif base.get("is_causal") is not None and ctx.holds("dflash_is_causal_first"):
        # a layer config's own is_causal would override the per-layer fallback for every layer
        return (
            "draft_config.is_causal",
            None,
            "layers were trained with different masks: is_causal cleared so each layer's type decides",
        )
    return None


def _served_because(ctx: Context, variant: Variant, mapped: dict) -> str:
    """Which rule of the targeted vLLM gives the unmodified file its mask."""
    if ctx.holds("dflash_is_causal_first") and mapped.get("is_causal") is not None:
        return (
            f"{ctx.vllm_label} applies the layer config's is_causal = {str(mapped['is_causal']).lower()} to every layer"
        )
    if "dflash_config" in mapped and ctx.holds("dflash_per_layer_causal"):
        return (
            f"{ctx.vllm_label} sets dflash_config.causal = not sliding_window_non_causal "
            f"(= {str(mapped['dflash_config']['causal']).lower()}) for every layer"
        )
    if ctx.holds("dflash_per_layer_causal"):
        return (
            f"{ctx.vllm_label}'s mapping writes no causal flag for {variant.name}, so layer_types decides "
            "(sliding layers causal)"
        )
    return f"{ctx.vllm_label} applies one causal flag, unset in the file, to every layer"


def _json(value: Any) -> str:
    return json.dumps(value)
