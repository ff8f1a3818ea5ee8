"""The catalog entry's schema: the attrs classes one TOML file structures into (cattrs refuses
unknown keys, coerces nothing and collects every type problem at once), and `CatalogError`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional

import attrs

from specreg.errors import Problem, SpecregError, show_value

Status = Literal["unpinned", "pinned", "verified"]
Format = Literal["speculators", "zlab", "zlab-dflash2", "deepspec", "eagle3-native", "materialized", "native"]
Direction = Literal["two-sided", "higher"]
Mode = Literal["batched", "prompt-at-a-time"]
#: pooled: 1 + accepted / drafts over the whole run; mean-per-prompt: the mean of each prompt's own AL
Statistic = Literal["pooled", "mean-per-prompt"]
BaselineKind = Literal["published", "measured"]
#: printed: the source prints the figure as the entry keeps it; computed: the entry computed it from
#: what the source prints (a mean of its rows, 1 + a sum of its rates), saying how in the note
Origin = Literal["printed", "computed"]

SNAPSHOT_SUFFIX = ".config.json"


@attrs.frozen
class Verifier:
    id: str
    revision: Optional[str] = None
    notes: Optional[str] = None


@attrs.frozen
class Serving:
    """Serving hints: how the draft is meant to be run."""

    k: Optional[int] = None
    tensor_parallel_size: Optional[int] = None
    max_model_len: Optional[int] = None
    quantization: Optional[str] = None  # of the verifier, e.g. "fp8", "nvfp4"
    #: why the k served differs from the k of the primary baselines (`catalog check` warns without it)
    k_note: Optional[str] = None


@attrs.frozen
class PromptFormat:
    chat_template: Optional[bool] = None
    few_shot: Optional[int] = None
    thinking: Optional[bool] = None
    #: the split the few-shot examples come from (vLLM's GSM8K harness: "train"); default the questions' split
    shots_split: Optional[str] = None
    #: a format string applied to each row's fields (e.g. vLLM's "{question}\nPlease reason step by step, ...")
    template: Optional[str] = None


@attrs.frozen
class Harness:
    """Everything a measured number depends on; what the source did not say is left out."""

    dataset: Optional[str] = None
    subset: Optional[str] = None
    split: Optional[str] = None
    num_prompts: Optional[int] = None
    prompt: PromptFormat = PromptFormat()
    temperature: Optional[float] = None
    max_tokens: Optional[int] = None
    k: Optional[int] = None
    #: for a baseline without k: what the source says instead (it does not give k; a tree, no chain k)
    k_note: Optional[str] = None
    batch_size: Optional[int] = None
    concurrency: Optional[str] = None
    seed: Optional[int] = None
    vllm_version: Optional[str] = None
    #: what measured the figure, as the source says: "vllm", "sglang", "trtllm", the trainer's own
    #: held-out validation ("validation"), ...; a figure is ranked only against figures of its engine
    engine: Optional[str] = None
    gpu: Optional[str] = None
    tensor_parallel_size: Optional[int] = None
    runs: Optional[int] = None
    #: stop strings of every request (vLLM's GSM8K harness: "Question", "Assistant:", "<|separator|>")
    stop: Optional[tuple[str, ...]] = None
    #: the engine's max_model_len (default: the entry's [serving])
    max_model_len: Optional[int] = None
    #: all prompts in one batch, or one `generate` per prompt (vLLM's DFlash reference test)
    mode: Optional[Mode] = None
    statistic: Optional[Statistic] = None
    #: engine options the source sets: speculative_config.draft_sample_method, enable_prefix_caching
    draft_sample_method: Optional[str] = None
    prefix_caching: Optional[bool] = None
    notes: Optional[str] = None

    #: the settings an acceptance figure depends on most; a source that leaves one out is shown as
    #: unknown (a catalog entry leaves out what its source does not say, never guesses it)
    DECIDING = ("dataset", "num_prompts", "temperature", "max_tokens", "k", "vllm_version", "gpu")

    def unknown(self) -> tuple[str, ...]:
        """The deciding settings this harness does not give."""
        return tuple(name for name in self.DECIDING if getattr(self, name) is None)


@attrs.frozen
class Metric:
    """One number (or a range, or a floor) and how a re-measurement is judged against it.

    direction "two-sided": within ±tolerance (relative) of value; "higher": at least
    (1 - tolerance) × value. Without them, `verify` applies its defaults (two-sided at
    temperature 0, one-sided otherwise).
    """

    value: Optional[float] = None
    low: Optional[float] = None
    high: Optional[float] = None
    floor: Optional[float] = None
    direction: Optional[Direction] = None
    tolerance: Optional[float] = None
    notes: Optional[str] = None


@attrs.frozen
class PerPosition:
    values: tuple[float, ...]
    direction: Optional[Direction] = None
    tolerance: Optional[float] = None


@attrs.frozen
class Metrics:
    acceptance_length: Optional[Metric] = None
    per_position: Optional[PerPosition] = None
    draft_acceptance_rate: Optional[Metric] = None
    accuracy: Optional[Metric] = None


@attrs.frozen
class Provenance:
    """Where a published figure stands in its source, so that anyone can re-find it."""

    figure: Origin
    #: the source's row as printed, its labels and numbers ("| MT-Bench | 3.12 | 2.1x |")
    row: Optional[str] = None
    #: how a computed figure was computed; where `row` is absent, why (the source could not be re-opened)
    note: Optional[str] = None


@attrs.frozen
class Baseline:
    kind: BaselineKind
    source: str
    harness: Harness
    metrics: Metrics
    date: Optional[str] = None
    secondary: bool = False
    #: the commit of the source (for vLLM's CI files: the release's, from its sdist's vllm/_version.py)
    source_commit: Optional[str] = None
    #: printed in the source or computed from it, with the source's row (`catalog check` warns without it)
    provenance: Optional[Provenance] = None


@attrs.frozen
class Entry:
    id: str
    algorithm: str
    status: Status
    verifier: Verifier
    format: Format = "speculators"
    revision: Optional[str] = None
    config_sha256: Optional[str] = None
    license: Optional[str] = None
    tags: tuple[str, ...] = ()
    notes: Optional[str] = None
    serving: Serving = Serving()
    baselines: tuple[Baseline, ...] = ()
    #: the file it was read from (not a TOML key)
    path: Optional[str] = attrs.field(default=None, eq=False)

    @property
    def org(self) -> str:
        return self.id.split("/", 1)[0]

    @property
    def snapshot_path(self) -> Path | None:
        if not self.path:
            return None
        p = Path(self.path)
        return p.with_name(p.name[: -len(".toml")] + SNAPSHOT_SUFFIX)

    def to_dict(self) -> dict[str, Any]:
        d = converter().unstructure(self)
        d.pop("path", None)
        return _drop_none(d)


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None and v != () and v != [] and v != {}}
    if isinstance(value, (list, tuple)):
        return [_drop_none(v) for v in value]
    return value


_CONVERTER = None


def _register_scalar_hooks(conv: Any) -> None:
    """Strict scalars: TOML's types as they are, no coercion (`id = 5` is not "5", `tags = "x"` is not
    a list of letters, `nan` and `inf` are not numbers)."""
    import math

    # TOML has no None: a float field also takes an integer (2 for 2.0), never a bool
    def number(value: Any, _type: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {show_value(value)}")
        if not math.isfinite(value):
            raise ValueError(f"expected a finite number, got {value}")
        return float(value)

    def integer(value: Any, _type: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {show_value(value)}")
        if abs(value) > 10**15:
            raise ValueError(f"the integer is out of range ({str(value)[:20]}...)")
        return value

    def string(value: Any, _type: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {show_value(value)}")
        return value

    def boolean(value: Any, _type: Any) -> bool:
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {show_value(value)}")
        return value

    def strings(value: Any, _type: Any) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ValueError(f"expected a list of strings, got {show_value(value)}")
        return tuple(value)

    def numbers(value: Any, _type: Any) -> tuple[float, ...]:
        if not isinstance(value, list):
            raise ValueError(f"expected a list of numbers, got {show_value(value)}")
        return tuple(number(v, float) for v in value)

    conv.register_structure_hook(float, number)
    conv.register_structure_hook(int, integer)
    conv.register_structure_hook(str, string)
    conv.register_structure_hook(bool, boolean)
    conv.register_structure_hook_func(lambda t: t == tuple[str, ...], strings)
    conv.register_structure_hook_func(lambda t: t == tuple[float, ...], numbers)


def converter():
    global _CONVERTER
    if _CONVERTER is None:
        import cattrs

        conv = cattrs.Converter(forbid_extra_keys=True, detailed_validation=True, prefer_attrib_converters=False)
        # registered before the Entry function is generated, which inlines the hooks it finds
        _register_scalar_hooks(conv)
        conv.register_structure_hook(
            Entry,
            cattrs.gen.make_dict_structure_fn(
                Entry, conv, _cattrs_forbid_extra_keys=True, path=cattrs.gen.override(omit=True)
            ),
        )

        _CONVERTER = conv
    return _CONVERTER


class CatalogError(SpecregError):
    """A catalog file is malformed: every problem, each with its file and key path."""

    def __init__(self, problems: list[tuple[str, Problem]]):
        self.problems = problems
        lines = [f"{f}: {p.path}: {p.message}" for f, p in problems]
        super().__init__(f"{len(problems)} problem{'s' * (len(problems) > 1)} in the catalog:\n" + "\n".join(lines))


def cattrs_problems(exc: BaseException) -> list[Problem]:
    import cattrs

    from typing import Literal, get_args, get_origin

    def describe(error: BaseException, type_: Any) -> str:
        if isinstance(error, cattrs.ForbiddenExtraKeysError):
            return (
                "unknown key" + ("s " if len(error.extra_fields) > 1 else " ") + ", ".join(sorted(error.extra_fields))
            )
        if isinstance(error, KeyError):
            return "required key missing"
        options = get_args(type_)
        if get_origin(type_) is Literal or (options and all(isinstance(o, str) for o in options)):
            return "must be one of " + ", ".join(json.dumps(o) for o in options)
        return str(error) or type(error).__name__

    out = []
    for message in cattrs.transform_error(exc, path="$", format_exception=describe):
        text, _, where = message.rpartition(" @ ")
        out.append(Problem(where or "$", text or message))
    return out
