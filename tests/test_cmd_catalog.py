"""`specreg catalog` on the CLI: what its filters refuse."""

import pytest

from conftest import run_specreg

run = run_specreg


@pytest.mark.parametrize(("flag", "value", "hint"), [("--algorithm", "dflsh", "did you mean 'dflash'?"),
                                                     ("--tag", "vllm_ci", "did you mean 'vllm-ci'?"),
                                                     ("--verifier", "Qwen/Qwen3-9B", "known: ")])
def test_catalog_list_filters_refuse_values_no_entry_has(flag, value, hint):
    out = run("catalog", "list", flag, value)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag} {value!r}: no catalog entry has it")
    assert hint in out.stderr
