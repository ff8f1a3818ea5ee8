"""Which attention backend vLLM picks for a draft's layers on a GPU, per vLLM version.

vLLM decides it in `CudaPlatform.get_valid_backends` (vllm/platforms/cuda.py): it walks
`_get_backend_priorities(...)` for the GPU's compute capability and keeps each backend whose
`validate_configuration` (vllm/v1/attention/backend.py) returns no reason. That method is a fixed
sequence of checks, each asking one of the backend's class methods (`supports_head_size`,
`supports_dtype`, `supports_kv_cache_dtype`, `supports_sink`, `supports_compute_capability`,
`supports_sliding_window`, `supports_non_causal`, ...), then `supports_combination`.

`facts/<X.Y>/attention_backends.json` holds, for each known vLLM version from 0.24 and each capability, the
priorities and every backend's answers to those methods, *computed by running the wheel's own
code* (tests/conformance/attention_selector.py); this module combines them in
`validate_configuration`'s order, with vLLM's reason strings. The conformance tier checks the
result against each wheel's `get_valid_backends` on 720 cases per version, without and with
FlashInfer's TRTLLM cubins (which decide its sinks: flashinfer-cubin installed, as 0.24-0.25 require,
or NVIDIA's artifactory reachable at startup). What is modelled rather than
run is the compiled part: which FlashAttention kernels exist (a wheel ships `_vllm_fa2_C` and
`_vllm_fa3_C`, and FA4's `cute/interface.py`; their availability per capability is then decided by
the wheel's `flash_attn_interface`), the GPU itself (its capability is given), and the settings
the check leaves at vLLM's defaults (no MLA, no sparse attention, no multimodal prefix, no
per-head quantization scales, no KV connector, no context parallelism, block size unset).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import attrs
from packaging.version import Version

from specreg import facts
from specreg.errors import clipped
from specreg.vllm.fact_files import read_all

#: GPUs by the name users give, and their compute capability (NVIDIA's CUDA GPU table)
GPUS: dict[str, tuple[int, int]] = {
    "V100": (7, 0), "T4": (7, 5), "A100": (8, 0), "A30": (8, 0), "A10": (8, 6), "A10G": (8, 6), "A40": (8, 6),
    "RTX 3090": (8, 6), "RTX A6000": (8, 6), "L4": (8, 9), "L40": (8, 9), "L40S": (8, 9), "RTX 4090": (8, 9),
    "RTX 6000 Ada": (8, 9), "H100": (9, 0), "H200": (9, 0), "H20": (9, 0), "GH200": (9, 0), "B200": (10, 0),
    "GB200": (10, 0), "B300": (10, 3), "GB300": (10, 3), "RTX 5090": (12, 0), "RTX PRO 6000": (12, 0),
    "GB10": (12, 1), "DGX Spark": (12, 1),
}
DTYPES = ("bfloat16", "float16", "float32")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
HEAD_STEP, HEAD_MAX = 8, 576  # the head sizes the facts were computed for: 8, 16, ..., 576


class AttentionError(ValueError):
    """A GPU, dtype or version the facts do not cover."""


@lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    return read_all("attention_backends")


def _overlaid(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {k: _overlaid(base.get(k), over[k]) if k in over else v for k, v in base.items()} | {
            k: v for k, v in over.items() if k not in base}
    return over


@lru_cache(maxsize=None)
def _merged(version_key: str, cubins: bool) -> dict[str, Any]:
    """One version's facts without FlashInfer's TRTLLM cubins, or with them (the `cubins` overlay:
    the answers that change when vLLM finds them, `has_nvidia_artifactory`)."""
    facts = _facts()[version_key]
    return _overlaid(facts, facts.get("cubins") or {}) if cubins else facts


def cubins_by_default(version: str) -> bool:
    """Whether every install of `version` has FlashInfer's TRTLLM cubins: 0.24-0.25 depend on
    flashinfer-cubin; later wheels find them only where that package is installed or NVIDIA's
    artifactory is reachable at startup."""
    return bool(_facts()[_version_key(version)].get("cubins_required"))


def versions() -> list[str]:
    return sorted(_facts(), key=lambda v: tuple(int(x) for x in v.split(".")))


def capability(gpu: str) -> tuple[int, int]:
    """'H100', 'rtx 4090', 'sm_90', 'sm90', 'sm_121' or '9.0' -> (9, 0)."""
    text = gpu.strip()
    by_name = {re.sub(r"[\s_-]+", "", k).lower(): v for k, v in GPUS.items()}
    key = re.sub(r"[\s_-]+", "", text).lower()
    if key in by_name:
        return by_name[key]
    m = re.fullmatch(r"(?:sm_?)?(\d{2,3})", text.lower()) or re.fullmatch(r"(\d+)\.(\d)", text)
    if m and len(m.groups()) == 1:
        digits = m.group(1)
        return int(digits[:-1]), int(digits[-1])
    if m:
        return int(m.group(1)), int(m.group(2))
    raise AttentionError(f"unknown GPU {clipped(gpu)}: give one of {', '.join(GPUS)}, or its compute capability "
                         "as sm_XY (sm_90) or X.Y")


def gpu_label(gpu: str) -> str:
    major, minor = capability(gpu)
    sm = f"sm_{major}{minor}"
    return sm if re.sub(r"[\s_.-]+", "", gpu).lower() in (sm.replace("_", ""), f"{major}{minor}") else f"{gpu} ({sm})"


@attrs.frozen
class Case:
    """What the selector is asked for one group of layers."""

    head_size: int
    dtype: str = "bfloat16"
    kv_cache_dtype: str = "auto"
    non_causal: bool = False
    sliding: bool = False
    sink: bool = False


@attrs.frozen
class Selection:
    """The backends vLLM finds valid, in its priority order, and every other's reasons."""

    version: str
    capability: tuple[int, int]
    case: Case
    valid: tuple[str, ...]
    refused: dict[str, tuple[str, ...]]
    cubins: bool = False  # whether FlashInfer's TRTLLM cubins were taken as found

    @property
    def chosen(self) -> str | None:
        return self.valid[0] if self.valid else None


