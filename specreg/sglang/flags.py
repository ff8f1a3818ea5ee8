"""The SGLang flags a user passes after `--`, read as SGLang reads them: its launcher parses them
with a plain argparse parser (ServerArgs.add_cli_args: aliases, `--flag=value`, a unique prefix of a
flag). The rules file's option table answers for the settings specreg writes itself (the verifier,
the draft and its speculative settings); the SGLang tier compares that table with SGLang's parser."""

from __future__ import annotations

import argparse
from typing import Any, Mapping, NoReturn, Sequence

from specreg.errors import SpecregError


class FlagError(SpecregError):
    """A flag after `--` that specreg refuses (one line)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise FlagError(f"the SGLang flags after --: {message}")


class _Named(argparse.Action):
    """Records the full option string a flag resolved to (argparse passes it, not the abbreviation)."""

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        namespace.resolved.setdefault(self.dest, option_string)


def _parser(options: Mapping[str, str]) -> argparse.ArgumentParser:
    parser = _Parser(add_help=False)
    for dest in dict.fromkeys(options.values()):
        parser.add_argument(*(o for o, d in options.items() if d == dest), dest=dest, action=_Named)
    return parser


def given(flags: Sequence[str], rules: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """setting -> (how the user wrote its option, the full option), for the table's settings the flags name."""
    ns, _rest = _parser(rules["options"]).parse_known_args(list(flags), argparse.Namespace(resolved={}))
    spelled: dict[str, str] = {}
    for arg in flags:
        if arg == "--":
            break
        if arg.startswith("--"):
            name = arg.partition("=")[0]
            hit = next((d for d, full in ns.resolved.items() if full.startswith(name) and d not in spelled), None)
            if hit:
                spelled[hit] = name
    return {dest: (spelled.get(dest, full), full) for dest, full in ns.resolved.items()}


def merge(flags: Sequence[str], rules: Mapping[str, Any]) -> list[str]:
    """The user's flags, checked: one naming a setting specreg writes (the verifier, the draft, its
    speculative settings, its quantization) is refused, as for vLLM."""
    named = given(flags, rules)
    owned = [d for d in rules["owned"] if d in named]
    if owned:
        user, full = named[owned[0]]
        read = "" if user == full else f"SGLang reads it as {full}; "
        raise FlagError(
            f"{user} after --: {read}specreg writes the model, the draft and its speculative settings "
            "itself; pass SGLang's other flags there"
        )
    return list(flags)


#: the catalog's [serving] hints (vLLM settings, specreg.api.serve.HINTS) as SGLang's settings: in 0.5.23
#: `tp_size` (sglang/srt/arg_groups/fields/parallel.py: --tp-size, alias --tensor-parallel-size) and
#: `context_length` (fields/model.py: --context-length). quantization is left out: SGLang's method
#: names are not vLLM's, and the draft's quantization is specreg's to write.
HINTS = {"tensor_parallel_size": "tp_size", "max_model_len": "context_length"}


def hint_flags(flags: Sequence[str], rules: Mapping[str, Any], serving: Any, note: Any) -> list[str]:
    """The catalog's [serving] hints the user's flags do not give in any spelling, as SGLang flags (a
    differing value given is the user's, with a note), as `specreg serve` adds them for vLLM."""
    named = given(flags, rules)
    ns, _rest = _parser(rules["options"]).parse_known_args(list(flags), argparse.Namespace(resolved={}))
    added: list[str] = []
    for field, dest in HINTS.items():
        hint = getattr(serving, field, None) if serving is not None else None
        if hint is None or dest not in rules["options"].values():
            continue
        option = next(o for o, d in rules["options"].items() if d == dest)
        if dest not in named:
            added += [option, str(hint)]
        elif str(getattr(ns, dest)) != str(hint):
            note(f"note: the catalog entry serves this draft with {option} {hint}; you asked for {getattr(ns, dest)}")
    return added
