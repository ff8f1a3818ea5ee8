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