def _in(head: int, ranges: list[list[int]]) -> bool:
    return any(lo <= head <= hi for lo, hi in ranges)


def _version_key(version: str) -> str:
    major_minor = ".".join(str(version).split(".")[:2])
    if major_minor not in _facts():
        raise AttentionError(f"no attention-backend facts for vLLM {version}: computed for {', '.join(versions())}")
    return major_minor


def reasons(version: str, cap: tuple[int, int], backend: str, case: Case,
            cubins: bool | None = None) -> tuple[str, ...] | None:
    """`validate_configuration`'s reasons for one backend (empty: valid); None: not in the version.
    cubins: whether FlashInfer's TRTLLM cubins are found (None: `cubins_by_default`)."""
    key = _version_key(version)
    every = _merged(key, cubins_by_default(key) if cubins is None else cubins)
    facts = every.get(f"{cap[0]}.{cap[1]}")
    if facts is None:
        raise AttentionError(f"no facts for compute capability {cap[0]}.{cap[1]}")
    b = facts["backends"].get(backend)
    if b is None:
        return None
    if "unavailable" in b:
        return (b["unavailable"],)
    out = []
    if not _in(case.head_size, b["heads"]):
        out.append("head_size not supported")
    if case.dtype not in b["dtypes"]:
        out.append("dtype not supported")
    if case.kv_cache_dtype not in b["kv"]:
        out.append("kv_cache_dtype not supported")
    if not b["block_size_none"]:
        out.append("block_size not supported")
    if b["mla"]:
        out.append("non-MLA not supported")
    if case.sink and not b["sink"]:
        out.append("attention sinks not supported")
    if b["sparse"]:
        out.append("non-sparse not supported")
    if not b["capability"]:
        out.append("compute capability not supported")
    if not b["decoder"]:
        out.append("attention type decoder not supported")
    if case.sliding and not b["sliding"] and every["validates"]["sliding"]:
        out.append("sliding window not supported")
    if case.non_causal and not b["non_causal"]:
        out.append("non-causal attention not supported")
    key = f"{case.dtype}|{case.kv_cache_dtype}|{int(case.sink)}"
    for why, by in b["combination"].items():
        if key in by and _in(case.head_size, by[key]):
            out.append(why)
    return tuple(out)


