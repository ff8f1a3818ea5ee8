"""The pre-flight report as a Python value: what `specreg check` prints, for a program to use
(`specreg.check`)."""

from __future__ import annotations

import os
from typing import Any

import attrs
from packaging.version import Version

from specreg.normalization.speculator import Finding, Speculator


@attrs.frozen
class CheckReport:
    """A draft checked against its verifier, its weight headers, the deployment rules and (given a
    GPU) the attention backends vLLM picks there."""

    speculator: Speculator

    @property
    def verifier(self) -> Any:
        """The verifier's facts read from its config.json (specreg.vllm.verifier_check.VerifierFacts)."""
        return self.speculator.checks.verifier

    @property
    def weights(self) -> Any:
        """The weight headers' summary (specreg.vllm.weight_headers.WeightsSummary), or None when not read."""
        return self.speculator.checks.weights

    @property
    def gpu(self) -> Any:
        """The attention backends vLLM picks on the GPU (specreg.vllm.gpu_plan.GpuReport), or None."""
        return self.speculator.checks.gpu

    @property
    def findings(self) -> tuple[Finding, ...]:
        return self.speculator.findings

    @property
    def errors(self) -> tuple[Finding, ...]:
        return self.speculator.errors

    def to_dict(self) -> dict[str, Any]:
        # the report is the Speculator with its `checks`: `specreg check --json` prints this dict
        return self.speculator.to_dict()


def check(
    draft: Speculator | str | os.PathLike[str],
    *,
    revision: str | None = None,
    vllm: str | Version | None = None,
    verifier: str | None = None,
    weights: bool = True,
    tensor_parallel_size: int | None = None,
    draft_tensor_parallel_size: int | None = None,
    max_model_len: int | None = None,
    hybrid_kv_cache_manager: bool = True,
    gpu: str | None = None,
    kv_cache_dtype: str = "auto",
    dtype: str | None = None,
    attention_backend: str | None = None,
    num_speculative_tokens: int | None = None,
) -> CheckReport:
    """Check a draft before serving it (`specreg check`): against its verifier's config.json (`verifier`,
    else the one the config names), its safetensors headers (unless weights=False; never the weights
    themselves), the deployment rules for the tensor-parallel sizes and model length given, the KV
    cache, and with `gpu` (H100, sm_90, ...) the attention backends vLLM picks for its layers there
    (kv_cache_dtype, dtype and attention_backend as the server's flags of those names), and the draft
    length it will be served with (`num_speculative_tokens`, vLLM's key) against what it can produce and
    was trained for."""
    from specreg.api import validation
    from specreg.vllm.preflight import preflight

    # the limits of `specreg check`'s flags (entries/limits.py), for the same arguments here
    tensor_parallel_size = validation.integer("tensor_parallel_size", tensor_parallel_size)
    draft_tensor_parallel_size = validation.integer(
        "draft_tensor_parallel_size", draft_tensor_parallel_size, "tensor_parallel_size"
    )
    max_model_len = validation.integer("max_model_len", max_model_len)
    num_speculative_tokens = validation.integer("num_speculative_tokens", num_speculative_tokens, "k")
    validation.flag("weights", weights), validation.flag("hybrid_kv_cache_manager", hybrid_kv_cache_manager)
    gpu = validation.gpu(gpu)
    for name, value in (("kv_cache_dtype", kv_cache_dtype), ("dtype", dtype), ("attention_backend", attention_backend)):
        validation.text(name, value)
    if isinstance(draft, Speculator):
        spec = draft
    else:
        from specreg.api import load

        spec = load(draft, revision=revision, vllm=vllm, verifier=verifier, check_verifier=False)
    spec = preflight(
        spec,
        verifier=verifier,
        check_weights=weights,
        tensor_parallel_size=tensor_parallel_size,
        draft_tensor_parallel_size=draft_tensor_parallel_size,
        max_model_len=max_model_len,
        hybrid_kv_cache_manager=hybrid_kv_cache_manager,
        gpu=gpu,
        kv_cache_dtype=kv_cache_dtype,
        dtype=dtype,
        attention_backend=attention_backend.upper() if attention_backend else None,
        num_speculative_tokens=num_speculative_tokens,
    )
    return CheckReport(spec)
