"""The harness of a run: the one function that turns a catalog baseline into a run's settings, used
by `specreg verify ENTRY`, by the nightly (`verify --all`) and by `specreg catalog show ENTRY --harness`,
so a single run reproduces a baseline exactly as the nightly does.

A setting the user gives on the command line overrides the baseline's, and the run records which
(`harness_from.overridden`); everything else is the baseline's, or verify's default where the
baseline does not state it."""

from __future__ import annotations

import shlex
from typing import Any

import attrs

from specreg.entries import Baseline, Entry
from specreg.verify.judge import judged
from specreg.verify.prompts import DATASETS
from specreg.verify.run import Options

#: the run settings a harness states (each a field of `run.Options`)
FIELDS = (
    "dataset",
    "num_prompts",
    "temperature",
    "max_tokens",
    "k",
    "batch_size",
    "concurrency",
    "seed",
    "chat",
    "few_shot",
    "thinking",
    "shots_split",
    "template",
    "stop",
    "max_model_len",
    "tensor_parallel_size",
    "mode",
    "statistic",
    "draft_sample_method",
    "prefix_caching",
)
#: verify's settings where neither the baseline nor the command line states one: `run.Options`' own
#: defaults, but the statistic, which follows the mode when nothing states it (the CLI picks it)
DEFAULTS: dict[str, Any] = {**{f.name: f.default for f in attrs.fields(Options) if f.name in FIELDS}, "statistic": None}

#: the run setting -> its command-line flag (value flags; the booleans are written in `command_args`)
FLAGS = {
    "num_prompts": "--num-prompts",
    "temperature": "--temperature",
    "max_tokens": "--max-tokens",
    "k": "--k",
    "batch_size": "--batch-size",
    "seed": "--seed",
    "few_shot": "--few-shot",
    "shots_split": "--shots-split",
    "template": "--template",
    "max_model_len": "--max-model-len",
    "tensor_parallel_size": "--tensor-parallel-size",
    "mode": "--mode",
    "statistic": "--statistic",
    "draft_sample_method": "--draft-sample-method",
}


def runnable(baseline: Baseline) -> bool:
    """On a dataset verify loads, with a metric it measures (judge.judged: AL, the draft acceptance
    rate, per-position rates): the same test the judge's matching makes, so what one offers the
    other accepts."""
    return baseline.harness.dataset in DATASETS and bool(judged(baseline))


def primary_baseline(entry: Entry) -> tuple[int, Baseline] | None:
    """The baseline a run of the entry reproduces when none is named: the first primary (not
    `secondary`) one with a metric verify measures on a dataset verify can load."""
    for i, b in enumerate(entry.baselines):
        if not b.secondary and runnable(b):
            return i, b
    return None


def why_not_runnable(entry: Entry) -> str:
    primary = [b for b in entry.baselines if not b.secondary]
    if not entry.baselines:
        return f"{entry.id} has no baseline"
    if not primary:
        return "only secondary baselines (reported beside a run, never a gate): nothing to reproduce"
    unknown = sorted({str(b.harness.dataset) for b in primary if b.harness.dataset not in DATASETS})
    unmeasured = sorted({str(b.harness.dataset) for b in primary if b.harness.dataset in DATASETS})
    why = []
    if unknown:
        why.append(
            f"no primary baseline on a dataset verify can load (the baselines use {', '.join(unknown)}; "
            f"verify knows {', '.join(sorted(DATASETS))})"
        )
    if unmeasured:
        why.append(
            f"the primary baselines on {', '.join(unmeasured)} record no metric verify measures (acceptance "
            "length, draft acceptance rate, per-position rates)"
        )
    return "; ".join(why)


def settings(baseline: Baseline) -> dict[str, Any]:
    """The run settings that reproduce `baseline`: every field its harness states (nothing else)."""
    h = baseline.harness
    out: dict[str, Any] = {"dataset": h.dataset + (f":{h.subset}" if h.subset else "")}
    values = {
        "num_prompts": h.num_prompts,
        "temperature": h.temperature,
        "max_tokens": h.max_tokens,
        "k": h.k,
        "batch_size": h.batch_size,
        "seed": h.seed,
        "few_shot": h.prompt.few_shot,
        "shots_split": h.prompt.shots_split,
        "template": h.prompt.template,
        "max_model_len": h.max_model_len,
        "tensor_parallel_size": h.tensor_parallel_size,
        "mode": h.mode,
        "statistic": h.statistic,
        "draft_sample_method": h.draft_sample_method,
        "stop": tuple(h.stop) if h.stop else None,
        "chat": h.prompt.chat_template,
        "thinking": h.prompt.thinking,
        "prefix_caching": h.prefix_caching,
    }
    out.update({k: v for k, v in values.items() if v is not None})
    return out


def resolve(
    entry: Entry | None, given: dict[str, Any], baseline: int | None = None
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the run's settings, where they came from): verify's defaults, then the chosen baseline's
    harness (`baseline`, an index into the entry's baselines, or the primary one), then what the
    user gave. Raises ValueError for a baseline index the entry does not have."""
    chosen: tuple[int, Baseline] | None = None
    if entry is not None and baseline is not None:
        if not 0 <= baseline < len(entry.baselines):
            raise ValueError(
                f"--baseline {baseline}: {entry.id} has baselines 0-{len(entry.baselines) - 1}"
                if entry.baselines
                else f"--baseline {baseline}: {entry.id} has no baseline"
            )
        chosen = baseline, entry.baselines[baseline]
    elif entry is not None:
        chosen = primary_baseline(entry)
        if chosen is None and entry.baselines and "dataset" not in given:
            # never verify's default dataset in a baseline's place: the run would be judged against nothing
            raise ValueError(
                f"{entry.id}: {why_not_runnable(entry)}; give --dataset to measure it anyway (it is then "
                "compared with no baseline)"
            )
    from_baseline = settings(chosen[1]) if chosen else {}
    merged = {**DEFAULTS, **from_baseline, **given}
    overridden = sorted(k for k, v in given.items() if k in from_baseline and from_baseline[k] != v)
    return merged, {"baseline_index": chosen[0] if chosen else None, "overridden": overridden, "given": sorted(given)}


def command_args(values: dict[str, Any]) -> list[str]:
    """Command-line arguments stating `values` (settings as `settings` returns them)."""
    args = ["--dataset", values["dataset"]] if "dataset" in values else []
    for field, flag in FLAGS.items():
        if values.get(field) is not None:
            args.append(f"{flag}={values[field]}")  # one argument: a value may begin with "-"
    for text in values.get("stop") or ():
        args.append(f"--stop={text}")
    if values.get("chat") is False:
        args.append("--raw")
    if values.get("thinking") is not None:
        args.append("--thinking" if values["thinking"] else "--no-thinking")
    if values.get("prefix_caching") is not None:
        args.append("--prefix-caching" if values["prefix_caching"] else "--no-prefix-caching")
    return args


def command_line(entry: Entry, baseline: int | None = None) -> str:
    """`specreg verify ENTRY ...` with every harness field of the baseline spelled out."""
    index, b = (
        (baseline, entry.baselines[baseline]) if baseline is not None else (primary_baseline(entry) or (None, None))
    )
    if b is None:
        return f"# {why_not_runnable(entry)}"
    return shlex.join(["specreg", "verify", entry.id, *command_args(settings(b))])
