"""The catalog (the model zoo): one TOML file per known speculator, `registry/<org>/<name>.toml`.

The files are inert data. Their schema is the attrs classes below (cattrs structures them,
refusing unknown keys and collecting every type problem at once); `problems()` adds the rules
a type cannot say (ids, pins, algorithm names, metric ranges). A stored config snapshot,
`registry/<org>/<name>.config.json`, is optional: `catalog check` normalizes it.

    import specreg
    cat = specreg.catalog()
    cat["RedHatAI/Qwen3-8B-speculator.eagle3"].baselines
    cat.filter(algorithm="dflash", verifier="Qwen/Qwen3-8B")
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

import attrs

from specreg.errors import Problem, SpecregError, show_value

Status = Literal["unpinned", "pinned", "verified"]
Format = Literal["speculators", "zlab", "zlab-dflash2", "deepspec", "eagle3-native", "materialized", "native"]
Direction = Literal["two-sided", "higher"]
Mode = Literal["batched", "prompt-at-a-time"]
#: pooled: 1 + accepted / drafts over the whole run; mean-per-prompt: the mean of each prompt's own AL
Statistic = Literal["pooled", "mean-per-prompt"]
BaselineKind = Literal["published", "measured"]

_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_SHORT_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
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
    batch_size: Optional[int] = None
    concurrency: Optional[str] = None
    seed: Optional[int] = None
    vllm_version: Optional[str] = None
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
class Baseline:
    kind: BaselineKind
    source: str
    harness: Harness
    metrics: Metrics
    date: Optional[str] = None
    secondary: bool = False
    #: the commit of the source (for vLLM's CI files: the release's, from its sdist's vllm/_version.py)
    source_commit: Optional[str] = None


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
        d = _converter().unstructure(self)
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


def _converter():
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


def _cattrs_problems(exc: BaseException) -> list[Problem]:
    import cattrs

    from typing import Literal, get_args, get_origin

    def describe(error: BaseException, type_: Any) -> str:
        if isinstance(error, cattrs.ForbiddenExtraKeysError):
            return "unknown key" + ("s " if len(error.extra_fields) > 1 else " ") + ", ".join(sorted(error.extra_fields))
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
        entry = _converter().structure(doc, Entry)
    except Exception as exc:  # cattrs' validation errors (grouped); turned into paths below
        import cattrs

        if not isinstance(exc, (cattrs.BaseValidationError, ValueError, TypeError)):
            raise
        return None, _cattrs_problems(exc)
    entry = attrs.evolve(entry, path=file)
    return entry, problems(entry, file=file)


def problems(entry: Entry, *, file: str | None = None) -> list[Problem]:
    """What the schema's types cannot say: ids, pins, algorithms, dates and metric ranges."""
    from specreg.normalization import algorithms as registry
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
        registry.get(entry.algorithm)
    except SpecregError:
        known = ", ".join(a.name for a in registry.algorithms())
        out.append(Problem("$.algorithm", f"{json.dumps(entry.algorithm)} is not a registered algorithm ({known})"))
    pinned = entry.status != "unpinned"
    for key, rx, what in (("revision", _COMMIT, "a 40-hex commit"), ("config_sha256", _SHA256, "a 64-hex sha256")):
        value = getattr(entry, key)
        if value is not None and not rx.match(value):
            out.append(Problem(f"$.{key}", f"{json.dumps(value)} is not {what}"))
        if pinned and value is None:
            out.append(Problem(f"$.{key}", f"status {json.dumps(entry.status)} needs {key} ({what})"))
        if not pinned and value is not None:
            out.append(Problem("$.status", f"an entry with {key} is pinned: set status = \"pinned\""))
    if entry.verifier.revision is not None and not _COMMIT.match(entry.verifier.revision):
        out.append(Problem("$.verifier.revision", f"{json.dumps(entry.verifier.revision)} is not a 40-hex commit"))
    if entry.status == "verified" and not any(b.kind == "measured" for b in entry.baselines):
        out.append(Problem("$.status", "status \"verified\" needs a measured baseline"))
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
    for field in ("num_prompts", "max_tokens", "k", "batch_size", "tensor_parallel_size", "runs", "max_model_len"):
        v = getattr(h, field)
        if v is not None and v < 1:
            out.append(Problem(f"{at}.harness.{field}", f"must be >= 1, got {v}"))
    if h.prompt.few_shot is not None and h.prompt.few_shot < 0:
        out.append(Problem(f"{at}.harness.prompt.few_shot", f"must be >= 0, got {h.prompt.few_shot}"))
    if h.temperature is not None and h.temperature < 0:
        out.append(Problem(f"{at}.harness.temperature", f"must be >= 0, got {h.temperature}"))
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
            out.append(Problem(f"{at}.metrics.per_position", "per-position rates increase with position; "
                               "cumulative rates (drafts with at least i+1 accepted) cannot"))
        al = m.acceptance_length.value if m.acceptance_length else None
        # only when every position is listed: a source may gate a few (vLLM's CI lists 4 of 15)
        if pp and al is not None and b.harness.k is not None and len(pp) == b.harness.k:
            slack = 0.006 * len(pp) + 0.011
            if abs((al - 1) - sum(pp)) > slack:
                out.append(Problem(f"{at}.metrics", f"acceptance length {al} != 1 + sum(per_position) = "
                                   f"{1 + sum(pp):.3f} (AL = 1 + accepted / drafts; the rates may be defined differently)"))
        if pp and b.harness.k is not None and len(pp) > b.harness.k:
            out.append(Problem(f"{at}.metrics.per_position", f"{len(pp)} positions for k = {b.harness.k}"))
    return out


