"""Pre-flight checks: a draft against its verifier's config.json and its own weight headers.

Nothing here downloads weights. The verifier is read from its config.json alone (its
`text_config` for multimodal verifiers); the draft's safetensors are read as headers only: from
local files (the first 8 bytes and the JSON header) or, for a Hub repo, through
huggingface_hub's `get_safetensors_metadata`, which sends HTTP range requests.

    spec = specreg.load("org/draft", check_verifier=True, check_weights=True)
    spec.checks.weights.parameters, [f for f in spec.findings if f.code.startswith("weights-")]
"""

from __future__ import annotations

import json
import os
import re
import struct
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from specreg.sources import hub
from specreg.normalization.capabilities import (AUX_CAPTURE_ARCHITECTURES, AUX_CAPTURE_VERSION, RULES, parse_version,
                                                short, since)
from specreg.errors import ConfigError, Problem, SpecregError, show_value
from specreg.normalization.speculator import Finding, thaw
from specreg.vllm.attention import AttentionError, gpu_label
from specreg.vllm.gpu_plan import GpuReport, VerifierGroup, config_dtype, gpu_check, head_size, verifier_groups
from specreg.vllm.deployment import (deployment_findings, hybrid_kv_findings, quant_method, quant_name_findings,
                                     quantization_gpu_findings)
from specreg.vllm.kv_cache import draft_kv_layers, kv_cache_findings, mla_latent, state_layers, verifier_kv_layers
from specreg.vllm.kv_cache import dtype_bytes as kv_dtype_bytes

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: safetensors refuses headers over 100 MB; so does specreg
#: more dimensions than any tensor a draft holds
MAX_DIMS = 16
MAX_HEADER_BYTES = 100_000_000
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


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
    state_layers: tuple[int, ...] = ()  # Mamba-type layers (kv_cache.STATE_LAYER_TYPES in layer_types)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class Tensor:
    name: str
    dtype: str
    shape: tuple[int, ...]

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@attrs.frozen
class WeightsSummary:
    files: tuple[str, ...]
    tensors: int
    parameters: int
    #: dtype -> number of parameters
    dtypes: Mapping[str, int]
    #: header bytes read (local files) or None (Hub: see the server's transfer figures)
    header_bytes: int | None

    def to_dict(self) -> dict[str, Any]:
        return {"files": list(self.files), "tensors": self.tensors, "parameters": self.parameters,
                "dtypes": dict(self.dtypes), "header_bytes": self.header_bytes}


@attrs.frozen
class Checks:
    verifier: VerifierFacts | None = None
    weights: WeightsSummary | None = None
    gpu: GpuReport | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"verifier": self.verifier.to_dict() if self.verifier else None,
                "weights": self.weights.to_dict() if self.weights else None,
                "gpu": self.gpu.to_dict() if self.gpu else None}


# -- reading ----------------------------------------------------------------------------------------

def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _positive(value: Any) -> int | None:
    return value if _int(value) is not None and value > 0 else None


def verifier_facts(verifier: str, *, source: str, hub_only: bool = False) -> VerifierFacts:
    """The verifier's config.json (a Hub id, a local directory or a config file): what the checks need.

    hub_only: the name came from a Hub config (someone else's file), so it may only name a Hub repo:
    a remote config never makes specreg read a local path (`/dev/stdin`, `/etc/...`)."""
    from specreg.sources.files import read_config

    from specreg.sources.files import is_repo_id

    if hub_only and not is_repo_id(verifier):
        raise ConfigError(f"the Hub config names the verifier {verifier!r}, which is not a Hub repo id; specreg "
                          "reads no local path a remote file names. Pass the verifier yourself (--verifier)",
                          "$.speculators_config.verifier.name_or_path", source=source)
    local = Path(verifier).expanduser()
    if not hub_only and not local.exists() and verifier.startswith((".", "/", "~")):
        raise ConfigError("no such file or directory", "verifier", source=verifier)
    if not hub_only and local.exists():
        path = local / hub.CONFIG_NAME if local.is_dir() else local
        config, _ = read_config(path, source=str(path))
    else:
        fetched = hub.fetch_config(verifier, None, source=verifier)
        config, _ = read_config(fetched.path, source=f"{verifier}/{hub.CONFIG_NAME}")
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else None
    body = text or config
    archs = config.get("architectures")
    names = tuple(a for a in archs if isinstance(a, str)) if isinstance(archs, list) else ()
    return VerifierFacts(
        id=verifier,
        architectures=names,
        num_hidden_layers=_int(body.get("num_hidden_layers")),
        hidden_size=_int(body.get("hidden_size")),
        vocab_size=_int(body.get("vocab_size") if "vocab_size" in body else config.get("vocab_size")),
        text_config=text is not None,
        head_size=head_size(body),
        dtype=config_dtype(body, config),
        max_position_embeddings=_int(body.get("max_position_embeddings")),
        quantization=quant_method(config) or quant_method(body),
        attention_chunk_size=_int(body.get("attention_chunk_size")),
        layers=verifier_groups(body, names),
        kv_heads=_int(body.get("num_key_value_heads")) or _int(body.get("num_attention_heads")),
        sliding_window=_int(body.get("sliding_window")),
        mla_latent=mla_latent(body),
        state_layers=state_layers(body),
    )


