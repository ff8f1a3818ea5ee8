"""specreg.facts: the one list of known vLLM releases and dated rules, and `python -m specreg.facts`."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from contextlib import redirect_stderr, redirect_stdout

import pytest
from packaging.version import Version

from specreg import facts
from specreg.normalization import capabilities
from specreg.vllm import plugin


def test_the_known_releases_are_oldest_first_and_the_newest_is_last():
    known = facts.known()
    assert list(known) == sorted(known, key=Version) and len(set(known)) == len(known)
    assert facts.newest() == Version(facts.wheel(known[-1]))
    assert facts.before(known[-1]) == known[-2]


def test_the_fact_lists_are_sorted_json_with_one_record_per_line():
    for name in ("releases.json", "rules.json", "mtp_rewrites.json"):
        keyed = name != "releases.json"  # a table of named records, not a list
        text = (facts.FOLDER / name).read_text(encoding="utf-8")
        records = [line.strip().rstrip(",") for line in text.splitlines()[2:-2]]
        parsed = [json.loads(r.partition(": ")[2] if keyed else r) for r in records]
        assert all(json.dumps(p, sort_keys=True) in line for p, line in zip(parsed, records)), name
        keys = [r.partition(": ")[0] for r in records] if keyed else [p["release"] for p in parsed]
        assert keys == sorted(keys, key=(str if keyed else Version)), name


def test_every_constant_that_names_the_newest_release_reads_the_list():
    newest = facts.newest()
    assert capabilities.NEWEST_KNOWN == newest
    # the aux-capture table covers every known release, and past the newest answers with the newest's
    assert facts.aux_capture()["releases"] == [*facts.older_releases(), *facts.known()]
    past = Version(f"{newest.major}.{newest.minor + 1}")
    assert capabilities.aux_capture(past) == capabilities.aux_capture(newest)
    assert capabilities.aux_capture(newest)[0] == facts.known()[-1]
    oldest = Version(facts.aux_capture()["releases"][0])  # below the first release read: not known
    assert capabilities.aux_capture(Version(f"{oldest.major}.{oldest.minor - 1}")) is None
    tested = facts.plugin_tested()
    assert plugin.TESTED == (Version(tested[0]), Version(f"{tested[-1]}.99"))


def test_every_dated_rule_names_the_file_that_reads_it_and_the_test_that_holds_it():
    rules = json.loads((facts.FOLDER / "rules.json").read_text(encoding="utf-8"))["rules"]
    root = facts.FOLDER.parents[2]
    for name, rule in rules.items():
        assert (root / rule["read_by"]).is_file(), name
        assert name in (root / rule["read_by"]).read_text(encoding="utf-8"), f"{name} is not read by {rule['read_by']}"
        assert _names_a_test(rule["held_by"]) and rule["source"].startswith("vllm/"), name
    assert sorted(capabilities.RULES) == list(facts.rules("specreg/normalization/capabilities.py"))


def _names_a_test(held_by: str) -> bool:
    """Whether `held_by` is `tests/conformance/FILE.py::NAME` of a test function in that file."""
    path, _, name = held_by.partition("::")
    file = facts.FOLDER.parents[2] / path
    return path.startswith("tests/conformance/") and file.is_file() and f"def {name}(" in file.read_text()


def test_whether_a_release_has_a_rule_is_its_own_record_and_the_runs_follow_from_them():
    assert facts.check() == []
    meta = facts.metadata()
    for name, record in meta.items():
        holds = {r: facts.release_rules(r)[name] for r in facts.known()}
        for release, value in holds.items():
            if isinstance(value, bool):
                assert facts.holds(name, release) is value, (name, release)
                assert facts.holds(name, facts.wheel(release)) is value, (name, release)
        assert facts.rule_spans(name) == tuple(facts.spans(name, holds))
        if "since" in record:  # typed: older than every known release, which all have it
            assert set(holds.values()) == {True} and facts.since(name) < Version(facts.known()[0]), name
            assert "before the oldest release specreg tracks" in record["typed"], name
            assert facts.holds(name, record["since"]) and not facts.holds(name, "0.1"), name


def test_a_rule_may_start_stop_and_start_again():
    holds = {"0.1": False, "0.2": True, "0.3": False, "0.4": True}
    assert facts.spans("r", holds) == [("0.2", "0.2"), ("0.4", None)]
    assert facts.spans("r", {**holds, "0.4": False}) == [("0.2", "0.2")]
    assert facts.spans("r", {"0.1": True, "0.2": True}) == [("0.1", None)]
    assert facts.spans("r", {"0.1": False}) == []


def test_a_rule_that_stops_in_the_newest_release_holds_before_it_and_not_after():
    stopped = [n for n in facts.metadata() if facts.last(n) is not None]
    assert stopped, "no committed rule stops holding: the case this test holds is gone"
    name = stopped[0]
    last = facts.last(name)
    after = facts.known()[facts.known().index(last) + 1]
    assert facts.holds(name, last) and facts.holds(name, f"{last}.1")
    assert not facts.holds(name, after) and not facts.holds(name, "99.0")
    with pytest.raises(facts.FactsError, match=rf"^rule {name} stopped after {last}: "):
        facts.since(name)
    assert facts.span_text(name).endswith(f"-{last}") or facts.span_text(name).endswith(f", {last}")


def test_a_release_the_rule_is_not_computed_in_takes_its_neighbours_value_unless_they_disagree():
    record = {"extractable": False, "held_by": "tests/conformance/x.py::t", "why": "the survey cannot run"}
    assert facts.ambiguous("r", {"0.1": record, "0.2": False, "0.3": True}) == []
    assert facts.spans("r", {"0.1": record, "0.2": False, "0.3": True}) == [("0.3", None)]
    assert facts.ambiguous("r", {"0.1": False, "0.2": True, "0.3": record, "0.4": True}) == []
    assert facts.spans("r", {"0.1": False, "0.2": True, "0.3": record, "0.4": True}) == [("0.2", None)]
    assert facts.ambiguous("r", {"0.1": False, "0.2": record, "0.3": True}) == [
        "rule r holds in the next computed release and is not computed in 0.2: whether 0.2 has it cannot be derived"
    ]
    assert facts.ambiguous("r", {"0.1": record, "0.2": True}) == [
        "rule r holds in the next computed release and is not computed in 0.1: whether 0.1 has it cannot be derived"
    ]
    assert facts.ambiguous("r", {"0.1": True, "0.2": record}) == [
        "rule r is not computed in 0.2, and no later release says whether it holds"
    ]


def test_every_record_of_a_rule_not_computed_is_well_formed_and_names_an_existing_test():
    found = [(r, n, v) for r in facts.known() for n, v in facts.release_rules(r).items() if not isinstance(v, bool)]
    for release, name, record in found:
        assert facts.not_extracted(record) is None, (release, name)
        assert _names_a_test(record["held_by"]), (release, name, record["held_by"])
    good = {"extractable": False, "held_by": "tests/conformance/x.py::t", "why": "no wheel"}
    assert facts.not_extracted(good) is None
    for bad in (
        {**good, "extractable": True},
        {**good, "why": ""},
        {**good, "held_by": "nobody"},
        {"why": "no wheel"},
        "unknown",
        None,
        {**good, "since": "0.1"},
    ):
        assert facts.not_extracted(bad) is not None, bad
    per_release = {r: facts.release_rules(r) for r in facts.known()}
    oldest = facts.known()[0]
    name = sorted(per_release[oldest])[0]
    per_release[oldest] = {**per_release[oldest], name: {"why": "unknown"}}
    assert facts.check(per_release) == [
        f"{oldest}/rules.json: rule {name}'s record is neither true, false nor a record with exactly "
        "['extractable', 'held_by', 'why']"
    ]


def test_every_dated_rule_has_its_extractor_and_every_release_a_record_of_it():
    from conformance import rule_facts

    meta = json.loads((facts.FOLDER / "rules.json").read_text(encoding="utf-8"))["rules"]
    assert rule_facts.RULES == sorted(meta)
    for release in facts.known():
        assert sorted(facts.release_rules(release)) == sorted(meta), release


def test_every_conformance_group_runs_on_known_releases_and_the_newest():
    groups = {g for r in facts.known() for g in facts._releases()[r]["tested_by"]}
    assert groups, "no conformance group"
    for group in groups:
        assert facts.known()[-1] in facts.tested_by(group), group


def _facts_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "specreg.facts", *args], capture_output=True, text=True, timeout=60)


def test_list_prints_the_known_releases_one_per_line_oldest_first():
    done = _facts_cli("list")
    assert done.returncode == 0 and done.stdout.splitlines() == list(facts.known())


def test_path_prints_the_folder_of_a_known_release_by_its_name_or_its_wheel():
    newest = facts.known()[-1]
    for given in (newest, facts.wheel(newest)):
        done = _facts_cli("path", given)
        assert done.returncode == 0 and done.stdout == f"{facts.FOLDER / newest}\n"


def test_path_refuses_an_unknown_release_with_one_line_and_exit_2():
    done = _facts_cli("path", "9.99")
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"python -m specreg.facts path: 9.99 is not a known vLLM release (known: {facts.known()[0]} to "
        f"{facts.known()[-1]}; `python -m specreg.facts list` names each)"
    ]


# a damaged releases.json ---------------------------------------------------------------------------

RELEASES_TEXT = (facts.FOLDER / "releases.json").read_text(encoding="utf-8")
#: a damaged releases.json -> the JSON path and what the one line says of it
DAMAGED_RELEASES = {
    "truncated": (RELEASES_TEXT[:300], "the committed facts are damaged"),
    "no list": ("{}", "$.releases is missing"),
    "not an object": ("[]", "$: [] is not an object"),
    "a record without its wheel": ('{"releases": [{"release": "0.34"}]}', "$.releases[0].wheel is missing"),
    "a release that is a number": (
        '{"releases": [{"plugin_tested": false, "release": 5, "tested_by": [], "wheel": "5.0.0"}]}',
        '$.releases[0].release: 5 is not a release "X.Y"',
    ),
    "groups that are no list": (
        '{"releases": [{"plugin_tested": false, "release": "0.34", "tested_by": "all", "wheel": "0.34.0"}]}',
        '$.releases[0].tested_by: "all" is not a list of group names',
    ),
}


def damaged_facts(tmp_path, text: str):
    """A copy of the committed facts whose releases.json holds `text`."""
    import shutil

    root = tmp_path / "facts"
    shutil.copytree(facts.FOLDER, root)
    (root / "releases.json").write_text(text, encoding="utf-8")
    return root


@pytest.mark.parametrize("damage", sorted(DAMAGED_RELEASES))
@pytest.mark.parametrize("command", [["list"], ["mark-tested", "9.9"], ["path", "9.9"], ["diff", "9.8", "9.9"]])
def test_every_facts_command_on_a_damaged_releases_list_is_one_line_naming_it(tmp_path, monkeypatch, damage, command):
    from specreg.facts import __main__ as cli

    text, said = DAMAGED_RELEASES[damage]
    root = damaged_facts(tmp_path, text)
    monkeypatch.setattr(facts, "FOLDER", root)
    facts.reread()
    try:
        out, err = io.StringIO(), io.StringIO()
        with redirect_stdout(out), redirect_stderr(err):
            code = cli.main(command)
        assert (code, out.getvalue()) == (2, "")
        lines = err.getvalue().splitlines()
        assert len(lines) == 1 and lines[0].startswith(
            f"python -m specreg.facts {command[0]}: {root / 'releases.json'}: "
        )
        assert said in lines[0] and (root / "releases.json").read_text(encoding="utf-8") == text  # nothing written
    finally:
        monkeypatch.undo()
        facts.reread()


@pytest.mark.parametrize("damage", ["truncated", "a record without its wheel"])
def test_show_and_env_on_a_damaged_releases_list_name_it_and_exit_2(tmp_path, damage):
    """In a fresh interpreter whose facts folder is the damaged copy (set before any specreg module
    reads it: some read the list when imported)."""
    from tiny import draft_config

    text, said = DAMAGED_RELEASES[damage]
    root = damaged_facts(tmp_path, text)
    draft = tmp_path / "draft"
    draft.mkdir()
    (draft / "config.json").write_text(json.dumps(draft_config("eagle3")), encoding="utf-8")
    for argv in (["show", str(draft)], ["env"]):
        code = (
            "import sys; from pathlib import Path; import specreg.facts as f; "
            f"f.FOLDER = Path({str(root)!r}); from specreg.cli.main import main; sys.exit(main({argv!r}))"
        )
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert done.returncode == 2, (argv, done.stderr)
        assert done.stderr.splitlines() == [done.stderr.strip()] and done.stderr.startswith(
            f"error: {root / 'releases.json'}: "
        )
        assert said in done.stderr


def test_facts_diff_into_a_reader_that_stopped_reading_ends_quietly(tmp_path):
    """`python -m specreg.facts diff A B | head` once ended in a BrokenPipeError traceback; here the
    reader has stopped before the first line, so every write meets the closed pipe."""
    import os

    read_end, write_end = os.pipe()
    os.close(read_end)
    old, new = facts.known()[-2:]
    try:
        done = subprocess.run(
            [sys.executable, "-m", "specreg.facts", "diff", old, new],
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_end)
    assert (done.returncode, done.stderr) == (0, "")
