"""specreg.facts: the one list of known vLLM releases and dated rules, and `python -m specreg.facts`."""

from __future__ import annotations

import json
import subprocess
import sys

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
        assert rule["held_by"].startswith("tests/conformance") and rule["source"].startswith("vllm/"), name
    assert capabilities.RULES == facts.rules("specreg/normalization/capabilities.py")


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
        f"{facts.known()[-1]}; `python -m specreg.facts list` names each)"]
