"""A run against the catalog: the baseline for the same dataset, every harness difference, and
a verdict with the entry's tolerances: `pass`, `regressed` (below a floor or a two-sided band),
`out-of-band` (above a two-sided band: vLLM's CI fails that too, e.g. `test_acceptance_length.py`'s
`abs(AL - expected) / expected <= 0.05`; a change either way means the experiment changed) or
`improved` (above a one-sided floor by more than its tolerance: fine).

A baseline sourced from vLLM's CI carries CI's own gate (direction and tolerance for AL and for the
listed per-position rates, with the file and commit; tests/test_ci_gates.py replays CI's rule).
Where a baseline states no gate, specreg's own defaults apply and the check says so
(`tolerance_from = "default"`): at temperature 0, two-sided within 5%; otherwise a floor at 90%.
"""

from __future__ import annotations

from typing import Any

import attrs

from specreg.verify.stats import Statistics
from specreg.entries import Baseline, Entry, Harness, Metric

DEFAULT_TWO_SIDED, DEFAULT_FLOOR = 0.05, 0.10
#: harness fields compared (the prompt format is compared as a whole)
COMPARED = ("dataset", "subset", "split", "num_prompts", "prompt", "temperature", "max_tokens", "k", "batch_size",
            "concurrency", "seed", "vllm_version", "gpu", "tensor_parallel_size", "stop", "max_model_len", "mode",
            "statistic", "draft_sample_method", "prefix_caching")


@attrs.frozen
class Difference:
    field: str
    run: Any
    baseline: Any

    def text(self) -> str:
        if self.baseline is None:
            return f"{self.field}: {self.run!r} (the baseline does not record it)"
        return f"{self.field}: {self.run!r} here, {self.baseline!r} in the baseline"


@attrs.frozen
class Check:
    metric: str
    measured: float
    baseline: str
    direction: str
    tolerance: float
    bounds: tuple[float | None, float | None]
    verdict: str
    tolerance_from: str  # "entry" or "default"
    #: the measured value lies closer to a bound than the run can resolve (its 95% detectable change)
    within_noise: bool = False


@attrs.frozen
class Judgement:
    baseline_index: int | None
    baseline: Baseline | None
    differences: tuple[Difference, ...]
    checks: tuple[Check, ...]
    verdict: str  # pass | regressed | out-of-band | improved | no-baseline | refused | secondary
    reason: str | None = None


def _plain(value: Any) -> Any:
    return attrs.asdict(value) if attrs.has(type(value)) else value


def differences(run: Harness, baseline: Harness) -> list[Difference]:
    out = []
    for field in COMPARED:
        mine, theirs = _plain(getattr(run, field)), _plain(getattr(baseline, field))
        if field == "prompt":
            theirs = {k: v for k, v in theirs.items() if v is not None}
            mine = {k: v for k, v in mine.items() if k in theirs or v is not None}
            if not theirs:
                theirs = None
        if mine is None and theirs is None:
            continue
        if mine != theirs:
            out.append(Difference(field, mine, theirs))
    return out


def pick_baseline(entry: Entry, run: Harness) -> tuple[int, Baseline] | None:
    """The entry's baseline for the same dataset (and subset), preferring measured over published and
    primary over `secondary`, then the one with the fewest harness differences."""
    candidates = [(i, b) for i, b in enumerate(entry.baselines)
                  if b.harness.dataset == run.dataset and (b.harness.subset or None) == (run.subset or None)
                  and b.metrics.acceptance_length is not None]
    if not candidates:
        return None
    return min(candidates, key=lambda ib: (ib[1].kind != "measured", ib[1].secondary, len(differences(run, ib[1].harness)), -ib[0]))


