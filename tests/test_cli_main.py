"""specreg/cli/main.py builds only the named command's parser (the first command stays fast, issue 48):
each command's help and usage errors are what the whole parser gives."""

from __future__ import annotations

import argparse

import pytest

from specreg.cli import main


def _subparser(parser: argparse.ArgumentParser, name: str) -> argparse.ArgumentParser:
    (action,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return action.choices[name]


def _error(parser: argparse.ArgumentParser, argv: list[str], capsys) -> tuple[str, str]:
    """The usage error the parser raises (main() prints it as one line), and what it printed."""
    with pytest.raises(main._UsageError) as exc:
        parser.parse_args(argv)
    return str(exc.value), capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(main.COMMANDS))
def test_one_commands_parser_says_what_the_whole_parser_says(name, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    whole, alone = main._parser(), main._parser(name)
    assert _subparser(alone, name).format_help() == _subparser(whole, name).format_help()
    bad = [name, "--no-such-flag"]
    assert _error(alone, bad, capsys) == _error(whole, bad, capsys)
    assert list(_subparser(alone, name)._actions)  # the parser is built, not a stub


def test_main_builds_only_the_named_commands_parser(monkeypatch):
    built = []
    real = main.group
    monkeypatch.setattr(main, "group", lambda command: built.append(command) or real(command))
    assert main.main(["algorithms", "--json"]) == 0
    assert built == ["algorithms", "algorithms"]  # its parser, then its handler