def select(version: str, cap: tuple[int, int], case: Case, cubins: bool | None = None) -> Selection:
    """What `get_valid_backends` answers for `case` on a GPU of capability `cap` in vLLM `version`
    (cubins: as for `reasons`)."""
    if case.head_size % HEAD_STEP or not HEAD_STEP <= case.head_size <= HEAD_MAX:
        raise AttentionError(f"head size {case.head_size}: the facts cover multiples of {HEAD_STEP} up to {HEAD_MAX}")
    if case.dtype not in DTYPES:
        raise AttentionError(f"dtype {case.dtype!r}: one of {', '.join(DTYPES)}")
    if case.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise AttentionError(f"kv_cache_dtype {case.kv_cache_dtype!r}: the facts cover {', '.join(KV_CACHE_DTYPES)}")
    key = _version_key(version)
    cubins = cubins_by_default(key) if cubins is None else cubins
    facts = _merged(key, cubins).get(f"{cap[0]}.{cap[1]}")
    if facts is None:
        raise AttentionError(f"compute capability {cap[0]}.{cap[1]}: the facts cover "
                             f"{', '.join(sorted(k for k in _facts()[key] if k[0].isdigit()))}")
    order = facts["priorities"][f"{'non-causal' if case.non_causal else 'causal'}|{case.kv_cache_dtype}"]
    valid, refused = [], {}
    for backend in order:
        why = reasons(key, cap, backend, case, cubins)
        if why is None:
            continue
        if why:
            refused[backend] = why
        else:
            valid.append(backend)
    return Selection(key, cap, case, tuple(valid), refused, cubins)


# -- a draft on a GPU --------------------------------------------------------------------------------

@attrs.frozen
class Layers:
    """One group of layers the selector is asked about: what they are, and what vLLM answers."""

    label: str
    selection: Selection
    given: tuple[str, ...] | None = None  # the forced backend's reasons (empty: valid)
    #: the answer with FlashInfer's TRTLLM cubins the other way, where its valid backends differ
    other: Selection | None = None


def cubins_words(found: bool) -> str:
    return ("where FlashInfer's TRTLLM cubins are found (flashinfer-cubin installed, or NVIDIA's artifactory "
            "reachable at startup)" if found else "where FlashInfer's TRTLLM cubins are not found")


@attrs.frozen
class GpuReport:
    gpu: str
    capability: tuple[int, int]
    version: str
    dtype: str
    dtype_from: str
    kv_cache_dtype: str
    attention_backend: str | None
    draft: tuple[Layers, ...]
    verifier: tuple[Layers, ...]  # empty: the verifier's config was not read

    def to_dict(self) -> dict[str, Any]:
        def answer(s: Selection) -> dict[str, Any]:
            return {"chosen": s.chosen, "valid": list(s.valid), "refused": {k: list(v) for k, v in s.refused.items()},
                    "cubins": s.cubins}

        def layers(g: Layers) -> dict[str, Any]:
            return {"layers": g.label, "case": attrs.asdict(g.selection.case), **answer(g.selection),
                    "given": None if g.given is None else list(g.given),
                    "other": None if g.other is None else answer(g.other)}
        return {"gpu": self.gpu, "capability": f"sm_{self.capability[0]}{self.capability[1]}", "vllm": self.version,
                "dtype": self.dtype, "dtype_from": self.dtype_from, "kv_cache_dtype": self.kv_cache_dtype,
                "attention_backend": self.attention_backend, "draft": [layers(g) for g in self.draft],
                "verifier": [layers(v) for v in self.verifier]}


def head_size(config: dict[str, Any]) -> int | None:
    """vLLM's head size for a decoder config: head_dim, else hidden_size // num_attention_heads."""
    head = config.get("head_dim")
    if isinstance(head, int) and not isinstance(head, bool) and head > 0:
        return head
    hidden, heads = config.get("hidden_size"), config.get("num_attention_heads")
    if isinstance(hidden, int) and isinstance(heads, int) and heads > 0:
        return hidden // heads
    return None


def config_dtype(*configs: dict[str, Any] | None) -> str | None:
    """The first `dtype` (transformers 5) or `torch_dtype` (4) string the configs state."""
    for config in configs:
        for key in ("dtype", "torch_dtype"):
            value = (config or {}).get(key)
            if isinstance(value, str):
                return value
    return None


