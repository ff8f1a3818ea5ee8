"""`python -m specreg.facts list | path VERSION | diff OLD NEW | refresh VERSION [--out DIR [--force]] | mark-tested
VERSION`: the known vLLM releases, where their facts live, what changed between two, recomputing one
from its wheel, and marking the newest plugin-tested once its conformance tier passed
(docs/maintaining.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from specreg import facts
from specreg.errors import printable

PROG = "python -m specreg.facts"


def _known(command: str, text: str) -> str | None:
    """The known release `text` names, else None after one error line."""
    release = facts.release_of(text.strip())
    if release is None:
        known = facts.known()
        print(
            f"{PROG} {command}: {printable(text)!s} is not a known vLLM release "
            f"(known: {known[0]} to {known[-1]}; `{PROG} list` names each)",
            file=sys.stderr,
        )
    return release


def main(argv: list[str] | None = None, extract=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        return _main(argv, extract)
    except facts.FactsError as e:  # a damaged committed file: one line naming it, whatever the command
        command = next((f"{PROG} {a}" for a in argv[:1] if a in COMMANDS), PROG)
        print(f"{command}: {printable(str(e))!s}", file=sys.stderr)
        return 2


COMMANDS = ("list", "path", "diff", "refresh", "mark-tested")


def _main(argv: list[str], extract) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the known vLLM releases, oldest first")
    path = commands.add_parser("path", help="the folder of a known release's committed facts")
    path.add_argument("version", help="a known release, e.g. " + facts.known()[-1])
    diff = commands.add_parser("diff", help="what changed between two known releases' committed facts")
    diff.add_argument("old")
    diff.add_argument("new")
    refresh = commands.add_parser("refresh", help="compute one release's facts from its wheel and write them")
    refresh.add_argument("version", help="X.Y or X.Y.0 (a new release is added to the list)")
    refresh.add_argument("--out", type=Path, help="write the facts files here instead of the committed folder")
    refresh.add_argument(
        "--force", action="store_true", help="in --out, replace files that are not facts files as refresh writes them"
    )
    mark = commands.add_parser(
        "mark-tested", help="mark the newest known release plugin-tested, once its conformance tier passed"
    )
    mark.add_argument("version", help="the newest known release")
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(facts.known()))
        return 0
    if args.command == "path":
        release = _known("path", args.version)
        if release is None:
            return 2
        print(facts.folder(release))
        return 0
    if args.command == "diff":
        return _diff(args.old, args.new)
    if args.command == "mark-tested":
        return _mark_tested(args.version)
    try:
        return _refresh(args.version, args.out, extract, args.force)
    except KeyboardInterrupt as e:  # what is new, when something was written (refresh.Interrupted)
        state = getattr(e, "state", "the committed facts are as they were")
        print(f"{PROG} refresh: interrupted; {printable(state)!s}", file=sys.stderr)
        return 130


def _diff(old_text: str, new_text: str) -> int:
    from specreg.facts.diff import diff, read_committed

    old, new = _known("diff", old_text), _known("diff", new_text)
    if old is None or new is None:
        return 2
    if facts.known().index(old) >= facts.known().index(new):
        print(f"{PROG} diff: {old} is not older than {new}: give the older release first", file=sys.stderr)
        return 2
    print("\n".join(diff(old, new, read_committed, facts.metadata())))
    return 0


def _refresh(version: str, out: Path | None, extract, force: bool) -> int:
    from specreg.facts import refresh

    try:
        lines = refresh.refresh(version, out, force=force, **({"extract": extract} if extract else {}))
    except refresh.RefreshError as e:
        if e.report:
            print("\n".join(e.report))
        if e.failures:
            print(f"{PROG} refresh: {len(e.failures)} extractor(s) failed:", file=sys.stderr)
            for failure in e.failures:
                print(f"  {printable(failure)!s}", file=sys.stderr)
        print(f"{PROG} refresh: {printable(str(e))!s}", file=sys.stderr)
        return e.code
    print("\n".join(lines))
    return 0


def _mark_tested(version: str) -> int:
    from specreg.facts import refresh

    release = _known("mark-tested", version)
    if release is None:
        return 2
    try:
        refresh.mark_tested(release)
    except refresh.RefreshError as e:
        print(f"{PROG} mark-tested: {printable(str(e))!s}", file=sys.stderr)
        return 2
    print(f"vLLM {release} is plugin-tested")
    return 0


def run(argv: list[str] | None = None) -> int:
    """`main`, for a reader that may stop reading (`... diff A B | head`): what it read is the answer,
    so the closed pipe ends the command quietly (exit 0), not in a traceback."""
    import os

    try:
        code = main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # stdout's last flush at exit would fail again: point it at /dev/null first
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    return code


if __name__ == "__main__":
    sys.exit(run())