def _local_header(path: Path) -> tuple[dict[str, Tensor], int]:
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) < 8:
            raise ConfigError("shorter than a safetensors header", "$", source=str(path))
        (size,) = struct.unpack("<Q", head)
        if size > MAX_HEADER_BYTES:
            raise ConfigError(f"safetensors header of {size} bytes (over {MAX_HEADER_BYTES})", "$", source=str(path))
        raw = f.read(size)
    try:
        header = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"safetensors header is not JSON: {exc}", "$", source=str(path)) from None
    except RecursionError:
        raise ConfigError("safetensors header is nested too deeply", "$", source=str(path)) from None
    if not isinstance(header, dict):
        raise ConfigError("safetensors header is not an object", "$", source=str(path))
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        where = f"$[{json.dumps(name)}]"
        if not isinstance(info, dict) or not isinstance(info.get("shape"), list):
            raise ConfigError(f"tensor {name!r} has no shape", where, source=str(path))
        shape = info["shape"]
        # a dimension is what safetensors writes: a non-negative integer (not a string, null, a
        # float such as 1e400 or NaN, an object), at most 2**53 so that sizes stay exact
        if len(shape) > MAX_DIMS or not all(type(d) is int and 0 <= d <= 2**53 for d in shape):
            raise ConfigError(f"tensor {name!r} has the shape {json.dumps(shape)[:200]}: expected at most "
                              f"{MAX_DIMS} integers >= 0", f"{where}.shape", source=str(path))
        tensors[name] = Tensor(name, str(info.get("dtype")), tuple(shape))
    return tensors, 8 + size


def local_weights(directory: Path) -> tuple[dict[str, Tensor], tuple[str, ...], int] | None:
    """Tensor headers of the safetensors beside a local config (None: there are none)."""
    from specreg.vllm.materialize import SAFETENSORS_INDEX, index_shards, weight_file, safetensors_files

    # the same rule as materialize: regular files, or links that stay inside the draft directory
    # (a FIFO here once made check wait for ever; a link could point anywhere)
    index = weight_file(directory, SAFETENSORS_INDEX)
    paths = index_shards(directory, index) if index is not None else safetensors_files(directory)
    if not paths:
        return None
    files = tuple(paths)
    tensors: dict[str, Tensor] = {}
    read = 0
    for path in paths.values():
        found, n = _local_header(path)
        tensors.update(found)
        read += n
    return tensors, files, read


def hub_weights(repo_id: str, revision: str | None, *, source: str) -> tuple[dict[str, Tensor], tuple[str, ...]] | None:
    """Tensor headers of a Hub repo's safetensors, by range requests (huggingface_hub)."""
    import huggingface_hub
    from huggingface_hub import errors as hf

    api = huggingface_hub.HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None,
                                token=os.environ.get("HF_TOKEN") or None)
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision)
    except hf.NotASafetensorsRepoError:
        return None
    except hf.SafetensorsParsingError as exc:
        raise ConfigError(f"a safetensors header could not be read: {exc}", "$", source=source) from None
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise SpecregError(f"the Hub answered HTTP {status} reading safetensors headers of {repo_id}",
                           source=source) from None
    except OSError as exc:
        raise SpecregError(f"could not read safetensors headers of {repo_id}: {type(exc).__name__}", source=source) from None
    tensors = {}
    for file_meta in meta.files_metadata.values():
        for name, info in file_meta.tensors.items():
            tensors[name] = Tensor(name, str(info.dtype), tuple(int(d) for d in info.shape))
    return tensors, tuple(sorted(meta.files_metadata))


