"""`specreg completion bash|zsh`: a shell completion script, written from the parser itself (so it
names every command and option there is), with the finding codes for `explain` and the catalog ids
for `catalog show`, `catalog pin` and `verify`. Nothing runs at completion time but the shell."""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from specreg.cli.common import EXIT_OK

SHELLS = ("bash", "zsh")
#: the commands whose argument is a catalog id
ID_TAKERS = ("catalog show", "catalog pin", "verify")


def add_completion(sub: Any) -> None:
    comp = sub.add_parser(
        "completion",
        help="print a shell completion script (bash or zsh)",
        description="Print a completion script for bash or zsh. Load it in the current shell with "
        "`source <(specreg completion bash)`, or for every shell: "
        "`specreg completion bash > ~/.local/share/bash-completion/completions/specreg` "
        '(zsh: `specreg completion zsh > "${fpath[1]}/_specreg"`).',
    )
    comp.add_argument("shell", choices=SHELLS, help="the shell")


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # argparse keeps its parsers nowhere public
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _options(parser: argparse.ArgumentParser) -> list[str]:
    return sorted(o for a in parser._actions for o in a.option_strings if o.startswith("--") or len(o) == 2)


def _words() -> dict[str, str]:
    """`command` or `command action` -> the words to complete after it."""
    from specreg.cli.main import parser
    from specreg.normalization.findings import CODES

    words: dict[str, str] = {}
    for name, sp in _subparsers(parser()).items():
        actions = _subparsers(sp)
        words[name] = " ".join([*actions, *_options(sp)])
        for action, ap in actions.items():
            words[f"{name} {action}"] = " ".join(_options(ap))
    try:
        from specreg.entries.lookup import catalog

        ids = [e.id for e in catalog().values()]
    except Exception:  # noqa: BLE001 - a broken catalog still gets the commands completed
        ids = []
    words["explain"] += " " + " ".join(CODES)
    words["ids"] = " ".join(ids)  # one shell variable, named by the commands that take a catalog id
    for key in ID_TAKERS:
        words[key] += " $ids"
    words["completion"] += " " + " ".join(SHELLS)
    return words


def bash_script() -> str:
    words = _words()
    ids = words.pop("ids")
    commands = " ".join(k for k in words if " " not in k)
    groups = sorted({k.split(" ")[0] for k in words if " " in k})  # commands with actions: catalog, cache
    is_group = " || ".join(f'[ "$key" = {g} ]' for g in groups)
    cases = []
    for key, value in words.items():
        quoted = f'"{value}"' if key in ID_TAKERS else shlex.quote(value)  # "$ids" expands
        cases.append(f"        {shlex.quote(key)}) words={quoted} ;;")
    return (
        "# specreg completion (bash): source <(specreg completion bash)\n"
        "_specreg() {\n"
        '    local cur="${COMP_WORDS[COMP_CWORD]}" key words\n'
        f"    local ids={shlex.quote(ids)}\n"
        '    if [ "$COMP_CWORD" -eq 1 ]; then\n'
        f'        COMPREPLY=($(compgen -W {shlex.quote(commands + " --help --version")} -- "$cur"))\n'
        "        return\n"
        "    fi\n"
        '    key="${COMP_WORDS[1]}"\n'
        f'    if [ "$COMP_CWORD" -ge 3 ] && {{ {is_group}; }}; then\n'
        '        key="$key ${COMP_WORDS[2]}"\n'
        "    fi\n"
        '    case "$key" in\n' + "\n".join(cases) + "\n        *) words='' ;;\n"
        "    esac\n"
        '    COMPREPLY=($(compgen -W "$words" -- "$cur"))\n'
        "}\n"
        "complete -o default -F _specreg specreg\n"
    )


def zsh_script() -> str:
    # zsh runs bash completion functions through its bashcompinit layer
    return (
        "#compdef specreg\n"
        "# specreg completion (zsh): source <(specreg completion zsh)\n"
        "autoload -U +X bashcompinit && bashcompinit\n" + bash_script().split("\n", 1)[1]
    )


def _completion(args: argparse.Namespace) -> int:
    print(bash_script() if args.shell == "bash" else zsh_script(), end="")
    return EXIT_OK


HANDLERS = {"completion": _completion}
