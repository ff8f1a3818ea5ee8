"""specreg.verify.judge: verdicts against a catalog entry's baselines and tolerances, harness differences."""

import attrs
import pytest

from specreg import entries
from specreg.entries import Harness, PromptFormat
from specreg.verify import counters as C
from specreg.verify.judge import judge
from specreg.verify.stats import compute
from verify_helpers import ENTRY


def entry_with(metric_toml: str, harness: str = 'dataset = "gsm8k"\ntemperature = 0.0\nnum_prompts = 20',
               extra: str = "") -> entries.Entry:
    text = f"""id = "org/draft"\nalgorithm = "eagle3"\nstatus = "unpinned"\n[verifier]\nid = "org/verifier"\n
[[baselines]]\nkind = "published"\nsource = "a test"\n[baselines.harness]\n{harness}\n
[baselines.metrics.acceptance_length]\n{metric_toml}\n{extra}"""
    entry, problems = entries.parse_entry(text, file="registry/org/draft.toml")
    assert not problems, problems
    return entry


def stats_with_al(al: float):
    return compute([C.SpecCounters(1000, 3000, round((al - 1) * 1000), ())])


RUN = Harness(dataset="gsm8k", num_prompts=20, temperature=0.0)


@pytest.mark.parametrize("metric, run_temperature, al, verdict", [
    ("value = 2.0", 0.0, 2.05, "pass"),         # default: two-sided 5% at T=0
    ("value = 2.0", 0.0, 1.85, "regressed"),
    ("value = 2.0", 0.0, 2.2, "out-of-band"),  # above a two-sided band fails, as vLLM CI's abs(AL - e) / e <= rtol does
    ("value = 2.0", 1.0, 1.85, "pass"),         # default: one-sided floor at 90% otherwise
    ("value = 2.0", 1.0, 1.75, "regressed"),
    ("value = 2.0\ndirection = \"higher\"\ntolerance = 0.15", 0.0, 1.75, "pass"),
    ("value = 2.0\ndirection = \"two-sided\"\ntolerance = 0.01", 0.0, 2.05, "out-of-band"),
    ("low = 2.0\nhigh = 2.2", 1.0, 2.1, "pass"),
    ("floor = 3.5", 0.0, 3.4, "regressed"),
    ("floor = 3.5", 0.0, 3.6, "pass"),
])
def test_verdicts_with_entry_and_default_tolerances(metric, run_temperature, al, verdict):
    run_h = attrs.evolve(RUN, temperature=run_temperature)
    harness = f'dataset = "gsm8k"\ntemperature = {run_temperature}\nnum_prompts = 20'
    j = judge(stats_with_al(al), run_h, entry_with(metric, harness))
    assert j.verdict == verdict
    assert j.checks[0].tolerance_from == ("entry" if "tolerance" in metric else "default")


def test_harness_differences_are_listed_and_strict_refuses():
    e = entry_with("value = 2.0", 'dataset = "gsm8k"\ntemperature = 0.0\nnum_prompts = 80\nk = 3\ngpu = "1xH100"')
    run_h = Harness(dataset="gsm8k", num_prompts=20, temperature=0.0, k=3, gpu="1xA100",
                    prompt=PromptFormat(chat_template=True), vllm_version="0.33.0")
    j = judge(stats_with_al(2.0), run_h, e)
    texts = {d.field: d.text() for d in j.differences}
    assert texts == {"num_prompts": "num_prompts: here 20, baseline 80", "gpu": "gpu: here 1xA100, baseline 1xH100"}
    # what the baseline does not record is listed apart, and is no difference
    assert "vllm_version" in j.unrecorded and "prompt.chat_template" in j.unrecorded
    assert judge(stats_with_al(2.0), run_h, e, strict=True).verdict == "refused"


def test_a_harness_equal_in_everything_the_baseline_records_passes_strict():
    e = entry_with("value = 2.0", 'dataset = "gsm8k"\ntemperature = 0.0\nnum_prompts = 20\nk = 3\n'
                                  '[baselines.harness.prompt]\nfew_shot = 0')
    run_h = Harness(dataset="gsm8k", num_prompts=20, temperature=0.0, k=3, max_tokens=256, seed=42,
                    prompt=PromptFormat(chat_template=True, few_shot=None), vllm_version="0.33.0")
    j = judge(stats_with_al(2.0), run_h, e, strict=True)
    assert j.verdict == "pass" and j.differences == ()
    assert set(j.unrecorded) >= {"max_tokens", "seed", "vllm_version"}