# -- checking -----------------------------------------------------------------------------------------

def _aux_ids(draft: Mapping[str, Any]) -> list[int] | None:
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


def verifier_findings(spec: "Speculator", facts: VerifierFacts, *, tensor_parallel_size: int | None = None,
                   draft_tensor_parallel_size: int | None = None) -> list[Finding]:
    """The draft against its verifier's config: layers, hidden size, vocabulary, mask token,
    aux capture support, draft tensor parallelism."""
    d, out = spec.draft_config, []
    version = parse_version(spec.vllm_version)
    L, H, V = facts.num_hidden_layers, facts.hidden_size, facts.vocab_size
    ids = _aux_ids(d)
    if ids is not None and L is not None:
        through_last = since("aux_capture_through_last_layer", version)
        top = L if through_last else L - 1
        bad = [i for i in ids if not 0 <= i <= top]
        if bad:
            rule = ("ids count the hidden state entering layer i; vLLM >= "
                    f"{short(RULES['aux_capture_through_last_layer'])} also captures the last layer's output as id L"
                    if through_last else
                    f"ids count the hidden state entering layer i, and vLLM {short(version)} captures "
                    "only before each layer")
            out.append(Finding.of(
                "verifier-layer-out-of-range",
                f"aux layer ids {bad} are outside {facts.id}'s {L} layers (valid 0..{top}: {rule})",
                "draft_config.eagle_aux_hidden_state_layer_ids",
                fix="train against (or name) the verifier this draft was trained with; the ids must come from it",
            ))
    target_hidden = d.get("target_hidden_size") or d.get("hidden_size")
    if H is not None and target_hidden is not None and target_hidden != H:
        out.append(Finding.of(
            "verifier-hidden-size-mismatch",
            f"the draft expects target hidden size {target_hidden}; {facts.id} has {H}",
            "draft_config.target_hidden_size",
            fix="pair the draft with the verifier it was trained on (or set target_hidden_size if the config omits it)",
        ))
    dv = d.get("draft_vocab_size")
    if V is not None and isinstance(dv, int):
        if dv > V:
            out.append(Finding.of(
                "verifier-vocab-too-small",
                f"draft_vocab_size {dv} is larger than {facts.id}'s vocabulary ({V})",
                "draft_config.draft_vocab_size",
                fix="the draft was trained for another tokenizer: use its own verifier",
            ))
        elif dv < V:
            out.append(Finding.of(
                "draft-vocab-reduced",
                f"draft_vocab_size {dv} < the verifier's {V}: the weights must carry d2t (and t2d)",
                "draft_config.draft_vocab_size",
            ))
    ev = d.get("vocab_size")
    if V is not None and isinstance(ev, int) and ev != V:
        out.append(Finding.of(
            "verifier-vocab-mismatch",
            f"the draft's embedding vocabulary is {ev}; {facts.id}'s is {V}",
            "draft_config.vocab_size",
            fix="the draft embeds the verifier's tokens: check that this is the verifier it was trained with",
        ))
    mask, mask_at = _mask_token(spec)
    if V is not None and isinstance(mask, int) and not 0 <= mask < V:
        out.append(Finding.of(
            "mask-token-out-of-vocab",
            f"mask token id {mask} is outside {facts.id}'s vocabulary (0..{V - 1})",
            mask_at,
            fix="use the mask token id the draft was trained with, from the verifier's tokenizer",
        ))
    if facts.architectures and short(version) == short(AUX_CAPTURE_VERSION):
        if not any(a in AUX_CAPTURE_ARCHITECTURES for a in facts.architectures):
            out.append(Finding.of(
                "verifier-no-aux-capture",
                f"vLLM {short(AUX_CAPTURE_VERSION)} cannot capture aux hidden states from "
                f"{', '.join(facts.architectures)} (its class does not implement SupportsEagle3)",
                None,
                fix="serve a verifier architecture vLLM supports for Eagle-3/DFlash drafts",
            ))
    if draft_tensor_parallel_size is not None:
        tp = tensor_parallel_size or 1
        if draft_tensor_parallel_size not in (1, tp):
            out.append(Finding.of(
                "draft-tp-invalid",
                f"draft tensor parallel size {draft_tensor_parallel_size} is neither 1 nor the target's ({tp})",
                None,
                fix=f"use draft_tensor_parallel_size 1 or {tp}",
            ))
    return out


