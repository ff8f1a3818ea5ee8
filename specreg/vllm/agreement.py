"""What a draft and the verifier it is served beside must agree on beyond the widths and ids
verifier_check compares, and the draft length the user chose against what the draft can produce.

RoPE. vLLM's rotary embedding (`get_rope` in vllm/model_executor/layers/rotary_embedding/__init__.py of
every known release) reads everything from the config's `rope_parameters`: `rope_theta` (default 10000),
`rope_type` (default "default"), `rope_dim` else `partial_rotary_factor` (times the head size: the
rotated dimensions) and each type's own factors, which it hashes whole into its cache key (a key one
config leaves out takes its model class's default, `set_default_rope_theta` differing by class, so
only what both state is compared); the head
size comes from the model class (`head_dim`, else hidden_size // num_attention_heads). Before that,
`patch_rope_parameters` (vllm/transformers_utils/config.py) folds the legacy names into it: `rope_theta`
or `rotary_emb_base`, `partial_rotary_factor`, `rotary_pct` or `rotary_emb_fraction`, a `rope_scaling`
whose `type` becomes `rope_type`. tests/conformance reads those alias lists from every wheel
(`ROPE_ALIASES` below must equal them). The draft classes (qwen3_dflash.py, llama_eagle3.py,
qwen3_dspark.py) build their rotary embedding from the draft's own config the same way, so a draft
whose RoPE differs from its verifier's rotates positions by other angles than the verifier whose hidden
states it reads: it was trained beside another verifier, or its layer config was edited.

Draft length. `--num-speculative-tokens K` (vLLM's key) against the algorithm plan's
`TokenLimits`: above `most` (what the draft can produce: a DFlash-family block's positions) is an
error, above `trained` (the length the trainer wrote) a warning naming it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from specreg.normalization.speculator import Finding

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: the top-level names vLLM's patch_rope_parameters folds into rope_parameters, by the name it keeps
#: (vllm/transformers_utils/config.py; tests/conformance checks every wheel's lists against these)
ROPE_ALIASES = {
    "rope_theta": ("rope_theta", "rotary_emb_base"),
    "partial_rotary_factor": ("partial_rotary_factor", "rotary_pct", "rotary_emb_fraction"),
}
#: rope types whose angles differ from the unscaled ones only past original_max_position_embeddings
#: (DynamicNTKScalingRotaryEmbedding rescales only when a sequence outgrows it)
_GROWS_PAST_ORIGINAL = frozenset({"dynamic"})


def rope_view(config: Mapping[str, Any]) -> dict[str, Any]:
    """The RoPE parameters a config gives vLLM's get_rope, as patch_rope_parameters leaves them:
    rope_parameters (else rope_scaling) with `type` read as `rope_type`, the folded top-level names,
    and the defaults get_rope applies. A nested (per layer type) rope_parameters is kept whole."""
    params = config.get("rope_parameters")
    if not isinstance(params, Mapping) or not params:
        params = config.get("rope_scaling")
    view: dict[str, Any] = dict(params) if isinstance(params, Mapping) else {}
    if "type" in view and "rope_type" not in view:
        view["rope_type"] = view.pop("type")
    else:
        view.pop("type", None)
    for name, aliases in ROPE_ALIASES.items():
        if name not in view:
            value = next((config[a] for a in aliases if config.get(a) is not None), None)
            if value is not None:
                view[name] = value
    return view


def _costs(draft: Mapping[str, Any], verifier: Mapping[str, Any], differ: list[str]) -> str:
    """Which positions the difference rotates by other angles."""
    if differ == ["rope_type"] or set(differ) <= {"rope_type", "factor", "original_max_position_embeddings"}:
        kinds = {draft.get("rope_type"), verifier.get("rope_type")} - {"default"}
        if kinds and kinds <= _GROWS_PAST_ORIGINAL:
            start = draft.get("original_max_position_embeddings") or verifier.get("original_max_position_embeddings")
            if isinstance(start, int):
                return f"positions from {start} on are rotated by other angles (dynamic NTK rescales only past it)"
    return "every position after the first is rotated by other angles"


def rotated(head: int | None, factor: Any) -> int | None:
    """The dimensions a rotary embedding turns: `int(head * partial_rotary_factor)` as get_rope computes it,
    in exact arithmetic (a 4,000-digit head size overflows a float); None where either is not a number."""
    import math
    from fractions import Fraction

    if not isinstance(head, int) or isinstance(head, bool) or isinstance(factor, bool):
        return None
    if not isinstance(factor, (int, float)) or not math.isfinite(factor):
        return None
    return int(Fraction(head) * Fraction(factor))


def rope_findings(spec: "Speculator", verifier_id: str, verifier_body: Mapping[str, Any]) -> list[Finding]:
    """The draft's RoPE (its layer config as served) against the verifier's, key by key, with the head
    size get_rope's rotated dimensions come from."""
    from specreg.sources.decoder import head_size

    d, v = rope_view(spec.draft_config), rope_view(verifier_body)
    heads = []
    for config, view in ((spec.draft_config, d), (verifier_body, v)):
        h = head_size(dict(config))
        factor = view.get("partial_rotary_factor", 1.0) if isinstance(view, Mapping) else 1.0
        heads.append((h, rotated(h, factor)))
    return compare(d, v, heads[0], heads[1], verifier_id)


