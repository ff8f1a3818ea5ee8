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

import attr  # attr.asdict(retain_collection_types=False): tuples as lists, as JSON reads them back
import attrs

PREFIX = "vllm:spec_decode_"
DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POS = (
    f"{PREFIX}{n}" for n in ("num_drafts", "num_draft_tokens", "num_accepted_tokens", "num_accepted_tokens_per_pos")
)
#: tokens the engine generated (vLLM's own counter, vllm/v1/metrics/loggers.py); optional: throughput only
GENERATED = "vllm:generation_tokens"


class CounterError(ValueError):
    """The counters are missing or malformed."""


#: the highest per-position index accepted (no draft has more positions: specreg's MAX_COUNT)
MAX_POSITIONS = 4096


@attrs.frozen
class SpecCounters:
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_pos: tuple[int, ...] = ()
    #: output tokens generated (vllm:generation_tokens), where the engine exposes it
    generated: int | None = None
    #: wall seconds a chunk took (set on a chunk's delta by `engines.measure`)
    seconds: float | None = None

    def _combine(self, other: "SpecCounters", op: Callable[[Any, Any], Any]) -> "SpecCounters":
        """Field by field, per-position counters padded with zeros to the longer of the two; the
        optional fields only where both have them."""

        def both(a: Any, b: Any) -> Any:
            return None if a is None or b is None else op(a, b)

        return SpecCounters(
            op(self.drafts, other.drafts),
            op(self.draft_tokens, other.draft_tokens),
            op(self.accepted, other.accepted),
            _pairwise(self.per_pos, other.per_pos, op),
            both(self.generated, other.generated),
            both(self.seconds, other.seconds),
        )

    def __sub__(self, before: "SpecCounters") -> "SpecCounters":
        return self._combine(before, operator.sub)

    def __add__(self, other: "SpecCounters") -> "SpecCounters":
        return self._combine(other, operator.add)

    @property
    def moved(self) -> bool:
        return bool(self.drafts or self.draft_tokens or self.accepted or any(self.per_pos) or self.generated)

    def to_dict(self) -> dict[str, Any]:
        """The four counters."""
        return attr.asdict(self, filter=COUNTS, retain_collection_types=False)

    def chunk_dict(self) -> dict[str, Any]:
        """A chunk's delta as result.json keeps it (with its output tokens and seconds: a resumed run
        rebuilds its chunks from these, `from_chunk_dict`)."""
        return attr.asdict(self, retain_collection_types=False)

    @classmethod
    def from_chunk_dict(cls, d: Any) -> "SpecCounters":
        """The inverse of `chunk_dict`; CounterError for anything else (a result file is untrusted)."""

        def count(v: Any) -> int:
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise CounterError(f"not a count: {v!r}")
            return v

        if not isinstance(d, dict) or not isinstance(d.get("per_pos"), list):
            raise CounterError("not a chunk's counters")
        seconds = d.get("seconds")
        if seconds is not None and (
            not isinstance(seconds, (int, float)) or isinstance(seconds, bool) or not 0 <= seconds < float("inf")
        ):
            raise CounterError(f"not seconds: {seconds!r}")
        generated = d.get("generated")
        return cls(
            count(d.get("drafts")),
            count(d.get("draft_tokens")),
            count(d.get("accepted")),
            tuple(count(v) for v in d["per_pos"]),
            None if generated is None else count(generated),
            None if seconds is None else float(seconds),
        )


#: the four spec-decode counters of a SpecCounters (an attrs.asdict filter): without the chunk's
#: output tokens and seconds
COUNTS = attrs.filters.exclude("generated", "seconds")


def _pairwise(a: Iterable[int], b: Iterable[int], op: Callable[[int, int], int]) -> tuple[int, ...]:
    return tuple(op(x, y) for x, y in zip_longest(a, b, fillvalue=0))


def _per_pos(by_position: dict[int, float]) -> tuple[int, ...]:
    if not by_position:
        return ()
    return tuple(int(by_position.get(i, 0)) for i in range(max(by_position) + 1))


def from_prometheus(text: str, *, speculative: bool = True) -> SpecCounters:
    """Counters from a vLLM server's `/metrics` (Prometheus text format). `speculative=False`: a
    server without a draft (the baseline engine of a speedup), which has only the generated tokens."""
    from prometheus_client.parser import text_string_to_metric_families

    totals = {DRAFTS: 0.0, DRAFT_TOKENS: 0.0, ACCEPTED: 0.0}
    by_position: dict[int, float] = {}
    generated: float | None = None
    seen = set()
    try:
        families = list(text_string_to_metric_families(text))
    except Exception as exc:  # prometheus_client raises ValueError and friends on bad text
        raise CounterError(f"not Prometheus text: {exc}") from None
    for family in families:
        for sample in family.samples:
            name = sample.name[: -len("_total")] if sample.name.endswith("_total") else sample.name
            if (name in totals or name == PER_POS) and not (0 <= sample.value < float("inf")):
                raise CounterError(f"{sample.name} is {sample.value}: a counter is a finite number >= 0")
            if name in totals:
                totals[name] += sample.value
                seen.add(name)
            elif name == GENERATED and 0 <= sample.value < float("inf"):
                generated = (generated or 0.0) + sample.value
            elif name == PER_POS:
                try:
                    pos = int(sample.labels["position"])
                except (KeyError, ValueError):
                    raise CounterError(f"{PER_POS} sample without an integer position label: {sample.labels}") from None
                if not 0 <= pos < MAX_POSITIONS:
                    raise CounterError(f"{PER_POS} position {pos} is out of range (0-{MAX_POSITIONS - 1})")
                by_position[pos] = by_position.get(pos, 0.0) + sample.value
    missing = [n for n in totals if n not in seen]
    if not speculative:
        if generated is None:
            raise CounterError(f"no {GENERATED} in the metrics: are stats logged (vLLM: not --disable-log-stats)?")
    elif missing:
        raise CounterError(
            f"no {', '.join(missing)} in the metrics: is speculative decoding on, and are "
            "stats logged (vLLM: not --disable-log-stats)?"
        )
    overflowed = [
        n
        for n, v in [*totals.items(), *((f"{PER_POS}[{p}]", v) for p, v in by_position.items())]
        if not v < float("inf")
    ]
    if overflowed:  # each sample finite, their sum not (two engines at 1e308)
        raise CounterError(f"{overflowed[0]} sums to infinity over its label sets: not a counter")
    return SpecCounters(
        int(totals[DRAFTS]),
        int(totals[DRAFT_TOKENS]),
        int(totals[ACCEPTED]),
        _per_pos(by_position),
        int(generated) if generated is not None and generated < float("inf") else None,
    )