def _find(tensors: Mapping[str, Tensor], suffix: str) -> Tensor | None:
    if suffix in tensors:
        return tensors[suffix]
    hits = [t for n, t in tensors.items() if n.endswith("." + suffix)]
    return hits[0] if len(hits) == 1 else None


def weights_findings(spec: "Speculator", tensors: Mapping[str, Tensor], facts: VerifierFacts | None) -> list[Finding]:
    """The draft's tensor headers against its config (and the verifier's, when known)."""
    d, out = spec.draft_config, []
    target_hidden = _positive(d.get("target_hidden_size")) or _positive(d.get("hidden_size"))
    ids = _aux_ids(d)
    n_aux = len(ids) if ids else (_positive(d.get("num_aux_hidden_states")) or 3)
    fc = _find(tensors, "fc.weight")
    if fc is not None and target_hidden and len(fc.shape) == 2:
        want = target_hidden * n_aux
        if fc.shape[1] != want:
            out.append(Finding.of(
                "weights-fc-shape",
                f"fc.weight {list(fc.shape)} takes {fc.shape[1]} inputs; the config needs {target_hidden} x "
                f"{n_aux} aux layers = {want}",
                "draft_config.eagle_aux_hidden_state_layer_ids",
                fix="the number of aux layer ids (or target_hidden_size) in config.json does not match the weights",
            ))
    dv = d.get("draft_vocab_size")
    V = facts.vocab_size if facts else d.get("vocab_size")
    d2t, t2d = _find(tensors, "d2t"), _find(tensors, "t2d")
    reduced = isinstance(dv, int) and isinstance(V, int) and dv < V
    if reduced and d2t is None:
        out.append(Finding.of(
            "weights-vocab-map-missing",
            f"draft_vocab_size {dv} < {V}, but the weights carry no d2t: draft tokens cannot be mapped to the verifier's",
            "draft_config.draft_vocab_size",
            fix="save the draft with its d2t/t2d buffers (speculators writes them for a reduced vocabulary)",
        ))
    if not reduced and (d2t is not None or t2d is not None) and isinstance(dv, int) and isinstance(V, int):
        out.append(Finding.of(
            "weights-vocab-map-unexpected",
            f"the weights carry {'d2t' if d2t else 't2d'} but the vocabulary is not reduced ({dv} = {V})",
            "draft_config.draft_vocab_size",
            fix="check draft_vocab_size in config.json: the weights say the vocabulary was reduced",
        ))
    if d2t is not None and isinstance(dv, int) and (d2t.shape != (dv,) or d2t.dtype != "I64"):
        out.append(Finding.of(
            "weights-vocab-map-shape",
            f"d2t is {d2t.dtype} {list(d2t.shape)}; it must be I64 [{dv}] (one offset per draft token)",
            "draft_config.draft_vocab_size",
        ))
    if t2d is not None and isinstance(V, int) and (t2d.shape != (V,) or t2d.dtype != "BOOL"):
        out.append(Finding.of(
            "weights-vocab-map-shape",
            f"t2d is {t2d.dtype} {list(t2d.shape)}; it must be BOOL [{V}] (one flag per verifier token)",
            "draft_config.vocab_size",
        ))
    head = _find(tensors, "lm_head.weight")
    if head is not None and isinstance(dv, int) and head.shape[:1] != (dv,):
        out.append(Finding.of(
            "weights-lm-head-rows",
            f"lm_head.weight has {head.shape[0]} rows; draft_vocab_size is {dv}",
            "draft_config.draft_vocab_size",
            fix="draft_vocab_size in config.json must equal the lm_head's rows",
        ))
    if spec.algorithm == "peagle":
        mask = _find(tensors, "mask_hidden")
        want = target_hidden * n_aux if target_hidden else None
        if mask is None:
            out.append(Finding.of(
                "weights-mask-hidden", "a P-EAGLE draft needs mask_hidden; the weights have none", None,
                fix="this checkpoint is not a P-EAGLE draft (or was saved without its parameters)",
            ))
        elif want and mask.shape[-1:] != (want,):
            out.append(Finding.of(
                "weights-mask-hidden", f"mask_hidden {list(mask.shape)} does not end in the fc input width {want}", None,
            ))
    if spec.algorithm == "dspark":
        out += _dspark_heads(d, tensors)
    layers = {int(m.group(1)) for n in tensors for m in [_LAYER.search(n)] if m and "verifier" not in n}
    n_layers = d.get("num_hidden_layers")
    if layers and isinstance(n_layers, int) and len(layers) != n_layers:
        out.append(Finding.of(
            "weights-layer-count",
            f"the weights hold {len(layers)} decoder layers; num_hidden_layers is {n_layers}",
            "draft_config.num_hidden_layers",
            fix="num_hidden_layers in transformer_layer_config must match the saved layers",
        ))
    return out