def _why(selection: Selection) -> str:
    return "; ".join(f"{b}: {', '.join(r)}" for b, r in selection.refused.items())


def _describe(case: Case) -> str:
    bits = [f"head size {case.head_size}", "non-causal" if case.non_causal else "causal"]
    if case.sliding:
        bits.append("sliding window")
    if case.sink:
        bits.append("attention sinks")
    bits.append(f"{case.dtype}, KV cache {case.kv_cache_dtype}")
    return ", ".join(bits)


#: draft architecture -> the first vLLM whose class builds attention sinks when the draft config asks:
#: qwen3_dflash's decoder layer reads dflash_config["attention_sink_bias"], else the top-level
#: add_swa_attention_sink_bias, and gives every layer's Attention the sinks, whose selector then asks
#: has_sink (DFlash2 and DSpark build their layers with DFlashQwen3Model). Held to each wheel by the
#: conformance tier (tests/conformance/test_deployment_rules.py).
SINK_ARCHITECTURES = {"DFlashDraftModel": str(facts.since("sinks_dflash_draft_model")),
                      "DFlash2DraftModel": str(facts.since("sinks_dflash2_draft_model")),
                      "Qwen3DSparkModel": str(facts.since("sinks_qwen3_dspark_model"))}


#: verifier architectures whose vLLM class decides its layers' sliding window and sinks itself, not
#: from layer_types: gpt_oss.py's attention makes the sinks on every layer and gives even layers
#: config.sliding_window (held to each wheel by tests/conformance/test_deployment_rules.py)
VERIFIER_CLASSES = {"GptOssForCausalLM": {"sliding": "even", "sinks": True}}


@attrs.frozen
class VerifierGroup:
    """One kind of verifier layer, as the selector is asked about it."""

    layers: tuple[int, ...]
    sliding: bool
    sink: bool
    source: str  # what says so

    def label(self) -> str:
        kind = ("sliding" if self.sliding else "full") + (", sinks" if self.sink else "") + ", causal"
        shown = ", ".join(map(str, self.layers[:4])) + (f", ... ({len(self.layers)})" if len(self.layers) > 4 else "")
        return f"verifier layers {shown} ({kind}; {self.source})"


def verifier_groups(config: dict[str, Any], architectures: tuple[str, ...]) -> tuple[VerifierGroup, ...]:
    """The verifier's layers by sliding window and sinks: from its vLLM class where `VERIFIER_CLASSES`
    knows it, else from its config's layer_types (sliding_attention), else all full."""
    n = config.get("num_hidden_layers")
    if not isinstance(n, int) or isinstance(n, bool) or not 0 < n <= 100_000:
        return ()
    known = next((VERIFIER_CLASSES[a] for a in architectures if a in VERIFIER_CLASSES), None)
    if known is not None:
        window = config.get("sliding_window")
        sliding = {i for i in range(n) if i % 2 == 0} if known["sliding"] == "even" and window else set()
        sink, source = known["sinks"], f"vLLM's {next(a for a in architectures if a in VERIFIER_CLASSES)}"
        full = tuple(i for i in range(n) if i not in sliding)
    elif isinstance(types := config.get("layer_types"), list):
        # only attention layers ask the selector (a hybrid's linear-attention or Mamba layers do not)
        sliding = {i for i, t in enumerate(types[:n]) if t == "sliding_attention"}
        full = tuple(i for i, t in enumerate(types[:n]) if t == "full_attention")
        others = min(n, len(types)) - len(sliding) - len(full)
        sink, source = False, "layer_types" + (f"; {others} other layers not attention" if others else "")
    else:
        sliding, full, sink, source = set(), tuple(range(n)), False, "no layer_types: all full"
    groups = [VerifierGroup(tuple(sorted(sliding)), True, sink, source)] if sliding else []
    if full:
        groups.append(VerifierGroup(full, False, sink, source))
    return tuple(groups)


def draft_sinks(version: str, draft_config: dict[str, Any]) -> bool:
    """Whether vLLM `version` builds the draft's layers with attention sinks."""
    archs = draft_config.get("architectures") or [None]
    since = SINK_ARCHITECTURES.get(archs[0]) if isinstance(archs[0], str) else None
    if since is None or Version(version) < Version(since):
        return False
    dflash = draft_config.get("dflash_config")
    asked = (dflash or {}).get("attention_sink_bias") if isinstance(dflash, dict) else None
    if asked is None:
        asked = draft_config.get("add_swa_attention_sink_bias", False)
    return bool(asked)


