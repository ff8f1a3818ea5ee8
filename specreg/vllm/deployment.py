"""Deployment facts the draft's and the verifier's configs decide, per vLLM version (`check`).

Each rule names the wheel code that decides it; the conformance tier reads that code in every wheel
0.26-0.33, and 0.20-0.25 where the rule is older (tests/conformance/test_deployment_rules.py), and
fails when a table here disagrees.

- **Quantization.** Every draft class vLLM serves speculators drafts with (llama_eagle3,
  qwen3_eagle3, deepseek_eagle3, qwen3_dflash, and DFlash2 / DSpark through them) builds its layers
  with `get_draft_quant_config(vllm_config)` (model_executor/models/utils.py): the draft's own
  `quantization_config`, never the verifier's. A quantized verifier does not make the draft
  quantized, and a quantized draft is loaded with its own scheme.
- **dtype.** `SpeculativeConfig` builds the draft's ModelConfig with `dtype=self.target_model_config.dtype`:
  the draft runs in the verifier's dtype, whatever dtype its weights were saved in.
- **max_position_embeddings.** The draft's rotary cache is sized by its `max_position_embeddings`
  while the proposer feeds it positions up to the server's max_model_len (vLLM #48894).
  `SpeculativeConfig._maybe_override_draft_max_position_embeddings` raises it to max_model_len:
  not in 0.26; for methods eagle and eagle3 from 0.27; in vllm/config/speculative.py from 0.33 for
  every method but draft_model, and only when all its RoPE types just size a cache
  (`_CACHE_ONLY_ROPE_TYPES`), else vLLM limits max_model_len to the draft's.
- **Quantization config names.** The draft's layers run under the verifier's layer numbers: the draft
  classes build layer `i` with the prefix `layers.{i + start_layer_id}`, start_layer_id being the
  verifier's `num_hidden_layers`, while the weights still load by the checkpoint's own index. A
  quantization config that names draft layers by index (`layers.0.mlp.down_proj` in an ignore list)
  then names modules that do not exist at run time, and the modules it meant get another
  quantization than the checkpoint's. What each class renames (`QUANT_LAYER_NAMES`): Eagle-3
  (llama_eagle3, qwen3_eagle3) nothing; qwen3_dflash (DFlash, DFlash2 and DSpark build their layers
  there) a ModelOpt config's exclude_modules from 0.31 (`_add_global_draft_layer_exclusions`) and
  every name of a ModelOpt config from 0.33 (vllm/model_executor/models/utils.py
  `map_draft_quant_config`). The same holds for the draft's `fc` (`MODEL_MODULES`): the draft's model
  is built under the prefix `model`, so the checkpoint's `fc` runs as `model.fc`. A compressed-tensors ignore list, which matches whole names
  (or `re:` patterns), naming `fc` leaves it quantized: shown on the engine, 0 of 66 tokens accepted,
  18 of 18 with `model.fc`. ModelOpt's exclude_modules also match by substring in every known wheel
  (`is_layer_excluded`), so `fc` there excludes `model.fc`.
- **Hybrid KV-cache manager.** A verifier with chunked local attention (`attention_chunk_size`,
  Llama 4) and a drafter of `SpeculativeConfig.use_eagle()`'s methods: `VllmConfig.__post_init__`
  turns the hybrid KV-cache manager off even where VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1
  would keep it, so the chunked layers keep KV for the whole sequence
  (`unify_hybrid_kv_cache_specs`), and --enable-hybrid-kv-cache-manager is refused at startup.
- **Quantization on a GPU.** `VllmConfig._get_quantization_config` refuses a method below its class's
  `get_min_capability()` or outside its `get_supported_act_dtypes()` (facts/<X.Y>/quantization_methods.json,
  read from each wheel from 0.24).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from packaging.version import Version

from specreg.errors import with_article
from specreg import facts
from specreg.vllm.fact_files import read_all

#: the first row of a dated table: before any release specreg models
ALWAYS = Version("0")

#: (first version, methods whose max_position_embeddings vLLM raises to max_model_len, RoPE types
#: it raises them for (None: any)); speculative.py's `_maybe_override_draft_max_position_embeddings`
#: and its call site
RAISES_MAX_POSITIONS = (
    (ALWAYS, frozenset(), None),  # no raising before (read from every older known release)
    (facts.since("raises_draft_positions_eagle"), frozenset({"eagle", "eagle3"}), None),
    (
        facts.since("raises_draft_positions_cache_only_rope"),
        frozenset({"eagle", "eagle3", "dflash", "dspark", "mtp"}),
        frozenset({"default", "linear", "llama3", "ntk", "proportional"}),
    ),
)


#: The vLLM module that builds each served draft architecture's layers (registry.py's speculative
#: models; DFlash2 and DSpark subclass qwen3_dflash's model, which builds the layers)
DRAFT_LAYER_MODULES = {
    "Eagle3LlamaForCausalLM": "llama_eagle3",
    "LlamaForCausalLMEagle3": "llama_eagle3",
    "Eagle3Qwen3ForCausalLM": "qwen3_eagle3",
    "PeagleQwen3ForCausalLM": "qwen3_eagle3",
    "DFlashDraftModel": "qwen3_dflash",
    "DFlash2DraftModel": "qwen3_dflash",
    "Qwen3DSparkModel": "qwen3_dflash",
}

#: module -> ((first version, what of the draft's quantization config it renames to the run-time
#: layer names), ...): "nothing"; "modelopt exclusions" (exclude_modules of a ModelOpt config);
#: "modelopt" (every name of a ModelOpt config, and any config's exclude_modules)
QUANT_LAYER_NAMES = {
    "llama_eagle3": ((ALWAYS, "nothing"),),
    "qwen3_eagle3": ((ALWAYS, "nothing"),),
    "qwen3_dflash": (
        (ALWAYS, "nothing"),
        (facts.since("dflash_renames_modelopt_exclusions"), "modelopt exclusions"),
        (facts.since("dflash_renames_modelopt_names"), "modelopt"),
    ),
}

#: a name of a draft layer by its index in the draft: `layers.N` or `model.layers.N`, bare or after a
#: wildcard (not `vision.layers.N`, which is no decoder layer of the draft)
LOCAL_LAYER = re.compile(r"(?<![A-Za-z0-9_.])(?:model\.)?layers\.(\d+)")
#: the modules other than its layers the draft's model builds with the quantization config, under the
#: prefix `model` (`prefix=maybe_prefix(prefix, "fc")` in the classes DRAFT_LAYER_MODULES names; held
#: to each wheel by the conformance tier); named from the start of a string, as the checkpoint names them
MODEL_MODULES = ("fc",)
MODEL_MODULE = re.compile(r"^(?:%s)(?=\.|$)" % "|".join(MODEL_MODULES))
#: what qwen3_dflash._add_global_draft_layer_exclusions (0.31-0.32) renames: `layers.N` not after a dot
EXCLUSION_RENAMED = re.compile(r"(?<![A-Za-z0-9_.])layers\.(\d+)")
#: what vllm/model_executor/models/utils.py map_draft_quant_config (0.33) renames in a ModelOpt config: a name starting with
#: `layers.N` or `model.layers.N`, after an optional wildcard
MODELOPT_RENAMED = re.compile(r"^(?:model\.)?\*?layers\.\d+(?=\.|\*|$)")

#: (first version, the methods of SpeculativeConfig.use_eagle()), which turn the hybrid KV-cache
#: manager off for a verifier with chunked local attention (VllmConfig.__post_init__)
EAGLE_METHODS = (
    (ALWAYS, frozenset({"eagle", "eagle3", "mtp", "dflash"})),
    (facts.since("use_eagle_includes_dspark"), frozenset({"eagle", "eagle3", "mtp", "dflash", "dspark"})),
)


def minor_release(version: str) -> str:
    """0.32.1 -> "0.32": the release the rules are kept per."""
    return ".".join(str(version).split(".")[:2])


def _at(version: str, rows: tuple) -> Any:
    v = Version(minor_release(version))
    return [row for row in rows if v >= row[0]][-1][1]


#: what each scope renames, in words
RENAMES = {
    "nothing": "no name of the draft's quantization config",
    "modelopt exclusions": "only the bare layers.N names of a ModelOpt config's exclude_modules (ignore)",
    "modelopt": "only a ModelOpt config's names",
}


def _renamed(scope: str, method: str, path: tuple, name: str) -> bool:
    """Whether vLLM renames `name`, at `path` of a `method` quantization config, to the run-time layer
    names (only ModelOpt configs have the exclude_modules vLLM renames; no other method's lists are)."""
    if not method.startswith("modelopt") or scope == "nothing":
        return False
    if scope == "modelopt":
        return MODELOPT_RENAMED.match(name) is not None
    return path[:1] in (("exclude_modules",), ("ignore",)) and all(
        EXCLUSION_RENAMED.match(name, m.start()) for m in LOCAL_LAYER.finditer(name)
    )


def _strings(value: Any, path: tuple = ()) -> list[tuple[tuple, str]]:
    """Every string of a JSON value, keys included, with its path."""
    if isinstance(value, str):
        return [(path, value)]
    out: list[tuple[tuple, str]] = []
    if isinstance(value, dict):
        for k, v in value.items():
            out += [(path + (k,), k)] if isinstance(k, str) else []
            out += _strings(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            out += _strings(v, path + (i,))
    return out


def _json_path(path: tuple) -> str:
    return "$.quantization_config" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def quant_name_findings(spec: Any, *, verifier_layers: int | None) -> list[Any]:
    """An error when the draft's quantization config names draft layers by index and the targeted
    vLLM serves those layers under other names without renaming these (module docstring)."""
    from specreg.normalization.speculator import Finding

    draft = spec.draft_config_dict()
    q = draft.get("quantization_config")
    archs = draft.get("architectures") or [None]
    module = DRAFT_LAYER_MODULES.get(archs[0]) if isinstance(archs[0], str) else None
    if not isinstance(q, dict) or module is None:
        return []
    version = str(spec.vllm_version)
    scope = _at(version, QUANT_LAYER_NAMES[module])
    method = quant_method(draft) or ""
    layers = draft.get("num_hidden_layers")
    local = layers if isinstance(layers, int) and not isinstance(layers, bool) else 1
    whole = method == "compressed-tensors"  # matches whole names (ModelOpt's exclusions match substrings too)
    named = [
        (path, s)
        for path, s in _strings(q)
        if (any(int(m.group(1)) < local for m in LOCAL_LAYER.finditer(s)) or (whole and MODEL_MODULE.match(s)))
        and not _renamed(scope, method, path, s)
    ]
    if not named:
        return []
    offset = f"{verifier_layers}" if verifier_layers else "the verifier's num_hidden_layers"
    path, first = named[0]

    def run_time(m: re.Match) -> str:
        # the module's name as vLLM runs it: model.layers.{i + verifier layers} (a name given from the
        # start gets the `model.` the draft classes' prefix adds; compressed-tensors matches whole names)
        index = int(m.group(1))
        head = m.group(0)[: m.start(1) - m.start(0)]
        if m.start() == 0 and not head.startswith("model."):
            head = "model." + head
        return head + (str(index + verifier_layers) if verifier_layers else f"<{index} + {offset}>")

    example = MODEL_MODULE.sub(lambda m: "model." + m.group(0), LOCAL_LAYER.sub(run_time, first))
    newer = [
        f"{since}+" for since, sc in QUANT_LAYER_NAMES[module] if all(_renamed(sc, method, p, n) for p, n in named)
    ]
    fix = f"name them as vLLM runs them ({first!r} -> {example!r})" + (
        f", or serve with vLLM {newer[0]}, which renames them" if newer else ""
    )
    more = f" and {len(named) - 1} more" if len(named) > 1 else ""
    return [
        Finding.of(
            "draft-quant-layer-names",
            f"the draft's quantization_config names draft modules as the checkpoint does ({first!r}{more}); vLLM "
            f"{version}'s {module} builds draft layer i as model.layers.{{i + {offset}}} and fc as model.fc, and renames "
            f"{RENAMES[scope]}, so these "
            "names match no module and the modules they name get another quantization than the checkpoint's",
            _json_path(path),
            fix=fix,
        )
    ]


@lru_cache(maxsize=1)
def _quantization_methods() -> dict[str, Any]:
    return read_all("quantization_methods")


def served_quant_method(q: dict[str, Any]) -> str | None:
    """The method vLLM loads a quantization config with: its quant_method, lowercased and with
    compressed_tensors spelled compressed-tensors (`_normalize_quantization_config`); for ModelOpt,
    the class its quant_algo selects (the ModelOpt configs' `override_quantization_method`)."""
    method = q.get("quant_method")
    producer = q.get("producer")
    nested = q.get("quantization") if isinstance(q.get("quantization"), dict) else {}
    if (isinstance(producer, dict) and producer.get("name") == "modelopt") or "modelopt_quant_config" in nested:
        method = "modelopt"  # ModelOpt's hf_quant_config.json
    if not isinstance(method, str):
        return None
    method = method.lower().replace("compressed_tensors", "compressed-tensors")
    if method == "modelopt":
        algo = str(q.get("quant_algo") or nested.get("quant_algo") or "").upper()
        for part, name in (("MIXED_PRECISION", "modelopt_mixed"), ("MXFP8", "modelopt_mxfp8"), ("FP4", "modelopt_fp4")):
            if part in algo:
                return name
    return method


def quantization_gpu_findings(
    spec: Any, cap: tuple[int, int], *, dtype: str, gpu: str, verifier_method: str | None
) -> list[Any]:
    """Errors where vLLM refuses the draft's (or the verifier's: `quant_method` of its config)
    quantization method on this GPU or
    in the dtype the draft runs in: `VllmConfig._get_quantization_config` checks the method class's
    get_min_capability() and get_supported_act_dtypes() (facts/<X.Y>/quantization_methods.json, read from each
    wheel by the conformance tier)."""
    from specreg.normalization.speculator import Finding

    version = minor_release(spec.vllm_version)
    table = _quantization_methods().get(version)
    if table is None:
        return []
    found = []
    for who, method, path in (
        ("draft", quant_method(spec.draft_config_dict()), "$.quantization_config"),
        ("verifier", verifier_method, None),
    ):
        facts = table.get(method) if method else None
        if facts is None:
            continue
        have = cap[0] * 10 + cap[1]
        if have < facts["min_capability"]:
            found.append(
                Finding.of(
                    "quantization-gpu",
                    f"vLLM {version} refuses the {who}'s quantization method {method} on {gpu}: \"The quantization method "
                    f"{method} is not supported for the current GPU. Minimum capability: {facts['min_capability']}. Current "
                    f'capability: {have}." (VllmConfig._get_quantization_config)',
                    path,
                    fix=f"a GPU of compute capability {facts['min_capability'] // 10}.{facts['min_capability'] % 10} or "
                    f"newer, or a {who} without {method} quantization",
                )
            )
        elif who == "draft" and dtype not in facts["act_dtypes"]:
            found.append(
                Finding.of(
                    "quantization-gpu",
                    f"vLLM {version} refuses the draft's quantization method {method} in {dtype}, the dtype the draft runs "
                    f"in (the verifier's): it supports {', '.join(facts['act_dtypes'])} (VllmConfig._get_quantization_config)",
                    path,
                    fix=f"serve with --dtype {facts['act_dtypes'][0]}",
                )
            )
    return found


def hybrid_kv_findings(spec: Any, *, verifier_chunk: int | None) -> list[Any]:
    """Info when the draft's method turns the hybrid KV-cache manager off for the verifier (module docstring)."""
    from specreg.normalization.speculator import Finding

    version = str(spec.vllm_version)
    if verifier_chunk is None or spec.method not in _at(version, EAGLE_METHODS):  # vLLM: `is not None`
        return []
    return [
        Finding.of(
            "draft-disables-hybrid-kv",
            f"the verifier has chunked local attention (attention_chunk_size {verifier_chunk}) and {with_article(spec.method)} drafter: "
            f"vLLM {version} turns the hybrid KV-cache manager off (VllmConfig.__post_init__, even with "
            "VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1), so the chunked layers keep KV for the whole sequence, "
            "and --enable-hybrid-kv-cache-manager is refused at startup",
            None,
        )
    ]


def _raises(version: str, method: str | None) -> tuple[bool, frozenset | None]:
    v = Version(minor_release(version))
    methods, ropes = frozenset(), None
    for since, m, r in RAISES_MAX_POSITIONS:
        if v >= since:
            methods, ropes = m, r
    return (method in methods), ropes


def _rope_types(config: dict[str, Any]) -> set[str]:
    found = set()
    for key in ("rope_parameters", "rope_scaling"):
        params = config.get(key)
        if isinstance(params, dict):
            nested = [p for p in params.values() if isinstance(p, dict) and "rope_type" in p]
            for p in nested or [params]:
                found.add(str(p.get("rope_type", p.get("type", "default"))))
    return found or {"default"}


def quant_method(config: dict[str, Any] | None) -> str | None:
    """The method of a config's quantization_config as vLLM names it (`served_quant_method`), or,
    where that names none, the config's own label (quant_algo, else "unnamed"); None: unquantized."""
    q = (config or {}).get("quantization_config")
    if isinstance(q, dict):
        return served_quant_method(q) or str(q.get("quant_algo") or "unnamed")
    return None


def deployment_findings(
    spec: Any,
    *,
    verifier_dtype: str | None,
    verifier_positions: int | None,
    verifier_quantization: str | None,
    max_model_len: int | None,
) -> list[Any]:
    """The findings of the rules in the module docstring for `spec`, what its verifier's config says
    (dtype, max_position_embeddings, quantization_config's method) and the server's --max-model-len."""
    from specreg.normalization.speculator import Finding
    from specreg.sources.decoder import config_dtype

    version = str(spec.vllm_version)
    draft = spec.draft_config_dict()
    found = []
    # quantization: the draft's own, per get_draft_quant_config
    mine, theirs = quant_method(draft), verifier_quantization
    if mine or theirs:
        found.append(
            Finding.of(
                "draft-quantization",
                f"vLLM {version} loads the draft with its own quantization config ({mine or 'none: unquantized'}), not "
                f"the verifier's ({theirs or 'none'}): get_draft_quant_config",
                "$.quantization_config" if mine else None,
            )
        )
    # dtype: the verifier's
    saved = config_dtype(draft)
    served = verifier_dtype
    if isinstance(saved, str) and isinstance(served, str) and saved != served:
        found.append(
            Finding.of(
                "draft-dtype-differs",
                f"the draft was saved in {saved}, the verifier in {served}: vLLM {version} runs the draft in {served} "
                "(SpeculativeConfig gives the draft the target's dtype)",
                "$.transformer_layer_config.dtype",
            )
        )
    # max_position_embeddings against the served length
    positions = draft.get("max_position_embeddings")
    length = max_model_len or verifier_positions
    if isinstance(positions, int) and isinstance(length, int) and positions < length:
        raised, ropes = _raises(version, spec.method)
        types = _rope_types(draft)
        where = "$.transformer_layer_config.max_position_embeddings"
        said = f"--max-model-len {max_model_len}" if max_model_len else f"the verifier's {length} positions"
        if raised and (ropes is None or types <= ropes):
            found.append(
                Finding.of(
                    "draft-positions-raised",
                    f"the draft's max_position_embeddings is {positions}, below {said}: vLLM {version} raises it to "
                    f"{length} for method {spec.method} (_maybe_override_draft_max_position_embeddings)",
                    where,
                )
            )
        elif raised:
            found.append(
                Finding.of(
                    "draft-positions-limit",
                    f"the draft's max_position_embeddings is {positions}, below {said}, and its RoPE ({', '.join(sorted(types))}) "
                    f"is not one vLLM {version} resizes: vLLM limits max_model_len to {positions}",
                    where,
                    fix=f"serve with --max-model-len {positions} or less, or use a draft trained for {length} positions",
                )
            )
        else:
            found.append(
                Finding.of(
                    "draft-positions-short",
                    f"the draft's max_position_embeddings is {positions}, below {said}: vLLM {version} does not raise it for "
                    f"method {spec.method}, and positions past {positions} index out of the draft's rotary cache "
                    "(vLLM #48894)",
                    where,
                    fix=f"serve with --max-model-len {positions} or less, or a vLLM that raises it for {spec.method} "
                    f"({_first_raising(spec.method) or 'none yet'})",
                )
            )
    return found


def _first_raising(method: str | None) -> str | None:
    for since, methods, _ in RAISES_MAX_POSITIONS:
        if method in methods:
            return f"{since}+"
    return None
