"""A run against the catalog: the baseline for the same dataset, every harness difference, and
a verdict with the entry's tolerances: `pass`, `regressed` (below a floor or a two-sided band),
`out-of-band` (above a two-sided band: vLLM's CI fails that too, e.g. `test_acceptance_length.py`'s
`abs(AL - expected) / expected <= 0.05`; a change either way means the experiment changed) or
`improved` (above a one-sided floor by more than its tolerance: fine).

Every metric the catalog records that the counters measure is judged, each by its own statistic
and tolerance (`STATISTICS`): the acceptance length, the draft acceptance rate and each listed
per-position rate. For vLLM's counters AL = 1 + k x rate (accepted / drafts = k x accepted /
draft tokens at a fixed k), so a baseline that records only a rate is judged from the same deltas.
Accuracy needs graded answers: it is shown as not judged.

A baseline sourced from vLLM's CI carries CI's own gate (direction and tolerance for AL and for the
listed per-position rates, with the file and commit; tests/test_verify_judge.py replays CI's rule).
Where a baseline states no gate, specreg's own defaults apply and the check says so
(`tolerance_from = "default"`): at temperature 0, two-sided within 5%; otherwise a floor at 90%.
"""

from __future__ import annotations

from typing import Any

import attrs

from specreg.verify.stats import Statistics
from specreg.entries import Baseline, Entry, Harness, Metric

DEFAULT_TWO_SIDED, DEFAULT_FLOOR = 0.05, 0.10
#: the baseline metrics verify measures from the counters, and what each is computed as
STATISTICS = {
    "acceptance_length": "1 + accepted / drafts",
    "draft_acceptance_rate": "accepted / draft tokens",
    "per_position": "per_pos[i] / drafts",
}
#: harness fields compared (the prompt format is compared as a whole)
COMPARED = (
    "dataset",
    "subset",
    "split",
    "num_prompts",
    "prompt",
    "temperature",
    "max_tokens",
    "k",
    "batch_size",
    "concurrency",
    "seed",
    "vllm_version",
    "gpu",
    "tensor_parallel_size",
    "stop",
    "max_model_len",
    "mode",
    "statistic",
    "draft_sample_method",
    "prefix_caching",
)


def label(metric: str) -> str:
    """A check's name as every output shows it: positions 1-based ("position 1" is the first drafted
    token, vLLM's position 0), the rest with spaces."""
    import re

    m = re.fullmatch(r"per_position\[(\d+)\]", metric)
    return f"position {int(m.group(1)) + 1}" if m else metric.replace("_", " ")


