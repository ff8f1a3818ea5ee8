"""The draft's weight headers: its safetensors read as headers only (the first 8 bytes and the JSON
header of local files; for a Hub repo, huggingface_hub's `get_safetensors_metadata`, which sends HTTP
range requests), summarized, and checked against its config (and the verifier's, when known).
Nothing here downloads weights."""

from __future__ import annotations

import json
import os
import re
import struct
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import attrs

from specreg.errors import ConfigError, SpecregError
from specreg.normalization import algorithms
from specreg.normalization.speculator import Finding
from specreg.sources.decoder import positive_int
from specreg.vllm.verifier_check import VerifierFacts, aux_ids

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: safetensors refuses headers over 100 MB; so does specreg
#: more dimensions than any tensor a draft holds
MAX_DIMS = 16


MAX_HEADER_BYTES = 100_000_000


_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")


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
        return {
            "files": list(self.files),
            "tensors": self.tensors,
            "parameters": self.parameters,
            "dtypes": dict(self.dtypes),
            "header_bytes": self.header_bytes,
        }


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
            raise ConfigError(
                f"tensor {name!r} has the shape {json.dumps(shape)[:200]}: expected at most {MAX_DIMS} integers >= 0",
                f"{where}.shape",
                source=str(path),
            )
        tensors[name] = Tensor(name, str(info.get("dtype")), tuple(shape))
    return tensors, 8 + size


def local_weights(directory: Path) -> tuple[dict[str, Tensor], tuple[str, ...], int] | None:
    """Tensor headers of the safetensors beside a local config (None: there are none)."""
    from specreg.vllm.draft_weights import SAFETENSORS_INDEX, index_shards, safetensors_files, weight_file

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


#: what to do when the Hub cannot give the headers
HUB_FIX = "check without them (--no-weights), or download the draft's weights (hf download REPO) and check again"


def cached_weights(repo_id: str, revision: str | None) -> tuple[dict[str, Tensor], tuple[str, ...]] | None:
    """Tensor headers of a Hub repo's safetensors read from huggingface_hub's cache at `revision`
    (index and every shard, or model.safetensors), without any request; None when they are not all
    there."""
    from specreg.sources import hub
    from specreg.vllm.draft_weights import SAFETENSORS_INDEX, shards_of

    index = hub.cached(repo_id, SAFETENSORS_INDEX, revision)
    if index is not None:
        names = shards_of(index, where=f"{repo_id}/{SAFETENSORS_INDEX}")
    elif hub.cached(repo_id, "model.safetensors", revision) is not None:
        names = ["model.safetensors"]
    else:
        return None
    paths = {name: hub.cached(repo_id, name, revision) for name in names}
    if any(p is None for p in paths.values()):
        return None
    tensors: dict[str, Tensor] = {}
    for path in paths.values():
        found, _n = _local_header(path)  # type: ignore[arg-type]
        tensors.update(found)
    return tensors, tuple(sorted(paths))


def hub_weights(repo_id: str, revision: str | None, *, source: str) -> tuple[dict[str, Tensor], tuple[str, ...]] | None:
    """Tensor headers of a Hub repo's safetensors: from huggingface_hub's cache where the files are
    there (offline too), else by range requests (huggingface_hub). A Hub that cannot answer is one
    SpecregError with the fix."""
    import huggingface_hub
    from huggingface_hub import errors as hf

    from specreg.sources import hub

    cached = cached_weights(repo_id, revision)
    if cached is not None:
        return cached
    where = f"safetensors headers of {repo_id}" + (f" at {revision}" if revision else "")
    if hub.offline():
        raise SpecregError(
            f"the {where} are not in the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE); "
            + HUB_FIX.replace("REPO", repo_id),
            source=source,
        )
    api = huggingface_hub.HfApi(
        endpoint=os.environ.get("HF_ENDPOINT") or None, token=os.environ.get("HF_TOKEN") or None
    )
    try:
        meta = api.get_safetensors_metadata(repo_id, revision=revision)
    except hf.NotASafetensorsRepoError:
        return None
    except hf.SafetensorsParsingError as exc:
        raise ConfigError(f"a safetensors header could not be read: {exc}", "$", source=source) from None
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise SpecregError(
            f"the Hub answered HTTP {status} reading the {where}; " + HUB_FIX.replace("REPO", repo_id), source=source
        ) from None
    except Exception as exc:
        failure = hub.connection_failure(exc, where, source)
        if failure is None:
            raise
        raise SpecregError(
            f"{failure.message}, and they are not in the Hugging Face cache; " + HUB_FIX.replace("REPO", repo_id),
            source=source,
        ) from None
    tensors = {}
    for file_meta in meta.files_metadata.values():
        for name, info in file_meta.tensors.items():
            tensors[name] = Tensor(name, str(info.dtype), tuple(int(d) for d in info.shape))
    return tensors, tuple(sorted(meta.files_metadata))


