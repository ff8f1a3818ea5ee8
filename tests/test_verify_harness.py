"""specreg.verify.harness: the verify arguments that reproduce a baseline's harness."""

import attrs

from specreg import entries
from specreg.verify import harness, nightly
from verify_helpers import ENTRY, run


def ENTRY_OBJ():
    entry, problems = entries.parse_entry(ENTRY, file="registry/org/draft.toml")
    assert not problems, problems
    return entry


def test_harness_args_reproduce_the_baseline():
    entry = entries.catalog()["nm-testing/dflash-qwen3-8b-speculators"]
    args = harness.command_args(harness.settings(nightly.runnable_baseline(entry)))
    from specreg.cli.main import _parser

    parsed = _parser().parse_args(["verify", entry.id, *args])
    assert (parsed.dataset, parsed.max_tokens, parsed.few_shot) == ("gsm8k", 256, 5)


def test_harness_args_pass_a_stop_string_that_looks_like_a_flag():
    """A stop string "--all" was parsed by verify as its own --all flag."""
    from specreg.cli.main import _parser

    b = attrs.evolve(ENTRY_OBJ().baselines[0], harness=attrs.evolve(ENTRY_OBJ().baselines[0].harness, stop=("--all",)))
    entry = attrs.evolve(ENTRY_OBJ(), baselines=(b,))
    parsed = _parser().parse_args(["verify", entry.id, *harness.command_args(harness.settings(b))])
    assert parsed.stop == ["--all"] and not parsed.all


def test_catalog_show_harness_prints_the_command_verify_runs(mt_setup):
    reg, _, _ = mt_setup
    r = run("catalog", "show", "org/draft", "--harness", "--registry", str(reg))
    assert r.returncode == 0
    assert r.stdout.strip() == ("specreg verify org/draft --dataset mt-bench --num-prompts=20 --temperature=0.0 --k=3")


def test_catalog_show_harness_of_a_rate_only_baseline_is_its_command_not_a_contradiction():
    """The headline's one baseline records a draft acceptance rate, no AL: it was called 'no primary
    baseline on a dataset verify can load' while its dataset, mt-bench, is one."""
    entry = entries.catalog()["RedHatAI/gemma-4-31B-it-speculator.dflash"]
    assert harness.command_line(entry) == (
        "specreg verify RedHatAI/gemma-4-31B-it-speculator.dflash --dataset mt-bench --num-prompts=80 "
        "--temperature=0.0 --max-tokens=2048 --k=8 --max-model-len=16384 --tensor-parallel-size=1"
    )


def test_why_an_entry_is_not_runnable_names_each_reason_truly():
    entry = ENTRY_OBJ()
    b = entry.baselines[0]
    unmeasured = attrs.evolve(b, metrics=entries.Metrics())
    unknown = attrs.evolve(b, harness=attrs.evolve(b.harness, dataset="vllm-test-prompts"))
    assert harness.why_not_runnable(attrs.evolve(entry, baselines=(unmeasured, unknown))) == (
        "no primary baseline on a dataset verify can load (the baselines use vllm-test-prompts; verify knows "
        "gsm8k, humaneval, mt-bench, mt-bench-h4, speed-bench); the primary baselines on gsm8k record no metric "
        "verify measures (acceptance length, draft acceptance rate, per-position rates)"
    )
