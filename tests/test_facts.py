"""specreg.facts: the one list of known vLLM releases and dated rules, and `python -m specreg.facts`."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert capabilities.NEWEST_KNOWN == capabilities.AUX_CAPTURE_VERSION == newest
    tested = facts.plugin_tested()
    assert plugin.TESTED == (Version(tested[0]), Version(f"{tested[-1]}.99"))


def test_every_dated_rule_names_the_file_that_reads_it_and_the_test_that_holds_it():
    rules = json.loads((facts.FOLDER / "rules.json").read_text(encoding="utf-8"))["rules"]
    root = facts.FOLDER.parents[2]
    for name, rule in rules.items():
        assert (root / rule["read_by"]).is_file(), name
        assert name in (root / rule["read_by"]).read_text(encoding="utf-8"), f"{name} is not read by {rule['read_by']}"
        assert _names_a_test(rule["held_by"]) and rule["source"].startswith("vllm/"), name
    assert capabilities.RULES == facts.rules("specreg/normalization/capabilities.py")


def _names_a_test(held_by: str) -> bool:
    """Whether `held_by` is `tests/conformance/FILE.py::NAME` of a test function in that file."""
    path, _, name = held_by.partition("::")
    file = facts.FOLDER.parents[2] / path
    return path.startswith("tests/conformance/") and file.is_file() and f"def {name}(" in file.read_text()


def _holds_from(holds: dict[str, bool]) -> str:
    """The release from which every later one holds (the first of them), read off the list."""
    releases = list(holds)
    first = len(releases)
    while first and holds[releases[first - 1]] is True:
        first -= 1
    return releases[first]


def test_every_rules_first_version_is_where_the_release_files_say_it_starts_holding():
    assert facts.check() == []
    meta = json.loads((facts.FOLDER / "rules.json").read_text(encoding="utf-8"))["rules"]
    oldest = facts.known()[0]
    for name, record in meta.items():
        holds = {r: facts.release_rules(r)[name] for r in facts.known()}
        if "since" in record:  # typed: older than every known release, which all have it
            assert set(holds.values()) == {True} and facts.since(name) < Version(oldest), name
            assert "before the oldest release specreg tracks" in record["typed"], name
            continue
        computed = {r: v for r, v in holds.items() if isinstance(v, bool)}
        start = _holds_from(computed)
        assert not any(v is True for r, v in computed.items() if Version(r) < Version(start)), name
        assert facts.since(name) == Version(start), name


def test_a_rule_that_holds_stops_and_holds_again_is_reported():
    gap = {"0.1": False, "0.2": True, "0.3": False, "0.4": True}
    with pytest.raises(facts.FactsError, match=r"^rule r holds in 0\.2, not in 0\.3, and again from 0\.4: "):
        facts.first_release("r", gap)
    with pytest.raises(facts.FactsError, match=r"^rule r does not hold in 0\.4: "):
        facts.first_release("r", {**gap, "0.4": False})
    assert facts.first_release("r", {**gap, "0.2": False}) == "0.4"
    per_release = {r: facts.release_rules(r) for r in facts.known()}
    name = next(n for n in per_release[facts.known()[0]] if "since" not in facts._metadata()[n])
    first = str(facts.since(name))
    later = facts.known()[facts.known().index(first) + 1 :]
    assert later, f"{name} starts in the newest release: pick a rule with a release after its first"
    per_release[later[0]] = {**per_release[later[0]], name: False}
    problems = facts.check(per_release)
    if later[1:]:
        assert problems == [
            f"rule {name} holds in {first}, not in {later[0]}, and again from {later[1]}: "
            "a dated rule has one first release (split it in two rules)"
        ]
    else:
        assert problems == [
            f"rule {name} does not hold in {later[0]}: a dated rule holds from its first "
            "release on (retire it, or fix its extractor)"
        ]


def test_a_release_the_rule_is_not_computed_in_is_passed_over_unless_the_date_rests_on_it():
    record = {"extractable": False, "held_by": "tests/conformance/x.py::t", "why": "the survey cannot run"}
    assert facts.first_release("r", {"0.1": record, "0.2": False, "0.3": True}) == "0.3"
    assert facts.first_release("r", {"0.1": False, "0.2": True, "0.3": record, "0.4": True}) == "0.2"
    with pytest.raises(facts.FactsError, match=r"^rule r holds from 0\.3 and is not computed in 0\.2: "):
        facts.first_release("r", {"0.1": False, "0.2": record, "0.3": True})
    with pytest.raises(facts.FactsError, match=r"^rule r holds from 0\.2 and is not computed in 0\.1: "):
        facts.first_release("r", {"0.1": record, "0.2": True})


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