def _find(tensors: Mapping[str, Tensor], suffix: str) -> Tensor | None:
    if suffix in tensors:
        return tensors[suffix]
    hits = [t for n, t in tensors.items() if n.endswith("." + suffix)]
    return hits[0] if len(hits) == 1 else None


def weights_findings(spec: "Speculator", tensors: Mapping[str, Tensor], facts: VerifierFacts | None) -> list[Finding]:
    """The draft's tensor headers against its config (and the verifier's, when known)."""
    d, out = spec.draft_config, []
    target_hidden = positive_int(d.get("target_hidden_size")) or positive_int(d.get("hidden_size"))
    ids = aux_ids(d)
    n_aux = len(ids) if ids else (positive_int(d.get("num_aux_hidden_states")) or 3)
    fc = _find(tensors, "fc.weight")
    if fc is not None and target_hidden and len(fc.shape) == 2:
        want = target_hidden * n_aux
        if fc.shape[1] != want:
            out.append(
                Finding.of(
                    "weights-fc-shape",
                    f"fc.weight {list(fc.shape)} takes {fc.shape[1]} inputs; the config needs {target_hidden} x "
                    f"{n_aux} aux layers = {want}",
                    "draft_config.eagle_aux_hidden_state_layer_ids",
                    fix="the number of aux layer ids (or target_hidden_size) in config.json does not match the weights",
                )
            )
    dv = d.get("draft_vocab_size")
    V = facts.vocab_size if facts else d.get("vocab_size")
    d2t, t2d = _find(tensors, "d2t"), _find(tensors, "t2d")
    reduced = isinstance(dv, int) and isinstance(V, int) and dv < V
    if reduced and d2t is None:
        out.append(
            Finding.of(
                "weights-vocab-map-missing",
                f"draft_vocab_size {dv} < {V}, but the weights carry no d2t: draft tokens cannot be mapped to the verifier's",
                "draft_config.draft_vocab_size",
                fix="save the draft with its d2t/t2d buffers (speculators writes them for a reduced vocabulary)",
            )
        )
    if not reduced and (d2t is not None or t2d is not None) and isinstance(dv, int) and isinstance(V, int):
        out.append(
            Finding.of(
                "weights-vocab-map-unexpected",
                f"the weights carry {'d2t' if d2t else 't2d'} but the vocabulary is not reduced ({dv} = {V})",
                "draft_config.draft_vocab_size",
                fix="check draft_vocab_size in config.json: the weights say the vocabulary was reduced",
            )
        )
    if d2t is not None and isinstance(dv, int) and (d2t.shape != (dv,) or d2t.dtype != "I64"):
        out.append(
            Finding.of(
                "weights-vocab-map-shape",
                f"d2t is {d2t.dtype} {list(d2t.shape)}; it must be I64 [{dv}] (one offset per draft token)",
                "draft_config.draft_vocab_size",
            )
        )
    if t2d is not None and isinstance(V, int) and (t2d.shape != (V,) or t2d.dtype != "BOOL"):
        out.append(
            Finding.of(
                "weights-vocab-map-shape",
                f"t2d is {t2d.dtype} {list(t2d.shape)}; it must be BOOL [{V}] (one flag per verifier token)",
                "draft_config.vocab_size",
            )
        )
    head = _find(tensors, "lm_head.weight")
    if head is not None and isinstance(dv, int) and head.shape[:1] != (dv,):
        out.append(
            Finding.of(
                "weights-lm-head-rows",
                f"lm_head.weight has {head.shape[0]} rows; draft_vocab_size is {dv}",
                "draft_config.draft_vocab_size",
                fix="draft_vocab_size in config.json must equal the lm_head's rows",
            )
        )
    variant = algorithms.get(spec.algorithm).variant  # the registration's traits, never its name
    if getattr(variant, "parallel_drafting", False):
        mask = _find(tensors, "mask_hidden")
        want = target_hidden * n_aux if target_hidden else None
        if mask is None:
            out.append(
                Finding.of(
                    "weights-mask-hidden",
                    f"a {variant.label} draft needs mask_hidden; the weights have none",
                    None,
                    fix="this checkpoint is not a P-EAGLE draft (or was saved without its parameters)",
                )
            )
        elif want and mask.shape[-1:] != (want,):
            out.append(
                Finding.of(
                    "weights-mask-hidden",
                    f"mask_hidden {list(mask.shape)} does not end in the fc input width {want}",
                    None,
                )
            )
    if getattr(variant, "top_level", False):  # the DSpark layout: its Markov and confidence heads
        out += _dspark_heads(d, tensors)
        out += _dspark_own_vocab(d, tensors, facts.vocab_size if facts else None)
    layers = {int(m.group(1)) for n in tensors for m in [_LAYER.search(n)] if m and "verifier" not in n}
    n_layers = d.get("num_hidden_layers")
    if layers and isinstance(n_layers, int) and len(layers) != n_layers:
        out.append(
            Finding.of(
                "weights-layer-count",
                f"the weights hold {len(layers)} decoder layers; num_hidden_layers is {n_layers}",
                "draft_config.num_hidden_layers",
                fix="num_hidden_layers in transformer_layer_config must match the saved layers",
            )
        )
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
        found = tensors.get(name)  # the one name vLLM's loader maps (see _dspark_own_vocab): no other prefix
        if found is None:
            out.append(
                Finding.of(
                    "weights-dspark-heads",
                    f"{name} is missing (expected {list(shape)}){_unmapped(tensors, name)}",
                    None,
                    fix="markov_rank/markov_head_type/enable_confidence_head in config.json must match the weights",
                )
            )
        elif found.shape != shape:
            out.append(
                Finding.of(
                    "weights-dspark-heads",
                    f"{name} is {list(found.shape)}; the config implies {list(shape)}",
                    None,
                    fix="markov_rank/markov_head_type/confidence_head_with_markov must match the weights",
                )
            )
    return out


