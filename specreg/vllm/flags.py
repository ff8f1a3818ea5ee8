"""The vLLM flags a user passes to `specreg serve` after `--`, read as vLLM reads them.

Where vLLM is importable, its own parser decides (`EngineArgs.add_cli_args` on vLLM's
`FlexibleArgumentParser`: every alias, `_` for `-`, `--flag=value`, `--speculative-config.key`).
Otherwise the table below, read from vLLM 0.33.0's `vllm/engine/arg_utils.py` (the conformance tier
reads each wheel's and the vLLM tier compares it with the live parser) answers for the settings
serve writes or takes from the catalog."""

from __future__ import annotations

import argparse
import functools
from typing import Any, NoReturn, Sequence

from specreg import facts
from specreg.errors import SpecregError

#: option string -> vLLM's setting (dest), for the settings `serve` writes, hints or reads (`--gpu`; vllm/engine/arg_utils.py, read as the docstring says)
OPTIONS = {
    "--model": "model",
    "--speculative-config": "speculative_config",
    "-sc": "speculative_config",
    "--spec-method": "spec_method",
    "--spec-model": "spec_model",
    "--spec-tokens": "spec_tokens",
    "--tensor-parallel-size": "tensor_parallel_size",
    "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size",
    "-pp": "pipeline_parallel_size",
    "--data-parallel-size": "data_parallel_size",
    "-dp": "data_parallel_size",
    "--max-model-len": "max_model_len",
    "--quantization": "quantization",
    "-q": "quantization",
    "--dtype": "dtype",
    "--kv-cache-dtype": "kv_cache_dtype",
    "--attention-backend": "attention_backend",
}
#: the settings serve writes itself (the draft): a user's spelling of one is refused
OWNED = {"model", "speculative_config", "spec_method", "spec_model", "spec_tokens"}
#: vLLM versions with `--spec-model/--spec-method/--spec-tokens` (engine/arg_utils.py, 0.22 and later)
SPEC_FLAGS_SINCE = str(facts.since("spec_flags"))


@functools.lru_cache(maxsize=1)  # building it imports vLLM's engine arguments: once a process
def _live_parser() -> Any | None:
    try:
        from vllm.engine.arg_utils import EngineArgs
        from vllm.utils.argparse_utils import FlexibleArgumentParser
    except Exception:  # noqa: BLE001 - vLLM absent, or a version without these: the table answers
        return None
    parser = FlexibleArgumentParser(add_help=False)
    try:
        EngineArgs.add_cli_args(parser)
    except Exception:  # noqa: BLE001 - e.g. vLLM's CUDA build on a machine with no device: its
        return None  # defaults fail to build ("Failed to infer device type"); the table answers
    return parser


def _refuse(message: str) -> NoReturn:
    """argparse's refusal (an ambiguous abbreviation, a flag without its value) as one line."""
    raise SpecregError(f"the vLLM flags after --: {message}")


class _Refusal(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        _refuse(message)


class _Named(argparse.Action):
    """Records the option string a flag resolved to (argparse passes the full one, not the abbreviation)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.resolved = option_string


def _table_parser() -> argparse.ArgumentParser:
    """The table's flags on an argparse parser, which resolves an abbreviation as vLLM's does
    (FlexibleArgumentParser leaves argparse's allow_abbrev on)."""
    parser = _Refusal(add_help=False)
    for dest in dict.fromkeys(OPTIONS.values()):
        parser.add_argument(*(o for o, d in OPTIONS.items() if d == dest), dest=dest, action=_Named)
    return parser


def resolve(arg: str) -> tuple[str, str] | None:
    """(setting, full option string) that one argument names by the table, as argparse reads it: an
    alias, `_` for `-`, `=value`, a dotted JSON key, a unique prefix. An ambiguous prefix is refused."""
    if not arg.startswith("-"):
        return None
    name = _dashes(arg)
    if "." in name.partition("=")[0]:  # vLLM reads --speculative-config.k v as --speculative-config '{"k": v}'
        name = name.partition("=")[0].split(".", 1)[0]  # (FlexibleArgumentParser.parse_args)
    ns, _ = _table_parser().parse_known_args([name, "value"], argparse.Namespace(resolved=None))
    return (OPTIONS[ns.resolved], ns.resolved) if ns.resolved else None


def named(flags: Sequence[str]) -> dict[str, tuple[str, str]]:
    """setting -> (how the user wrote its option, the full option), for the first argument naming each."""
    out: dict[str, tuple[str, str]] = {}
    for arg in flags:
        if arg == "--":  # argparse reads every later argument as a value
            break
        hit = resolve(arg)
        if hit:
            out.setdefault(hit[0], (arg.partition("=")[0], hit[1]))
    return out


def _from_table(flags: Sequence[str]) -> dict[str, str | None]:
    ns, _ = _table_parser().parse_known_args([_dashes(a) for a in flags], argparse.Namespace(resolved=None))
    return {d: str(getattr(ns, d)) for d in dict.fromkeys(OPTIONS.values()) if getattr(ns, d, None) is not None}


def settings(flags: Sequence[str]) -> tuple[dict[str, str | None], str]:
    """(vLLM setting -> the value the user gave, for the settings in OPTIONS; how it was read)."""
    parser = _live_parser()
    if parser is None:
        given, how = _from_table(flags), "table"
    else:
        given, how = _from_live(parser, flags), "vLLM's parser"
    # a dotted JSON key (--speculative-config.k v) is a setting of its own too
    for dest, (spelled_, _full) in named(flags).items():
        if "." in spelled_:
            given.setdefault(dest, spelled_)
    return given, how


def _from_live(parser: Any, flags: Sequence[str]) -> dict[str, str | None]:
    parser.error = _refuse  # vLLM's own refusal, as one line instead of its usage text
    wanted = set(OPTIONS.values())
    names = {a.dest for a in parser._actions}  # noqa: SLF001 - argparse has no public list of dests
    # FlexibleArgumentParser turns `_` into `-` in parse_args, which refuses unknown flags; the same
    # rewrite before parse_known_args (only the option's name, never its value)
    ns, _ = parser.parse_known_args([_dashes(a) for a in flags])
    defaults = parser.parse_known_args([])[0]
    return {
        d: None if getattr(ns, d) is None else str(getattr(ns, d))
        for d in wanted & names
        if getattr(ns, d) != getattr(defaults, d)
    }


def _dashes(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    head, dot, rest = name.partition(".")
    return "--" + head[2:].replace("_", "-") + dot + rest + eq + value


def spelling(dest: str) -> str:
    """The long option of a setting (for messages and the flags serve adds)."""
    return next(o for o, d in OPTIONS.items() if d == dest and o.startswith("--"))
