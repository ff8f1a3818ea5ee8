"""The `specreg` command line: show, check, serve, materialize, convert, algorithms, catalog, verify, report,
explain, env, cache, completion.

Exit codes: 0 ok; 1 the draft has error findings; 2 bad input (one line on stderr,
``error: <source>: <json path>: <what is wrong>``); 3 an internal error (a bug: please report it;
SPECREG_DEBUG=1 shows the traceback); 130 interrupted (Ctrl-C: one line, no traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import json
from typing import Any, NoReturn, Sequence

from specreg.cli import cache, catalog, completion, env, explain, serve, show, verify
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

#: the commands, in the order `specreg --help` lists them, and the group that holds each
COMMANDS = {
    "show": show,
    "serve": serve,
    "materialize": serve,
    "convert": serve,
    "check": show,
    "verify": verify,
    "report": verify,
    "catalog": catalog,
    "algorithms": show,
    "explain": explain,
    "env": env,
    "cache": cache,
    "completion": completion,
}


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


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the command and the fix (`--help` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes what the user typed: escaped, as every line specreg prints
        self.exit(EXIT_BAD_INPUT, printable(f"error: {self.prog}: {message} (see {self.prog} --help)") + "\n")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="specreg",
        description="Normalize speculative-decoding draft configs into vLLM-ready configuration, as trained.",
    )
    p.add_argument(
        "--version", action=_Version, help="specreg's version, the vLLM it targets and huggingface_hub's, then exit"
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, group in COMMANDS.items():
        getattr(group, f"add_{name}")(sub)
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
    args = _parser().parse_args(argv)
    args.vllm_args = extra
    if extra and args.command != "serve":
        print(
            f"error: flags after -- are passed to vLLM by `specreg serve` only, not by `specreg {args.command}`",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    handler = COMMANDS[args.command].HANDLERS[args.command]
    if getattr(args, "quiet", None) is not None:  # commands that may download weights
        from specreg.sources.hub import progress_bars

        progress_bars(not args.quiet and sys.stderr.isatty())
        if args.quiet:  # the libraries' own warnings too (huggingface_hub's, ...): errors still print
            import warnings

            warnings.simplefilter("ignore")
    try:
        return handler(args)
    except Refused as exc:
        print_lines(str(exc).split("\n"), file=sys.stderr)
        return EXIT_FINDINGS
    except SpecregErrorLine as exc:
        print(printable(f"error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except ConfigError as exc:  # every problem of the file, one line each with its JSON path
        if getattr(args, "json", False):
            print(
                json.dumps(
                    {
                        "error": exc.line(),
                        "source": exc.source,
                        "problems": [{"path": p.path, "message": p.message} for p in exc.problems],
                    },
                    indent=2,
                )
            )
        prefix = f"{exc.source}: " if exc.source else ""
        print_lines([f"error: {prefix}{p.path}: {p.message}" for p in exc.problems], file=sys.stderr)
        return EXIT_BAD_INPUT
    except SpecregError as exc:
        if os.environ.get("SPECREG_DEBUG") and exc.__cause__ is not None:
            # a plugin's failure: its author needs the traceback of what it raised
            import traceback

            traceback.print_exception(exc.__cause__, file=sys.stderr)
        print(printable(f"error: {exc.line()}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except OSError as exc:  # the machine said no (read-only, full, permissions): not a specreg bug
        print(printable(f"error: {os_error_line(exc)}"), file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:  # Ctrl-C: one line; what was being written is rolled back by its writer
        print(f"interrupted: specreg {args.command} stopped", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("SPECREG_DEBUG"):
            raise
        print(
            printable(
                f"error: internal error ({type(exc).__name__}: {exc}); please report it "
                "(SPECREG_DEBUG=1 shows the traceback)"
            ),
            file=sys.stderr,
        )
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