def _dspark_own_vocab(d: Mapping[str, Any], tensors: Mapping[str, Tensor], verifier_vocab: int | None) -> list[Finding]:
    """A DSpark draft shares the verifier's lm_head and input embedding unless its weights carry its own,
    and neither can stand in for a vocabulary of another size. vLLM's Qwen3DSparkModel.load_weights
    refused such a checkpoint (qwen3_dspark.py, 0.30.0-0.33.0: "Reduced-vocabulary Qwen3 DSpark
    checkpoints must include lm_head weights", "... whose input vocab_size is larger than the target
    vocabulary must include embed_tokens weights"); qwen3_dspark.py of 0.34.0 dropped both checks and
    loads it, sharing the verifier's tensors in place of the missing ones.

    Only the names that load_weights maps onto the head and the embedding count, whatever else a name
    holds: qwen3_dspark.py (0.30.0-0.34.0) passes a name holding "lm_head" on unchanged and puts
    "model." before any other, then AutoWeightsLoader (model_executor/models/utils.py, _load_module)
    places `lm_head.weight` on the head and `model.embed_tokens.weight` (saved as `embed_tokens.weight`)
    on the embedding, and refuses a name under any other prefix ("There is no module or parameter
    named ..."): a `model.lm_head.weight` or `draft.embed_tokens.weight` is no head or embedding there."""
    out = []
    dv, vocab = positive_int(d.get("draft_vocab_size")), positive_int(d.get("vocab_size"))
    if dv and verifier_vocab and dv < verifier_vocab and DSPARK_HEAD not in tensors:
        out.append(
            Finding.of(
                "weights-lm-head-missing",
                f"draft_vocab_size {dv} < the verifier's {verifier_vocab}, but the weights carry no {DSPARK_HEAD}"
                f"{_unmapped(tensors, DSPARK_HEAD)}: the verifier's full-vocabulary head cannot score the draft's "
                "reduced vocabulary",
                "draft_config.draft_vocab_size",
                fix="save the draft with its own lm_head (its rows are the reduced vocabulary), or train it on the "
                "verifier's full vocabulary",
            )
        )
    if vocab and verifier_vocab and vocab > verifier_vocab and DSPARK_EMBED not in tensors:
        out.append(
            Finding.of(
                "weights-embed-missing",
                f"vocab_size {vocab} > the verifier's {verifier_vocab}, but the weights carry no {DSPARK_EMBED}"
                f"{_unmapped(tensors, DSPARK_EMBED)}: the verifier's embedding has no rows for ids {verifier_vocab} "
                "and up",
                "draft_config.vocab_size",
                fix="save the draft with its own embed_tokens, or set vocab_size to the verifier's",
            )
        )
    return out


#: the names vLLM's DSpark load_weights maps onto the draft's own head and embedding (_dspark_own_vocab)
DSPARK_HEAD, DSPARK_EMBED = "lm_head.weight", "embed_tokens.weight"


def _unmapped(tensors: Mapping[str, Tensor], name: str) -> str:
    """The words for a tensor saved under another prefix than the one name vLLM maps (empty: none)."""
    others = sorted(n for n in tensors if n.endswith("." + name))
    return f" ({others[0]} is not a name vLLM's DSpark loader maps)" if others else ""


def summarize(tensors: Mapping[str, Tensor], files: tuple[str, ...], header_bytes: int | None) -> WeightsSummary:
    by_dtype: Counter[str] = Counter()
    for t in tensors.values():
        by_dtype[t.dtype] += t.numel
    return WeightsSummary(
        files=files,
        tensors=len(tensors),
        parameters=sum(by_dtype.values()),
        dtypes=dict(sorted(by_dtype.items())),
        header_bytes=header_bytes,
    )
