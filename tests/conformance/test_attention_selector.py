"""specreg's attention-backend answers against each vLLM wheel's own selector (pytest -m conformance).

For every wheel 0.24-0.33 (sources unpacked from the wheel, compiled files left out),
tests/conformance/attention_selector.py runs the wheel's `CudaPlatform.get_valid_backends` on 720
cases (12 compute capabilities x 5 head sizes x 2 KV-cache dtypes x causal/non-causal x plain,
sliding window, sinks), without and with FlashInfer's TRTLLM cubins, and computes the facts specreg
models it from (tests/conformance/selector.py says in which Python). The committed facts
(specreg/vllm/facts/<X.Y>/attention_backends.json) must be what the wheel computes, and specreg's selection must
equal the wheel's on every case. SPECREG_REGENERATE=1 writes the facts instead of comparing them.
"""

from __future__ import annotations

import json
import os

import pytest

from specreg.vllm import attention
from specreg.vllm.fact_files import read_facts
from tests.conformance import selector

pytestmark = pytest.mark.conformance
VERSIONS = selector.VERSIONS


@pytest.fixture(scope="module")
def surveyed():
    exe, env = selector.python()
    out = {
        v: {
            "plain": selector.run(exe, env, v, False),
            "cubins": selector.run(exe, env, v, True),
            "cubins_required": selector.requires_cubins(v),
        }
        for v in VERSIONS
    }
    if os.environ.get("SPECREG_REGENERATE") == "1":
        selector.regenerate(out)
        attention._facts.cache_clear()
        attention._merged.cache_clear()
    return out


@pytest.mark.parametrize("version", VERSIONS)
def test_the_committed_facts_are_what_the_wheel_computes(surveyed, version):
    committed = read_facts(version, "attention_backends")
    assert committed == selector.facts_document(surveyed)["versions"][version]


@pytest.mark.parametrize("cubins", [False, True])
@pytest.mark.parametrize("version", VERSIONS)
def test_specreg_selects_what_the_wheels_selector_selects(surveyed, version, cubins):
    cases = surveyed[version]["cubins" if cubins else "plain"]["cases"]
    assert len(cases) >= 200
    for c in cases:
        case = attention.Case(
            head_size=c["head_size"],
            dtype=c["dtype"],
            kv_cache_dtype=c["kv_cache_dtype"],
            non_causal=c["non_causal"],
            sliding=c["sliding"],
            sink=c["sink"],
        )
        cap = tuple(int(x) for x in c["capability"].split("."))
        got = attention.select(version, cap, case, cubins=cubins)
        assert (list(got.valid), {k: list(v) for k, v in got.refused.items()}) == (c["valid"], c["refused"]), c


def plain_cases(surveyed, version):
    return surveyed[version]["plain"]["cases"]


def test_the_wheels_differ_where_their_code_changed(surveyed):
    """FP8 KV cache with FlashAttention on SM100 (FA4) changes from wheel to wheel; and from 0.26 a
    non-causal draft on SM100 prefers FlashAttention to FlashInfer (vLLM #48167)."""

    def first(version, non_causal):
        (c,) = [
            c
            for c in plain_cases(surveyed, version)
            if c["capability"] == "10.0"
            and c["head_size"] == 128
            and c["kv_cache_dtype"] == "auto"
            and c["non_causal"] is non_causal
            and not c["sliding"]
            and not c["sink"]
        ]
        return c["valid"][0]

    assert [first(v, True) for v in ("0.25", "0.26")] == ["FLASHINFER", "FLASH_ATTN"]
    assert all(first(v, False) == "FLASHINFER" for v in VERSIONS)

    def fa_reasons(version, head):
        (c,) = [
            c
            for c in plain_cases(surveyed, version)
            if c["capability"] == "10.0"
            and c["head_size"] == head
            and c["kv_cache_dtype"] == "fp8"
            and not c["non_causal"]
            and not c["sliding"]
            and not c["sink"]
        ]
        return c["refused"].get("FLASH_ATTN", [])

    table = {v: fa_reasons(v, 256) for v in VERSIONS}
    assert len({json.dumps(r) for r in table.values()}) > 1, table


def test_flashinfer_sinks_need_the_trtllm_cubins(surveyed):
    """FlashInferBackend.supports_sink asks supports_trtllm_attention, which needs the cubins
    (flashinfer-cubin, or NVIDIA's artifactory reachable): with them, sinks are served on SM90/SM100."""
    for version in VERSIONS:
        facts = surveyed[version]
        assert not facts["plain"]["facts"]["9.0"]["backends"]["FLASHINFER"]["sink"]
    assert any(surveyed[v]["cubins"]["facts"]["10.0"]["backends"]["FLASHINFER"]["sink"] for v in VERSIONS)
    assert [selector.requires_cubins(v) for v in ("0.25", "0.26")] == [True, False]
