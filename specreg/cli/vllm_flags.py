"""The vLLM flags a user passes to `specreg serve` after `--`, read as vLLM reads them.

Where vLLM is importable, its own parser decides (`EngineArgs.add_cli_args` on vLLM's
`FlexibleArgumentParser`: every alias, `_` for `-`, `--flag=value`, `--speculative-config.key`).
Otherwise the table below, read from vLLM 0.33.0's `vllm/engine/arg_utils.py` (the conformance tier
reads each wheel's and the vLLM tier compares it with the live parser) answers for the settings
serve writes or takes from the catalog."""

from __future__ import annotations

from typing import Any, Sequence

#: option string -> vLLM's setting (dest), for the settings `serve` writes, hints or reads (`--gpu`; vLLM 0.33.0)
OPTIONS = {
    "--model": "model",
    "--speculative-config": "speculative_config", "-sc": "speculative_config",
    "--spec-method": "spec_method", "--spec-model": "spec_model", "--spec-tokens": "spec_tokens",
    "--tensor-parallel-size": "tensor_parallel_size", "-tp": "tensor_parallel_size",
    "--pipeline-parallel-size": "pipeline_parallel_size", "-pp": "pipeline_parallel_size",
    "--data-parallel-size": "data_parallel_size", "-dp": "data_parallel_size",
    "--max-model-len": "max_model_len",
    "--quantization": "quantization", "-q": "quantization",
    "--dtype": "dtype", "--kv-cache-dtype": "kv_cache_dtype", "--attention-backend": "attention_backend",
}
#: the settings serve writes itself (the draft): a user's spelling of one is refused
OWNED = {"model", "speculative_config", "spec_method", "spec_model", "spec_tokens"}
#: vLLM versions with `--spec-model/--spec-method/--spec-tokens` (engine/arg_utils.py, 0.22 and later)
SPEC_FLAGS_SINCE = "0.22"


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


def _dest(arg: str) -> str | None:
    """The setting one argument names by the table (`_` or `-`, `=value`, a dotted JSON key)."""
    # --speculative-config.num_speculative_tokens is a key of --speculative-config
    return OPTIONS.get(_dashes(arg).partition("=")[0].split(".", 1)[0])


def spelled(flags: Sequence[str], dest: str) -> str:
    """How the user wrote the option of `dest` (the first such argument), else the setting's name."""
    return next((arg.partition("=")[0] for arg in flags if arg.startswith("-") and _dest(arg) == dest), dest)


def _from_table(flags: Sequence[str]) -> dict[str, str | None]:
    given: dict[str, str | None] = {}
    for i, arg in enumerate(flags):
        if not arg.startswith("-") or arg == "--":
            continue
        name, eq, value = arg.partition("=")
        dest = _dest(arg)
        if dest is None:
            continue
        following = flags[i + 1] if i + 1 < len(flags) and not flags[i + 1].startswith("-") else None
        given[dest] = value if eq else following
    return given


def settings(flags: Sequence[str]) -> tuple[dict[str, str | None], str]:
    """(vLLM setting -> the value the user gave, for the settings in OPTIONS; how it was read)."""
    parser = _live_parser()
    if parser is None:
        return _from_table(flags), "table"
    wanted = set(OPTIONS.values())
    names = {a.dest for a in parser._actions}  # noqa: SLF001 - argparse has no public list of dests
    # FlexibleArgumentParser turns `_` into `-` in parse_args, which refuses unknown flags; the same
    # rewrite before parse_known_args (only the option's name, never its value)
    spelled_ = [_dashes(a) for a in flags]
    ns, _ = parser.parse_known_args(spelled_)
    defaults = parser.parse_known_args([])[0]
    given = {d: None if getattr(ns, d) is None else str(getattr(ns, d)) for d in wanted & names
             if getattr(ns, d) != getattr(defaults, d)}
    # a dotted JSON key (--speculative-config.k v) is a setting of its own too
    for arg in flags:
        if arg.startswith(("--speculative-config.", "--speculative_config.")):
            given.setdefault("speculative_config", arg)
    return given, "vLLM's parser"


def _dashes(arg: str) -> str:
    if not arg.startswith("--"):
        return arg
    name, eq, value = arg.partition("=")
    head, dot, rest = name.partition(".")
    return "--" + head[2:].replace("_", "-") + dot + rest + eq + value


def spelling(dest: str) -> str:
    """The long option of a setting (for messages and the flags serve adds)."""
    return next(o for o, d in OPTIONS.items() if d == dest and o.startswith("--"))
