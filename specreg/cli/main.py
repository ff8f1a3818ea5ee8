"""The `specreg` command line: show, check, serve, materialize, convert, algorithms, catalog, verify, report,
explain, env, cache, completion.

Exit codes: 0 ok; 1 the draft has error findings; 2 bad input (one line on stderr,
``error: <source>: <json path>: <what is wrong>``); 3 an internal error (a bug: please report it;
SPECREG_DEBUG=1 shows the traceback); 130 interrupted (Ctrl-C: one line, no traceback).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import json
from types import ModuleType
from typing import Any, NoReturn, Sequence

from specreg.errors import ConfigError, SpecregError
from specreg.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_OK,
    SpecregErrorLine,
    Refused,
    print_lines,
    printable,
)

#: the commands, in the order `specreg --help` lists them, and the group (specreg.cli.<group>) that
#: holds each; a group is imported only when one of its commands is parsed or run
COMMANDS = {
    "show": "show",
    "serve": "serve",
    "materialize": "serve",
    "convert": "serve",
    "check": "show",
    "verify": "verify",
    "report": "verify",
    "catalog": "catalog",
    "algorithms": "show",
    "explain": "explain",
    "env": "env",
    "cache": "cache",
    "completion": "completion",
}


def group(command: str) -> ModuleType:
    """The module of the command group that holds `command`."""
    return importlib.import_module(f"specreg.cli.{COMMANDS[command]}")


class _Version(argparse.Action):
    """--version: specreg's version, the vLLM it targets and huggingface_hub's (computed only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from specreg.normalization.capabilities import NEWEST_KNOWN, installed_vllm, short

        def of(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "not installed"

        vllm = installed_vllm()
        target = f"vLLM {vllm} (installed)" if vllm else f"vLLM {short(NEWEST_KNOWN)} (newest known; none installed)"
        print(f"specreg {of('specreg')}; targets {target}; huggingface_hub {of('huggingface_hub')}")
        parser.exit()


class _UsageError(Exception):
    """A usage error argparse found (main prints it: one line, and with --json a document)."""


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the command and the fix (`--help` shows the usage)."""

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201 (argparse's signature)
        self.argv = list(sys.argv[1:] if args is None else args)  # which command a usage error is about
        return super().parse_known_args(args, namespace)

    def error(self, message: str) -> NoReturn:
        raise _UsageError(f"{self.prog}: {message}{did_you_mean(self, message)} (see {self.prog} --help)")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    """Every long option of `parser` and of the command parsers built under it."""
    found = []
    for action in parser._actions:
        found += [o for o in action.option_strings if o.startswith("--")]
        if isinstance(action, argparse._SubParsersAction):
            for sub in {id(p): p for p in action.choices.values()}.values():
                found += _options(sub)
    return sorted(set(found))


def did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """ "; did you mean show?" for a mistyped command (`shwo`), "; did you mean --vllm?" for a mistyped
    option (`--vlm`), else ""."""
    import difflib
    import re

    choice = re.match(r"argument [^:]+: invalid choice: '([^']*)' \(choose from (.*)\)$", message)
    if choice:
        choices = [c.strip().strip("'") for c in choice.group(2).split(",")]
        close = difflib.get_close_matches(choice.group(1), choices, n=1, cutoff=0.6)
        return f"; did you mean {close[0]}?" if close else ""
    if message.startswith("unrecognized arguments: "):
        # the named command's options and the top level's: another command's option is no suggestion
        # (and a parser built for one command says what the whole parser says)
        options = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                named = next((w for w in getattr(parser, "argv", []) if w in action.choices), None)
                options += _options(action.choices[named]) if named else []
        hints = []
        for word in message.removeprefix("unrecognized arguments: ").split():
            if word.startswith("--"):
                close = difflib.get_close_matches(word.split("=", 1)[0], options, n=1, cutoff=0.6)
                if close:
                    hints.append((close[0], word.split("=", 1)[0]))
        if len(hints) == 1:
            return f"; did you mean {hints[0][0]}?"
        return "; did you mean " + ", ".join(f"{o} for {w}" for o, w in hints) + "?" if hints else ""
    return ""


#: the longest run of characters without a space an error line echoes whole (a 4,000-digit number, a
#: 100,000-character path): longer ones are cut, saying how long they were
MAX_ECHOED = 200


def bounded(line: str) -> str:
    """`line` with each word (punctuation apart) longer than MAX_ECHOED characters cut to its start
    and its length."""
    if len(line) <= MAX_ECHOED:
        return line
    import re

    return re.sub(
        rf"[^\s:;,()\[\]'\"]{{{MAX_ECHOED + 1},}}", lambda m: f"{m.group()[:60]}… ({len(m.group()):,} characters)", line
    )


def _failure(args: argparse.Namespace | None, code: int, line: str, **more: Any) -> int:
    """End a command that failed: `line` on stderr and, with --json, one JSON document on stdout
    saying the same (every failure prints one, so a program reading stdout always gets an answer)."""
    line = bounded(line)
    if args is not None and getattr(args, "json", False):
        said = line.removeprefix("error: ")
        print(json.dumps({"error": said, "exit_status": code, **more}, indent=2, ensure_ascii=False))
    print(printable(line), file=sys.stderr)
    return code


def _parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with `only`, the parser of that one command (the others are neither
    built nor imported: what a command prints, its help and its errors are the same either way)."""
    p = _OneLineParser(
        prog="specreg",
        description="Normalize speculative-decoding draft configs into vLLM-ready configuration, as trained.",
    )
    p.add_argument(
        "--version", action=_Version, help="specreg's version, the vLLM it targets and huggingface_hub's, then exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS if only is None else (only,):
        getattr(group(name), f"add_{name}")(sub)
    return p


def parser() -> argparse.ArgumentParser:
    """The whole command line's parser (`specreg completion` writes its script from it)."""
    return _parser()


#: what to do about the file-system failures a user can fix
_OS_HINTS = {
    "EROFS": "the file system is read-only: choose a writable place",
    "ENOSPC": "no space left on the device: free some or choose another place",
    "EDQUOT": "the disk quota is exhausted: free some or choose another place",
    "EACCES": "permission denied: choose a place you can write, or fix its permissions",
    "EPERM": "not permitted: choose a place you can write, or fix its permissions",
    "ENOTDIR": "a part of the path is not a directory",
    "EISDIR": "a directory is where a file was expected",
    "ENOENT": "is SPECREG_CACHE or HOME set to a place that exists?",
    "ENAMETOOLONG": "the name is too long for the file system",
    "ELOOP": "too many levels of links",
}


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the path, the system's words and what to do."""
    import errno

    name = errno.errorcode.get(exc.errno or 0, "")
    where = exc.filename if exc.filename is not None else "?"
    hint = _OS_HINTS.get(name)
    return f"{where}: {exc.strerror or exc}" + (f" ({hint})" if hint else "")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1 :]
    if not argv:
        _parser().print_help(sys.stderr)
        return EXIT_BAD_INPUT
    # the first word names the command: only its parser is built (an option before it, such as
    # --help or --version, needs them all)
    try:
        args = _parser(argv[0] if argv[0] in COMMANDS else None).parse_args(argv)
    except _UsageError as exc:  # argparse quotes what the user typed: escaped, as every line specreg prints
        return _failure(argparse.Namespace(json="--json" in argv), EXIT_BAD_INPUT, f"error: {exc}")
    args.vllm_args = extra
    if extra and args.command != "serve":
        print(
            f"error: flags after -- are passed to vLLM by `specreg serve` only, not by `specreg {args.command}`",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    handler = group(args.command).HANDLERS[args.command]
    if getattr(args, "quiet", None) is not None:  # commands that may download weights
        from specreg.sources.hub import progress_bars

        progress_bars(not args.quiet and sys.stderr.isatty())
        if args.quiet:  # the libraries' own warnings too (huggingface_hub's, ...): errors still print
            import warnings

            warnings.simplefilter("ignore")
    try:
        return handler(args)
    except Refused as exc:
        lines = str(exc).split("\n")
        if getattr(args, "json", False):
            findings = [f.to_dict() for f in getattr(exc, "findings", ())]
            said = bounded(lines[-1]).removeprefix("error: ")
            print(json.dumps({"error": said, "exit_status": EXIT_FINDINGS, "findings": findings}, indent=2))
        print_lines([bounded(line) for line in lines], file=sys.stderr)
        return EXIT_FINDINGS
    except SpecregErrorLine as exc:
        return _failure(args, EXIT_BAD_INPUT, f"error: {exc}")
    except ConfigError as exc:  # every problem of the file, one line each with its JSON path
        if getattr(args, "json", False):
            print(
                json.dumps(
                    {
                        "error": bounded(exc.line()),
                        "exit_status": EXIT_BAD_INPUT,
                        "source": exc.source,
                        "problems": [{"path": p.path, "message": bounded(p.message)} for p in exc.problems],
                    },
                    indent=2,
                )
            )
        prefix = f"{exc.source}: " if exc.source else ""
        print_lines([bounded(f"error: {prefix}{p.path}: {p.message}") for p in exc.problems], file=sys.stderr)
        return EXIT_BAD_INPUT
    except SpecregError as exc:
        if os.environ.get("SPECREG_DEBUG") and exc.__cause__ is not None:
            # a plugin's failure: its author needs the traceback of what it raised
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        return _failure(args, EXIT_BAD_INPUT, f"error: {exc.line()}", source=exc.source, kind=type(exc).__name__)
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the machine said no (read-only, full, permissions): not a specreg bug
        return _failure(args, EXIT_BAD_INPUT, f"error: {os_error_line(exc)}")
    except KeyboardInterrupt:  # Ctrl-C: one line; what was being written is rolled back by its writer
        return _failure(args, EXIT_INTERRUPTED, f"interrupted: specreg {args.command} stopped")
    except Exception as exc:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("SPECREG_DEBUG"):
            raise
        return _failure(
            args,
            EXIT_INTERNAL,
            f"error: internal error ({type(exc).__name__}: {exc}); please report it "
            "(SPECREG_DEBUG=1 shows the traceback)",
        )


if __name__ == "__main__":
    sys.exit(main())