def gpu_check(spec: Any, gpu: str, *, kv_cache_dtype: str = "auto", dtype: str | None = None,
              attention_backend: str | None = None, verifier_head_size: int | None = None,
              verifier_dtype: str | None = None,
              verifier_layers: tuple[VerifierGroup, ...] = ()) -> tuple[GpuReport, list[Any]]:
    """The attention backends vLLM `spec.vllm_version` picks for the draft's layers (and the verifier's,
    when its head size is known) on `gpu`, and the findings: no backend, a refused forced backend, or
    a draft whose best backend differs from the verifier's.

    vLLM 0.24-0.33's drafter (`_create_draft_vllm_config`, v1/spec_decode/llm_base_proposer.py)
    never inherits the server's --attention-backend: it selects its own unless
    `speculative_config.attention_backend` is set (`attention_backend` here), and it inherits the
    server's --kv-cache-dtype unless `speculative_config.kv_cache_dtype` is set. The draft runs in the
    verifier's dtype (SpeculativeConfig builds its ModelConfig with the target's). DFlash drafts set
    `use_non_causal` for the whole draft when a layer is non-causal (`not dflash_causal`)."""
    from specreg.normalization.speculator import Finding

    cap = capability(gpu)
    version = _version_key(str(spec.vllm_version))
    label = gpu_label(gpu)
    draft_config = spec.draft_config_dict()
    head = head_size(draft_config)
    if head is None:
        raise AttentionError("the draft config gives neither head_dim nor hidden_size and num_attention_heads")
    dtype_from = "--dtype"
    if dtype is None:
        for where, stated in (("the verifier's config", verifier_dtype), ("the draft's config",
                                                                           config_dtype(draft_config))):
            if stated in ("bfloat16", "float16"):
                dtype, dtype_from = stated, where
                break
        else:
            dtype, dtype_from = "bfloat16", "assumed (no config states bfloat16 or float16: give --dtype)"
    non_causal = any(not a.causal for a in spec.attention)
    sinks = draft_sinks(version, draft_config)
    kinds = sorted({a.kind for a in spec.attention}) or ["full"]
    groups = []
    for kind in kinds:
        layers = [a.layer for a in spec.attention if a.kind == kind] or [0]
        case = Case(head_size=head, dtype=dtype, kv_cache_dtype=kv_cache_dtype, non_causal=non_causal,
                    sliding=kind == "sliding", sink=sinks)
        groups.append(_layers(f"draft layers {', '.join(map(str, layers))} ({kind})", version, cap, case,
                              attention_backend))
    found = []
    for g in groups:
        s = g.selection
        if attention_backend is not None:
            why = g.given
            if why is None:
                raise AttentionError(f"vLLM {version} has no attention backend {attention_backend!r} in its CUDA "
                                     f"priorities: {', '.join(sorted(set(s.valid) | set(s.refused)))}")
            if why:
                fix = (f"give the draft one vLLM finds valid ({' or '.join(s.valid)}) as speculative_config's "
                       f"attention_backend, or none (vLLM then picks {s.chosen})" if s.valid
                       else "no backend serves these layers on this GPU (see no-attention-backend)")
                found.append(Finding.of(
                    "attention-backend-refused",
                    f"vLLM {version} refuses {attention_backend} for the {g.label} on {label} ({_describe(s.case)}): "
                    f"{', '.join(why)}", "$.speculative_config.attention_backend", fix=fix))
            continue
        if not s.valid:
            fix = _no_backend_fix(version, cap, s.case)
            if g.other is not None and g.other.valid:
                fix = f"{g.other.chosen} serves them {cubins_words(g.other.cubins)}; or {fix}"
            found.append(Finding.of(
                "no-attention-backend",
                f"no attention backend of vLLM {version} serves the {g.label} on {label} ({_describe(s.case)}): "
                f"{_why(s)}", None, fix=fix))
    verifier: tuple[Layers, ...] = ()
    vhead = verifier_head_size
    if vhead is not None and vhead % HEAD_STEP == 0 and HEAD_STEP <= vhead <= HEAD_MAX:
        kinds_of = verifier_layers or (VerifierGroup((), False, False, "its config's head size"),)
        verifier = tuple(_layers(v.label() if v.layers else "verifier layers (full, causal)", version, cap,
                                 Case(head_size=vhead, dtype=dtype, kv_cache_dtype=kv_cache_dtype, sliding=v.sliding,
                                      sink=v.sink), None) for v in kinds_of)
    best = [g.selection.chosen for g in groups]
    theirs = {v.selection.chosen for v in verifier}
    if attention_backend is None and all(best):
        if verifier and None not in theirs and set(best) != theirs:
            pin = (f"speculative_config's attention_backend = {best[0]} pins it" if len(set(best)) == 1
                   else "the draft's layer groups get different backends")
            found.append(Finding.of(
                "draft-attention-backend",
                f"on {label}, vLLM {version} gives the verifier's layers {', '.join(sorted(theirs))} and the draft's "
                f"{', '.join(sorted(set(best)))}: the drafter selects its own backend ({pin}; vLLM's "
                "--attention-backend does not reach the draft)", None))
        else:
            found.append(Finding.of(
                "attention-backend",
                f"on {label}, vLLM {version} picks {', '.join(sorted(set(best)))} for the draft's layers"
                + (f" (refused: {_why(groups[0].selection)})" if groups[0].selection.refused else ""), None))
    report = GpuReport(gpu, cap, version, dtype, dtype_from, kv_cache_dtype, attention_backend, tuple(groups),
                       verifier)
    return report, found


