"""The values specreg produces: `Speculator` and its parts (frozen attrs classes)."""

from __future__ import annotations

import json
import os
from types import MappingProxyType
from typing import Any, Callable, Mapping

import attr  # attr.asdict(retain_collection_types=False): tuples as lists, as JSON reads them back
import attrs

from specreg.normalization.findings import SERVED_DIFFERENTLY, SEVERITIES, code_of
from specreg.sources.files import Origin


_SCALARS = frozenset({str, int, float, bool, type(None)})


def _freeze(value: Any) -> Any:
    """A read-only deep view: dicts become mapping proxies, lists become tuples.
    (Scalars, most of a config, are kept without a call: this runs on every normalize.)"""
    if isinstance(value, dict):
        return MappingProxyType({k: v if type(v) in _SCALARS else _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple([v if type(v) in _SCALARS else _freeze(v) for v in value])
    return value


def as_tuple(items: Any) -> tuple[Any, ...]:
    """tuple(items), as an attrs converter: attrs reads a converter's signature, and a builtin's
    (tuple's own) is parsed with `tokenize`, whose first use compiles a regular expression that costs
    a short command a fifth of its time."""
    return tuple(items)


def thaw(value: Any) -> Any:
    """A plain, mutable deep copy of a frozen value (for JSON and for handing to vLLM)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (tuple, list)):
        return [thaw(v) for v in value]
    return value


class LLMKwargs(dict):
    """`vllm.LLM(**kwargs)` keyword arguments (a plain dict), with `.env`: the environment variables
    vLLM needs to serve the draft as trained (set them before vLLM starts; {} when none)."""

    def __init__(self, kwargs: dict[str, Any], *, env: dict[str, str]):
        super().__init__(kwargs)
        self.env = dict(env)


@attrs.frozen
class Finding:
    """Something a user should know about the draft: a code from `specreg.normalization.findings.CODES`."""

    code: str
    severity: str = attrs.field(validator=attrs.validators.in_(SEVERITIES))
    message: str
    path: str | None = None
    #: what to do about it, when there is something to do
    fix: str | None = None

    @classmethod
    def of(cls, code: str, message: str, path: str | None = None, fix: str | None = None) -> "Finding":
        """A finding with the severity its code is documented with, and the code's own fix when the
        emitter gives none."""
        registered = code_of(code)
        return cls(
            code=code,
            severity=registered.severity,
            message=message,
            path=path,
            fix=fix if fix is not None else registered.fix,
        )

    def to_dict(self) -> dict[str, Any]:
        return attr.asdict(self, retain_collection_types=False)


@attrs.frozen
class Provenance:
    """Where one output value came from.

    kind: "source" (copied from `sources[0]`), "derived" (computed from `sources`) or
    "default" (applied because the source did not say; `why` says whose default and why).
    Only specreg's Plan creates them (about 40 per normalize), so the kind is not re-validated on
    each; tests check every kind produced is one of `KINDS`.
    """

    KINDS = ("source", "derived", "default")

    kind: str
    sources: tuple[str, ...] = ()
    why: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attr.asdict(self, retain_collection_types=False)

    def describe(self) -> str:
        if self.kind == "source":
            return f"from {self.sources[0]}"
        if self.kind == "derived":
            base = f"derived from {', '.join(self.sources)}" if self.sources else "derived"
            return f"{base}: {self.why}" if self.why else base
        return f"default: {self.why}"


@attrs.frozen
class LayerAttention:
    """How one draft layer attends inside the draft block, as it was trained."""

    layer: int
    kind: str = attrs.field(validator=attrs.validators.in_(("full", "sliding")))
    window: int | None
    causal: bool

    def to_dict(self) -> dict[str, Any]:
        return attr.asdict(self, retain_collection_types=False)


def _json_value(_: Any, field: attrs.Attribute, value: Any) -> Any:
    """One Speculator field in its JSON form: parts through their own to_dict (the catalog entry and the
    checks are typed Any here, as their modules import this one), provenance by key."""
    if field.name == "provenance":
        return {k: v.to_dict() for k, v in sorted(value.items())}
    if isinstance(value, tuple):
        return [v.to_dict() for v in value]
    return value.to_dict() if hasattr(value, "to_dict") else thaw(value)


#: what later stages let a Speculator do (name -> function(spec, ...)); filled when they are imported
WRITERS: dict[str, Callable[..., Any]] = {}


@attrs.frozen
class Speculator:
    """A draft model's configuration, normalized for one vLLM version as it was trained."""

    # in the order of `specreg show --json`'s keys (to_dict)
    algorithm: str
    #: "speculators", or the native format the config was read in (`specreg.sources.native`)
    format: str = attrs.field(default="speculators", kw_only=True)
    method: str | None
    verifier: str | None
    num_speculative_tokens: int | None
    vllm_version: str
    draft_config: Mapping[str, Any] = attrs.field(converter=_freeze)
    speculative_config: Mapping[str, Any] = attrs.field(converter=_freeze)
    attention: tuple[LayerAttention, ...] = attrs.field(converter=as_tuple)
    findings: tuple[Finding, ...] = attrs.field(converter=as_tuple)
    provenance: Mapping[str, Provenance] = attrs.field(converter=lambda d: MappingProxyType(dict(d)))
    source_config: Mapping[str, Any] = attrs.field(converter=_freeze, repr=False)
    origin: Origin | None = None
    #: the catalog entry (`specreg.catalog.Entry`) when the source is a Hub repo the catalog knows
    catalog: Any = None
    #: pre-flight results (`specreg.vllm.preflight.Checks`) when load() ran the checks
    checks: Any = None
    #: the draft-length traits its algorithm declared (`specreg.normalization.plan.TokenLimits`), not in to_dict
    token_limits: Any = attrs.field(default=None, kw_only=True)
    #: every key of the source config and how it is accounted for (`specreg.normalization.ledger`;
    #: speculators-format sources)
    ledger: tuple[Any, ...] = attrs.field(default=(), converter=as_tuple)

    @property
    def servable(self) -> bool:
        """Whether the targeted vLLM can serve this draft as trained (no error findings)."""
        return self.method is not None and not self.errors

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def needs_v2_model_runner(self) -> bool:
        """Whether vLLM serves this draft as trained only on its V2 model runner. The algorithm module
        decides it from vLLM's code and says why in a `needs-v2-model-runner` finding (mixed
        sliding/full layers, DFlash2's candidate head, DSpark): this reads that finding."""
        return any(f.code == "needs-v2-model-runner" for f in self.findings)

    @property
    def serve_env(self) -> dict[str, str]:
        """The environment vLLM needs to serve this draft as trained (empty when none)."""
        return {"VLLM_USE_V2_MODEL_RUNNER": "1"} if self.needs_v2_model_runner else {}

    @property
    def served_differently(self) -> tuple[Finding, ...]:
        """The findings saying that vLLM, given the unmodified file, would not serve the draft as
        trained; when there are any, serve a materialized directory (`materialize`)."""
        return tuple(f for f in self.findings if f.code in SERVED_DIFFERENTLY)

    @property
    def materialize_reason(self) -> str | None:
        """Why vLLM cannot be pointed at the unmodified source to serve the draft as trained (so a
        materialized directory is needed), or None when it can."""
        if self.served_differently:
            codes = ", ".join(sorted({f.code for f in self.served_differently}))
            return f"the unmodified file would be served differently from how it was trained ({codes})"
        if any(f.code == "vllm-maps-through-specreg" for f in self.findings):
            return (
                f"no vLLM release maps {self.algorithm} itself (vllm-maps-through-specreg): vLLM loads the "
                "unmodified file only with specreg's plugin active"
            )
        if self.format != "speculators":
            return f"a {self.format} config: the materialized directory states the trained plan in the form vLLM loads"
        origin = self.origin
        if origin is None or (origin.repo_id is None and origin.path is None):
            return "it was normalized from a dict, not read from a draft directory"
        if origin.repo_id is None and os.path.basename(origin.path) != "config.json":
            return f"vLLM reads config.json from a draft directory, and this config is {os.path.basename(origin.path)}"
        return None

    def llm_kwargs(self, draft: str | None = None, verifier: str | None = None) -> dict[str, Any]:
        """Keyword arguments for `vllm.LLM`: ``{"model": verifier, "speculative_config": {...}}``.

        draft: the draft model vLLM loads, by default where the config came from (the Hub repo at
        the commit that was read, or the local directory). That default is refused when the
        unmodified file would be served differently from how it was trained: pass a directory
        written by `materialize` (or call ``spec.materialize(DIR).llm_kwargs()``).
        """
        from specreg.errors import SpecregError

        source = self.origin.source if self.origin else None
        if self.method is None:
            raise SpecregError(f"{self.algorithm} drafts are not served by vLLM's speculators path", source=source)
        verifier = verifier or self.verifier
        if not verifier:
            raise SpecregError("the config names no verifier; pass verifier=", source=source)
        revision = None
        if draft is None:
            reason = self.materialize_reason
            if reason:
                raise SpecregError(
                    f"{reason}: materialize it and pass that directory: spec.materialize(DIR).llm_kwargs()",
                    source=source,
                )
            if self.origin.repo_id:
                draft, revision = self.origin.repo_id, self.origin.commit or self.origin.revision
            else:
                draft = os.path.dirname(os.path.abspath(self.origin.path))
        cfg = self.speculative_config_dict()
        spec_cfg: dict[str, Any] = {"method": cfg.pop("method"), "model": draft}
        if revision:
            spec_cfg["revision"] = revision
        spec_cfg["num_speculative_tokens"] = cfg.pop("num_speculative_tokens")
        spec_cfg.update(cfg)
        return LLMKwargs({"model": verifier, "speculative_config": spec_cfg}, env=self.serve_env)

    def materialize(
        self, directory: str | os.PathLike[str], *, weights: str = "link", force: bool = False, progress: Any = None
    ) -> Any:
        """Write a vLLM-ready draft directory (config.json as vLLM loads it directly, plus the
        weights linked, copied or left out: weights="link" | "copy" | "none"). Returns a
        `specreg.vllm.materialize.Materialized` (``.directory``, ``.files``, ``.llm_kwargs()``).

        The writing is the vLLM stage's (`specreg.vllm.materialize`, which registers itself in
        `WRITERS` when imported; `specreg.load` and `specreg.normalize` import it): normalization
        knows nothing of the stages after it."""
        writer = WRITERS.get("materialize")
        if writer is None:
            from specreg.errors import SpecregError

            raise SpecregError(
                "nothing registered to write a draft directory: import specreg.vllm.materialize "
                "(specreg.load and specreg.normalize do)"
            )
        return writer(self, directory, weights=weights, force=force, progress=progress)

    def draft_config_dict(self) -> dict[str, Any]:
        """A plain, mutable copy of `draft_config`."""
        return thaw(self.draft_config)

    def speculative_config_dict(self) -> dict[str, Any]:
        """A plain, mutable copy of `speculative_config`."""
        return thaw(self.speculative_config)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form printed by ``specreg show SOURCE --json``."""
        return attrs.asdict(
            self,
            recurse=False,
            filter=lambda field, _: field.name not in ("source_config", "token_limits"),
            value_serializer=_json_value,
        )

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2, sort_keys=False)