def _dspark_heads(d: Mapping[str, Any], tensors: Mapping[str, Tensor]) -> list[Finding]:
    rank, kind = d.get("markov_rank"), d.get("markov_head_type") or "vanilla"
    hidden, vocab = d.get("hidden_size"), d.get("draft_vocab_size")
    want: dict[str, tuple[int, ...]] = {}
    if isinstance(rank, int) and rank > 0 and isinstance(hidden, int) and isinstance(vocab, int):
        want["markov_head.markov_w1.weight"] = (vocab, rank)
        want["markov_head.markov_w2.weight"] = (vocab, rank)
        if kind == "gated":
            want["markov_head.gate_proj.weight"] = (rank, hidden + rank)
        elif kind == "rnn":
            want["markov_head.joint_proj.weight"] = (3 * rank, 2 * rank + hidden)
    if d.get("enable_confidence_head") and isinstance(hidden, int):
        width = hidden + (rank if d.get("confidence_head_with_markov") and isinstance(rank, int) else 0)
        want["confidence_head.proj.weight"] = (1, width)
    out = []
    for name, shape in want.items():
        found = _find(tensors, name)
        if found is None:
            out.append(Finding.of("weights-dspark-heads", f"{name} is missing (expected {list(shape)})", None,
                                  fix="markov_rank/markov_head_type/enable_confidence_head in config.json must match the weights"))
        elif found.shape != shape:
            out.append(Finding.of("weights-dspark-heads", f"{name} is {list(found.shape)}; the config implies {list(shape)}",
                                  None, fix="markov_rank/markov_head_type/confidence_head_with_markov must match the weights"))
    return out


def summarize(tensors: Mapping[str, Tensor], files: tuple[str, ...], header_bytes: int | None) -> WeightsSummary:
    by_dtype: Counter[str] = Counter()
    for t in tensors.values():
        by_dtype[t.dtype] += t.numel
    return WeightsSummary(files=files, tensors=len(tensors), parameters=sum(by_dtype.values()),
                          dtypes=dict(sorted(by_dtype.items())), header_bytes=header_bytes)


def _kv_cache_findings(spec: "Speculator", facts: VerifierFacts, tp: int | None, draft_tp: int | None,
                       kv_cache_dtype: str, dtype: str | None, hybrid: bool) -> list[Finding]:
    """kv_cache.kv_cache_findings for the verifier and the draft as served: their layers over the
    ranks, the KV-cache dtype's width, the hybrid KV-cache manager on or off; a Mamba-hybrid
    verifier's state layers with them. A verifier with chunked local attention is left out: which of its layers are chunked is its class's, not modelled (with
    the manager off, which an Eagle drafter turns off for it, its chunked and full layers are all
    allocated as full attention)."""
    if facts.attention_chunk_size is not None:
        return []
    width = kv_dtype_bytes(kv_cache_dtype, dtype or facts.dtype)
    verifier = verifier_kv_layers(facts.layers, kv_heads=facts.kv_heads, head_size=facts.head_size,
                                  window=facts.sliding_window, latent=facts.mla_latent, tp=tp or 1, dtype_bytes=width,
                                  states=facts.state_layers)
    draft = draft_kv_layers(spec, tp=draft_tp or tp or 1, dtype_bytes=width)
    return kv_cache_findings(spec, verifier, draft, hybrid=hybrid)