def _layers(label: str, version: str, cap: tuple[int, int], case: Case, backend: str | None) -> Layers:
    s = select(version, cap, case)
    other = select(version, cap, case, cubins=not s.cubins)
    return Layers(label, s, None if backend is None else reasons(version, cap, backend, case),
                  other if other.valid != s.valid else None)


def _no_backend_fix(version: str, cap: tuple[int, int], case: Case) -> str:
    tries = []
    if case.kv_cache_dtype != "auto" and select(version, cap, attrs.evolve(case, kv_cache_dtype="auto")).valid:
        if Version(version) >= Version(DRAFT_KV_CACHE_DTYPE_SINCE):
            tries.append("give the draft its own KV cache dtype, speculative_config's kv_cache_dtype = auto (the "
                         "draft inherits the server's --kv-cache-dtype otherwise)")
        else:
            tries.append(f"serve with --kv-cache-dtype auto (vLLM {version}'s draft always has the server's; "
                         f"vLLM {DRAFT_KV_CACHE_DTYPE_SINCE}+ takes speculative_config's kv_cache_dtype)")
    if case.dtype == "float32":
        for d in ("bfloat16", "float16"):
            if select(version, cap, attrs.evolve(case, dtype=d)).valid:
                tries.append(f"--dtype {d}")
                break
    gpus = [name for name, c in GPUS.items() if c != cap and f"{c[0]}.{c[1]}" in _facts()[version]
            and select(version, c, case).valid]
    if gpus:
        tries.append(f"a GPU vLLM {version} serves these layers on: {', '.join(gpus)}")
    return "; or ".join(tries) if tries else f"no GPU, KV cache dtype or backend of vLLM {version} serves these layers"


#: the GPUs of the table in docs/semantics.md, one per capability that differs
TABLE_GPUS = ("A100", "L40S", "H100", "B200", "RTX 5090", "GB10")


