"""specreg.verify.stats: acceptance statistics, their intervals and the detectable change."""

import pytest

from specreg.verify import counters as C
from specreg.verify.stats import compute, t975


def test_statistics_from_counter_deltas():
    s = compute([C.SpecCounters(100, 300, 100, (60, 30, 10)), C.SpecCounters(100, 300, 200, (90, 70, 40))])
    assert s.acceptance_length == pytest.approx(1 + 300 / 200)
    assert s.per_position == pytest.approx((0.75, 0.5, 0.25))
    assert sum(s.per_position) == pytest.approx(s.acceptance_length - 1)
    assert s.draft_acceptance_rate == pytest.approx(300 / 600)
    mean, half = 2.5, t975(1) * (0.5**0.5) / (2**0.5)  # chunk ALs 2.0 and 3.0
    assert s.al_interval == pytest.approx((mean - half, mean + half))


def test_one_chunk_has_no_interval_and_no_drafts_is_an_error():
    assert compute([C.SpecCounters(10, 30, 10, (5, 3, 2))]).al_interval is None
    with pytest.raises(ValueError, match="no drafts"):
        compute([C.SpecCounters()])


def test_mean_per_prompt_statistic_and_detectable_change():
    from specreg.verify.counters import SpecCounters
    from specreg.verify.stats import compute

    prompts = [
        SpecCounters(drafts=10, draft_tokens=30, accepted=20, per_pos=[8, 7, 5]),
        SpecCounters(drafts=90, draft_tokens=270, accepted=90, per_pos=[50, 30, 10]),
        SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_pos=[0, 0, 0]),
    ]
    pooled, mean = compute(prompts), compute(prompts, "mean-per-prompt")
    assert pooled.acceptance_length == pytest.approx(1 + 110 / 100)
    # each prompt's own AL (3.0, 2.0, and 1 for a prompt without drafts, as vLLM's compute_acceptance_len)
    assert mean.acceptance_length == pytest.approx(2.0) and mean.chunks == 3
    lo, hi = mean.al_interval
    assert mean.detectable_change == pytest.approx((hi - lo) / 2) == pytest.approx(4.303 * 1.0 / 3**0.5)
