"""Deployment facts the draft's and the verifier's configs decide, per vLLM version (`check`).

Each rule names the wheel code that decides it; the conformance tier reads that code in every wheel
0.26-0.33 (tests/conformance/test_deployment_rules.py) and fails when a table here disagrees.

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
  not in 0.26; for methods eagle and eagle3 from 0.27; from 0.33 for every method but draft_model,
  and only when all its RoPE types just size a cache (`_CACHE_ONLY_ROPE_TYPES`), else vLLM limits
  max_model_len to the draft's.
"""

from __future__ import annotations

from typing import Any

from packaging.version import Version

#: (first version, methods whose max_position_embeddings vLLM raises to max_model_len, RoPE types
#: it raises them for (None: any)); speculative.py's `_maybe_override_draft_max_position_embeddings`
#: and its call site
RAISES_MAX_POSITIONS = (
    (Version("0.10"), frozenset(), None),  # no raising before 0.27 (read from 0.20-0.26)
    (Version("0.27"), frozenset({"eagle", "eagle3"}), None),
    (Version("0.33"), frozenset({"eagle", "eagle3", "dflash", "dspark", "mtp"}),
     frozenset({"default", "linear", "llama3", "ntk", "proportional"})),
)


def _raises(version: str, method: str | None) -> tuple[bool, frozenset | None]:
    v = Version(".".join(str(version).split(".")[:2]))
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
    q = (config or {}).get("quantization_config")
    if isinstance(q, dict):
        return str(q.get("quant_method") or q.get("quant_algo") or "unnamed")
    return None


def deployment_findings(spec: Any, *, verifier_dtype: str | None, verifier_positions: int | None,
                        verifier_quantization: str | None, max_model_len: int | None) -> list[Any]:
    """The findings of the rules in the module docstring for `spec`, what its verifier's config says
    (dtype, max_position_embeddings, quantization_config's method) and the server's --max-model-len."""
    from specreg.normalization.speculator import Finding
    from specreg.vllm.attention import config_dtype

    version = str(spec.vllm_version)
    draft = spec.draft_config_dict()
    found = []
    # quantization: the draft's own, per get_draft_quant_config
    mine, theirs = quant_method(draft), verifier_quantization
    if mine or theirs:
        found.append(Finding.of(
            "draft-quantization",
            f"vLLM {version} loads the draft with its own quantization config ({mine or 'none: unquantized'}), not "
            f"the verifier's ({theirs or 'none'}): get_draft_quant_config", "$.quantization_config" if mine else None))
    # dtype: the verifier's
    saved = config_dtype(draft)
    served = verifier_dtype
    if isinstance(saved, str) and isinstance(served, str) and saved != served:
        found.append(Finding.of(
            "draft-dtype-differs",
            f"the draft was saved in {saved}, the verifier in {served}: vLLM {version} runs the draft in {served} "
            "(SpeculativeConfig gives the draft the target's dtype)", "$.transformer_layer_config.dtype"))
    # max_position_embeddings against the served length
    positions = draft.get("max_position_embeddings")
    length = max_model_len or verifier_positions
    if isinstance(positions, int) and isinstance(length, int) and positions < length:
        raised, ropes = _raises(version, spec.method)
        types = _rope_types(draft)
        where = "$.transformer_layer_config.max_position_embeddings"
        said = f"--max-model-len {max_model_len}" if max_model_len else f"the verifier's {length} positions"
        if raised and (ropes is None or types <= ropes):
            found.append(Finding.of(
                "draft-positions-raised",
                f"the draft's max_position_embeddings is {positions}, below {said}: vLLM {version} raises it to "
                f"{length} for method {spec.method} (_maybe_override_draft_max_position_embeddings)", where))
        elif raised:
            found.append(Finding.of(
                "draft-positions-limit",
                f"the draft's max_position_embeddings is {positions}, below {said}, and its RoPE ({', '.join(sorted(types))}) "
                f"is not one vLLM {version} resizes: vLLM limits max_model_len to {positions}", where,
                fix=f"serve with --max-model-len {positions} or less, or use a draft trained for {length} positions"))
        else:
            found.append(Finding.of(
                "draft-positions-short",
                f"the draft's max_position_embeddings is {positions}, below {said}: vLLM {version} does not raise it for "
                f"method {spec.method}, and positions past {positions} index out of the draft's rotary cache "
                "(vLLM #48894)", where,
                fix=f"serve with --max-model-len {positions} or less, or a vLLM that raises it for {spec.method} "
                    f"({_first_raising(spec.method) or 'none yet'})"))
    return found


def _first_raising(method: str | None) -> str | None:
    for since, methods, _ in RAISES_MAX_POSITIONS:
        if method in methods:
            return f"{since}+"
    return None
