"""The draft against its verifier: the verifier's config.json read into `VerifierFacts` (its
`text_config` for multimodal verifiers; never its weights), and the findings it gives: layers,
hidden size, vocabulary, mask token, aux-layer capture (aux id 0 too), RoPE and head size
(agreement.py), tensor parallelism, and the KV cache of the two as served."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

import attrs

from specreg.normalization.capabilities import (
    aux_capture,
    aux_capture_releases,
    first,
    holds,
    layer_zero_capture,
    parse_version,
    short,
)
from specreg.normalization.speculator import Finding
from specreg.vllm.agreement import rope_findings
from specreg.vllm.deployment import quant_method
from specreg.vllm.gpu_plan import VerifierGroup, verifier_groups
from specreg.vllm.kv_cache import draft_kv_layers, kv_cache_findings, verifier_kv_layers
from specreg.vllm.kv_cache import dtype_bytes as kv_dtype_bytes

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator
    from specreg.sources.verifier import VerifierConfig


@attrs.frozen
class VerifierFacts:
    id: str
    architectures: tuple[str, ...]
    num_hidden_layers: int | None
    hidden_size: int | None
    vocab_size: int | None
    text_config: bool
    head_size: int | None = None  # head_dim, else hidden_size // num_attention_heads (vLLM's rule)
    dtype: str | None = None
    max_position_embeddings: int | None = None
    quantization: str | None = None  # quantization_config's quant_method
    attention_chunk_size: int | None = None  # chunked local attention (Llama 4)
    layers: tuple[VerifierGroup, ...] = ()  # its layers by sliding window and sinks (gpu_plan.verifier_groups)
    kv_heads: int | None = None  # num_key_value_heads, else num_attention_heads
    sliding_window: int | None = None
    mla_latent: int | None = None  # kv_lora_rank + qk_rope_head_dim (MLA); None: not MLA
    state_layers: tuple[int, ...] = ()  # Mamba-type layers (decoder.STATE_LAYER_TYPES in layer_types)
    #: the language model's config as read (text_config for a multimodal verifier): what the agreement
    #: rules read beyond these fields (specreg.vllm.agreement); not in to_dict
    body: Mapping[str, Any] = attrs.field(factory=dict, repr=False, eq=False)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, filter=lambda field, _: field.name != "body")


def verifier_facts(verifier: str, *, source: str, hub_only: bool = False) -> VerifierFacts:
    """The verifier's config.json (a Hub id, a local directory or a config file): what the checks need.

    hub_only: the name came from a Hub config (someone else's file), so it may only name a Hub repo
    (`specreg.sources.verifier.read_verifier` reads it; this is what vLLM makes of its fields)."""
    from specreg.sources.verifier import read_verifier

    return _facts(read_verifier(verifier, source=source, hub_only=hub_only))


def facts_of(config: Mapping[str, Any], verifier: str) -> VerifierFacts:
    """The facts of a verifier config already read (a config.json, or the one vLLM runs with)."""
    from specreg.sources.verifier import VerifierConfig

    return _facts(VerifierConfig.of(dict(config), verifier))


def _facts(read: VerifierConfig) -> VerifierFacts:
    """What its fields state (the source's reading), with what vLLM makes of them: the quantization
    method by vLLM's name and the layer groups vLLM's attention selector sees."""
    return VerifierFacts(
        id=read.id,
        architectures=read.architectures,
        num_hidden_layers=read.num_hidden_layers,
        hidden_size=read.hidden_size,
        vocab_size=read.vocab_size,
        text_config=read.text_config,
        head_size=read.head_size,
        dtype=read.dtype,
        max_position_embeddings=read.max_position_embeddings,
        quantization=quant_method(read.config) or quant_method(read.body),
        attention_chunk_size=read.attention_chunk_size,
        layers=verifier_groups(read.body, read.architectures),
        kv_heads=read.kv_heads,
        sliding_window=read.sliding_window,
        mla_latent=read.mla_latent,
        state_layers=read.state_layers,
        body=read.body,
    )


def aux_ids(draft: Mapping[str, Any]) -> list[int] | None:
    """Aux layer ids in the speculators convention (the hidden state entering layer i)."""
    ids = draft.get("eagle_aux_hidden_state_layer_ids")
    if ids is None and draft.get("target_layer_ids") is not None:
        ids = [t + 1 for t in draft["target_layer_ids"]]
    return list(ids) if ids is not None else None


def _mask_token(spec: "Speculator") -> tuple[int | None, str]:
    d = spec.draft_config
    if isinstance(d.get("dflash_config"), Mapping) and d["dflash_config"].get("mask_token_id") is not None:
        return d["dflash_config"]["mask_token_id"], "draft_config.dflash_config.mask_token_id"
    for key in ("mask_token_id", "pard_token"):
        if d.get(key) is not None:
            return d[key], f"draft_config.{key}"
    return None, ""


def verifier_findings(
    spec: "Speculator",
    facts: VerifierFacts,
    *,
    tensor_parallel_size: int | None = None,
    draft_tensor_parallel_size: int | None = None,
) -> list[Finding]:
    """The draft against its verifier's config: layers, hidden size, vocabulary, mask token,
    aux capture support, draft tensor parallelism."""
    d, out = spec.draft_config, []
    version = parse_version(spec.vllm_version)
    L, H, V = facts.num_hidden_layers, facts.hidden_size, facts.vocab_size
    ids = aux_ids(d)
    if ids is not None and L is not None:
        through_last = holds("aux_capture_through_last_layer", version)
        top = L if through_last else L - 1
        bad = [i for i in ids if not 0 <= i <= top]
        if bad:
            rule = (
                "ids count the hidden state entering layer i; vLLM >= "
                f"{short(first('aux_capture_through_last_layer'))} also captures the last layer's output as id L"
                if through_last
                else f"ids count the hidden state entering layer i, and vLLM {short(version)} captures "
                "only before each layer"
            )
            out.append(
                Finding.of(
                    "verifier-layer-out-of-range",
                    f"aux layer ids {bad} are outside {facts.id}'s {L} layers (valid 0..{top}: {rule})",
                    "draft_config.eagle_aux_hidden_state_layer_ids",
                    fix="train against (or name) the verifier this draft was trained with; the ids must come from it",
                )
            )
    target_hidden = d.get("target_hidden_size") or d.get("hidden_size")
    if H is not None and target_hidden is not None and target_hidden != H:
        out.append(
            Finding.of(
                "verifier-hidden-size-mismatch",
                f"the draft expects target hidden size {target_hidden}; {facts.id} has {H}",
                "draft_config.target_hidden_size",
                fix="pair the draft with the verifier it was trained on (or set target_hidden_size if the config omits it)",
            )
        )
    dv = d.get("draft_vocab_size")
    if V is not None and isinstance(dv, int):
        if dv > V:
            out.append(
                Finding.of(
                    "verifier-vocab-too-small",
                    f"draft_vocab_size {dv} is larger than {facts.id}'s vocabulary ({V})",
                    "draft_config.draft_vocab_size",
                    fix="the draft was trained for another tokenizer: use its own verifier",
                )
            )
        elif dv < V:
            out.append(
                Finding.of(
                    "draft-vocab-reduced",
                    f"draft_vocab_size {dv} < the verifier's {V}: the weights must carry d2t (and t2d)",
                    "draft_config.draft_vocab_size",
                )
            )
    ev = d.get("vocab_size")
    if V is not None and isinstance(ev, int) and ev != V:
        out.append(
            Finding.of(
                "verifier-vocab-mismatch",
                f"the draft's embedding vocabulary is {ev}; {facts.id}'s is {V}",
                "draft_config.vocab_size",
                fix="the draft embeds the verifier's tokens: check that this is the verifier it was trained with",
            )
        )
    mask, mask_at = _mask_token(spec)
    if V is not None and isinstance(mask, int) and not 0 <= mask < V:
        out.append(
            Finding.of(
                "mask-token-out-of-vocab",
                f"mask token id {mask} is outside {facts.id}'s vocabulary (0..{V - 1})",
                mask_at,
                fix="use the mask token id the draft was trained with, from the verifier's tokenizer",
            )
        )
    aux = aux_capture(version)
    if facts.architectures and aux is None:
        oldest = aux_capture_releases()[0]
        out.append(
            Finding.of(
                "verifier-aux-capture-unknown",
                f"vLLM {short(version)} is older than {oldest}, the oldest release whose model files were read for aux "
                f"hidden-state capture: whether its class for {', '.join(facts.architectures)} captures them is not "
                "known (not checked)",
                None,
                fix="check the verifier's class in that vLLM's model file (SupportsEagle3), or target a release with facts",
            )
        )
    if facts.architectures and aux is not None and not any(a in aux[1] for a in facts.architectures):
        read_as = "" if f"{version.major}.{version.minor}" == aux[0] else f" (as {aux[0]}, the newest release read)"
        out.append(
            Finding.of(
                "verifier-no-aux-capture",
                f"vLLM {short(version)}{read_as} cannot capture aux hidden states from "
                f"{', '.join(facts.architectures)} (its class does not implement SupportsEagle3)",
                None,
                fix="serve a verifier architecture vLLM supports for Eagle-3/DFlash drafts",
            )
        )
    out += rope_findings(spec, facts.id, facts.body)
    zero = layer_zero_capture(version)
    if ids is not None and 0 in ids and facts.architectures and zero is not None:
        if not any(a in zero[1] for a in facts.architectures):
            read_as = (
                "" if f"{version.major}.{version.minor}" == zero[0] else f" (as {zero[0]}, the newest release read)"
            )
            out.append(
                Finding.of(
                    "verifier-no-layer-zero-capture",
                    f"aux id 0 (the embedding output, target id -1) is the state entering {facts.id}'s first "
                    f"layer; vLLM {short(version)}{read_as}'s class for {', '.join(facts.architectures)} does not "
                    "capture it (its aux states are taken after each layer, or another way), so the draft would "
                    "read other features than trained",
                    "draft_config.eagle_aux_hidden_state_layer_ids",
                    fix="serve with a vLLM whose class for this verifier captures the state entering layer 0 "
                    "(`specreg facts` lists them), or a draft trained without layer 0",
                )
            )
    if draft_tensor_parallel_size is not None:
        tp = tensor_parallel_size or 1
        if draft_tensor_parallel_size not in (1, tp):
            out.append(
                Finding.of(
                    "draft-tp-invalid",
                    f"draft tensor parallel size {draft_tensor_parallel_size} is neither 1 nor the target's ({tp})",
                    None,
                    fix=f"use draft_tensor_parallel_size 1 or {tp}",
                )
            )
    return out


def kv_cache_check(
    spec: "Speculator",
    facts: VerifierFacts,
    tp: int | None,
    draft_tp: int | None,
    kv_cache_dtype: str,
    dtype: str | None,
    hybrid: bool,
) -> list[Finding]:
    """kv_cache.kv_cache_findings for the verifier and the draft as served: their layers over the
    ranks, the KV-cache dtype's width, the hybrid KV-cache manager on or off; a Mamba-hybrid
    verifier's state layers with them. A verifier with chunked local attention is left out: which of its layers are chunked is its class's, not modelled (with
    the manager off, which an Eagle drafter turns off for it, its chunked and full layers are all
    allocated as full attention)."""
    if facts.attention_chunk_size is not None:
        return []
    width = kv_dtype_bytes(kv_cache_dtype, dtype or facts.dtype)
    verifier = verifier_kv_layers(
        facts.layers,
        kv_heads=facts.kv_heads,
        head_size=facts.head_size,
        window=facts.sliding_window,
        latent=facts.mla_latent,
        tp=tp or 1,
        dtype_bytes=width,
        states=facts.state_layers,
    )
    draft = draft_kv_layers(spec, tp=draft_tp or tp or 1, dtype_bytes=width)
    return kv_cache_findings(spec, verifier, draft, hybrid=hybrid)
