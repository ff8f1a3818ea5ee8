"""A draft on a GPU: the attention backend vLLM picks for each group of the draft's layers (and the
verifier's), the findings that follow (no backend, a refused forced backend, a draft whose backend
differs from the verifier's), and what `serve --gpu` writes so the draft starts. The selector itself,
per vLLM version, is specreg.vllm.attention."""

from __future__ import annotations

from typing import Any

import attrs
from packaging.version import Version

from specreg import facts
from specreg.sources.decoder import config_dtype, head_size
from specreg.vllm.attention import (
    DTYPES,
    GPUS,
    HEAD_MAX,
    HEAD_STEP,
    AttentionError,
    Case,
    Selection,
    capability,
    covers,
    cubins_words,
    gpu_label,
    reasons,
    select,
    version_key,
)


@attrs.frozen
class Layers:
    """One group of layers the selector is asked about: what they are, and what vLLM answers."""

    label: str
    selection: Selection
    given: tuple[str, ...] | None = None  # the forced backend's reasons (empty: valid)
    #: the answer with FlashInfer's TRTLLM cubins the other way, where its valid backends differ
    other: Selection | None = None


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
            return {
                "chosen": s.chosen,
                "valid": list(s.valid),
                "refused": {k: list(v) for k, v in s.refused.items()},
                "cubins": s.cubins,
            }

        def layers(g: Layers) -> dict[str, Any]:
            return {
                "layers": g.label,
                "case": attrs.asdict(g.selection.case),
                **answer(g.selection),
                "given": None if g.given is None else list(g.given),
                "other": None if g.other is None else answer(g.other),
            }

        return {
            "gpu": self.gpu,
            "capability": f"sm_{self.capability[0]}{self.capability[1]}",
            "vllm": self.version,
            "dtype": self.dtype,
            "dtype_from": self.dtype_from,
            "kv_cache_dtype": self.kv_cache_dtype,
            "attention_backend": self.attention_backend,
            "draft": [layers(g) for g in self.draft],
            "verifier": [layers(v) for v in self.verifier],
        }


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
SINK_ARCHITECTURES = {
    "DFlashDraftModel": str(facts.since("sinks_dflash_draft_model")),
    "DFlash2DraftModel": str(facts.since("sinks_dflash2_draft_model")),
    "Qwen3DSparkModel": str(facts.since("sinks_qwen3_dspark_model")),
}


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


def gpu_check(
    spec: Any,
    gpu: str,
    *,
    kv_cache_dtype: str = "auto",
    dtype: str | None = None,
    attention_backend: str | None = None,
    verifier_head_size: int | None = None,
    verifier_dtype: str | None = None,
    verifier_layers: tuple[VerifierGroup, ...] = (),
) -> tuple[GpuReport, list[Any]]:
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
    version = version_key(str(spec.vllm_version))
    label = gpu_label(gpu)
    draft_config = spec.draft_config_dict()
    head = head_size(draft_config)
    if head is None:
        raise AttentionError("the draft config gives neither head_dim nor hidden_size and num_attention_heads")
    dtype_from = "--dtype"
    if dtype is None:
        for where, stated in (
            ("the verifier's config", verifier_dtype),
            ("the draft's config", config_dtype(draft_config)),
        ):
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
        case = Case(
            head_size=head,
            dtype=dtype,
            kv_cache_dtype=kv_cache_dtype,
            non_causal=non_causal,
            sliding=kind == "sliding",
            sink=sinks,
        )
        groups.append(
            _layers(f"draft layers {', '.join(map(str, layers))} ({kind})", version, cap, case, attention_backend)
        )
    found = []
    for g in groups:
        s = g.selection
        if attention_backend is not None:
            why = g.given
            if why is None:
                raise AttentionError(
                    f"vLLM {version} has no attention backend {attention_backend!r} in its CUDA "
                    f"priorities: {', '.join(sorted(set(s.valid) | set(s.refused)))}"
                )
            if why:
                fix = (
                    f"give the draft one vLLM finds valid ({' or '.join(s.valid)}) as speculative_config's "
                    f"attention_backend, or none (vLLM then picks {s.chosen})"
                    if s.valid
                    else "no backend serves these layers on this GPU (see no-attention-backend)"
                )
                found.append(
                    Finding.of(
                        "attention-backend-refused",
                        f"vLLM {version} refuses {attention_backend} for the {g.label} on {label} ({_describe(s.case)}): "
                        f"{', '.join(why)}",
                        "$.speculative_config.attention_backend",
                        fix=fix,
                    )
                )
            continue
        if not s.valid:
            fix = _no_backend_fix(version, cap, s.case)
            if g.other is not None and g.other.valid:
                fix = f"{g.other.chosen} serves them {cubins_words(g.other.cubins)}; or {fix}"
            found.append(
                Finding.of(
                    "no-attention-backend",
                    f"no attention backend of vLLM {version} serves the {g.label} on {label} ({_describe(s.case)}): "
                    f"{_why(s)}",
                    None,
                    fix=fix,
                )
            )
    verifier: tuple[Layers, ...] = ()
    vhead = verifier_head_size
    if vhead is not None and vhead % HEAD_STEP == 0 and HEAD_STEP <= vhead <= HEAD_MAX:
        kinds_of = verifier_layers or (VerifierGroup((), False, False, "its config's head size"),)
        verifier = tuple(
            _layers(
                v.label() if v.layers else "verifier layers (full, causal)",
                version,
                cap,
                Case(head_size=vhead, dtype=dtype, kv_cache_dtype=kv_cache_dtype, sliding=v.sliding, sink=v.sink),
                None,
            )
            for v in kinds_of
        )
    best = [g.selection.chosen for g in groups]
    theirs = {v.selection.chosen for v in verifier}
    if attention_backend is None and all(best):
        if verifier and None not in theirs and set(best) != theirs:
            pin = (
                f"speculative_config's attention_backend = {best[0]} pins it"
                if len(set(best)) == 1
                else "the draft's layer groups get different backends"
            )
            found.append(
                Finding.of(
                    "draft-attention-backend",
                    f"on {label}, vLLM {version} gives the verifier's layers {', '.join(sorted(theirs))} and the draft's "
                    f"{', '.join(sorted(set(best)))}: the drafter selects its own backend ({pin}; vLLM's "
                    "--attention-backend does not reach the draft)",
                    None,
                )
            )
        else:
            found.append(
                Finding.of(
                    "attention-backend",
                    f"on {label}, vLLM {version} picks {', '.join(sorted(set(best)))} for the draft's layers"
                    + (f" (refused: {_why(groups[0].selection)})" if groups[0].selection.refused else ""),
                    None,
                )
            )
    report = GpuReport(gpu, cap, version, dtype, dtype_from, kv_cache_dtype, attention_backend, tuple(groups), verifier)
    return report, found


