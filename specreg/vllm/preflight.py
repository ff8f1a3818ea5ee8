"""Pre-flight checks, composed: the draft against its verifier's config.json (verifier_check.py),
its own weight headers (weight_headers.py), the deployment rules (deployment.py, kv_cache.py) and,
given a GPU, the attention backends vLLM picks there (gpu_plan.py). Nothing here downloads weights.

    spec = specreg.load("org/draft", check_verifier=True, check_weights=True)
    spec.checks.weights.parameters, [f for f in spec.findings if f.code.startswith("weights-")]
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Mapping

import attrs
from packaging.version import Version

from specreg.errors import ConfigError, OfflineError, Problem, SpecregError, show_value
from specreg.normalization.speculator import Finding, as_tuple, thaw
from specreg.vllm.attention import AttentionError, gpu_label
from specreg.vllm.gpu_plan import GpuReport, gpu_check
from specreg.vllm.deployment import (
    deployment_findings,
    hybrid_kv_findings,
    quant_name_findings,
    quantization_gpu_findings,
)
from specreg.sources.decoder import positive_int
from specreg.vllm.agreement import tokens_findings
from specreg.sources.verifier import LOCAL_VERIFIER_FIX
from specreg.vllm.verifier_check import (
    VerifierFacts,
    kv_cache_check,
    verifier_facts,
    verifier_findings,
)
from specreg.vllm.weight_headers import WeightsSummary, hub_weights, local_weights, summarize, weights_findings

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator


@attrs.frozen
class Checks:
    verifier: VerifierFacts | None = None
    weights: WeightsSummary | None = None
    gpu: GpuReport | None = None
    #: the findings these checks added to the draft's own
    found: tuple[Finding, ...] = attrs.field(default=(), converter=as_tuple)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verifier": self.verifier.to_dict() if self.verifier else None,
            "weights": self.weights.to_dict() if self.weights else None,
            "gpu": self.gpu.to_dict() if self.gpu else None,
        }


# -- reading ----------------------------------------------------------------------------------------


# -- checking -----------------------------------------------------------------------------------------


def _head_size_problems(spec: "Speculator", gpu: str) -> list[Problem]:
    """The draft's fields vLLM's head size comes from (head_dim, else hidden_size // num_attention_heads)
    where they hold something other than a positive integer, by the JSON path of the source."""
    d = spec.draft_config
    if positive_int(d.get("head_dim")):
        return []
    out = []
    for key in ("hidden_size", "num_attention_heads"):
        value = d.get(key)
        if key in d and not positive_int(value):
            prov = spec.provenance.get(f"draft_config.{key}")
            path = prov.sources[0] if prov is not None and prov.sources else f"draft_config.{key}"
            out.append(
                Problem(
                    path,
                    f"--gpu {gpu}: expected a positive integer (vLLM's head size is head_dim, "
                    f"else hidden_size // num_attention_heads), got {show_value(thaw(value))}",
                )
            )
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
    num_speculative_tokens: int | None = None,
) -> "Speculator":
    """`spec` with the pre-flight findings added and `checks` set (verifier facts, weights summary, and
    with `gpu` the attention backends vLLM picks there: specreg.vllm.gpu_plan.gpu_check; with
    `num_speculative_tokens` the K it is served with against what it can produce and was trained for)."""
    source = spec.origin.source if spec.origin else None
    facts = None
    found: list[Finding] = []
    if check_verifier:
        name = verifier or spec.verifier
        # no verifier named (a checkpoint whose verifier is given on the command line): the draft alone is
        # checked, and its `verifier-missing` warning says the pair could not be
        check_verifier = bool(name)
    if check_verifier:
        from_hub = verifier is None and spec.origin is not None and spec.origin.repo_id is not None
        facts = verifier_facts(name, source=source or name, hub_only=from_hub)
        found += verifier_findings(
            spec,
            facts,
            tensor_parallel_size=tensor_parallel_size,
            draft_tensor_parallel_size=draft_tensor_parallel_size,
        )
        found += deployment_findings(
            spec,
            verifier_dtype=facts.dtype,
            verifier_positions=facts.max_position_embeddings,
            verifier_quantization=facts.quantization,
            max_model_len=max_model_len,
        )
        found += hybrid_kv_findings(spec, verifier_chunk=facts.attention_chunk_size)
        found += kv_cache_check(
            spec,
            facts,
            tensor_parallel_size,
            draft_tensor_parallel_size,
            kv_cache_dtype,
            dtype,
            hybrid_kv_cache_manager,
        )
    found += quant_name_findings(spec, verifier_layers=facts.num_hidden_layers if facts else None)
    found += tokens_findings(spec, num_speculative_tokens)
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
            found.append(
                Finding.of(
                    "weights-unavailable",
                    "no safetensors weights to read headers from (only .bin, or none)",
                    None,
                    fix="save the draft as safetensors to have its weights checked",
                )
            )
        else:
            summary = summarize(tensors, files, read)
            found += weights_findings(spec, tensors, facts)
    report = None
    if gpu is not None:
        bad = _head_size_problems(spec, gpu)
        if bad:
            raise ConfigError(bad, source=source)
        unknown = gpu_facts_unknown(spec, gpu)
        if unknown is not None:
            found.append(unknown)
            gpu = None  # the rest is answered; what the GPU does with the draft is said to be unknown
    if gpu is not None:
        try:
            report, more = gpu_check(
                spec,
                gpu,
                kv_cache_dtype=kv_cache_dtype,
                dtype=dtype,
                attention_backend=attention_backend,
                verifier_head_size=facts.head_size if facts else None,
                verifier_dtype=facts.dtype if facts else None,
                verifier_layers=facts.layers if facts else (),
            )
        except AttentionError as exc:
            raise SpecregError(f"--gpu {gpu}: {exc}", source=source) from None
        found += more
        found += quantization_gpu_findings(
            spec,
            report.capability,
            dtype=report.dtype,
            gpu=gpu_label(gpu),
            verifier_method=facts.quantization if facts else None,
        )
    # a verifier given (--verifier) fills the one the file leaves out: the pair was checked
    kept = tuple(f for f in spec.findings if not (verifier and facts is not None and f.code == "verifier-missing"))
    return attrs.evolve(
        spec,
        findings=(*kept, *found),
        checks=Checks(verifier=facts, weights=summary, gpu=report, found=found),
    )


def gpu_facts_unknown(spec: "Speculator", gpu: str) -> Finding | None:
    """The finding for a release with no attention-backend facts (older than the attention selector's
    range): what --gpu would check there is not known, and said so, instead of stopping the check."""
    from specreg.vllm.attention import capability, versions
    from specreg.vllm.deployment import minor_release

    release = minor_release(spec.vllm_version)
    have = versions()
    if release in have or Version(release) > Version(have[-1]):
        return None
    cap = capability(gpu)
    return Finding.of(
        "gpu-facts-unknown",
        f"--gpu {gpu} (sm_{cap[0]}{cap[1]}): vLLM {release} is older than {have[0]}, the oldest release with "
        f"attention-backend facts: which backend serves the draft's layers there, its KV-cache layout and the "
        f"quantization methods it takes on this GPU are not known (not checked); everything else is",
        None,
        fix=f"check the GPU on a release with facts (--vllm {have[0]} or later), or on the GPU itself",
    )


def trained_verifier(spec: "Speculator") -> str | None:
    """The verifier the draft names itself (its config's speculators_config.verifier.name_or_path, else
    its catalog entry's), whatever verifier it is served beside."""
    sc = spec.source_config.get("speculators_config")
    named = sc.get("verifier") if isinstance(sc, Mapping) else None
    name = named.get("name_or_path") if isinstance(named, Mapping) else None
    if isinstance(name, str) and name:
        return name
    entry = getattr(spec.catalog, "verifier", None) if spec.catalog is not None else None
    return getattr(entry, "id", None)


def against_verifier(spec: "Speculator", verifier: str | None) -> "Speculator":
    """`spec` checked against the verifier it will be served beside (the verifier pre-flight, no
    weights), where that is one the user gave and not the one the draft names: a pairing other than the
    trained one is where a layer or width mismatch comes from. Unchanged when there is nothing to check
    or it was checked against that verifier already; a verifier whose config the Hub cannot give (and
    no cache holds) is a `verifier-unread` warning: the draft is served, unchecked, as before."""
    if not verifier or verifier == trained_verifier(spec):
        return spec
    checked = spec.checks.verifier if spec.checks is not None else None
    if checked is not None and checked.id == verifier or any(f.code == "verifier-unread" for f in spec.findings):
        return spec
    try:
        return preflight(spec, verifier=verifier, check_verifier=True, check_weights=False)
    except OfflineError as exc:
        why = exc.message.removesuffix(f"; {LOCAL_VERIFIER_FIX}")
        unread = Finding.of("verifier-unread", f"the draft was not checked against {verifier}: {why}")
        return attrs.evolve(spec, findings=(*spec.findings, unread))


def accept_verifier(spec: "Speculator") -> "Speculator":
    """`spec` with the errors its verifier check found made warnings: served beside that verifier on
    the user's word (`--force-verifier`), each still said."""
    added = spec.checks.found if spec.checks is not None else ()
    if not any(f.severity == "error" for f in added):
        return spec

    def accepted(f: Finding) -> Finding:
        note = " (served anyway: --force-verifier)"
        return (
            attrs.evolve(f, severity="warning", message=f.message + note) if f in added and f.severity == "error" else f
        )

    return attrs.evolve(
        spec,
        findings=tuple(accepted(f) for f in spec.findings),
        checks=attrs.evolve(spec.checks, found=tuple(accepted(f) for f in added)),
    )
