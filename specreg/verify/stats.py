"""Acceptance statistics from counter deltas, with a confidence interval from per-chunk deltas.

AL = 1 + accepted / drafts (the bonus token included); per-position rate p_i = per_pos[i] /
drafts (they sum to AL - 1); draft acceptance rate = accepted / draft_tokens.

Two statistics, as the sources define them: "pooled" is one AL over the whole run (vLLM's
batched CI tests read the engine's counters once); "mean-per-prompt" is the mean of each prompt's
own AL, run one prompt at a time (vLLM's DFlash reference test, `run_acceptance_length_eval`; a
prompt without drafts counts as 1, as its `compute_acceptance_len` returns). The interval is a
95% t-interval over the chunks' (or prompts') own ALs; its half-width is the smallest change of AL
the run can tell from noise at 95% confidence (`detectable_change`). Every other metric has its
own standard error the same way, over the chunks' own values (`standard_errors`): the draft
acceptance rate accepted / draft tokens, each position's per_pos[i] / drafts.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Sequence

import attr  # attr.asdict(retain_collection_types=False): tuples as lists, as JSON reads them back
import attrs

from specreg.verify.counters import SpecCounters

#: two-sided 95% Student t quantiles t(0.975, df) for df = 1..30; above 30 the normal 1.96
_T975 = (
    12.706,
    4.303,
    3.182,
    2.776,
    2.571,
    2.447,
    2.365,
    2.306,
    2.262,
    2.228,
    2.201,
    2.179,
    2.160,
    2.145,
    2.131,
    2.120,
    2.110,
    2.101,
    2.093,
    2.086,
    2.080,
    2.074,
    2.069,
    2.064,
    2.060,
    2.056,
    2.052,
    2.048,
    2.045,
    2.042,
)


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


@attrs.frozen
class Statistics:
    # in the order of to_dict's keys
    counters: SpecCounters
    chunks: int
    statistic: str = attrs.field(default="pooled", kw_only=True)
    acceptance_length: float
    per_position: tuple[float, ...]
    draft_acceptance_rate: float
    #: 95% interval of the acceptance length over chunks; None with fewer than 2 usable chunks
    al_interval: tuple[float, float] | None
    #: metric -> (standard error over the chunks' own values, their number): "acceptance_length",
    #: "draft_acceptance_rate", "per_position[i]"; a metric with fewer than 2 usable chunks is left out
    standard_errors: dict[str, tuple[float, int]] = attrs.field(factory=dict, kw_only=True, eq=False)

    def half_width(self, metric: str) -> float | None:
        """The 95% t-interval's half-width of `metric` (its detectable change), or None."""
        if metric not in self.standard_errors:
            return None
        se, n = self.standard_errors[metric]
        return t975(n - 1) * se

    @property
    def output_tokens_per_s(self) -> float | None:
        """Output tokens per wall second over the run (vllm:generation_tokens over the chunks' time):
        a property of this engine, GPU, batch and concurrency, not of the draft alone."""
        c = self.counters
        return None if not c.generated or not c.seconds else c.generated / c.seconds

    @property
    def ms_per_output_token(self) -> float | None:
        """Wall milliseconds per output token over the run (the inverse of the run's throughput; with one
        request in flight, the time per output token a user sees)."""
        c = self.counters
        return None if not c.generated or not c.seconds else 1000.0 * c.seconds / c.generated

    @property
    def detectable_change(self) -> float | None:
        """The smallest AL change this run could detect at 95% confidence (the interval's half-width)."""
        return None if self.al_interval is None else (self.al_interval[1] - self.al_interval[0]) / 2

    def to_dict(self) -> dict[str, Any]:
        """The fields (the counters without the run's output tokens and seconds, which follow with the
        derived figures)."""
        return {
            **attr.asdict(
                self, filter=attrs.filters.exclude(*COUNTS_EXCLUDED, "standard_errors"), retain_collection_types=False
            ),
            "standard_errors": {k: v[0] for k, v in self.standard_errors.items()},
            "detectable_change": self.detectable_change,
            "output_tokens": self.counters.generated,
            "seconds": self.counters.seconds,
            "output_tokens_per_s": self.output_tokens_per_s,
            "ms_per_output_token": self.ms_per_output_token,
        }


def acceptance_length(c: SpecCounters) -> float:
    return 1.0 + c.accepted / c.drafts


#: the chunk fields `to_dict` leaves out of the counters (they follow with the derived figures)
COUNTS_EXCLUDED = ("generated", "seconds")


def _standard_error(values: Sequence[float]) -> tuple[float, int] | None:
    return (statistics.stdev(values) / math.sqrt(len(values)), len(values)) if len(values) >= 2 else None


def chunk_values(chunks: Sequence[SpecCounters], statistic: str = "pooled") -> dict[str, list[float]]:
    """Each metric's value per chunk (per prompt with "mean-per-prompt"), the chunks that cannot
    have one (no drafts) left out; with "mean-per-prompt" a prompt without drafts has AL 1."""
    if statistic == "mean-per-prompt":
        al = [acceptance_length(c) if c.drafts > 0 else 1.0 for c in chunks]
    else:
        al = [acceptance_length(c) for c in chunks if c.drafts > 0]
    out = {
        "acceptance_length": al,
        "draft_acceptance_rate": [c.accepted / c.draft_tokens for c in chunks if c.draft_tokens > 0],
    }
    positions = max((len(c.per_pos) for c in chunks), default=0)
    for i in range(positions):
        out[f"per_position[{i}]"] = [
            (c.per_pos[i] if i < len(c.per_pos) else 0) / c.drafts for c in chunks if c.drafts > 0
        ]
    return out


def total(chunks: Sequence[SpecCounters]) -> SpecCounters:
    """The chunks' deltas summed (the optional fields stay only where every chunk has them)."""
    out = chunks[0] if chunks else SpecCounters()
    for c in chunks[1:]:
        out = out + c
    return out


def compute(chunks: Sequence[SpecCounters], statistic: str = "pooled") -> Statistics:
    """Statistics over the chunks' counter deltas (raises ValueError when no draft was made).
    With "mean-per-prompt" each chunk is one prompt."""
    total_ = total(chunks)
    if total_.drafts <= 0:
        raise ValueError("no drafts were counted: speculative decoding did not run")
    values = chunk_values(chunks, statistic)
    per_chunk = values["acceptance_length"]
    errors = {name: se for name, v in values.items() if (se := _standard_error(v)) is not None}
    interval = None
    if len(per_chunk) >= 2:
        mean = statistics.fmean(per_chunk)
        half = t975(len(per_chunk) - 1) * statistics.stdev(per_chunk) / math.sqrt(len(per_chunk))
        interval = (mean - half, mean + half)
    return Statistics(
        counters=total_,
        chunks=len(chunks),
        acceptance_length=statistics.fmean(per_chunk) if statistic == "mean-per-prompt" else acceptance_length(total_),
        per_position=tuple(p / total_.drafts for p in total_.per_pos),
        draft_acceptance_rate=total_.accepted / total_.draft_tokens if total_.draft_tokens else 0.0,
        al_interval=interval,
        statistic=statistic,
        standard_errors=errors,
    )
