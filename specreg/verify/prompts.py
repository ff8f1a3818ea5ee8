"""Datasets and prompt formats for `specreg verify`, loaded through the `datasets` library.

Named datasets are pinned to a revision where one is known; `--dataset-file FILE` supplies a named
dataset's rows from a local JSONL file (machines without network) and keeps the dataset's identity
in the harness. Any other `FILE.jsonl` is its own dataset.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from specreg.errors import SpecregError


@attrs.frozen
class DatasetSpec:
    hf_id: str
    config: str | None
    split: str
    #: a commit of the dataset repo; None where none is known yet (the run records "unpinned")
    revision: str | None
    category_field: str | None = None
    #: the field every row of the dataset has its prompt in (a rows file without it holds another
    #: dataset's rows); None where specreg does not know the dataset's fields
    prompt_field: str | None = None


DATASETS = {
    "gsm8k": DatasetSpec(
        "openai/gsm8k", "main", "test", "740312add88f781978c0658806c59bc2815b9866", prompt_field="question"
    ),
    "mt-bench": DatasetSpec(
        "philschmid/mt-bench", None, "train", None, category_field="category", prompt_field="turns"
    ),
    # the MT-Bench prompts vLLM's DFlash reference test reads (tests/v1/e2e/spec_decode/acceptance_rates/utils.py)
    "mt-bench-h4": DatasetSpec(
        "HuggingFaceH4/mt_bench_prompts", None, "train", None, category_field="category", prompt_field="prompt"
    ),
    "humaneval": DatasetSpec(
        "openai/openai_humaneval", None, "test", "7dce6050a7d6d172f3cc5c32aa97f52fa1a2e544", prompt_field="prompt"
    ),
    "speed-bench": DatasetSpec("nvidia/SPEED-Bench", "qualitative", "test", None, category_field="category"),
}


class RowsMismatch(SpecregError):
    """A rows file given for a named dataset holds another dataset's rows; `fields` are its first
    row's, so that a caller can name the baselines whose dataset the file does hold."""

    def __init__(self, what: str, advice: str, fields: tuple[str, ...]) -> None:
        super().__init__(f"{what}; {advice}")
        self.what, self.fields = what, fields


def datasets_of(fields: tuple[str, ...]) -> list[str]:
    """The named datasets whose prompt field is among a row's `fields` (sorted)."""
    return sorted(name for name, spec in DATASETS.items() if spec.prompt_field and spec.prompt_field in fields)


_TEXT_FIELDS = ("question", "prompt", "turns", "text", "instruction", "messages")


@attrs.frozen
class Prompts:
    """The prompts of a run and the identity of where they came from."""

    dataset: str
    subset: str | None
    split: str | None
    revision: str | None
    source: str  # "hub" or the local file the rows came from
    items: tuple[Any, ...]  # str (raw) or a list of chat messages
    chat: bool
    few_shot: int
    shots_split: str | None = None
    template: str | None = None


def _text(row: dict[str, Any], where: str, field: str | None = None) -> str:
    for key in (field,) if field else _TEXT_FIELDS:
        value = row.get(key)
        if isinstance(value, str) and value.strip():
            return value
        if isinstance(value, list) and value:
            first = value[0]
            if isinstance(first, str):
                return first
            if isinstance(first, dict) and isinstance(first.get("content"), str):
                return first["content"]
    raise SpecregError(f"{where}: a row has none of the prompt fields {', '.join(_TEXT_FIELDS)}: {sorted(row)[:8]}")


def _answer(row: dict[str, Any]) -> str | None:
    for key in ("answer", "canonical_solution", "output", "response"):
        if isinstance(row.get(key), str):
            return row[key]
    return None


def _rows(
    name: str, dataset_file: str | None, category: str | None, split: str | None = None
) -> tuple[list[dict], DatasetSpec | None, str]:
    import datasets

    spec = DATASETS.get(name)
    if spec is not None and split is not None:
        spec = attrs.evolve(spec, split=split)
    local = dataset_file or (name if spec is None else None)
    if local is not None:
        path = Path(local).expanduser()
        if not path.is_file():
            known = ", ".join(sorted(DATASETS))
            raise SpecregError(f"{local}: no such file (named datasets: {known}; or FILE.jsonl)")
        try:
            ds = datasets.load_dataset("json", data_files=str(path), split="train")
        except Exception as exc:  # datasets wraps parse errors in its own types
            raise SpecregError(f"{path}: not a JSONL dataset: {type(exc).__name__}: {exc}") from None
        import hashlib

        source = f"{path} (sha256 {hashlib.sha256(path.read_bytes()).hexdigest()})"  # what ran, not the Hub's
        if spec is not None and spec.prompt_field:
            _check_fits(ds, name, spec, path)
        spec = None  # a local file is recorded by its content, never at the named dataset's revision
    else:
        from specreg.errors import HubError
        from specreg.sources import hub

        try:  # one Hub policy: an unreachable Hub is one line in seconds, not datasets' 40 s of retries
            hub.probe(f"the dataset {spec.hf_id}", source=name)
        except HubError as exc:
            raise SpecregError(
                f"{exc.line()}; without network, pass its rows with --dataset-file FILE.jsonl, or "
                "set HF_DATASETS_OFFLINE=1 to use a cached copy"
            ) from None
        try:
            with _quiet_hub():
                ds = datasets.load_dataset(spec.hf_id, spec.config, split=spec.split, revision=spec.revision)
        except Exception as exc:
            raise SpecregError(
                f"could not load {spec.hf_id} ({type(exc).__name__}: {exc}); "
                f"without network, pass its rows with --dataset-file FILE.jsonl"
            ) from None
        source = "hub"
    rows = [dict(r) for r in ds]
    if category:
        field = (spec.category_field if spec else None) or "category"
        rows = [r for r in rows if str(r.get(field)) == category]
        if not rows:
            raise SpecregError(f"{name}: no rows with {field} = {category!r}")
    return rows, spec, source


