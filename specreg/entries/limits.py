"""The limits of a harness value: one table read by `catalog check` (rules.problems) and by
`specreg verify`'s flags, so a catalog entry never holds a value verify would refuse or crash on."""

from __future__ import annotations

import math
import string
from typing import Any

#: field -> (lowest, highest) of an integer harness value
INTEGERS: dict[str, tuple[int, int]] = {
    "num_prompts": (1, 10**9),
    "max_tokens": (1, 10**9),
    "k": (1, 10**9),
    "batch_size": (1, 10**9),
    "concurrency": (1, 10**9),
    "tensor_parallel_size": (1, 10**9),
    "runs": (1, 10**9),
    "max_model_len": (1, 10**9),
    "seed": (0, 10**9),
    "few_shot": (0, 10**9),
    "chunks": (1, 10**9),
}
#: field -> (lowest, highest) of a real harness value
NUMBERS: dict[str, tuple[float, float]] = {"temperature": (0.0, 100.0)}


def integer_problem(field: str, value: Any) -> str | None:
    lo, hi = INTEGERS[field]
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        return f"must be an integer from {lo} to {hi}, got {value!r}"
    return None


def number_problem(field: str, value: Any) -> str | None:
    lo, hi = NUMBERS[field]
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or not lo <= value <= hi
    ):
        return f"must be a finite number from {lo:g} to {hi:g}, got {value!r}"
    return None


def template_problem(template: str) -> str | None:
    """A prompt template may only name a row's fields, `{question}`: no format spec (a width of
    1,500,000,000 is a MemoryError), no conversion, no attribute or index."""
    try:
        parts = list(string.Formatter().parse(template))
    except ValueError as exc:
        return f"not a format string: {exc}"
    for _, name, spec, conversion in parts:
        if name is None:
            continue
        if not name.isidentifier() or spec or conversion:
            shown = "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            return f"{shown[:60]} is not a plain field: a template names fields only, as {{question}}"
    return None
