"""The catalog's CI-sourced baselines against vLLM's CI files themselves (pytest -m conformance).

The files are read from the sdist of the release the catalog cites (vLLM 0.33.0 on PyPI, commit
4ba787ec9) with `ast`: every number, tolerance, gate direction, listed position and harness field
that CI's test uses must be the catalog's, field by field."""

from __future__ import annotations

import pytest

from specreg.zoo import catalog

pytestmark = pytest.mark.conformance

RELEASE = "0.33.0"
CORRECTNESS = "tests/v1/spec_decode/test_speculators_correctness.py"
ACCEPTANCE = "tests/v1/spec_decode/test_acceptance_length.py"


def baseline(entry_id: str, source_file: str):
    (b,) = [b for b in catalog().get(entry_id).baselines if b.source.endswith(source_file)]
    return b


def test_the_catalog_cites_the_release_commit():
    from conformance import vllm_ci

    sha = vllm_ci.commit(RELEASE)
    cited = {b.source_commit for e in catalog() for b in e.baselines if b.source.endswith((CORRECTNESS, ACCEPTANCE))}
    assert cited == {sha}
    assert all(f"v{RELEASE} " in b.source for e in catalog() for b in e.baselines
               if b.source.endswith((CORRECTNESS, ACCEPTANCE)))


def test_speculators_correctness_gates_are_floors_on_al_and_listed_positions():
    from conformance import vllm_ci

    gates = vllm_ci.compares(vllm_ci.read(RELEASE, CORRECTNESS), "test_speculators_correctness")
    assert "acceptance_len >= al_threshold" in gates and "per_pos_rates[i] >= threshold" in gates


def test_acceptance_length_gates_are_two_sided_al_and_per_position_floors():
    from conformance import vllm_ci

    gates = vllm_ci.compares(vllm_ci.read(RELEASE, ACCEPTANCE), "test_eagle3_acceptance_length")
    assert "rel_error <= DEFAULT_RTOL" in gates and "actual >= min_expected" in gates


def _correctness_configs():
    from conformance import vllm_ci

    return vllm_ci.calls(vllm_ci.read(RELEASE, CORRECTNESS), "SpeculatorTestConfig")


def test_every_model_ci_gates_is_in_the_catalog():
    from conformance import vllm_ci

    ids = {e.id for e in catalog()}
    assert {c["model_path"] for c in _correctness_configs()} <= ids
    assert {c["drafter"] for c in vllm_ci.calls(vllm_ci.read(RELEASE, ACCEPTANCE), "Eagle3ModelConfig")} <= ids


def test_speculators_correctness_entries_match_ci_field_by_field():
    from conformance import vllm_ci

    text = vllm_ci.read(RELEASE, CORRECTNESS)
    (llm,) = vllm_ci.calls(text, "LLM")
    for c in _correctness_configs():
        entry = catalog().get(c["model_path"])
        b = baseline(c["model_path"], CORRECTNESS)
        al, pp = b.metrics.acceptance_length, b.metrics.per_position
        got = {"al": al.value, "al_direction": al.direction, "al_rtol": al.tolerance,
               "positions": tuple(pp.values), "pos_direction": pp.direction, "pos_rtol": pp.tolerance,
               "accuracy": (b.metrics.accuracy.value, b.metrics.accuracy.direction, b.metrics.accuracy.tolerance),
               "max_model_len": entry.serving.max_model_len,
               "batch": b.harness.batch_size, "dataset": b.harness.dataset, "max_tokens": b.harness.max_tokens}
        want = {"al": c["expected_acceptance_len"], "al_direction": "higher", "al_rtol": c["acceptance_len_rtol"],
                "positions": tuple(c["expected_per_pos_acceptance_rates"]), "pos_direction": "higher",
                "pos_rtol": c["per_pos_rtol"],
                "accuracy": (c["expected_gsm8k_accuracy"], "higher", c["accuracy_rtol"]),
                "max_model_len": llm["max_model_len"], "batch": llm["max_num_seqs"], "dataset": "gsm8k",
                "max_tokens": 256}
        assert got == want, c["model_path"]


def test_acceptance_length_entries_match_ci_field_by_field():
    from conformance import vllm_ci

    text = vllm_ci.read(RELEASE, ACCEPTANCE)
    defaults = vllm_ci.constants(text)
    for c in vllm_ci.calls(text, "Eagle3ModelConfig"):
        entry = catalog().get(c["drafter"])
        b = baseline(c["drafter"], ACCEPTANCE)
        al, pp = b.metrics.acceptance_length, b.metrics.per_position
        got = {"al": al.value, "al_direction": al.direction, "al_rtol": al.tolerance, "positions": list(pp.values),
               "pos_direction": pp.direction, "pos_rtol": pp.tolerance, "verifier": entry.verifier.id,
               "k": b.harness.k, "num_prompts": b.harness.num_prompts, "max_tokens": b.harness.max_tokens,
               "dataset": b.harness.dataset, "temperature": b.harness.temperature}
        want = {"al": c["expected_acceptance_length"], "al_direction": "two-sided", "al_rtol": defaults["DEFAULT_RTOL"],
                "positions": list(c["expected_acceptance_lengths_per_pos"]), "pos_direction": "higher",
                "pos_rtol": c.get("rtol", defaults["DEFAULT_RTOL"]), "verifier": c["verifier"],
                "k": defaults["DEFAULT_NUM_SPEC_TOKENS"], "num_prompts": defaults["DEFAULT_NUM_PROMPTS"],
                "max_tokens": defaults["DEFAULT_OUTPUT_LEN"], "dataset": "mt-bench", "temperature": 0.0}
        assert got == want, c["drafter"]
