"""specreg/vllm/facts/<X.Y>/rules.json against each known release's wheel (pytest -m conformance; CI runs
this file as its drill): every
dated rule but the kv_cache ones, decided by rule_facts.py as the rule's held_by test decides it (the
kv_cache rules need the survey: test_kv_cache_groups.py holds them)."""

from __future__ import annotations

import pytest
from packaging.version import Version

from specreg import facts
from tests.conformance import rule_facts

pytestmark = pytest.mark.conformance


@pytest.mark.parametrize("release", facts.known())
def test_the_committed_rules_are_the_wheels(release):
    """The drill CI runs (.ci/run): every known release's rules replayed from its wheel, oldest to newest,
    so a rule whose extractor cannot say what a release did fails here, not on the next release's day."""
    committed = facts.release_rules(release)
    computed = {rule: rule_facts.holds(rule, facts.wheel(release)) for rule in rule_facts.HOLDS}
    assert {rule: committed[rule] for rule in rule_facts.HOLDS} == computed
    assert rule_facts.refusals(facts.wheel(release)) == facts.refused(release)


def test_the_older_releases_table_is_the_wheels():
    """specreg/vllm/facts/older_releases.json: every rule decided on the wheel of each release older than the
    oldest known one, from the first with the speculators format (SPECREG_REGENERATE=1 writes it), an
    extractor that cannot read such a wheel saying why; specreg answers each such rule from it
    (facts.state), every other as not known."""
    import json
    import os

    got = rule_facts.older_table(rule_facts.older_releases())
    path = facts.FOLDER / facts.OLDER
    if os.environ.get("SPECREG_REGENERATE") == "1":
        rule_facts.write_older_table(path, got)
    assert {k: v for k, v in json.loads(path.read_text()).items() if k != "_about"} == got
    # a rule typed as older than every known release agrees with what its wheels say
    for rule, record in facts.metadata().items():
        if "since" in record:
            for release, value in got["rules"][rule].items():
                assert value is (Version(f"{release}.0") >= Version(record["since"])), (rule, release)
