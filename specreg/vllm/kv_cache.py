"""Whether vLLM can put the verifier's and the draft's attention layers into KV-cache groups.

The engine core calls `get_kv_cache_groups(vllm_config, specs)` (v1/core/kv_cache_utils.py; from
0.33 kv_cache_planning.py) on every attention layer of the verifier and of the draft together, before
it allocates a byte. Two of its paths raise at startup for real verifier-draft pairs:

- **Page sizes that do not divide.** The KV-cache manager allocates one page size. When the layers
  are not all of one type (a sliding-window verifier, or a sliding-window draft on a full-attention
  verifier), `unify_kv_cache_spec_page_size` grows each smaller page's block size to the largest page,
  which works when the largest is a multiple of it. Otherwise it pads the page, where the version
  allows: 0.24-0.28 when the layer's backend reads KV pages by the block stride
  (`indexes_kv_by_block_stride`), 0.29+ for every layer that is not MLA. What it cannot pad raises
  NotImplementedError, unless (0.27+) `_try_get_full_allocation_fallback_groups` allocates the
  sliding layers as full attention, which it does for MLA next to regular sliding-window layers.
- **Two sliding windows with the hybrid KV-cache manager off.** With the manager off (a chunked-local
  verifier and an Eagle drafter, --disable-hybrid-kv-cache-manager, or a KV connector without HMA
  support), the sliding-window layers are promoted to full attention but keep their windows, and
  `is_kv_cache_spec_uniform` merges the specs: `merge_window_sizes` raises ValueError ("All attention
  layers in the same KV cache group must have the same window size") when the first layer is not MLA
  and the layers have two windows, as a verifier with one window and a draft with another do.

- **A Mamba hybrid's state page (0.24-0.25).** The platform pads a Mamba-type layer's state page
  to the verifier's attention page (HybridAttentionMambaModelConfig). A draft whose page is larger
  makes unification try the Mamba layer's block size, which does not change its page: a bare
  AssertionError. From 0.26 the Mamba page is padded to the largest.

`grouping` models these paths; tests/conformance/test_kv_cache_groups.py runs each wheel's own
`get_kv_cache_groups` (each wheel from 0.24) on a matrix of verifier layouts, draft layers, the manager on and
off, and block-first pages or not, and holds `grouping` to its answers. facts/<X.Y>/kv_cache.json holds what the
backends answer (computed from each wheel by the same tier): whether each CUDA backend's KV page is
laid out block-first. In 0.24-0.28 every CUDA backend vLLM builds here reads pages by the block stride,
so pages that do not divide are padded; from 0.29 none declares a block-outermost layout first, so
the packed grouping (`_get_packed_kv_cache_groups`, taken only for a block-outermost layout) is not
what a CUDA server takes, and is not modelled.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Iterable

import attrs
from packaging.version import Version

from specreg import facts
from specreg.sources.decoder import head_size, positive_int
from specreg.vllm.deployment import minor_release
from specreg.vllm.fact_files import read_all

#: the versions whose grouping is modelled and held to the wheel (facts/<X.Y>/kv_cache.json)
FIRST, LAST = facts.tested_by("selector")[0], facts.tested_by("selector")[-1]
PADS_NON_MLA_SINCE = str(facts.since("kv_pads_non_mla"))  # pads every attention layer that is not MLA
PADS_BY_BLOCK_STRIDE = (
    FIRST,
    facts.before(PADS_NON_MLA_SINCE),
)  # pads a layer whose backend indexes KV by the block stride
FALLBACK_SINCE = str(facts.since("kv_full_allocation_fallback"))  # _try_get_full_allocation_fallback_groups
PROMOTE_SINCE = str(
    facts.since("kv_promote_local_specs")
)  # _promote_local_kv_cache_specs (its own message when promotion fails)
MAMBA_PADS_SINCE = str(
    facts.since("kv_mamba_pads")
)  # pads a Mamba layer's page to a larger one (before: it tries the block size)
BLOCK = 16  # the layers' block size before unification (all layers start from the same one)


@attrs.frozen
class KvLayer:
    """One attention layer as the KV-cache manager sees it."""

    label: str  # "verifier layer 3", "draft layer 0"
    kind: str  # full, sliding, chunked, mla, mamba
    kv_heads: int  # per tensor-parallel rank
    head_size: int
    dtype_bytes: int = 2
    window: int | None = None  # sliding_window, or attention_chunk_size for chunked

    def page_bytes(self, block: int = BLOCK) -> int:
        # FullAttentionSpec / SlidingWindowSpec store K and V; MLAAttentionSpec one latent. A Mamba
        # layer's state page is padded to the verifier's attention page at startup (the platform's
        # HybridAttentionMambaModelConfig): its kv_heads and head_size are that attention's.
        return (1 if self.kind == "mla" else 2) * block * self.kv_heads * self.head_size * self.dtype_bytes


@attrs.frozen
class Grouping:
    ok: bool
    error: str | None = None  # the exception vLLM raises, as "Type: message"
    where: str | None = None  # the wheel function that raises
    padded: tuple[str, ...] = ()  # layers whose page vLLM pads to the largest
    largest: int | None = None  # the page size (bytes) every layer's page becomes
    modelled: bool = True  # False: a path grouping does not model (the answer is not claimed)


@lru_cache(maxsize=1)
def facts() -> dict[str, Any]:
    return read_all("kv_cache")


def covered(version: str) -> bool:
    v = Version(minor_release(version))
    return Version(FIRST) <= v <= Version(LAST)


def block_first(version: str) -> bool | None:
    """Whether every CUDA backend of `version` lays KV pages out block-first (None: they differ)."""
    answers = {a for a in facts()[minor_release(version)]["block_first"].values() if isinstance(a, bool)}
    return answers.pop() if len(answers) == 1 else None


def grouping(version: str, layers: Iterable[KvLayer], *, hybrid: bool = True, first: bool | None = None) -> Grouping:
    """What vLLM `version`'s get_kv_cache_groups does with `layers` (the verifier's first, as the model
    registers them): `hybrid`, whether the hybrid KV-cache manager is on; `first`, whether the layers'
    backends lay pages out block-first (default: facts/<X.Y>/kv_cache.json's answer for the version)."""
    v = Version(minor_release(version))
    layers = list(layers)
    if not layers:
        return Grouping(True)
    if first is None:
        first = block_first(version)
    kinds = [_kind(x, layers, hybrid) for x in layers]
    if not hybrid:
        # is_kv_cache_spec_uniform: the first layer's spec merges them all; a non-MLA full spec reads
        # every layer's sliding window (or chunk) and raises on two (ValueError, not the AssertionError
        # the function catches)
        if kinds[0] == "full" and all(k in ("full", "mla") for k in kinds):
            if not any(k == "mla" for k in kinds):
                for attr in ("sliding", "chunked"):
                    seen = {x.window for x, k in zip(layers, kinds) if x.kind == attr}
                    if len(seen) > 1:
                        return Grouping(
                            False,
                            "ValueError: All attention layers in the same KV cache group must "
                            "have the same window size.",
                            "is_kv_cache_spec_uniform",
                        )
        if not _uniform_type(layers, kinds):  # what promotion leaves is still of two types
            message = (
                "Failed to promote local KV cache specs to one unified type."
                if v >= Version(PROMOTE_SINCE)
                else "Hybrid KV cache manager is disabled but failed to convert the KV cache specs to one unified type."
            )
            return Grouping(False, f"ValueError: {message}", "unify_hybrid_kv_cache_specs")
    pages = [x.page_bytes() for x in layers]
    if len(set(pages)) == 1 and len(set(_uniform_key(x, k) for x, k in zip(layers, kinds))) == 1:
        return Grouping(True, largest=pages[0])
    if _uniform_type(layers, kinds):
        return Grouping(True)  # one group (UniformTypeKVCacheSpecs): pages may differ
    if first is None or (v >= Version(PADS_NON_MLA_SINCE) and first and len(set(pages)) > 1):
        # the backends disagree (not in any wheel's facts), or _get_packed_kv_cache_groups
        return Grouping(True, modelled=False)
    largest = max(pages)
    padded = []
    for x, page in zip(layers, pages):
        if page == largest or (largest % page == 0 and x.kind != "mamba"):
            continue
        if x.kind == "mamba":
            if v >= Version(MAMBA_PADS_SINCE):
                padded.append(x.label)
                continue
            if largest % page == 0:  # a new block size leaves the padded state page as it was
                return Grouping(
                    False,
                    "AssertionError: (bare `assert new_spec.page_size_bytes == max_page_size`: a "
                    f"Mamba layer's page, {x.label}'s, does not grow with the block size)",
                    "unify_kv_cache_spec_page_size",
                )
            return _not_divisible(x)
        pads = first if v <= Version(PADS_BY_BLOCK_STRIDE[1]) else x.kind != "mla"
        if not pads:
            if v >= Version(FALLBACK_SINCE) and _fallback(layers):
                return Grouping(True)  # the sliding layers allocated as full attention: one group
            return _not_divisible(x)
        padded.append(x.label)
    return Grouping(True, padded=tuple(padded), largest=largest)


def _not_divisible(x: KvLayer) -> Grouping:
    return Grouping(
        False,
        f"NotImplementedError: Layer {x.label}: page size is not divisible by the maximum page "
        "size and cannot be padded",
        "unify_kv_cache_spec_page_size",
    )


def _kind(x: KvLayer, layers: list[KvLayer], hybrid: bool) -> str:
    """The spec's type after unify_hybrid_kv_cache_specs: with the manager off and full attention
    present, sliding and chunked layers are allocated as full attention (they keep their window)."""
    if not hybrid and x.kind in ("sliding", "chunked") and any(y.kind in ("full", "mla") for y in layers):
        return "full"
    return x.kind


def _uniform_key(x: KvLayer, kind: str) -> tuple:
    return (kind, x.kv_heads, x.head_size, x.dtype_bytes, x.window if kind in ("sliding", "chunked") else None)


def _uniform_type(layers: list[KvLayer], kinds: list[str]) -> bool:
    """UniformTypeKVCacheSpecs.is_uniform_type: all full attention (MLA is a full-attention spec), or
    all sliding (or chunked) with one window."""
    if all(k in ("full", "mla") for k in kinds):
        return True
    for attr in ("sliding", "chunked"):
        if all(k == attr for k in kinds) and len({x.window for x in layers}) == 1:
            return True
    return False


def _fallback(layers: list[KvLayer]) -> bool:
    """_try_get_full_allocation_fallback_groups: MLA next to regular sliding-window layers, no
    chunked layers, is allocated as full attention."""
    kinds = {x.kind for x in layers}
    return "mla" in kinds and "sliding" in kinds and "chunked" not in kinds


#: KV-cache dtypes one byte wide (vLLM's fp8 family); "auto" is the dtype the model runs in
_ONE_BYTE = ("fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla")


def verifier_kv_layers(
    groups: Iterable[Any],
    *,
    kv_heads: int | None,
    head_size: int | None,
    window: int | None,
    latent: int | None,
    tp: int,
    dtype_bytes: int,
    states: Iterable[int] = (),
) -> list[KvLayer]:
    """The verifier's attention layers as its vLLM class registers them: MLA (one latent per token,
    `latent` wide) where the config has kv_lora_rank, else num_key_value_heads split over the tensor
    parallel ranks (at least one each); sliding where `groups` (gpu_plan.verifier_groups) says.
    `states`: its Mamba-type layers, whose page vLLM pads to its attention layers' page."""
    out = []
    if kv_heads and head_size and not latent:
        out += [KvLayer(f"verifier layer {i}", "mamba", max(1, kv_heads // tp), head_size, dtype_bytes) for i in states]
    for g in groups:
        for i in g.layers:
            if latent:
                out.append(KvLayer(f"verifier layer {i}", "mla", 1, latent, dtype_bytes))
            elif kv_heads and head_size:
                sliding = g.sliding and window is not None
                out.append(
                    KvLayer(
                        f"verifier layer {i}",
                        "sliding" if sliding else "full",
                        max(1, kv_heads // tp),
                        head_size,
                        dtype_bytes,
                        window if sliding else None,
                    )
                )
    return sorted(out, key=lambda x: int(x.label.rsplit(" ", 1)[1]))


def draft_kv_layers(spec: Any, *, tp: int, dtype_bytes: int) -> list[KvLayer]:
    """The draft's attention layers: its config's KV heads over the ranks, head size and window, and
    each layer's kind as specreg planned it (spec.attention)."""
    config = spec.draft_config_dict()
    heads = positive_int(config.get("num_key_value_heads")) or positive_int(config.get("num_attention_heads"))
    head, window = head_size(config), positive_int(config.get("sliding_window"))
    if not heads or not head:
        return []
    layers = spec.attention or ()
    kinds = [(a.layer, a.kind) for a in layers] or [(0, "full")]
    return [
        KvLayer(
            f"draft layer {i}",
            "sliding" if kind == "sliding" and window else "full",
            max(1, heads // tp),
            head,
            dtype_bytes,
            window if kind == "sliding" and window else None,
        )
        for i, kind in kinds
    ]


def kv_cache_findings(spec: Any, verifier: list[KvLayer], draft: list[KvLayer], *, hybrid: bool) -> list[Any]:
    """The findings of vLLM `spec.vllm_version` grouping the verifier's and the draft's layers
    (module docstring): `hybrid`, whether the hybrid KV-cache manager is on as served."""
    from specreg.normalization.speculator import Finding

    version = str(spec.vllm_version)
    if not covered(version) or not verifier or not draft:
        return []
    layers = verifier + draft
    served = grouping(version, layers, hybrid=hybrid)
    if not served.modelled:
        return []
    if not served.ok and grouping(version, verifier, hybrid=hybrid).ok:  # (else the verifier's, not the pair's)
        return [
            Finding.of(
                "kv-cache-groups",
                f"vLLM {version} cannot put the verifier's and the draft's attention layers into KV-cache groups: "
                f"{served.where} raises {served.error}",
                None,
                fix=_fix(served, verifier, draft),
            )
        ]
    if not served.ok:
        return []
    found = []
    if hybrid:
        off = grouping(version, layers, hybrid=False)
        if off.modelled and not off.ok and grouping(version, verifier, hybrid=False).ok:
            found.append(
                Finding.of(
                    "kv-cache-groups-hybrid-off",
                    f"with the hybrid KV-cache manager off (--disable-hybrid-kv-cache-manager, or a KV connector without "
                    f"HMA support), vLLM {version} fails at startup: {off.where} raises {off.error}",
                    None,
                    fix=_fix(off, verifier, draft),
                )
            )
    padded = [x for x in draft + verifier if x.label in served.padded]
    if padded and served.largest:
        x = padded[0]
        unused = 100 * (served.largest - x.page_bytes()) / served.largest
        found.append(
            Finding.of(
                "kv-cache-pages-padded",
                f"vLLM {version} pads the KV page of {_names(padded)} ({x.page_bytes()} bytes per {BLOCK} tokens) to the "
                f"largest ({served.largest} bytes): {unused:.0f}% of each of those pages is unused "
                "(unify_kv_cache_spec_page_size)",
                None,
            )
        )
    return found


def _names(layers: list[KvLayer]) -> str:
    draft = [x.label.rsplit(" ", 1)[1] for x in layers if x.label.startswith("draft")]
    verifier = [x.label.rsplit(" ", 1)[1] for x in layers if x.label.startswith("verifier")]
    parts = ([f"draft layer{'s' if len(draft) > 1 else ''} {', '.join(draft)}"] if draft else []) + (
        [
            f"verifier layer{'s' if len(verifier) > 1 else ''} {', '.join(verifier[:4])}"
            + (", ..." if len(verifier) > 4 else "")
        ]
        if verifier
        else []
    )
    return " and ".join(parts)


def _fix(failed: Grouping, verifier: list[KvLayer], draft: list[KvLayer]) -> str:
    if failed.where == "unify_kv_cache_spec_page_size":
        return (
            "give the draft layers a KV page that divides the verifier's (KV heads x head size), or serve with "
            f"vLLM {PADS_NON_MLA_SINCE}+, which pads the page of every layer that is not MLA"
        )
    windows = sorted({x.window for x in verifier if x.kind == "sliding"})
    theirs = sorted({x.window for x in draft if x.kind == "sliding"})
    mine = (
        f" (the verifier's {', '.join(map(str, windows))}; the draft's {', '.join(map(str, theirs))})"
        if windows and theirs
        else ""
    )
    return f"serve with the hybrid KV-cache manager on, or give the draft's sliding layers the verifier's window{mine}"


def dtype_bytes(kv_cache_dtype: str, dtype: str | None) -> int:
    if kv_cache_dtype in _ONE_BYTE:
        return 1
    return 4 if (kv_cache_dtype == "auto" and dtype == "float32") or kv_cache_dtype == "float32" else 2