def show(value: Any) -> str:
    """A harness value as outputs print it: no reprs, no None."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, dict):
        return ", ".join(f"{k}={show(v)}" for k, v in value.items()) or "unset"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(show(v) for v in value) + "]"
    return str(value)


@attrs.frozen
class Difference:
    field: str
    run: Any
    baseline: Any

    def text(self) -> str:
        return f"{self.field}: here {show(self.run)}, baseline {show(self.baseline)}"


@attrs.frozen
class Check:
    metric: str
    measured: float
    #: the reference value (the baseline's value, the low end of its range, or its floor)
    baseline: float
    #: the baseline as written: "2.8", "2.5-2.9", ">= 2"
    baseline_text: str
    direction: str
    tolerance: float
    bounds: tuple[float | None, float | None]
    verdict: str
    tolerance_from: str  # "entry" or "default"
    #: the measured value lies closer to a bound than the run can resolve (its 95% detectable change)
    within_noise: bool = False
    #: how the measured value is computed from the counter deltas ("pooled: accepted / draft tokens")
    statistic: str = ""
    #: the 95% half-width of the measured value over the chunks (None with fewer than 2)
    detectable_change: float | None = None

    #: above this the verdict is improved (a value's or a range's floor; None for a bare floor)
    improved_above: float | None = None

    def boundaries(self) -> tuple[float, ...]:
        """The values that separate this check's verdict regions (regressed | pass | improved or
        out-of-band)."""
        return tuple(sorted({b for b in (*self.bounds, self.improved_above) if b is not None}))

    def text(self) -> str:
        """The check in one line: measured, the verdict, and the statistic and gate that gave it."""
        if self.baseline_text.startswith(">="):
            gate = "floor"
        elif self.direction == "two-sided":
            gate = f"two-sided ±{self.tolerance * 100:g}%"
        else:
            gate = f"floor at {100 - self.tolerance * 100:g}%"
        noise = f", 95% ±{self.detectable_change:.4g}" if self.detectable_change is not None else ""
        source = " (specreg's default)" if self.tolerance_from == "default" else ""
        return (
            f"{label(self.metric)} {self.measured:.4g}: {self.verdict} (baseline {self.baseline_text}, "
            f"{gate}{source}: {_bounds(self)}; {self.statistic}{noise})"
        )


@attrs.frozen
class Judgement:
    baseline_index: int | None
    baseline: Baseline | None
    differences: tuple[Difference, ...]
    checks: tuple[Check, ...]
    verdict: str  # pass | regressed | out-of-band | improved | no-baseline | unmatched | refused | secondary
    reason: str | None = None
    #: fields the run states that the baseline does not record (not differences)
    unrecorded: tuple[str, ...] = ()
    #: the other baselines of the same harness (a measured one beside a published one), each judged:
    #: (index, verdict)
    others: tuple[tuple[int, str], ...] = ()


def _plain(value: Any) -> Any:
    return attrs.asdict(value) if attrs.has(type(value)) else value


#: a prompt-format value that means the same as the field left out
_PROMPT_DEFAULTS = {"few_shot": 0}


def _compared(run: Harness, baseline: Harness):
    """(field, run's value, baseline's value) for every field (and prompt key) the baseline records."""
    for field in COMPARED:
        mine, theirs = _plain(getattr(run, field)), _plain(getattr(baseline, field))
        if field == "prompt":
            for key, value in theirs.items():
                if value is not None:
                    here = mine.get(key)
                    yield f"prompt.{key}", _PROMPT_DEFAULTS.get(key) if here is None else here, value
            continue
        if theirs is not None:
            yield field, mine, theirs


def differences(run: Harness, baseline: Harness) -> list[Difference]:
    """The fields the baseline records whose value differs in the run (a field the baseline does not
    record is not a difference: see `unrecorded`; few_shot 0 and unset are the same prompt)."""
    out = []
    for field, mine, theirs in _compared(run, baseline):
        if isinstance(mine, (list, tuple)) and isinstance(theirs, (list, tuple)):
            mine, theirs = list(mine), list(theirs)
        if mine != theirs:
            out.append(Difference(field, mine, theirs))
    return out


def unrecorded(run: Harness, baseline: Harness) -> list[str]:
    """Fields the run states that the baseline does not record."""
    recorded = {f for f, _, _ in _compared(run, baseline)}
    out = []
    for field in COMPARED:
        value = _plain(getattr(run, field))
        if field == "prompt":
            out += [
                f"prompt.{k}"
                for k, v in value.items()
                if v is not None and f"prompt.{k}" not in recorded and v != _PROMPT_DEFAULTS.get(k)
            ]
        elif value is not None and field not in recorded:
            out.append(field)
    return out


def candidates(entry: Entry, run: Harness) -> list[tuple[int, Baseline]]:
    """The entry's baselines a run on this dataset (and subset) can be compared with."""
    return [
        (i, b)
        for i, b in enumerate(entry.baselines)
        if b.harness.dataset == run.dataset and (b.harness.subset or None) == (run.subset or None) and judged(b)
    ]


def judged(baseline: Baseline) -> list[str]:
    """The metrics of `baseline` verify judges (STATISTICS), in that order."""
    m = baseline.metrics
    out = []
    for name in STATISTICS:
        metric = getattr(m, name)
        if name == "per_position":
            if metric is not None and metric.values:
                out.append(name)
        elif metric is not None and any(v is not None for v in (metric.value, metric.low, metric.floor)):
            out.append(name)
    return out


def pick_baseline(entry: Entry, run: Harness) -> tuple[int, Baseline] | None:
    """The entry's baseline for the same dataset (and subset): primary before `secondary`, then the
    one with the fewest harness differences, then published before measured (a measured baseline is
    judged beside a published one of the same harness, never instead of it), then catalog order."""
    found = candidates(entry, run)
    if not found:
        return None
    return min(
        found, key=lambda ib: (ib[1].secondary, len(differences(run, ib[1].harness)), ib[1].kind == "measured", ib[0])
    )


def describe(baseline: Baseline, index: int) -> str:
    """One baseline in a phrase: its dataset, k, kind and the metrics verify judges in it."""
    b = baseline
    metrics = ", ".join(label(m) for m in judged(b)) or "no metric verify measures"
    return (
        f"baseline {index}: {b.harness.dataset}"
        + (f":{b.harness.subset}" if b.harness.subset else "")
        + (f", k={b.harness.k}" if b.harness.k is not None else "")
        + f" ({b.kind}"
        + (", secondary" if b.secondary else "")
        + f"; {metrics})"
    )


