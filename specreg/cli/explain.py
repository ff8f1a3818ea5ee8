"""`specreg explain CODE`: what a finding code means and its fix, from the same table docs/findings.md is
generated from (specreg.normalization.findings: CODES and NO_FIX), plugins' codes included."""

from __future__ import annotations

import argparse
import json
from typing import Any

from specreg.cli.common import EXIT_OK, SpecregErrorLine, print_lines


def add_explain(sub: Any) -> None:
    exp = sub.add_parser(
        "explain",
        help="what a finding code means and how to fix it (docs/findings.md in the terminal)",
        description="Print what a finding code (e.g. served-causal-mismatch) means, its severity and its fix. "
        "A finding's own message and fix, as `show` and `check` print them, name the values of that draft.",
    )
    exp.add_argument("code", metavar="CODE", help="a finding code, as `show` and `check` print it")
    exp.add_argument("--json", action="store_true", help="code, severity, title, explains and fix as JSON")


def explanation(code: str) -> dict[str, Any]:
    """The code's entry of docs/findings.md as plain values; a SpecregErrorLine with the closest code."""
    from specreg.normalization.algorithms import algorithms
    from specreg.normalization.findings import CODES, NO_FIX

    algorithms()  # plugins register their own codes when they load
    found = CODES.get(code.lower())  # the whole value: a code with a newline or spaces around it is not one
    if found is None:
        import difflib

        from specreg.errors import clipped

        close = difflib.get_close_matches(code.strip().lower(), list(CODES), n=1, cutoff=0.5)
        hint = f"did you mean {close[0]}?" if close else "the codes are listed in docs/findings.md"
        raise SpecregErrorLine(f"no finding code {clipped(code)}; {hint}")
    return {
        "code": found.code,
        "severity": found.severity,
        "title": found.title,
        "explains": found.explains,
        "fix": found.fix,
        "no_fix": NO_FIX.get(found.code) if not found.fix else None,
    }


def _explain(args: argparse.Namespace) -> int:
    doc = explanation(args.code)
    if args.json:
        print(json.dumps(doc, indent=2, ensure_ascii=False))
        return EXIT_OK
    import textwrap

    out = [f"{doc['code']} ({doc['severity']}): {doc['title']}", ""]
    out += textwrap.wrap(doc["explains"], 100) if doc["explains"] else ["(no explanation given by its plugin)"]
    if doc["fix"]:
        out += ["", *textwrap.wrap(f"Fix: {doc['fix']}.", 100)]
    elif doc["no_fix"]:
        out += ["", *textwrap.wrap(f"No fix: {doc['no_fix']}.", 100)]
    else:  # the emitter gives each finding its own fix, naming that draft's values
        out += ["", "Fix: each finding of this code carries its own (`specreg check DRAFT` prints it)."]
    print_lines(out)
    return EXIT_OK


HANDLERS = {"explain": _explain}
