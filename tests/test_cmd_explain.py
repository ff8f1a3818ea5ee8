"""`specreg explain CODE`: docs/findings.md's entry of a code, from the same table the page is generated from."""

from __future__ import annotations

import json

import pytest

from conftest import run_in_process
from specreg.normalization.findings import CODES, NO_FIX


@pytest.mark.parametrize("code", sorted(CODES))
def test_every_code_is_explained_with_its_fix_or_why_none(code):
    r = run_in_process("explain", code, "--json")
    assert r.returncode == 0, r.stderr
    c = CODES[code]
    assert json.loads(r.stdout) == {
        "code": code,
        "severity": c.severity,
        "title": c.title,
        "explains": c.explains,
        "fix": c.fix,
        "no_fix": None if c.fix else NO_FIX.get(code),
    }


def test_the_text_is_the_docs_page_entry():
    r = run_in_process("explain", "served-causal-mismatch")
    assert r.returncode == 0
    c = CODES["served-causal-mismatch"]
    words = r.stdout.split()
    assert r.stdout.startswith(f"served-causal-mismatch (warning): {c.title}\n\n")
    assert " ".join(words).endswith(f"Fix: {c.fix}.")
    assert " ".join(c.explains.split()) in " ".join(words)


def test_a_code_without_a_fix_says_why():
    r = run_in_process("explain", "auto-map-ignored")
    assert r.stdout.rstrip().endswith(f"No fix: {NO_FIX['auto-map-ignored']}.")


def test_an_unknown_code_is_one_line_with_the_closest():
    r = run_in_process("explain", "served-causal-mismach")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: no finding code 'served-causal-mismach'; did you mean served-causal-mismatch?\n"


def test_a_code_like_none_points_at_the_docs():
    r = run_in_process("explain", "zzzz")
    assert r.stderr == "error: no finding code 'zzzz'; the codes are listed in docs/findings.md\n"


def test_a_code_with_a_trailing_newline_is_refused_like_any_unknown_code():
    r = run_in_process("explain", "served-causal-mismatch\n")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == "error: no finding code 'served-causal-mismatch\\n'; did you mean served-causal-mismatch?\n"
