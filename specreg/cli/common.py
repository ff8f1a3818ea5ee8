"""What every command group shares: exit codes, option types, the source arguments, loading a
draft, and the errors that end a command with one line."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from specreg.errors import clipped, printable  # the one escaper and the one shortener (re-exported here)

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3
EXIT_INTERRUPTED = 130  # Ctrl-C, as shells report a SIGINT


def int_range(minimum: int, maximum: int = 10**9) -> Any:
    """An argparse type: an integer from minimum to maximum (a clear usage error, exit 2, otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:  # also a number past int()'s 4300 digits
            raise argparse.ArgumentTypeError(f"not an integer: {clipped(text)}") from None
        if value < minimum or value > maximum:
            digits = str(value)
            shown = digits if len(digits) <= 40 else f"{digits[:40]}… ({len(digits):,} digits)"
            raise argparse.ArgumentTypeError(f"must be an integer from {minimum} to {maximum}, got {shown}")
        return value

    return parse


def harness_int(field: str) -> Any:
    """An argparse type for an integer flag of any command, with the limits the catalog's harness values
    have (entries/limits.py INTEGERS: the lowest and highest value of each), read when a value is
    parsed (building a command's parser imports no catalog code)."""

    def parse(text: str) -> int:
        from specreg.entries.limits import INTEGERS

        return int_range(*INTEGERS[field])(text)

    return parse


def harness_number(field: str) -> Any:
    def parse(text: str) -> float:
        from specreg.entries.limits import NUMBERS

        return number_range(*NUMBERS[field])(text)

    return parse


def number_range(low: float, high: float) -> Any:
    """An argparse type: a finite number in [low, high] (nan and inf refused)."""

    def parse(text: str) -> float:
        import math

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {clipped(text)}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a finite number from {low:g} to {high:g}, got {value:g}")
        return value

    return parse


def gpu_name(text: str) -> str:
    """An argparse type: a GPU name or compute capability specreg has facts for (specreg.vllm.attention)."""
    from specreg.vllm.attention import AttentionError, capability

    try:
        capability(text)
    except AttentionError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def _verifier(text: str) -> str:
    """An argparse type: a verifier that `vllm serve VERIFIER` cannot read as one of its flags, and no
    longer than a path can be (it is echoed in the serve line and in errors)."""
    from specreg.api.validation import MAX_PATH

    if len(text) > MAX_PATH:
        raise argparse.ArgumentTypeError(
            f"{clipped(text)} is longer than any Hub id or path ({MAX_PATH:,} characters at most)"
        )
    if text.startswith("-"):
        raise argparse.ArgumentTypeError(
            f"{clipped(text)} starts with '-': no Hub id does, and vLLM would read it "
            "as a flag; write a local directory as ./NAME"
        )
    return text


def source_args(sp: argparse.ArgumentParser) -> None:
    sp.add_argument("source", help="a local dir, a config.json path, org/name or org/name@revision")
    sp.add_argument("--revision", help="a Hub branch, tag or commit (or use org/name@revision)")
    sp.add_argument("--vllm", metavar="X.Y", help="the vLLM version to target (default: installed, else newest known)")
    sp.add_argument(
        "--verifier",
        type=_verifier,
        help="the verifier (Hub id or local dir): for native formats, which name none, or to override the config's",
    )


def directory_args(sp: argparse.ArgumentParser, metavar: str) -> None:
    """SOURCE, the directory to write and how the weights get there (materialize, convert)."""
    source_args(sp)
    sp.add_argument("dir", metavar=metavar, help="the directory to write (must be empty unless --force)")
    sp.add_argument(
        "-q", "--quiet", action="store_true", help="no download progress bars, notes or warnings (errors still print)"
    )
    how = sp.add_mutually_exclusive_group()
    how.add_argument("--config-only", action="store_true", help="write config.json only, no weights")
    how.add_argument("--copy", action="store_true", help="copy the weight files instead of linking them")
    sp.add_argument(
        "--force", action="store_true", help=f"write into a non-empty {metavar} (replaces only the files it writes)"
    )


class SpecregErrorLine(Exception):
    """Bad command-line usage: one line, exit 2."""


class Refused(Exception):
    """The draft has error findings: the message is printed and the exit status is 1 (with --json, a
    document holding the message and the findings that say why)."""

    def __init__(self, message: str, findings: Sequence[Any] = ()):
        super().__init__(message)
        self.findings = tuple(findings)


def progress_line(message: str) -> None:
    print(f"# {message}", file=sys.stderr)


def load_draft(args: argparse.Namespace, *, check_verifier: bool | None = None):
    """The draft the command names; by default checked against a --verifier other than the one it names
    (specreg.load)."""
    from specreg.api import load

    return load(
        args.source, revision=args.revision, vllm=args.vllm, verifier=args.verifier, check_verifier=check_verifier
    )


def json_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


#: bidirectional-text controls that reorder what a terminal shows (Trojan Source)


def print_lines(lines: Sequence[str], file: Any = None) -> None:
    """Print each line with its control characters escaped (a value cannot start a line of its own)."""
    print("\n".join(printable(line) for line in lines), file=file or sys.stdout)
