"""What an algorithm module receives (`Context`) and returns (`Plan`).

A module fills a fresh Plan: every value goes in with its provenance, so `specreg show` can say
where each one came from. The module never touches its input: it reads through `Fields`.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Sequence

import attrs
from packaging.version import Version

from specreg.normalization.capabilities import holds, short
from specreg.normalization.speculator import Finding, LayerAttention, Provenance


@attrs.frozen
class Envelope:
    """The fields every speculators config shares, read and checked by the core."""

    num_speculative_tokens: int | None
    tokens_path: str
    verifier: str | None
    speculators_version: Version | None


@attrs.frozen
class TokenLimits:
    """An algorithm's draft-length traits for one draft: the most tokens it can produce a step (`most`;
    None: any number, one after another) and the length it was trained for (`trained`; None: the file
    does not say), each with why. `specreg.vllm.agreement.tokens_findings` holds the user's K to them."""

    most: int | None
    most_why: str
    trained: int | None
    trained_why: str


@attrs.frozen
class Context:
    """What a module may know besides the config: the target vLLM, the source's name, the envelope."""

    vllm: Version
    source: str | None
    envelope: Envelope
    #: for a native file: the architecture it names, which vLLM's registry serves it with directly
    #: (a native EAGLE-3 `LlamaForCausalLMEagle3` is Llama Eagle-3 layers whatever its model_type)
    native_architecture: str | None = None

    def holds(self, rule: str) -> bool:
        """Whether the targeted vLLM has the dated rule `rule`."""
        return holds(rule, self.vllm)

    @property
    def vllm_label(self) -> str:
        return f"vLLM {short(self.vllm)}"


def set_path(root: dict[str, Any], dotted: str, value: Any) -> None:
    """Set `root[a][b][c] = value` for "a.b.c", creating the objects on the way."""
    parts = dotted.split(".")
    node = root
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


class Plan:
    """The values one algorithm module produces for one config, with provenance and findings."""

    def __init__(self) -> None:
        self._k: int | None = None
        self.outputs: dict[str, Any] = {"draft_config": {}, "speculative_config": {}}
        self.provenance: dict[str, Provenance] = {}
        self.findings: list[Finding] = []
        self.attention: list[LayerAttention] = []
        #: the draft-length traits the algorithm declares (`TokenLimits`); None: it declares none
        self.token_limits: TokenLimits | None = None

    # -- values ----------------------------------------------------------------------------------
    def _put(self, field: str, value: Any, prov: Provenance) -> None:
        if field.startswith(("draft_config.", "speculative_config.")):
            set_path(self.outputs, field, value)
        elif field == "num_speculative_tokens":
            self._k = value
        else:
            raise ValueError(f"unknown output field {field!r}")
        self.provenance[field] = prov

    @property
    def num_speculative_tokens(self) -> int | None:
        """The draft length planned (set it with copy/derive/default, which record where it came from)."""
        return self._k

    @num_speculative_tokens.setter
    def num_speculative_tokens(self, value: Any) -> None:
        raise AttributeError(
            'Plan.num_speculative_tokens is read-only: set it with plan.copy("num_speculative_tokens", '
            'value, "$.json.path"), plan.derive(...) or plan.default(...), which record where it '
            "came from"
        )

    def copy(self, field: str, value: Any, source: str) -> None:
        """`value` is the source's value at `source`, unchanged."""
        self._put(field, value, Provenance("source", (source,)))

    def derive(self, field: str, value: Any, sources: Sequence[str], why: str) -> None:
        """`value` was computed from the source values at `sources`."""
        self._put(field, value, Provenance("derived", tuple(sources), why))

    def default(self, field: str, value: Any, why: str) -> None:
        """`value` was applied because the source did not say; `why` names whose default."""
        self._put(field, value, Provenance("default", (), why))

    def base(self, data: dict[str, Any], source: str, *, into: str = "draft_config") -> None:
        """Every key of `data` copied as the base of the output object `into` (a top-level output;
        this is `copy` for each key, without re-parsing paths: it runs for every layer-config field)."""
        target, provenance = self.outputs[into], self.provenance
        for key, value in data.items():
            target[key] = value
            path = f"{source}.{key}"
            # one shared Provenance per field name; a long (hostile) key is not kept in the cache
            provenance[f"{into}.{key}"] = _copied_from(path) if len(key) <= 200 else Provenance("source", (path,))

    def layer(self, attn: LayerAttention, sources: Sequence[str], why: str) -> None:
        self.attention.append(attn)
        self.provenance[f"attention[{attn.layer}]"] = Provenance("derived", tuple(sources), why)

    # -- findings --------------------------------------------------------------------------------
    def find(self, code: str, message: str, path: str | None = None, fix: str | None = None) -> None:
        self.findings.append(Finding.of(code, message, path, fix))


@lru_cache(maxsize=1024)
def _copied_from(path: str) -> Provenance:
    """Provenance("source", (path,)), one per path (a frozen value: every config of one algorithm shares
    its layer-config fields' provenance, built once)."""
    return Provenance("source", (path,))