def unmatched_reason(entry: Entry, run: Harness) -> str:
    """Why a run matched none of the entry's baselines, and only advice that works: the baselines
    verify can reproduce (a dataset it loads, a metric it measures), each by `--baseline N` alone."""
    from specreg.verify.prompts import DATASETS

    where = f"dataset {run.dataset!r}" + (f" / {run.subset!r}" if run.subset else "")
    usable = [(i, b) for i, b in enumerate(entry.baselines) if b.harness.dataset in DATASETS and judged(b)]
    if usable:
        advice = "; ".join(describe(b, i) for i, b in usable)
        return (
            f"{entry.id} has no baseline for {where} with a metric verify measures; it could be compared with "
            f"{advice} (run it with --baseline N and no --dataset: the baseline's own dataset)"
        )
    others = "; ".join(describe(b, i) for i, b in enumerate(entry.baselines))
    return (
        f"{entry.id} has no baseline for {where} with a metric verify measures, and none verify can reproduce "
        f"({others})"
    )


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
    reference = metric.value if metric.value is not None else metric.low if metric.low is not None else metric.floor
    return Check(
        name,
        measured,
        reference,
        shown,
        direction,
        tolerance,
        (low, high),
        verdict,
        source,
        improved_above=improved_above,
    )


def judge(
    stats: Statistics, run: Harness, entry: Entry | None, *, strict: bool = False, baseline: int | None = None
) -> Judgement:
    """The verdict of a run. `baseline`: the index of the baseline the run reproduces (verify's
    harness); otherwise the closest one of the same dataset."""
    if entry is None:
        return Judgement(None, None, (), (), "no-baseline", "the model is not in the catalog: measured, not judged")
    if not entry.baselines:
        return Judgement(None, None, (), (), "no-baseline", f"{entry.id} has no baseline: measured, not judged")
    found = dict(candidates(entry, run))
    if baseline is not None and baseline in found:
        picked: tuple[int, Baseline] | None = (baseline, found[baseline])
    else:
        picked = pick_baseline(entry, run)
    if picked is None:
        return Judgement(None, None, (), (), "unmatched", unmatched_reason(entry, run))
    index, chosen = picked
    diffs = tuple(differences(run, chosen.harness))
    if strict and diffs:
        return Judgement(
            index,
            chosen,
            diffs,
            (),
            "refused",
            "--strict-harness: the harness differs from the baseline's (see the differences)",
            tuple(unrecorded(run, chosen.harness)),
        )
    verdict, checks, reason = _judge_one(stats, run, chosen)
    others = []
    if not chosen.secondary:
        for i, other in sorted(found.items()):
            if i != index and not other.secondary and not differences(run, other.harness):
                others.append((i, _judge_one(stats, run, other)[0]))
    worst = next((v for v in ("regressed", "out-of-band") if v == verdict or v in dict(others).values()), verdict)
    if worst != verdict:
        at = next(i for i, v in others if v == worst)
        reason = (
            f"baseline {index} says {verdict}, baseline {at} ({entry.baselines[at].kind}, the same harness) "
            f"says {worst}"
        ) + (f"; {reason}" if reason else "")
    return Judgement(index, chosen, diffs, checks, worst, reason, tuple(unrecorded(run, chosen.harness)), tuple(others))


def _statistic(name: str, stats: Statistics) -> str:
    """How a check's measured value comes from the deltas, as its verdict says it."""
    if name == "acceptance_length" and stats.statistic == "mean-per-prompt":
        return "mean per prompt of 1 + accepted / drafts"
    formula = STATISTICS["per_position" if name.startswith("per_position") else name]
    if name.startswith("per_position"):
        formula = formula.replace("[i]", name[len("per_position") :])
    return f"pooled {formula}"


def _with_statistic(c: Check, stats: Statistics, k: int | None) -> Check:
    statistic = _statistic(c.metric, stats)
    if c.metric == "draft_acceptance_rate" and k:
        statistic += f"; at k={k}, AL 1 + {k} x rate = {1 + k * c.measured:.3f}"
    return attrs.evolve(c, statistic=statistic, detectable_change=stats.half_width(c.metric))