#: an entry is a page of TOML; anything larger is not read whole
MAX_ENTRY_BYTES = 1024 * 1024


def read_entry_text(path: Path) -> str:
    with open(path, "rb") as f:
        data = f.read(MAX_ENTRY_BYTES + 1)
    if len(data) > MAX_ENTRY_BYTES:
        raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes: not a catalog entry")
    return data.decode("utf-8")


def _natural_key(text: str) -> list[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", text)]


def default_registry() -> Path:
    """The catalog shipped with specreg (installed as the `specreg.catalog_data` package data)."""
    env = os.environ.get("SPECREG_REGISTRY")
    if env:
        return Path(env).expanduser()
    from importlib.resources import files

    return Path(str(files("specreg.catalog_data")))


def _root(directory: str | os.PathLike[str] | None) -> Path:
    """A catalog directory given by the caller, else the shipped one."""
    return Path(directory).expanduser() if directory is not None else default_registry()


def writable_root(directory: str | os.PathLike[str] | None) -> Path:
    """The catalog directory a writing command (pin, --update-baseline) may change.

    The shipped catalog of an installed specreg lives in site-packages, which a reinstall replaces and
    other users share: writing there is refused (nothing is written) unless the caller names a
    directory (`--registry DIR` / SPECREG_REGISTRY). An editable install's catalog is the checkout's."""
    root = _root(directory)
    if directory is None and not os.environ.get("SPECREG_REGISTRY") and _installed(root):
        raise SpecregError(f"refusing to write into the catalog of the installed specreg package ({root}): copy it "
                           f"(cp -r {root} DIR) and pass --registry DIR, or set SPECREG_REGISTRY=DIR")
    return root


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.resolve().parts)


def entry_path(registry_dir: Path, entry_id: str) -> Path:
    org, _, name = entry_id.partition("/")
    return registry_dir / org / f"{name}.toml"


@attrs.frozen
class Catalog:
    """The entries of one registry directory, natural-sorted by id."""

    directory: Path
    entries: tuple[Entry, ...]

    def __iter__(self) -> Iterator[Entry]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return self.get(entry_id) is not None

    def __getitem__(self, entry_id: str) -> Entry:
        entry = self.get(entry_id)
        if entry is None:
            raise KeyError(entry_id)
        return entry

    def get(self, entry_id: str) -> Entry | None:
        return next((e for e in self.entries if e.id == entry_id), None)

    def filter(self, *, algorithm: str | None = None, verifier: str | None = None, tag: str | None = None,
               status: str | None = None) -> list[Entry]:
        return [
            e for e in self.entries
            if (algorithm is None or e.algorithm == algorithm)
            and (verifier is None or e.verifier.id == verifier)
            and (tag is None or tag in e.tags)
            and (status is None or e.status == status)
        ]


def _files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.glob("*/*.toml") if p.is_file())


def read_catalog(directory: str | os.PathLike[str] | None = None) -> tuple[list[Entry], list[tuple[str, Problem]]]:
    """Every entry that could be built, and every problem in every file (file, problem)."""
    root = _root(directory)
    if not root.is_dir():
        raise SpecregError(f"{root}: not a directory (a catalog is registry/<org>/<name>.toml)")
    entries: list[Entry] = []
    found: list[tuple[str, Problem]] = []
    seen: dict[str, str] = {}
    for path in _files(root):
        file = str(path)
        try:
            text = read_entry_text(path)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            found.append((file, Problem("$", f"cannot read: {exc}")))
            continue
        entry, problems_ = parse_entry(text, file=file)
        found += [(file, p) for p in problems_]
        if entry is not None:
            if entry.id in seen:
                found.append((file, Problem("$.id", f"{entry.id} is also the id of {seen[entry.id]}")))
            seen[entry.id] = file
            entries.append(entry)
    entries.sort(key=lambda e: _natural_key(e.id))
    return entries, found


def catalog(directory: str | os.PathLike[str] | None = None) -> Catalog:
    """The catalog (the shipped one by default). Raises CatalogError listing every problem."""
    entries, found = read_catalog(directory)
    if found:
        raise CatalogError(found)
    root = _root(directory)
    return Catalog(directory=root, entries=tuple(entries))