def table_markdown() -> str:
    """docs/semantics.md's table: the backend each version picks for a non-causal draft (DFlash) and
    for a causal one (Eagle-3), by head size, on one GPU per capability (bfloat16; KV cache auto and
    fp8); versions that answer alike share a row. A test holds the doc to this function."""
    head = "| vLLM | layers | head | KV cache | " + " | ".join(f"{g} (sm_{GPUS[g][0]}{GPUS[g][1]})"
                                                             for g in TABLE_GPUS) + " |"
    keys = [(non_causal, size, kv) for non_causal in (True, False) for size in (128, 256, 512) for kv in ("auto", "fp8")]

    def answers(version: str) -> list[list[str]]:
        return [[select(version, GPUS[g], Case(head_size=size, kv_cache_dtype=kv, non_causal=nc)).chosen or "**none**"
                 for g in TABLE_GPUS] for nc, size, kv in keys]

    runs: list[tuple[list[str], list[list[str]]]] = []
    for version in versions():
        got = answers(version)
        if runs and runs[-1][1] == got:
            runs[-1][0].append(version)
        else:
            runs.append(([version], got))
    rows = [head, "|" + "---|" * (4 + len(TABLE_GPUS))]
    for vs, got in runs:
        label = vs[0] if len(vs) == 1 else f"{vs[0]}-{vs[-1]}"
        for (nc, size, kv), cells in zip(keys, got):
            rows.append(f"| {label} | {'non-causal' if nc else 'causal'} | {size} | {kv} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


#: from this version the drafter takes speculative_config.kv_cache_dtype (`_create_draft_vllm_config`);
#: before, it always has the server's --kv-cache-dtype
DRAFT_KV_CACHE_DTYPE_SINCE = str(facts.since("draft_kv_cache_dtype"))

#: from this version the V2 model runner's Eagle-family drafter loads with
#: `SpeculativeConfig.apply_draft_overrides` (v1/worker/gpu/spec_decode/eagle/utils.py), which keeps
#: the server's --attention-backend unless speculative_config.attention_backend is set; the V1
#: drafter and the V2 DFlash drafter select their own
V2_EAGLE_INHERITS_BACKEND_SINCE = str(facts.since("v2_eagle_inherits_backend"))


def inherits_server_backend(version: str, method: str | None, v2_runner: bool) -> bool:
    from packaging.version import Version

    return (v2_runner and method in ("eagle", "eagle3", "mtp")
            and Version(_version_key(version)) >= Version(V2_EAGLE_INHERITS_BACKEND_SINCE))


def serve_fit(spec: Any, gpu: str, *, server_kv_cache_dtype: str | None, server_dtype: str | None,
              server_backend: str | None, v2_runner: bool) -> tuple[dict[str, str], list[str], list[Any]]:
    """What `serve --gpu` writes into speculative_config for the draft to start on `gpu`, given the
    server's flags: (keys to write, notes, error findings left). The draft inherits the server's
    --kv-cache-dtype; where no backend serves it with that but one does with "auto", the draft gets
    its own (`kv_cache_dtype: auto`). Where the draft inherits the server's --attention-backend
    (`inherits_server_backend`) and vLLM refuses it for the draft, the draft gets the backend vLLM
    would pick for it."""
    kv = (server_kv_cache_dtype or "auto").lower()
    dtype = server_dtype if server_dtype in DTYPES else None
    written: dict[str, str] = {}
    notes: list[str] = []
    report, found = gpu_check(spec, gpu, kv_cache_dtype=kv, dtype=dtype)
    from packaging.version import Version

    own_kv = Version(report.version) >= Version(DRAFT_KV_CACHE_DTYPE_SINCE)
    if any(f.code == "no-attention-backend" for f in found) and kv != "auto" and own_kv:
        again, more = gpu_check(spec, gpu, kv_cache_dtype="auto", dtype=dtype)
        if not any(f.code == "no-attention-backend" for f in more):
            written["kv_cache_dtype"] = "auto"
            notes.append(f"no attention backend serves the draft's layers with the server's KV cache {kv} on "
                         f"{gpu_label(gpu)}: the draft gets its own, kv_cache_dtype auto")
            report, found = again, more
    errors = [f for f in found if f.severity == "error"]
    if errors:
        return written, notes, errors
    chosen = [g.selection.chosen for g in report.draft]
    if server_backend and inherits_server_backend(report.version, spec.method, v2_runner):
        refused = [g for g in report.draft if reasons(report.version, report.capability, server_backend.upper(),
                                                      g.selection.case)]
        if refused and len(set(chosen)) == 1:
            written["attention_backend"] = chosen[0]
            notes.append(f"vLLM {report.version}'s V2 drafter keeps the server's --attention-backend "
                         f"{server_backend}, which it refuses for the draft's layers on {gpu_label(gpu)}: the draft "
                         f"gets {chosen[0]}")
    if "attention_backend" not in written:
        notes.append(f"vLLM {report.version} picks {', '.join(sorted(set(chosen)))} for the draft's layers on "
                     f"{gpu_label(gpu)}")
    return written, notes, []
