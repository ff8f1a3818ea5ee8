"""Code that moves must not move an answer: every fixture's `show`, `check`, `check --gpu` and
`serve --config-only` `--json` output equals the record (tests/cli_outputs.py says how to re-record
it when an answer is meant to change)."""

from __future__ import annotations

import pytest

import cli_outputs

RECORD = cli_outputs.read() if cli_outputs.RECORD.exists() else {}


def test_the_record_covers_every_fixture():
    recorded = {case.split()[1] for case in RECORD}
    assert recorded == set(cli_outputs.fixtures()), "re-record: .venv/bin/python tests/cli_outputs.py --record"


@pytest.mark.parametrize("fixture", cli_outputs.fixtures())
def test_answers_equal_the_record(fixture, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    now = cli_outputs.answers(fixture)
    before = {case: answer for case, answer in RECORD.items() if case.split()[1] == fixture}
    changed = cli_outputs.differences(before, now)
    assert not changed, "\n".join(changed)