def test_differences_print_no_reprs_and_no_none():
    from specreg.verify.judge import Difference

    assert Difference("stop", ("a",), None).text() == "stop: here [a], baseline unset"
    assert Difference("temperature", 0.5, 0.0).text() == "temperature: here 0.5, baseline 0"


def test_no_baseline_for_the_dataset_is_unmatched_naming_the_baselines():
    j = judge(stats_with_al(2.0), attrs.evolve(RUN, dataset="mt-bench"), entry_with("value = 2.0"))
    assert j.verdict == "unmatched" and "no baseline for dataset 'mt-bench'" in j.reason
    assert "baseline 0: gsm8k" in j.reason


def test_a_model_not_in_the_catalog_is_measured_not_judged():
    j = judge(stats_with_al(2.0), RUN, None)
    assert j.verdict == "no-baseline" and "not in the catalog" in j.reason


def test_a_measured_baseline_is_judged_beside_the_published_one_never_instead():
    measured = ('\n[[baselines]]\nkind = "measured"\nsource = "specreg verify"\n[baselines.harness]\n'
                'dataset = "gsm8k"\ntemperature = 0.0\nnum_prompts = 20\n'
                '[baselines.metrics.acceptance_length]\nvalue = 1.45\n')
    e = entry_with("value = 2.26", 'dataset = "gsm8k"\ntemperature = 0.0\nnum_prompts = 20', extra=measured)
    j = judge(stats_with_al(1.45), attrs.evolve(RUN, num_prompts=20, temperature=0.0), e)
    assert j.baseline_index == 0 and j.baseline.kind == "published"
    assert j.verdict == "regressed" and dict(j.others) == {1: "pass"}


def test_a_verdict_closer_to_its_bound_than_the_run_resolves_says_within_noise():
    from specreg.verify.counters import SpecCounters
    from specreg.verify.judge import judge
    from specreg.verify.stats import compute

    e = entry_with("value = 2.0\ndirection = \"higher\"\ntolerance = 0.1", 'dataset = "gsm8k"')
    noisy = compute([SpecCounters(drafts=10, draft_tokens=30, accepted=a, per_pos=[a, 0, 0]) for a in (7, 10, 13)],
                    "mean-per-prompt")  # AL 2.0 +- 0.745: the floor 1.8 lies inside the noise
    j = judge(noisy, Harness(dataset="gsm8k"), e)
    assert j.verdict == "pass" and j.checks[0].within_noise and "within noise" in j.reason
    steady = compute([SpecCounters(drafts=10, draft_tokens=30, accepted=10, per_pos=[10, 0, 0])] * 3)
    j = judge(steady, Harness(dataset="gsm8k"), e)
    assert j.verdict == "pass" and not j.checks[0].within_noise and j.reason is None


def test_a_gated_position_the_run_did_not_report_fails_like_vllms_ci():
    entry = entry_with("value = 2.0\ndirection = \"higher\"\ntolerance = 0.1", 'dataset = "gsm8k"\ntemperature = 0.0')
    entry = attrs.evolve(entry, baselines=(attrs.evolve(entry.baselines[0], metrics=attrs.evolve(
        entry.baselines[0].metrics, per_position=__import__("specreg.entries", fromlist=["PerPosition"]).PerPosition(
            values=(0.6, 0.3), direction="higher", tolerance=0.1))),))
    stats = stats_with_al(2.0)
    stats = attrs.evolve(stats, per_position=())
    j = judge(stats, RUN, entry)
    assert j.verdict == "regressed" and "no per-position count for gated positions 1, 2" in j.reason


def test_a_secondary_baseline_is_shown_never_a_gate():
    text = ENTRY.replace('source = "a test"', 'source = "a paper"\nsecondary = true')
    entry, problems = entries.parse_entry(text, file="registry/org/draft.toml")
    assert not problems
    j = judge(stats_with_al(1.2), Harness(dataset="gsm8k"), entry)
    assert j.verdict == "secondary" and "not gated" in j.reason and "regressed" in j.reason
    from specreg.verify.run import EXIT

    assert EXIT["secondary"] == 0 and EXIT["not-runnable"] == 0
