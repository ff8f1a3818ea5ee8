"""specreg/vllm/facts/<X.Y>/rules.json against each known release's wheel (pytest -m conformance; CI runs
this file as its drill): every
dated rule but the kv_cache ones, decided by rule_facts.py as the rule's held_by test decides it (the
kv_cache rules need the survey: test_kv_cache_groups.py holds them)."""

from __future__ import annotations

import pytest

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