def _head_size_problems(spec: "Speculator", gpu: str) -> list[Problem]:
    """The draft's fields vLLM's head size comes from (head_dim, else hidden_size // num_attention_heads)
    where they hold something other than a positive integer, by the JSON path of the source."""
    d = spec.draft_config
    if _positive(d.get("head_dim")):
        return []
    out = []
    for key in ("hidden_size", "num_attention_heads"):
        value = d.get(key)
        if key in d and not _positive(value):
            prov = spec.provenance.get(f"draft_config.{key}")
            path = prov.sources[0] if prov is not None and prov.sources else f"draft_config.{key}"
            out.append(Problem(path, f"--gpu {gpu}: expected a positive integer (vLLM's head size is head_dim, "
                                     f"else hidden_size // num_attention_heads), got {show_value(thaw(value))}"))
    return out


def preflight(
    spec: "Speculator",
    *,
    verifier: str | None = None,
    check_verifier: bool = True,
    check_weights: bool = True,
    tensor_parallel_size: int | None = None,
    draft_tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    hybrid_kv_cache_manager: bool = True,
    gpu: str | None = None,
    kv_cache_dtype: str = "auto",
    dtype: str | None = None,
    attention_backend: str | None = None,
) -> "Speculator":
    """`spec` with the pre-flight findings added and `checks` set (verifier facts, weights summary, and
    with `gpu` the attention backends vLLM picks there: specreg.vllm.gpu_plan.gpu_check)."""
    source = spec.origin.source if spec.origin else None
    facts = None
    found: list[Finding] = []
    if check_verifier:
        name = verifier or spec.verifier
        if not name:
            raise SpecregError("the config names no verifier; pass one (--verifier ORG/NAME)", source=source)
        from_hub = verifier is None and spec.origin is not None and spec.origin.repo_id is not None
        facts = verifier_facts(name, source=source or name, hub_only=from_hub)
        found += verifier_findings(spec, facts, tensor_parallel_size=tensor_parallel_size,
                                   draft_tensor_parallel_size=draft_tensor_parallel_size)
        found += deployment_findings(spec, verifier_dtype=facts.dtype, verifier_positions=facts.max_position_embeddings,
                                     verifier_quantization=facts.quantization, max_model_len=max_model_len)
        found += hybrid_kv_findings(spec, verifier_chunk=facts.attention_chunk_size)
        found += _kv_cache_findings(spec, facts, tensor_parallel_size, draft_tensor_parallel_size, kv_cache_dtype, dtype,
                                    hybrid_kv_cache_manager)
    found += quant_name_findings(spec, verifier_layers=facts.num_hidden_layers if facts else None)
    summary = None
    if check_weights:
        origin = spec.origin
        if origin is None or (origin.repo_id is None and origin.path is None):
            raise SpecregError("normalized from a dict: there are no weights to check", source=source)
        if origin.repo_id:
            got = hub_weights(origin.repo_id, origin.commit or origin.revision, source=origin.source)
            read: int | None = None
            if got is not None:
                tensors, files = got
        else:
            local = local_weights(Path(origin.path).parent)
            got = local
            if local is not None:
                tensors, files, read = local
        if got is None:
            found.append(Finding.of(
                "weights-unavailable", "no safetensors weights to read headers from (only .bin, or none)", None,
                fix="save the draft as safetensors to have its weights checked",
            ))
        else:
            summary = summarize(tensors, files, read)
            found += weights_findings(spec, tensors, facts)
    report = None
    if gpu is not None:
        bad = _head_size_problems(spec, gpu)
        if bad:
            raise ConfigError(bad, source=source)
        try:
            report, more = gpu_check(spec, gpu, kv_cache_dtype=kv_cache_dtype, dtype=dtype,
                                     attention_backend=attention_backend,
                                     verifier_head_size=facts.head_size if facts else None,
                                     verifier_dtype=facts.dtype if facts else None,
                                     verifier_layers=facts.layers if facts else ())
        except AttentionError as exc:
            raise SpecregError(f"--gpu {gpu}: {exc}", source=source) from None
        found += more
        found += quantization_gpu_findings(spec, report.capability, dtype=report.dtype, gpu=gpu_label(gpu),
                                           verifier_method=facts.quantization if facts else None)
    return attrs.evolve(spec, findings=(*spec.findings, *found),
                        checks=Checks(verifier=facts, weights=summary, gpu=report))

