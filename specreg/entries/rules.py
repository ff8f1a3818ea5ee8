"""What an entry's types cannot say, checked: ids, pins, algorithm names, dates, metric ranges
(`problems`, fatal), and the consistency of published numbers (`warnings`, reported). `parse_entry`
is one file through the schema and these rules."""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs

from specreg.entries import limits
from specreg.entries.schema import Baseline, Entry, cattrs_problems, converter
from specreg.errors import Problem, SpecregError

_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
_SHORT_COMMIT = re.compile(r"^[0-9a-f]{7,40}\Z")
_SHA256 = re.compile(r"^[0-9a-f]{64}\Z")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\Z")


def parse_entry(text: str, *, file: str) -> tuple[Entry | None, list[Problem]]:
    """One TOML file -> its entry and the problems found (the entry is None when it cannot be built)."""
    import tomllib

    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        return None, [Problem("$", f"invalid TOML: {exc}")]
    except ValueError as exc:  # e.g. an integer of more digits than Python converts
        return None, [Problem("$", f"invalid TOML: {exc}")]
    except RecursionError:
        return None, [Problem("$", "invalid TOML: nested too deeply")]
    try:
        entry = converter().structure(doc, Entry)
    except Exception as exc:  # cattrs' validation errors (grouped); turned into paths below
        import cattrs

        if not isinstance(exc, (cattrs.BaseValidationError, ValueError, TypeError)):
            raise
        return None, cattrs_problems(exc)
    entry = attrs.evolve(entry, path=file)
    return entry, problems(entry, file=file)


def problems(entry: Entry, *, file: str | None = None) -> list[Problem]:
    """What the schema's types cannot say: ids, pins, algorithms, dates and metric ranges."""
    from specreg.normalization import algorithms
    from specreg.sources.files import is_repo_id

    out: list[Problem] = []
    if not is_repo_id(entry.id) or "/" not in entry.id:
        out.append(Problem("$.id", f"{json.dumps(entry.id)} is not a Hub repo id (org/name)"))
    elif file is not None:
        expected = Path(*entry.id.split("/")).as_posix() + ".toml"
        if not Path(file).as_posix().endswith("/" + expected) and Path(file).as_posix() != expected:
            out.append(Problem("$.id", f"{json.dumps(entry.id)} belongs in {expected}, not in {Path(file).name}"))
    if not is_repo_id(entry.verifier.id):
        out.append(Problem("$.verifier.id", f"{json.dumps(entry.verifier.id)} is not a Hub repo id"))
    try:
        algorithms.get(entry.algorithm)
    except SpecregError:
        known = ", ".join(a.name for a in algorithms.algorithms())
        out.append(Problem("$.algorithm", f"{json.dumps(entry.algorithm)} is not a registered algorithm ({known})"))
    pinned = entry.status != "unpinned"
    for key, rx, what in (("revision", _COMMIT, "a 40-hex commit"), ("config_sha256", _SHA256, "a 64-hex sha256")):
        value = getattr(entry, key)
        if value is not None and not rx.match(value):
            out.append(Problem(f"$.{key}", f"{json.dumps(value)} is not {what}"))
        if pinned and value is None:
            out.append(Problem(f"$.{key}", f"status {json.dumps(entry.status)} needs {key} ({what})"))
        if not pinned and value is not None:
            out.append(Problem("$.status", f'an entry with {key} is pinned: set status = "pinned"'))
    if entry.verifier.revision is not None and not _COMMIT.match(entry.verifier.revision):
        out.append(Problem("$.verifier.revision", f"{json.dumps(entry.verifier.revision)} is not a 40-hex commit"))
    if entry.status == "verified" and not any(b.kind == "measured" for b in entry.baselines):
        out.append(Problem("$.status", 'status "verified" needs a measured baseline'))
    for field in ("k", "tensor_parallel_size", "max_model_len"):
        v = getattr(entry.serving, field)
        if v is not None and v < 1:
            out.append(Problem(f"$.serving.{field}", f"must be >= 1, got {v}"))
    for i, b in enumerate(entry.baselines):
        out += _baseline_problems(b, f"$.baselines[{i}]")
    return out