def from_vllm_metrics(metrics: Iterable[Any], *, speculative: bool = True) -> SpecCounters:
    """Counters from `vllm.LLM.get_metrics()`: `Counter(name, labels, value)` and, for the
    per-position counter, `Vector(name, labels, values)` (matched by attributes, so vLLM itself
    need not be imported)."""
    totals = {DRAFTS: 0, DRAFT_TOKENS: 0, ACCEPTED: 0}
    per_pos: tuple[int, ...] = ()
    generated: int | None = None
    seen = set()
    for metric in metrics:
        name = getattr(metric, "name", None)
        if name in totals and hasattr(metric, "value"):
            totals[name] += int(metric.value)
            seen.add(name)
        elif name == GENERATED and hasattr(metric, "value"):
            generated = (generated or 0) + int(metric.value)
        elif name == PER_POS and hasattr(metric, "values"):
            per_pos = _pairwise(per_pos, (int(v) for v in metric.values), operator.add)
    missing = [n for n in totals if n not in seen]
    if not speculative:
        if generated is None:
            raise CounterError(f"no {GENERATED} in LLM.get_metrics(): build the LLM with disable_log_stats=False")
    elif missing:
        raise CounterError(
            f"no {', '.join(missing)} in LLM.get_metrics(): build the LLM with "
            "disable_log_stats=False and a speculative_config"
        )
    return SpecCounters(totals[DRAFTS], totals[DRAFT_TOKENS], totals[ACCEPTED], per_pos, generated)


def check_delta(delta: SpecCounters, *, chunk: int) -> SpecCounters:
    """Refuse a chunk's counter delta that cannot be a measurement: a counter that went down (a
    restarted server), more accepted tokens than draft tokens, a position counted in more drafts
    than there were, or per-position counts that grow with the position."""
    where = f"chunk {chunk}"
    for field in ("drafts", "draft_tokens", "accepted"):
        if getattr(delta, field) < 0:
            raise CounterError(
                f"{where}: {PREFIX}num_{field} went down by {-getattr(delta, field)}: the server's "
                "counters were reset (restarted?) during the run; measure again"
            )
    if any(v < 0 for v in delta.per_pos):
        raise CounterError(f"{where}: {PER_POS} went down: the server's counters were reset during the run")
    if delta.accepted > delta.draft_tokens:
        raise CounterError(f"{where}: {delta.accepted} accepted tokens but {delta.draft_tokens} draft tokens")
    if any(v > delta.drafts for v in delta.per_pos):
        raise CounterError(
            f"{where}: a position was accepted in more drafts ({max(delta.per_pos)}) than there were ({delta.drafts})"
        )
    if any(later > earlier for earlier, later in zip(delta.per_pos, delta.per_pos[1:])):
        raise CounterError(
            f"{where}: per-position counts grow with the position ({list(delta.per_pos)}); position i "
            "counts drafts with at least i + 1 accepted tokens, which cannot grow"
        )
    return delta


def check_possible(delta: SpecCounters, *, requests: int, max_tokens: int | None, chunk: int) -> SpecCounters:
    """Refuse a chunk's delta that its requests could not have produced: each of `requests` completions
    ends at `max_tokens` output tokens, and each draft is verified in a step that emits at least one
    of them, so a chunk has at most requests x max_tokens drafts (a server claiming 10^7 drafts for
    6 completions of 256 tokens is not measuring them)."""
    if max_tokens is None:
        return delta
    most = requests * max_tokens
    if delta.drafts > most:
        raise CounterError(
            f"chunk {chunk}: {DRAFTS} rose by {delta.drafts:,} over {requests} completion{'s' * (requests != 1)} "
            f"of at most {max_tokens} tokens (at most {most:,} drafts): not a measurement of these prompts"
        )
    if delta.draft_tokens > delta.drafts * MAX_POSITIONS:
        raise CounterError(
            f"chunk {chunk}: {delta.draft_tokens:,} draft tokens in {delta.drafts:,} drafts: more than "
            f"{MAX_POSITIONS} tokens per draft"
        )
    return delta
