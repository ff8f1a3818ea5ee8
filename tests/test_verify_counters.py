"""specreg.verify.counters: spec-decode counters from Prometheus text and from LLM.get_metrics(),
their deltas, and the counters that cannot be a measurement."""

import json

import attrs
import pytest

from conftest import run_in_process, run_specreg
from openai_server import OpenAIServer
from specreg.verify import counters as C

PROM = """# TYPE vllm:spec_decode_num_drafts counter
vllm:spec_decode_num_drafts_total{engine="0"} 100.0
vllm:spec_decode_num_drafts_total{engine="1"} 50.0
# TYPE vllm:spec_decode_num_draft_tokens counter
vllm:spec_decode_num_draft_tokens_total{engine="0"} 300.0
vllm:spec_decode_num_draft_tokens_total{engine="1"} 150.0
# TYPE vllm:spec_decode_num_accepted_tokens counter
vllm:spec_decode_num_accepted_tokens_total{engine="0"} 180.0
vllm:spec_decode_num_accepted_tokens_total{engine="1"} 90.0
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="0"} 80.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="2"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",position="1"} 60.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="0"} 40.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="1"} 30.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="1",position="2"} 20.0
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0"} 3.0
"""


def test_counters_from_prometheus_text_sum_engines_and_order_positions():
    c = C.from_prometheus(PROM)
    assert c == C.SpecCounters(drafts=150, draft_tokens=450, accepted=270, per_pos=(120, 90, 60))


@pytest.mark.parametrize(
    "text, words",
    [
        ("vllm:num_requests_running 1.0\n", "no vllm:spec_decode_num_drafts"),
        ("this is { not prometheus", "not Prometheus text"),
    ],
)
def test_counters_missing_or_malformed(text, words):
    with pytest.raises(C.CounterError, match=words):
        C.from_prometheus(text)


@attrs.define
class Counter:  # the shape of vllm.v1.metrics.reader.Counter
    name: str
    labels: dict
    value: int


@attrs.define
class Vector:  # the shape of vllm.v1.metrics.reader.Vector
    name: str
    labels: dict
    values: list


@attrs.define
class Gauge:
    name: str
    labels: dict
    value: float


def test_counters_from_llm_get_metrics_objects():
    metrics = [
        Counter(C.DRAFTS, {"engine": "0"}, 10),
        Counter(C.DRAFTS, {"engine": "1"}, 5),
        Counter(C.DRAFT_TOKENS, {}, 45),
        Counter(C.ACCEPTED, {}, 27),
        Gauge("vllm:num_requests_running", {}, 1.0),
        Vector(C.PER_POS, {"engine": "0"}, [8, 6]),
        Vector(C.PER_POS, {"engine": "1"}, [4, 3, 6]),
    ]
    assert C.from_vllm_metrics(metrics) == C.SpecCounters(15, 45, 27, (12, 9, 6))
    with pytest.raises(C.CounterError, match="disable_log_stats=False"):
        C.from_vllm_metrics([Gauge("vllm:x", {}, 1.0)])


def test_deltas():
    after = C.SpecCounters(150, 450, 270, (120, 90, 60))
    before = C.SpecCounters(100, 300, 180, (80, 60))
    assert after - before == C.SpecCounters(50, 150, 90, (40, 30, 60))


def test_counters_that_cannot_be_a_measurement_are_refused():
    from specreg.verify.counters import CounterError, SpecCounters, check_delta

    check_delta(SpecCounters(100, 300, 150, (80, 50, 20)), chunk=1)  # a real one passes
    bad = {
        "reset": SpecCounters(-100, 300, 150, (80, 50, 20)),
        "accepted above draft tokens": SpecCounters(100, 300, 400, ()),
        "a position above drafts": SpecCounters(100, 300, 150, (180, 50, 20)),
        "positions growing": SpecCounters(100, 300, 150, (50, 80, 20)),
    }
    for delta in bad.values():
        with pytest.raises(CounterError):
            check_delta(delta, chunk=2)


@pytest.mark.parametrize(
    "text, words",
    [
        ("vllm:spec_decode_num_drafts_total +Inf\n", "finite"),
        ("vllm:spec_decode_num_drafts_total -5\n", "finite"),
        ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1000000000"} 1\n', "out of range"),
    ],
)
def test_hostile_prometheus_text_is_refused_without_allocating(text, words):
    from specreg.verify.counters import CounterError, from_prometheus

    with pytest.raises(CounterError, match=words):
        from_prometheus(text)


def test_a_server_with_impossible_counters_is_a_recorded_invalid_result(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    out = tmp_path / "out"
    with OpenAIServer(rates=(1.5, 0.2, 0.1)) as server:  # more accepted at position 1 than drafts
        r = run_specreg(
            "verify",
            "org/x",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--dataset",
            "gsm8k",
            "--num-prompts",
            "4",
            "--out",
            str(out),
            env={"HF_HUB_OFFLINE": "1"},
        )
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 2 and result["verdict"] == "invalid" and "Traceback" not in r.stderr, r.stderr


# -- counters -------------------------------------------------------------------------------------------


def test_counters_whose_label_sets_sum_to_infinity_are_refused_not_a_crash():
    """Two engines each at 1e308 (finite) sum to inf: int(inf) was an OverflowError (exit 3)."""
    from specreg.verify.counters import CounterError, from_prometheus

    text = "".join(
        f'vllm:spec_decode_{name}_total{{engine="{e}"}} 1e308\n'
        for name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens")
        for e in (0, 1)
    )
    with pytest.raises(CounterError, match="sums to infinity"):
        from_prometheus(text)


def test_a_server_claiming_more_drafts_than_its_completions_could_hold_is_invalid(tmp_path):
    """10^7 drafts per completion of 256 tokens was judged `pass` after 6 prompts: the counters were
    checked for sign and consistency only."""
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    out = tmp_path / "out"
    with OpenAIServer(drafts_per_request=10**7) as server:
        r = run_in_process(
            "verify",
            "org/x",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--dataset",
            "gsm8k",
            "--num-prompts",
            "4",
            "--max-tokens",
            "256",
            "--out",
            str(out),
            env={"HF_HUB_OFFLINE": "1"},
        )
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 2 and result["verdict"] == "invalid", r.stderr
    assert result["error"] == (
        "chunk 1: vllm:spec_decode_num_drafts rose by 10,000,000 over 1 completion of at most 256 tokens "
        "(at most 256 drafts): not a measurement of these prompts"
    )


def test_drafts_up_to_one_per_output_token_are_possible():
    from specreg.verify.counters import CounterError, SpecCounters, check_possible

    fine = SpecCounters(drafts=512, draft_tokens=3 * 512, accepted=10, per_pos=(10,))
    assert check_possible(fine, requests=2, max_tokens=256, chunk=1) is fine
    with pytest.raises(CounterError, match="rose by 513 over 2 completions"):
        check_possible(attrs.evolve(fine, drafts=513), requests=2, max_tokens=256, chunk=1)
