"""What the Python API is handed, checked as the command line checks it: a config in hand holds only
what a JSON file can (the file reader, sources/files.py, refuses the rest), and an argument gets the
limits its flag has (entries/limits.py, the table `specreg check`'s and `verify`'s flags read), so a
program never gets a result the CLI would refuse, nor a TypeError from deep inside."""

from __future__ import annotations

import math
from typing import Any, Mapping

from specreg.errors import ConfigError, Problem, SpecregError, show_value

#: how deep a config may nest (the file reader's json module stops far sooner than Python's stack)
MAX_DEPTH = 200
#: the longest verifier or source a call takes (Linux's PATH_MAX; a Hub id is at most 96 characters)
MAX_PATH = 4096
#: the most problems one config reports (a million NaNs are one message, not a million)
MAX_PROBLEMS = 20


def config_problems(config: Any) -> list[Problem]:
    """What in `config` a JSON file could not hold: a NaN or infinite number, a value of another
    type (a Decimal, a set, bytes, an object), a key that is not a string, a container that holds
    itself. Each problem names its JSON path."""
    problems: list[Problem] = []
    open_: set[int] = set()  # the containers on the path being walked (a cycle returns to one)

    def walk(value: Any, path: str, depth: int) -> None:
        if len(problems) >= MAX_PROBLEMS:
            return
        kind = type(value)
        if kind in (str, int, bool) or value is None:
            return
        if kind is float:
            if not math.isfinite(value):
                problems.append(Problem(path, f"{value!r} is not a JSON number (a config file cannot hold it)"))
            return
        if isinstance(value, (Mapping, list, tuple)):
            if id(value) in open_:
                problems.append(Problem(path, "holds itself (a cycle): a JSON document is a tree"))
                return
            if depth >= MAX_DEPTH:
                problems.append(Problem("$", f"the config is nested too deeply (more than {MAX_DEPTH} levels)"))
                return
            open_.add(id(value))
            if isinstance(value, Mapping):
                for key, item in value.items():
                    if not isinstance(key, str):
                        problems.append(Problem(path, f"has a key {show_value(key, 40)} that is not a string"))
                        continue
                    walk(item, f"{path}.{key}" if key.isidentifier() else f"{path}[{show_value(key, 40)}]", depth + 1)
            else:
                for i, item in enumerate(value):
                    walk(item, f"{path}[{i}]", depth + 1)
            open_.discard(id(value))
            return
        shown = type(value).__name__
        problems.append(
            Problem(
                path, f"a {shown} ({show_value(value, 40)}) is not a JSON value: give a str, int, float, bool or None"
            )
        )

    walk(config, "$", 0)
    return problems


def _plain(value: Any, depth: int) -> bool:
    """Whether `value` is plainly JSON (dicts with str keys, lists, str, int, bool, None, finite
    floats): the quick pass every normalize makes; config_problems then says what is wrong."""
    kind = type(value)
    if kind is str or kind is int or kind is bool or value is None:
        return True
    if kind is float:
        return value - value == 0.0  # NaN and infinity give NaN
    if depth >= MAX_DEPTH:
        return False
    if kind is dict:
        for k, v in value.items():
            t = type(v)
            if type(k) is not str or not (t is str or t is int or t is bool or v is None or _plain(v, depth + 1)):
                return False
        return True
    if kind is list:
        for v in value:
            t = type(v)
            if not (t is str or t is int or t is bool or v is None or _plain(v, depth + 1)):
                return False
        return True
    return False  # another mapping or sequence type, or not JSON: the full walk decides


def check_config(config: Any, source: str | None = None) -> None:
    """Raise ConfigError naming every JSON path of `config` a JSON file could not hold."""
    if not isinstance(config, Mapping) or _plain(config, 0):
        return  # (not a mapping: the normalizer says what the top level must be)
    problems = config_problems(config)
    if problems:
        raise ConfigError(problems, source=source)


def integer(name: str, value: Any, field: str | None = None) -> int | None:
    """`value` (None or an int) within the limits of the flag for `field` (default `name`)."""
    if value is None:  # before the import: the limits table comes with the catalog package
        return None
    from specreg.entries.limits import INTEGERS, integer_problem

    problem = integer_problem(field or name, value)
    if problem is not None:
        lo, hi = INTEGERS[field or name]
        raise SpecregError(f"{name} must be an integer from {lo} to {hi}, got {show_value(value, 40)}")
    return value


def text(name: str, value: Any, longest: int = MAX_PATH) -> str | None:
    """`value` as None or a string of at most `longest` characters (a bool or a number is refused,
    naming the argument)."""
    if value is not None and not isinstance(value, str):
        raise SpecregError(f"{name} must be a string, got {type(value).__name__} {show_value(value, 40)}")
    if value is not None and len(value) > longest:
        raise SpecregError(f"{name} {show_value(value, 40)} is {len(value):,} characters: at most {longest:,}")
    return value


def version(value: Any) -> Any:
    """The vLLM version to target: None, a string or a packaging Version."""
    from packaging.version import Version

    if value is not None and not isinstance(value, (str, Version)):
        from specreg import facts

        raise SpecregError(
            f"vllm must be a version string such as '{facts.known()[-1]}', got {type(value).__name__} {show_value(value, 40)}"
        )
    return value


def flag(name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise SpecregError(f"{name} must be True or False, got {type(value).__name__} {show_value(value, 40)}")
    return value


def gpu(value: Any) -> str | None:
    """A GPU name or compute capability specreg has facts for (as `--gpu` takes), or None."""
    from specreg.vllm.attention import AttentionError, capability

    if text("gpu", value) is None:
        return None
    try:
        capability(value)
    except AttentionError as exc:
        raise SpecregError(f"gpu: {exc}") from None
    return value


def flags(name: str, value: Any) -> list[str]:
    """Command-line words: a list or tuple of strings (one string would be split into characters)."""
    if isinstance(value, (str, bytes)):
        raise SpecregError(
            f"{name} must be a list of flags, got the string {show_value(value, 60)}: "
            f"pass {name}=shlex.split(...) or a list such as ['--port', '8000']"
        )
    try:
        words = list(value)
    except TypeError:
        raise SpecregError(f"{name} must be a list of strings, got {type(value).__name__}") from None
    bad = next((w for w in words if not isinstance(w, str)), None)
    if bad is not None:
        raise SpecregError(f"{name} must be a list of strings; it holds {type(bad).__name__} {show_value(bad, 40)}")
    return words


def directory(name: str, value: Any) -> Any:
    """A directory to write: a non-empty path (an empty string would be the current directory)."""
    import os

    try:
        path = os.fspath(value)
    except TypeError:
        raise SpecregError(f"{name} must be a path, got {type(value).__name__} {show_value(value, 40)}") from None
    if isinstance(path, bytes):
        raise SpecregError(f"{name} must be a str path, got bytes {show_value(path, 40)}: decode it first")
    if not path.strip():
        raise SpecregError(f"{name} is empty: name the directory to write (an empty path would be the current one)")
    return value


def source(value: Any) -> str:
    """A draft's source as `load` takes it: a str or os.PathLike of str."""
    import os

    try:
        path = os.fspath(value)
    except TypeError:
        raise SpecregError(
            f"the source must be a path or an org/name Hub id, got {type(value).__name__} {show_value(value, 40)}"
        ) from None
    if isinstance(path, bytes):
        raise SpecregError(f"the source must be a str, got bytes {show_value(path, 40)}: decode it first")
    return path