def lookup(entry_id: str, directory: Path | None = None) -> Entry | None:
    """One entry by id, reading only its own file (what `load` uses: no scan of the catalog).
    A malformed entry file raises CatalogError."""
    root = _root(directory)
    path = entry_path(root, entry_id)
    if not path.is_file():
        return None
    try:
        text = read_entry_text(path)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CatalogError([(str(path), Problem("$", f"cannot read: {exc}"))]) from None
    entry, found = parse_entry(text, file=str(path))
    if found or entry is None:
        raise CatalogError([(str(path), p) for p in found])
    return entry


# -- checking a whole catalog -------------------------------------------------------------------

@attrs.frozen
class CheckReport:
    entries: int
    problems: tuple[tuple[str, Problem], ...]
    warnings: tuple[tuple[str, Problem], ...]


def check(directory: str | os.PathLike[str] | None = None) -> CheckReport:
    """Every problem of every entry: schema, ids, algorithms, pins, and stored config snapshots
    (which must match their pinned sha256 and, in the speculators format, normalize without error
    findings). Offline: nothing is fetched."""
    from specreg.errors import ConfigError
    from specreg.sources.files import read_config
    from specreg.normalization.core import normalize

    entries, found = read_catalog(directory)
    warned: list[tuple[str, Problem]] = []
    for entry in entries:
        warned += [(entry.path, w) for w in warnings(entry)]
        snap = entry.snapshot_path
        if snap is None or not snap.is_file():
            continue
        where = str(snap)
        try:
            config, digest = read_config(snap, source=where)
        except ConfigError as exc:
            found += [(where, p) for p in exc.problems]
            continue
        if entry.config_sha256 and digest != entry.config_sha256:
            found.append((where, Problem("$", f"sha256 {digest} is not the pinned config_sha256 {entry.config_sha256}")))
        if entry.format != "speculators":
            continue
        try:
            spec = normalize(config, source=where)
        except ConfigError as exc:
            found += [(where, p) for p in exc.problems]
            continue
        found += [(where, Problem(f.path or "$", f"{f.code}: {f.message}")) for f in spec.errors]
    return CheckReport(entries=len(entries), problems=tuple(found), warnings=tuple(warned))


# -- pinning ------------------------------------------------------------------------------------

@attrs.frozen
class Pinned:
    entry_id: str
    path: Path
    revision: str
    config_sha256: str
    previous_revision: str | None
    changed: bool


def pin(entry_id: str, *, revision: str | None = None, directory: str | os.PathLike[str] | None = None) -> Pinned:
    """Fetch the entry's config.json (at `revision`, else its pinned revision, else the default
    branch) through huggingface_hub and write the commit and sha256 into its TOML file, keeping
    the rest of the file as it was, plus the config snapshot beside it.

    Refuses, writing nothing, when the entry is already pinned and the content at its pinned
    revision no longer matches the pinned sha256 (re-pin explicitly with `revision=`)."""
    import tomlkit

    from specreg import atomic

    from specreg.sources import hub
    from specreg.sources.files import read_config

    root = writable_root(directory)
    path = entry_path(root, entry_id)
    if not path.is_file():
        raise SpecregError(f"no catalog entry {entry_id} (looked for {path})")
    text = path.read_text(encoding="utf-8")
    entry, found = parse_entry(text, file=str(path))
    if found or entry is None:
        raise CatalogError([(str(path), p) for p in found])
    if revision is not None:
        hub.check_revision(revision, source=entry_id)
    asked = revision or entry.revision
    fetched = hub.fetch_config(entry_id, asked, source=entry_id)
    if fetched.commit is None:
        raise SpecregError(f"the Hub did not say which commit {asked or 'the default branch'} is", source=entry_id)
    _config, digest = read_config(fetched.path, source=f"{entry_id}/config.json")
    if revision is None and entry.config_sha256 and digest != entry.config_sha256:
        raise SpecregError(
            f"config.json at the pinned revision {entry.revision} has sha256 {digest}, not the pinned "
            f"{entry.config_sha256}: the content changed under the pin; nothing was written. Check the "
            "change, then re-pin with --revision",
            source=entry_id,
        )
    changed = (entry.revision, entry.config_sha256) != (fetched.commit, digest)
    if changed:
        doc = tomlkit.parse(text)
        doc["revision"] = fetched.commit
        doc["config_sha256"] = digest
        if entry.status == "unpinned" or (entry.status == "verified" and entry.revision != fetched.commit):
            doc["status"] = "pinned"  # a verification was of the old pin
        new_text = tomlkit.dumps(doc)
        parsed, problems_ = parse_entry(new_text, file=str(path))
        if problems_ or parsed is None:  # never write a file that `catalog check` would refuse
            raise CatalogError([(str(path), p) for p in problems_])
        atomic.write_bytes(path, new_text.encode("utf-8"))
    snapshot = entry_path(root, entry_id).with_name(path.name[: -len(".toml")] + SNAPSHOT_SUFFIX)
    atomic.write_bytes(snapshot, fetched.path.read_bytes())
    return Pinned(entry_id, path, fetched.commit, digest, entry.revision, changed)
