"""model_types as the config readers vLLM uses know them (transformers' ``CONFIG_MAPPING`` and vLLM's own
``_CONFIG_REGISTRY``), and the composite ones among them.

- A draft config.json whose model_type neither knows makes vLLM's ``get_config`` end in transformers'
  "The checkpoint you are trying to load has model type `X` but Transformers does not recognize this
  architecture": `KNOWN_MODEL_TYPES`.
- A composite model_type keeps the language model's fields under ``text_config``: transformers builds the
  composite (vision-language, audio, ...) config, which has no top-level ``vocab_size``, ``hidden_size`` or
  layers, so vLLM's draft classes fail reading them ("'Qwen2_5_VLConfig' object has no attribute
  'vocab_size'"): `COMPOSITE_MODEL_TYPES`, every ``CONFIG_MAPPING`` class with a ``text_config``
  sub-config whose default instance has no ``vocab_size``.

The transformers tables are data, read from each transformers release by one command
(`python -m specreg.transformers refresh VERSION`: specreg/transformers/facts/<version>.json;
tests/engine_tier/test_composite_types.py holds the committed files to what it writes); vLLM's, from
the ``vllm/transformers_utils/config.py`` of vLLM 0.26 on, tests/conformance/test_field_coverage.py
reads from each wheel's registry.
"""

from __future__ import annotations

from functools import cache
from typing import TYPE_CHECKING

from specreg import facts

if TYPE_CHECKING:
    from packaging.version import Version


@cache
def vllm_model_types() -> frozenset[str]:
    """The _CONFIG_REGISTRY keys of every vLLM release read (config classes vLLM ships for model types
    transformers lacks): specreg/vllm/facts/vllm_model_types.json."""
    return frozenset(facts.vllm_model_types()["model_types"])


@cache
def transformers_model_types() -> frozenset[str]:
    """The keys of transformers' CONFIG_MAPPING (specreg.transformers' facts)."""
    from specreg import transformers

    return frozenset(transformers.facts()["model_types"])


@cache
def known_model_types() -> frozenset[str]:
    """The model types transformers' CONFIG_MAPPING or vLLM's _CONFIG_REGISTRY knows."""
    return transformers_model_types() | vllm_model_types()


@cache
def composite_model_types() -> frozenset[str]:
    """The composite model types of transformers' CONFIG_MAPPING (specreg.transformers' facts)."""
    from specreg import transformers

    return frozenset(transformers.facts()["composite_model_types"])


def transformers_version() -> str:
    """The transformers release whose facts are in use."""
    from specreg import transformers

    return transformers.target()


#: the names this module had as constants, now read on first use
_LAZY = {
    "TRANSFORMERS_VERSION": transformers_version,
    "TRANSFORMERS_MODEL_TYPES": transformers_model_types,
    "KNOWN_MODEL_TYPES": known_model_types,
    "COMPOSITE_MODEL_TYPES": composite_model_types,
    "VLLM_MODEL_TYPES": vllm_model_types,
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        return _LAZY[name]()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: model_type -> (first wheel, first wheel without it or None, what the draft becomes in the newest
#: wheel that has it): the model types whose draft config vLLM's `SpeculativeConfig.hf_config_override`
#: (vllm/config/speculative.py) takes for an MTP target's and rewrites, for every draft whatever its
#: method (`compose_draft_hf_overrides`), so the draft class is never built: deepseek_v3 becomes
#: `DeepSeekMTPModel`. "refused" is a rewrite that raises on a draft's config. Each wheel's own
#: function run on a draft-shaped config (tests/conformance/draft_overrides.py) for every known release;
#: a first wheel that is the oldest known release means "it or older" (older wheels were not read).
MTP_REWRITES: dict[str, tuple[str, str | None, str]] = facts.mtp_rewrites()  # specreg/vllm/facts/mtp_rewrites.json


def mtp_rewrite(model_type: object, version: Version) -> str | None:
    """What `version`'s hf_config_override turns a draft with `model_type` into, or None if it leaves it."""
    from packaging.version import Version

    entry = MTP_REWRITES.get(model_type) if isinstance(model_type, str) else None
    if entry is None:
        return None
    since, until, becomes = entry
    if since != facts.known()[0] and version < Version(since) or until is not None and version >= Version(until):
        return None
    return becomes