def compare(
    d: Mapping[str, Any],
    v: Mapping[str, Any],
    draft_head: tuple[int | None, int | None],
    verifier_head: tuple[int | None, int | None],
    verifier_id: str,
    *,
    engine: str = "vLLM",
    head_from: str = "head_dim, else hidden_size // num_attention_heads",
    rotator: str = "get_rope",
) -> list[Finding]:
    """Two RoPE views (the parameters `engine`'s rotary embedding takes from the draft's config and from
    the verifier's) and each side's (head size, rotated dimensions), compared: `verifier-rope-mismatch`
    and `verifier-head-dim-mismatch`, each with both values and what the difference costs. Shared by
    the vLLM pre-flight and the SGLang export (specreg.sglang.agreement), which build the views as
    each engine reads them."""
    # a key one side leaves out takes its model class's default (vLLM's set_default_rope_theta differs by
    # class), so only what both state is compared; a scaling type stated on one side only is a difference
    differ = sorted(k for k in set(d) & set(v) if d[k] != v[k])
    if d and v and "rope_type" not in set(d) & set(v):
        kinds = {d.get("rope_type", "default"), v.get("rope_type", "default")}
        if len(kinds) > 1:
            differ = sorted({*differ, "rope_type"})
            d, v = {"rope_type": "default", **d}, {"rope_type": "default", **v}  # get_rope's default
    out = []
    if differ:
        both = "; ".join(f"{k}: draft {d.get(k)!r}, verifier {v.get(k)!r}" for k in differ)
        out.append(
            Finding.of(
                "verifier-rope-mismatch",
                f"the draft's RoPE differs from {verifier_id}'s ({both}): {engine} rotates the draft's positions "
                f"with its own ({_costs(d, v, differ)} than in the verifier whose hidden states it reads)",
                "draft_config.rope_parameters",
                fix="pair the draft with the verifier it was trained beside",
            )
        )
    (hd, rd), (hv, rv) = draft_head, verifier_head
    if isinstance(hd, int) and isinstance(hv, int) and hd != hv:
        out.append(
            Finding.of(
                "verifier-head-dim-mismatch",
                f"the draft's head size is {hd}, {verifier_id}'s {hv} ({head_from}): {rotator} rotates "
                f"{rd} dimensions of each draft head against {rv} of the verifier's",
                "draft_config.head_dim",
                fix="pair the draft with the verifier it was trained beside",
            )
        )
    return out


def tokens_findings(spec: "Speculator", k: int | None, *, flag: str = "--num-speculative-tokens") -> list[Finding]:
    """The draft length the user serves with (`k`, vLLM's num_speculative_tokens) against the plan's
    limits: beyond what the draft can produce an error, beyond what it was trained for a warning."""
    limits = spec.token_limits
    if k is None or limits is None:
        return []
    if limits.most is not None and k > limits.most:
        return [
            Finding.of(
                "speculative-tokens-beyond-draft",
                f"{flag} {k}: the draft produces at most {limits.most} tokens a step ({limits.most_why})",
                None,
                fix=f"serve with num_speculative_tokens {limits.most} or less",
            )
        ]
    if limits.trained is not None and k > limits.trained:
        return [
            Finding.of(
                "speculative-tokens-untrained",
                f"{flag} {k}: the draft was trained for {limits.trained} ({limits.trained_why}); tokens past "
                f"{limits.trained} are drafted at depths training never reached, and are accepted less often",
                None,
                fix=f"serve with num_speculative_tokens {limits.trained} (trained), or measure the acceptance at {k}",
            )
        ]
    return []


def served_with(spec: "Speculator", k: int | None) -> "Speculator":
    """`spec` as served with the user's num_speculative_tokens `k` (`specreg serve
    --num-speculative-tokens`): the length in its speculative config, `tokens_findings` among its
    findings (an error makes it unservable). Unchanged for None."""
    if k is None or spec.method is None:
        return spec
    import attrs

    from specreg.normalization.speculator import Provenance

    config = {**spec.speculative_config_dict(), "num_speculative_tokens": k}
    provenance = {
        **spec.provenance,
        "speculative_config.num_speculative_tokens": Provenance("source", ("--num-speculative-tokens",)),
    }
    return attrs.evolve(
        spec,
        num_speculative_tokens=k,
        speculative_config=config,
        provenance=provenance,
        findings=(*spec.findings, *tokens_findings(spec, k)),
    )
