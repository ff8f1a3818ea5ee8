"""Catalog entries sourced from vLLM's CI are judged by CI's own rule (vLLM v0.33.0, commit 4ba787ec9):

- tests/v1/spec_decode/test_speculators_correctness.py: `acceptance_len >= expected * (1 -
  acceptance_len_rtol)` and, for each *listed* position, `rate >= expected * (1 - per_pos_rtol)`;
- tests/v1/spec_decode/test_acceptance_length.py: `abs(AL - expected) / expected <= DEFAULT_RTOL`
  (0.05, always) and per-position floors with the model's `rtol` (else 0.05).

The rule is written here from those files, independently of specreg's judge; specreg's verdict must
equal it at 1% on either side of every bound (`pytest -m conformance` reads the same numbers back out
of the released sdist)."""

import pytest

from specreg.verify.counters import SpecCounters
from specreg.verify.judge import judge
from specreg.verify.stats import Statistics
from specreg.entries import catalog

CI_FILES = ("test_speculators_correctness.py", "test_acceptance_length.py")
CI_ENTRIES = sorted(e.id for e in catalog().values() for b in e.baselines if b.source.endswith(CI_FILES))


def ci_passes(source: str, al: float, rates: list[float], expected_al: float, al_rtol: float,
              expected_rates: list[float], pos_rtol: float) -> bool:
    """CI's own rule, as the two files state it."""
    if source.endswith("test_speculators_correctness.py"):
        al_ok = al >= expected_al * (1 - al_rtol)
    else:
        al_ok = abs(al - expected_al) / expected_al <= 0.05
    pos_ok = all(rates[i] >= exp * (1 - pos_rtol) for i, exp in enumerate(expected_rates) if exp > 0)
    return al_ok and pos_ok


def stats(al: float, rates: list[float]) -> Statistics:
    return Statistics(counters=SpecCounters(drafts=1000, draft_tokens=3000, accepted=int((al - 1) * 1000),
                                            per_pos=tuple(int(r * 1000) for r in rates)),
                      chunks=1, acceptance_length=al, per_position=tuple(rates), draft_acceptance_rate=0.5,
                      al_interval=None)


def test_the_ci_sourced_entries_are_the_eight_ci_gates():
    assert len(CI_ENTRIES) == 8


@pytest.mark.parametrize("entry_id", CI_ENTRIES)
def test_specregs_verdict_is_cis_at_one_percent_around_every_bound(entry_id):
    entry = catalog().get(entry_id)
    (b,) = [b for b in entry.baselines if b.source.endswith(CI_FILES)]
    assert b.source_commit == "4ba787ec9" and "v0.33.0" in b.source
    m = b.metrics
    exp_al, al_rtol = m.acceptance_length.value, m.acceptance_length.tolerance
    exp_rates, pos_rtol = list(m.per_position.values), m.per_position.tolerance
    floors = [r * (1 - pos_rtol) for r in exp_rates]
    al_bounds = [exp_al * (1 - al_rtol)] + ([exp_al * (1 + al_rtol)] if m.acceptance_length.direction == "two-sided"
                                            else [])
    # every rate comfortably above its floor, AL at each side of each of its bounds, and the reverse
    cases = [(bound * f, [fl * 1.01 for fl in floors]) for bound in al_bounds for f in (0.99, 1.01)]
    cases += [(exp_al, [fl * (0.99 if j == i else 1.01) for j, fl in enumerate(floors)]) for i in range(len(floors))]
    for al, rates in cases:
        want = ci_passes(b.source, al, rates, exp_al, al_rtol if b.source.endswith(CI_FILES[0]) else 0.05,
                         exp_rates, pos_rtol)
        got = judge(stats(al, rates), b.harness, entry).verdict
        assert (got not in ("regressed", "out-of-band")) == want, (entry_id, al, rates, got)


def test_the_nm_testing_dflash_entry_gates_the_four_positions_ci_lists():
    (b,) = catalog().get("nm-testing/dflash-qwen3-8b-speculators").baselines
    assert b.metrics.per_position.values == (0.795, 0.611, 0.429, 0.282)


# vLLM v0.33.0's acceptance_rates tests, each floor written here from its file:
# - dspark/test_dspark.py: `metric >= reference * REGRESSION_TOLERANCE` (0.95) for AL and acceptance rate;
# - dflash/test_dflash.py: the reference test's mean per-prompt AL `>= expected * 0.95` (utils.py), with
#   expected 4.24 (MT-Bench), 6.50 (HumanEval), 6.54 * 0.975 (GSM8K); the batched test `>= 3.5`;
# - xpress/test_xpress.py (assert_draft_model_correctness): AL `>= 6.71`, acceptance rate `>= 0.387`.
FLOORS = {
    ("deepseek-ai/dspark_qwen3_4b_block7", 0): {"acceptance_length": 3.994 * 0.95, "draft_acceptance_rate": 0.428 * 0.95},
    ("deepseek-ai/dspark_gemma4_12b_block7", 0): {"acceptance_length": 5.0 * 0.95, "draft_acceptance_rate": 0.58 * 0.95},
    ("z-lab/Qwen3-8B-DFlash-b16", 0): {"acceptance_length": 4.24 * 0.95},
    ("z-lab/Qwen3-8B-DFlash-b16", 1): {"acceptance_length": 6.50 * 0.95},
    ("z-lab/Qwen3-8B-DFlash-b16", 2): {"acceptance_length": 6.54 * 0.975 * 0.95},
    ("z-lab/Qwen3-8B-DFlash-b16", 3): {"acceptance_length": 3.5},
    ("UIUC-SSAIL/Qwen3-8B-XPress-b16", 0): {"acceptance_length": 6.71, "draft_acceptance_rate": 0.387},
}


def test_every_acceptance_rates_baseline_has_its_ci_floor_here():
    cited = {(e.id, i) for e in catalog().values() for i, b in enumerate(e.baselines) if "acceptance_rates/" in b.source}
    assert cited == set(FLOORS)


@pytest.mark.parametrize("key", sorted(FLOORS), ids=lambda k: f"{k[0]}[{k[1]}]")
def test_acceptance_rates_floors_are_cis_at_one_percent(key):
    entry_id, index = key
    entry = catalog().get(entry_id)
    b = entry.baselines[index]
    assert b.source_commit == "4ba787ec9" and "v0.33.0 " in b.source
    floors = FLOORS[key]
    for metric in floors:
        for f in (0.99, 1.01):
            values = {m: fl * (f if m == metric else 1.01) for m, fl in floors.items()}
            al = values.get("acceptance_length", 0)
            s = Statistics(counters=SpecCounters(drafts=1000, draft_tokens=7000, accepted=int((al - 1) * 1000)),
                           chunks=1, acceptance_length=al, per_position=(),
                           draft_acceptance_rate=values.get("draft_acceptance_rate", 1.0), al_interval=None)
            got = judge(s, b.harness, entry)
            assert got.baseline is b, (key, got.baseline_index)
            assert (got.verdict not in ("regressed", "out-of-band")) == (f > 1), (key, metric, f, got.verdict)
