"""`python -m specreg.facts list | path VERSION`: the known vLLM releases and where their facts live."""

from __future__ import annotations

import argparse
import sys

from specreg import facts
from specreg.errors import printable


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m specreg.facts", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="the known vLLM releases, oldest first")
    path = commands.add_parser("path", help="the folder of a known release's committed facts")
    path.add_argument("version", help="a known release, e.g. " + facts.known()[-1])
    args = parser.parse_args(argv)
    if args.command == "list":
        print("\n".join(facts.known()))
        return 0
    release = facts.release_of(args.version.strip())
    if release is None:
        known = facts.known()
        print(f"python -m specreg.facts path: {printable(args.version)!s} is not a known vLLM release "
              f"(known: {known[0]} to {known[-1]}; `python -m specreg.facts list` names each)", file=sys.stderr)
        return 2
    print(facts.folder(release))
    return 0


if __name__ == "__main__":
    sys.exit(main())
