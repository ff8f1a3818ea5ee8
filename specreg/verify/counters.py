"""vLLM's spec-decode counters, read from a server's Prometheus text or from `LLM.get_metrics()`.

The four counters (DESIGN.md, "Acceptance metrics"):
``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``, ``..._num_accepted_tokens`` and
``..._num_accepted_tokens_per_pos`` (label ``position``; position i counts drafts with at least
i+1 accepted tokens). A server exposes them with a ``_total`` suffix; several label sets (engines,
models) are summed.
"""

from __future__ import annotations

import operator
from itertools import zip_longest
from typing import Any, Callable, Iterable

import attrs

PREFIX = "vllm:spec_decode_"
DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = (f"{PREFIX}{n}" for n in (
    "num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos"))


class CounterError(ValueError):
    """The counters are missing or malformed."""


@attrs.frozen
class SpecCounters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: tuple[int, ...] = ()

    def _combine(self, other: "SpecCounters", op: Callable[[int, int], int]) -> "SpecCounters":
        """Field by field, per-position counters padded with zeros to the longer of the two."""
        return SpecCounters(op(self.drafts, other.drafts), op(self.draft_tokens, other.draft_tokens),
                            op(self.accepted, other.accepted), _pairwise(self.per_pos, other.per_pos, op))

    def __sub__(self, before: "SpecCounters") -> "SpecCounters":
        return self._combine(before, operator.sub)

    def __add__(self, other: "SpecCounters") -> "SpecCounters":
        return self._combine(other, operator.add)

    @property
    def moved(self) -> bool:
        return bool(self.drafts or self.draft_tokens or self.accepted or any(self.per_pos))

    def to_dict(self) -> dict[str, Any]:
        return {"drafts": self.drafts, "draft_tokens": self.draft_tokens, "accepted": self.accepted,
                "per_pos": list(self.per_pos)}


def _pairwise(a: Iterable[int], b: Iterable[int], op: Callable[[int, int], int]) -> tuple[int, ...]:
    return tuple(op(x, y) for x, y in zip_longest(a, b, fillvalue=0))


def _per_pos(by_position: dict[int, float]) -> tuple[int, ...]:
    if not by_position:
        return ()
    return tuple(int(by_position.get(i, 0)) for i in range(max(by_position) + 1))


def from_prometheus(text: str) -> SpecCounters:
    """Counters from a vLLM server's `/metrics` (Prometheus text format)."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    by_position: dict[int, float] = {}
    seen = set()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # prometheus_client raises ValueError and friends on bad text
        raise CounterError(f"not Prometheus text: {exc}") from None
    for family in families:
        for sample in family.samples:
            name = sample.name[: -len("_total")] if sample.name.endswith("_total") else sample.name
            if name in totals:
                totals[name] += sample.value
                seen.add(name)
            elif name == PER_POS:
                try:
                    pos = int(sample.labels["position"])
                except (KeyError, ValueError):
                    raise CounterError(f"{PER_POS} sample without an integer position label: {sample.labels}") from None
                by_position[pos] = by_position.get(pos, 0.0) + sample.value
    missing = [n for n in totals if n not in seen]
    if missing:
        raise CounterError(f"no {', '.join(missing)} in the metrics: is speculative decoding on, and are "
                           "stats logged (vLLM: not --disable-log-stats)?")
    return SpecCounters(int(totals[DRAFTS]), int(totals[DRAFT_TOKENS]), int(totals[ACCEPTED]), _per_pos(by_position))


def from_vllm_metrics(metrics: Iterable[Any]) -> SpecCounters:
    """Counters from `vllm.LLM.get_metrics()`: `Counter(name, labels, value)` and, for the
    per-position counter, `Vector(name, labels, values)` (matched by attributes, so vLLM itself
    need not be imported)."""
    totals = {DRAFTS: 0, DRAFT_TOKENS: 0, ACCEPTED: 0}
    per_pos: tuple[int, ...] = ()
    seen = set()
    for metric in metrics:
        name = getattr(metric, "name", None)
        if name in totals and hasattr(metric, "value"):
            totals[name] += int(metric.value)
            seen.add(name)
        elif name == PER_POS and hasattr(metric, "values"):
            per_pos = _pairwise(per_pos, (int(v) for v in metric.values), operator.add)
    missing = [n for n in totals if n not in seen]
    if missing:
        raise CounterError(f"no {', '.join(missing)} in LLM.get_metrics(): build the LLM with "
                           "disable_log_stats=False and a speculative_config")
    return SpecCounters(totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED], per_pos)