def _layers(label: str, version: str, cap: tuple[int, int], case: Case, backend: str | None) -> Layers:
    s = select(version, cap, case)
    other = select(version, cap, case, cubins=not s.cubins)
    return Layers(
        label,
        s,
        None if backend is None else reasons(version, cap, backend, case),
        other if other.valid != s.valid else None,
    )


def _no_backend_fix(version: str, cap: tuple[int, int], case: Case) -> str:
    tries = []
    if case.kv_cache_dtype != "auto" and select(version, cap, attrs.evolve(case, kv_cache_dtype="auto")).valid:
        if Version(version) >= Version(DRAFT_KV_CACHE_DTYPE_SINCE):
            tries.append(
                "give the draft its own KV cache dtype, speculative_config's kv_cache_dtype = auto (the "
                "draft inherits the server's --kv-cache-dtype otherwise)"
            )
        else:
            tries.append(
                f"serve with --kv-cache-dtype auto (vLLM {version}'s draft always has the server's; "
                f"vLLM {DRAFT_KV_CACHE_DTYPE_SINCE}+ takes speculative_config's kv_cache_dtype)"
            )
    if case.dtype == "float32":
        for d in ("bfloat16", "float16"):
            if select(version, cap, attrs.evolve(case, dtype=d)).valid:
                tries.append(f"--dtype {d}")
                break
    gpus = [name for name, c in GPUS.items() if c != cap and covers(version, c) and select(version, c, case).valid]
    if gpus:
        tries.append(f"a GPU vLLM {version} serves these layers on: {', '.join(gpus)}")
    return "; or ".join(tries) if tries else f"no GPU, KV cache dtype or backend of vLLM {version} serves these layers"


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

    return (
        v2_runner
        and method in ("eagle", "eagle3", "mtp")
        and Version(version_key(version)) >= Version(V2_EAGLE_INHERITS_BACKEND_SINCE)
    )


def serve_fit(
    spec: Any,
    gpu: str,
    *,
    server_kv_cache_dtype: str | None,
    server_dtype: str | None,
    server_backend: str | None,
    v2_runner: bool,
) -> tuple[dict[str, str], list[str], list[Any]]:
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
            notes.append(
                f"no attention backend serves the draft's layers with the server's KV cache {kv} on "
                f"{gpu_label(gpu)}: the draft gets its own, kv_cache_dtype auto"
            )
            report, found = again, more
    errors = [f for f in found if f.severity == "error"]
    if errors:
        return written, notes, errors
    chosen = [g.selection.chosen for g in report.draft]
    if server_backend and inherits_server_backend(report.version, spec.method, v2_runner):
        refused = [
            g
            for g in report.draft
            if reasons(report.version, report.capability, server_backend.upper(), g.selection.case)
        ]
        if refused and len(set(chosen)) == 1:
            written["attention_backend"] = chosen[0]
            notes.append(
                f"vLLM {report.version}'s V2 drafter keeps the server's --attention-backend "
                f"{server_backend}, which it refuses for the draft's layers on {gpu_label(gpu)}: the draft "
                f"gets {chosen[0]}"
            )
    if "attention_backend" not in written:
        notes.append(
            f"vLLM {report.version} picks {', '.join(sorted(set(chosen)))} for the draft's layers on {gpu_label(gpu)}"
        )
    return written, notes, []