def _judge_one(stats: Statistics, run: Harness, baseline: Baseline) -> tuple[str, tuple[Check, ...], str | None]:
    checks = []
    m = baseline.metrics
    temperature = run.temperature
    for name, measured, metric in (
        ("acceptance_length", stats.acceptance_length, m.acceptance_length),
        ("draft_acceptance_rate", stats.draft_acceptance_rate, m.draft_acceptance_rate),
    ):
        if metric is not None:
            c = _check(name, measured, metric, temperature)
            if c:
                checks.append(_with_statistic(c, stats, run.k))
    missing = []
    if m.per_position is not None:
        for i, ref in enumerate(m.per_position.values):
            metric = Metric(value=ref, direction=m.per_position.direction, tolerance=m.per_position.tolerance)
            if i >= len(stats.per_position):
                # never skipped: vLLM's CI fails a gated position it cannot read ("Missing per-position
                # acceptance rate"), and so does specreg
                c = _check(f"per_position[{i}]", 0.0, metric, temperature)
                if c:
                    checks.append(attrs.evolve(_with_statistic(c, stats, run.k), verdict="missing"))
                    missing.append(i)
                continue
            c = _check(f"per_position[{i}]", stats.per_position[i], metric, temperature)
            if c:
                checks.append(_with_statistic(c, stats, run.k))
    noisy = []
    for at, c in enumerate(checks):
        gap = min((abs(c.measured - b) for b in c.bounds if b is not None), default=None)
        if c.verdict != "missing" and c.detectable_change is not None and gap is not None and gap < c.detectable_change:
            checks[at] = attrs.evolve(c, within_noise=True)
            noisy.append((checks[at], gap))
    # the headline check: acceptance length where the baseline records it, else the first it records
    head = checks[0]
    verdicts = {c.verdict for c in checks}
    verdict = next((v for v in ("regressed", "out-of-band") if v in verdicts), head.verdict)
    reason = None
    failed = [c for c in checks if c.verdict in ("regressed", "out-of-band", "missing")]
    if failed:
        reason = "failed: " + ", ".join(f"{label(c.metric)} {c.measured:.3f} ({_bounds(c)})" for c in failed)
    if noisy:
        reason = ((reason + "; ") if reason else "") + (
            "within noise: "
            + "; ".join(
                f"the {label(c.metric)} is {gap:.3g} from its bound and this run can only resolve changes of "
                f"±{c.detectable_change:.3g} (95%)"
                for c, gap in noisy
            )
            + "; more prompts narrow it"
        )
    if missing:
        verdict = "regressed"
        reason = (
            f"the run reported no per-position count for gated position{'s' * (len(missing) > 1)} "
            f"{', '.join(str(i + 1) for i in missing)} (is vllm:spec_decode_num_accepted_tokens_per_pos exposed?)"
        )
    if baseline.secondary:
        # a secondary number (another harness, a paper's table) is shown beside the run, never a gate
        reason = (
            f"compared with a secondary baseline ({baseline.source}): reported, not gated; "
            f"the checks alone would say {verdict}" + (f"; {reason}" if reason else "")
        )
        verdict = "secondary"
    return verdict, tuple(checks), reason


def _bounds(c: Check) -> str:
    low, high = c.bounds
    if high is None:
        return f"floor {low:.3f}"
    return f"band {low:.3f}-{high:.3f}"


def decided(stats: Statistics, run: Harness, entry: Entry, judgement: Judgement, critical: Any) -> bool:
    """Whether a look's `judgement` is the run's verdict whatever the remaining prompts say
    (specreg.verify.sequential): each check's interval, its measured value ± critical(df) x its
    standard error, holds none of its bounds, or one check's lies wholly below its floor or band
    (regressed, whatever the others say). The other baselines of the same harness count too."""
    from specreg.verify.sequential import decided as clear

    if judgement.baseline is None or judgement.verdict in ("unmatched", "refused", "no-baseline"):
        return False
    checks = list(judgement.checks)
    for i, _ in judgement.others:
        checks += _judge_one(stats, run, entry.baselines[i])[1]
    states = []
    for c in checks:
        if c.verdict == "missing" or c.metric not in stats.standard_errors:
            states.append((c, False))
            continue
        se, n = stats.standard_errors[c.metric]
        states.append((c, clear(c.measured, se, critical(n - 1), c.boundaries())))
    if any(ok and c.verdict == "regressed" for c, ok in states):
        return True
    return bool(states) and all(ok for _, ok in states)