def _check(name: str, measured: float, metric: Metric, temperature: float | None) -> Check | None:
    direction = metric.direction or ("two-sided" if temperature == 0 else "higher")
    tolerance = metric.tolerance
    source = "entry"
    if tolerance is None:
        tolerance = DEFAULT_TWO_SIDED if direction == "two-sided" else DEFAULT_FLOOR
        source = "default"
    if metric.value is not None:
        ref, shown = metric.value, f"{metric.value:g}"
        low = ref * (1 - tolerance)
        high = ref * (1 + tolerance) if direction == "two-sided" else None
        improved_above = ref * (1 + tolerance)
    elif metric.low is not None:
        shown = f"{metric.low:g}-{metric.high:g}"
        low, high = metric.low * (1 - tolerance), (metric.high * (1 + tolerance) if direction == "two-sided" else None)
        improved_above = metric.high * (1 + tolerance)
    elif metric.floor is not None:
        shown, low, high, improved_above = f">= {metric.floor:g}", metric.floor, None, None
    else:
        return None
    if measured < low:
        verdict = "regressed"
    elif high is not None and measured > high:
        verdict = "out-of-band"
    elif improved_above is not None and measured > improved_above:
        verdict = "improved"
    else:
        verdict = "pass"
    return Check(name, measured, shown, direction, tolerance, (low, high), verdict, source)


def judge(stats: Statistics, run: Harness, entry: Entry | None, *, strict: bool = False) -> Judgement:
    if entry is None:
        return Judgement(None, None, (), (), "no-baseline", "the model is not in the catalog")
    picked = pick_baseline(entry, run)
    if picked is None:
        return Judgement(None, None, (), (), "no-baseline",
                         f"{entry.id} has no baseline for dataset {run.dataset!r}" + (f" / {run.subset!r}" if run.subset else ""))
    index, baseline = picked
    diffs = tuple(differences(run, baseline.harness))
    if strict and diffs:
        return Judgement(index, baseline, diffs, (), "refused",
                         "--strict-harness: the harness differs from the baseline's, or the baseline does not "
                         "record part of it (see the differences)")
    checks = []
    m = baseline.metrics
    temperature = run.temperature
    for name, measured, metric in (("acceptance_length", stats.acceptance_length, m.acceptance_length),
                                   ("draft_acceptance_rate", stats.draft_acceptance_rate, m.draft_acceptance_rate)):
        if metric is not None:
            c = _check(name, measured, metric, temperature)
            if c:
                checks.append(c)
    missing = []
    if m.per_position is not None:
        for i, ref in enumerate(m.per_position.values):
            metric = Metric(value=ref, direction=m.per_position.direction, tolerance=m.per_position.tolerance)
            if i >= len(stats.per_position):
                # never skipped: vLLM's CI fails a gated position it cannot read ("Missing per-position
                # acceptance rate"), and so does specreg
                c = _check(f"per_position[{i}]", 0.0, metric, temperature)
                if c:
                    checks.append(attrs.evolve(c, verdict="missing"))
                    missing.append(i)
                continue
            c = _check(f"per_position[{i}]", stats.per_position[i], metric, temperature)
            if c:
                checks.append(c)
    head = next(c for c in checks if c.metric == "acceptance_length")
    noise = stats.detectable_change
    gap = min((abs(head.measured - b) for b in head.bounds if b is not None), default=None)
    if noise is not None and gap is not None and gap < noise:
        at = checks.index(head)
        head = checks[at] = attrs.evolve(head, within_noise=True)
    verdicts = {c.verdict for c in checks}
    verdict = next((v for v in ("regressed", "out-of-band") if v in verdicts), head.verdict)
    reason = None
    if head.within_noise:
        reason = (f"within noise: the acceptance length is {gap:.3f} from its bound and this run can only resolve "
                  f"changes of ±{noise:.3f} (95%); more prompts narrow it")
    if missing:
        verdict = "regressed"
        reason = (f"the run reported no per-position count for gated position{'s' * (len(missing) > 1)} "
                  f"{', '.join(map(str, missing))} (is vllm:spec_decode_num_accepted_tokens_per_pos exposed?)")
    if baseline.secondary:
        # a secondary number (another harness, a paper's table) is shown beside the run, never a gate
        reason = (f"compared with a secondary baseline ({baseline.source}): reported, not gated; "
                  f"the checks alone would say {verdict}" + (f"; {reason}" if reason else ""))
        verdict = "secondary"
    return Judgement(index, baseline, diffs, tuple(checks), verdict, reason)