def _baseline_problems(b: Baseline, at: str) -> list[Problem]:
    out: list[Problem] = []
    if b.date is not None and not _DATE.match(b.date):
        out.append(Problem(f"{at}.date", f"{json.dumps(b.date)} is not a date (YYYY-MM-DD)"))
    if not b.source.strip():
        out.append(Problem(f"{at}.source", "a baseline needs its source"))
    if b.source_commit is not None and not _SHORT_COMMIT.match(b.source_commit):
        out.append(Problem(f"{at}.source_commit", f"{json.dumps(b.source_commit)} is not a commit (7-40 hex)"))
    h = b.harness
    # the limits verify's own flags apply (entries/limits.py): nothing here that verify refuses
    for field in (
        "num_prompts",
        "max_tokens",
        "k",
        "batch_size",
        "tensor_parallel_size",
        "runs",
        "max_model_len",
        "seed",
    ):
        v = getattr(h, field, None)
        if v is not None and (why := limits.integer_problem(field, v)):
            out.append(Problem(f"{at}.harness.{field}", why))
    if h.prompt.few_shot is not None and (why := limits.integer_problem("few_shot", h.prompt.few_shot)):
        out.append(Problem(f"{at}.harness.prompt.few_shot", why))
    if h.temperature is not None and (why := limits.number_problem("temperature", h.temperature)):
        out.append(Problem(f"{at}.harness.temperature", why))
    if h.prompt.template is not None and (why := limits.template_problem(h.prompt.template)):
        out.append(Problem(f"{at}.harness.prompt.template", why))
    m = b.metrics
    if not any((m.acceptance_length, m.per_position, m.draft_acceptance_rate, m.accuracy)):
        out.append(Problem(f"{at}.metrics", "a baseline needs at least one metric"))
    bounds = {"acceptance_length": (1.0, None), "draft_acceptance_rate": (0.0, 1.0), "accuracy": (0.0, 1.0)}
    for name, (lo, hi) in bounds.items():
        metric = getattr(m, name)
        if metric is None:
            continue
        where = f"{at}.metrics.{name}"
        numbers = {k: getattr(metric, k) for k in ("value", "low", "high", "floor") if getattr(metric, k) is not None}
        if not numbers:
            out.append(Problem(where, "needs a value, a low/high range or a floor"))
        if (metric.low is None) != (metric.high is None):
            out.append(Problem(where, "low and high go together"))
        elif metric.low is not None and metric.low > metric.high:
            out.append(Problem(f"{where}.low", f"low {metric.low} is above high {metric.high}"))
        for k, v in numbers.items():
            if v < lo or (hi is not None and v > hi):
                rng = f">= {lo}" if hi is None else f"in [{lo}, {hi}]"
                out.append(Problem(f"{where}.{k}", f"must be {rng}, got {v}"))
        out += _tolerance_problems(metric.tolerance, f"{where}.tolerance")
    if m.per_position is not None:
        where = f"{at}.metrics.per_position"
        values = m.per_position.values
        if not values:
            out.append(Problem(f"{where}.values", "empty"))
        for j, v in enumerate(values):
            if not 0.0 <= v <= 1.0:
                out.append(Problem(f"{where}.values[{j}]", f"a rate must be in [0, 1], got {v}"))
        out += _tolerance_problems(m.per_position.tolerance, f"{where}.tolerance")
    return out


def _tolerance_problems(tol: float | None, where: str) -> list[Problem]:
    if tol is not None and not 0.0 <= tol < 1.0:
        return [Problem(where, f"a relative tolerance must be in [0, 1), got {tol}")]
    return []


def warnings(entry: Entry) -> list[Problem]:
    """Consistency checks on published numbers, reported but not fatal: a source may round, or
    define a rate differently, and its numbers are stored as published."""
    out = []
    for i, b in enumerate(entry.baselines):
        m, at = b.metrics, f"$.baselines[{i}]"
        pp = m.per_position.values if m.per_position else ()
        if pp and any(later > earlier for earlier, later in zip(pp, pp[1:])):
            out.append(
                Problem(
                    f"{at}.metrics.per_position",
                    "per-position rates increase with position; "
                    "cumulative rates (drafts with at least i+1 accepted) cannot",
                )
            )
        al = m.acceptance_length.value if m.acceptance_length else None
        # only when every position is listed: a source may gate a few (vLLM's CI lists 4 of 15)
        if pp and al is not None and b.harness.k is not None and len(pp) == b.harness.k:
            slack = 0.006 * len(pp) + 0.011
            if abs((al - 1) - sum(pp)) > slack:
                out.append(
                    Problem(
                        f"{at}.metrics",
                        f"acceptance length {al} != 1 + sum(per_position) = "
                        f"{1 + sum(pp):.3f} (AL = 1 + accepted / drafts; the rates may be defined differently)",
                    )
                )
        if pp and b.harness.k is not None and len(pp) > b.harness.k:
            out.append(Problem(f"{at}.metrics.per_position", f"{len(pp)} positions for k = {b.harness.k}"))
        if b.harness.k is None and b.harness.k_note is None:
            out.append(
                Problem(
                    f"{at}.harness.k",
                    "no k: give the k the figure was measured at, or harness.k_note saying the source does not",
                )
            )
        out += _provenance_warnings(b, at)
    served = entry.serving.k
    primary = {b.harness.k for b in entry.baselines if not b.secondary and b.harness.k is not None}
    differ = sorted(primary - {served})
    # a sweep that includes the served k has the figure a served draft reaches
    if served is not None and differ and served not in primary and entry.serving.k_note is None:
        out.append(
            Problem(
                "$.serving.k",
                f"served at k = {served}, its primary baselines measured at k = {', '.join(map(str, differ))}: "
                "say why in serving.k_note (a figure at another k is not the one a served draft reaches)",
            )
        )
    return out


def _provenance_warnings(b: Baseline, at: str) -> list[Problem]:
    """A published figure says whether its source prints it or the entry computed it, and keeps the
    source's row as printed, or says why not (a measured one is this tool's own run)."""
    if b.kind != "published":
        return []
    p = b.provenance
    if p is None:
        return [
            Problem(
                f"{at}.provenance",
                "no provenance: say whether the source prints the figure or it was computed (figure), with the "
                "source's row as printed (row) or why it is not kept (note)",
            )
        ]
    if p.row is None and p.note is None:
        return [Problem(f"{at}.provenance.row", "no row: keep the source's row as printed, or say why not in note")]
    if p.figure == "computed" and p.note is None:
        return [Problem(f"{at}.provenance.note", "a computed figure says in note how it was computed")]
    return []