def _check_fits(ds: Any, name: str, spec: DatasetSpec, path: Path) -> None:
    """A rows file given for a named dataset holds that dataset's rows: each has its prompt field (the
    MT-Bench rows fed to gsm8k were once read from their `turns`, silently)."""
    field = spec.prompt_field
    for n, row in enumerate(ds, 1):
        value = row.get(field)
        if not (isinstance(value, str) and value.strip()) and not (isinstance(value, list) and value):
            raise RowsMismatch(
                f"{path}: row {n} has no {field!r} (every {name} row, {spec.hf_id}, has its prompt there; "
                f"this row's fields: {', '.join(sorted(row)[:8]) or 'none'}): these are not {name} rows",
                f"give the file with the dataset it holds (--dataset NAME, or --dataset {path} for rows of its own)",
                tuple(sorted(row)),
            )


class _quiet_hub:
    """huggingface_hub's own retry lines ("Retrying in 8s [Retry 4/5]") silenced while a library
    fetches through it: specreg reports a failure in its own one line."""

    def __enter__(self) -> None:
        import logging

        self.logger = logging.getLogger("huggingface_hub")
        self.level = self.logger.level
        self.logger.setLevel(logging.ERROR)

    def __exit__(self, *exc: Any) -> None:
        self.logger.setLevel(self.level)


def _apply(template: str | None, row: dict[str, Any], where: str, field: str | None = None) -> str:
    if template is None:
        return _text(row, where, field)
    try:
        return template.format(**row)
    except (KeyError, IndexError, ValueError) as exc:
        raise SpecregError(
            f"{where}: the prompt template {template!r} does not fit a row "
            f"({type(exc).__name__}: {exc}; fields {sorted(row)[:8]})"
        ) from None


def load_prompts(
    dataset: str,
    *,
    dataset_file: str | None = None,
    num_prompts: int | None = None,
    chat: bool = True,
    few_shot: int = 0,
    shots_split: str | None = None,
    shots_file: str | None = None,
    template: str | None = None,
) -> Prompts:
    """`dataset` is a named dataset (optionally `name:category`) or a JSONL file.

    Few-shot prompts are vLLM's GSM8K format (tests/evals/gsm8k/gsm8k_eval.py `_build_gsm8k_prompts`):
    "Question: ...\nAnswer: ...\n\n" per example, then "Question: ...\nAnswer:"; in chat form that
    whole text is one user message, as CI's `use_chat_completions` sends it. The examples are the
    first rows of `shots_split` (CI: "train") or, without it, of the questions' own split (then
    skipped as questions); `shots_file` gives those rows locally."""
    if template is not None:
        from specreg.entries.limits import template_problem

        why = template_problem(template)  # once, before any row is read or formatted
        if why:
            raise SpecregError(f"{dataset}: the prompt template {template[:80]!r}: {why}")
    if dataset in DATASETS or os.path.exists(dataset):
        name, category = dataset, ""
    else:
        name, _, category = dataset.partition(":")
    rows, spec, source = _rows(name, dataset_file, category or None)
    if few_shot and (shots_split or shots_file):
        if shots_file is None and dataset_file is not None:
            raise SpecregError(
                f"{dataset}: the few-shot examples come from the {shots_split!r} split; without "
                "network pass its rows with --shots-file FILE.jsonl"
            )
        shot_rows, _spec, shot_source = _rows(name, shots_file, None, split=shots_split)
        shots = shot_rows[:few_shot]
        if shot_source != "hub":
            source += f"; shots {shot_source}"
    else:
        shots = rows[:few_shot]
        rows = rows[few_shot:]
    if len(shots) < few_shot:
        raise SpecregError(f"{dataset}: {few_shot} few-shot examples asked for, {len(shots)} rows to take them from")
    if num_prompts is not None:
        rows = rows[:num_prompts]
    if not rows:
        raise SpecregError(f"{dataset}: no prompts left (after {few_shot} few-shot examples)")
    known = DATASETS.get(name)
    field = known.prompt_field if known else None
    context = "".join(f"Question: {_text(s, dataset, field)}\nAnswer: {_answer(s) or ''}\n\n" for s in shots)
    items: list[Any] = []
    for row in rows:
        question = _apply(template, row, dataset, field)
        text = f"{context}Question: {question}\nAnswer:" if shots else question
        items.append([{"role": "user", "content": text}] if chat else text)
    return Prompts(
        dataset=name if spec or dataset_file else str(Path(name).name),
        subset=category or None,
        split=spec.split if spec else None,
        revision=spec.revision if spec else None,
        source=source,
        items=tuple(items),
        chat=chat,
        few_shot=few_shot,
        shots_split=shots_split if few_shot else None,
        template=template,
    )
