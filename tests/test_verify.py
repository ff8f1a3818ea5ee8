"""The verification harness on the CPU: counters, statistics, verdicts, every output file, the report,
shards, isolation and resume, and `--server` end to end against a loopback vLLM-like server."""

import json
import re
import sqlite3
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree as ET

import attrs
import pytest

from conftest import run_in_process
from interrupt import as_from_a_terminal
from openai_server import OpenAIServer
from specreg import entries
from specreg.verify import counters as C
from specreg.verify import harness, nightly
from specreg.verify.judge import judge
from specreg.verify.prompts import load_prompts
from specreg.verify.stats import compute, t975
from specreg.entries import Harness, PromptFormat

REPO_ROOT = Path(__file__).resolve().parent.parent


def run(*args, env=None):
    """The CLI in this process (conftest.run_in_process), offline: these tests check outputs and exit codes."""
    return run_in_process(*args, env={"HF_HUB_OFFLINE": "1", **(env or {})})


# -- counters --------------------------------------------------------------------------------------

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


@pytest.mark.parametrize("text, words", [
    ("vllm:num_requests_running 1.0\n", "no vllm:spec_decode_num_drafts"),
    ("this is { not prometheus", "not Prometheus text"),
])
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
    metrics = [Counter(C.DRAFTS, {"engine": "0"}, 10), Counter(C.DRAFTS, {"engine": "1"}, 5),
               Counter(C.DRAFT_TOKENS, {}, 45), Counter(C.ACCEPTED, {}, 27), Gauge("vllm:num_requests_running", {}, 1.0),
               Vector(C.PER_POS, {"engine": "0"}, [8, 6]), Vector(C.PER_POS, {"engine": "1"}, [4, 3, 6])]
    assert C.from_vllm_metrics(metrics) == C.SpecCounters(15, 45, 27, (12, 9, 6))
    with pytest.raises(C.CounterError, match="disable_log_stats=False"):
        C.from_vllm_metrics([Gauge("vllm:x", {}, 1.0)])


def test_deltas():
    after = C.SpecCounters(150, 450, 270, (120, 90, 60))
    before = C.SpecCounters(100, 300, 180, (80, 60))
    assert after - before == C.SpecCounters(50, 150, 90, (40, 30, 60))


# -- statistics ------------------------------------------------------------------------------------

def test_statistics_from_counter_deltas():
    s = compute([C.SpecCounters(100, 300, 100, (60, 30, 10)), C.SpecCounters(100, 300, 200, (90, 70, 40))])
    assert s.acceptance_length == pytest.approx(1 + 300 / 200)
    assert s.per_position == pytest.approx((0.75, 0.5, 0.25))
    assert sum(s.per_position) == pytest.approx(s.acceptance_length - 1)
    assert s.draft_acceptance_rate == pytest.approx(300 / 600)
    mean, half = 2.5, t975(1) * (0.5 ** 0.5) / (2 ** 0.5)  # chunk ALs 2.0 and 3.0
    assert s.al_interval == pytest.approx((mean - half, mean + half))


def test_one_chunk_has_no_interval_and_no_drafts_is_an_error():
    assert compute([C.SpecCounters(10, 30, 10, (5, 3, 2))]).al_interval is None
    with pytest.raises(ValueError, match="no drafts"):
        compute([C.SpecCounters()])


# -- verdicts --------------------------------------------------------------------------------------

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


# -- datasets --------------------------------------------------------------------------------------

def write_rows(path: Path, n=30, category=None):
    with path.open("w") as f:
        for i in range(n):
            row = {"question": f"What is {i} + {i}?", "answer": f"{2 * i}"}
            if category:
                row["category"] = category if i % 2 else "other"
            f.write(json.dumps(row) + "\n")
    return path


def test_a_named_dataset_from_a_local_file_is_recorded_by_its_content(tmp_path):
    import hashlib

    rows = write_rows(tmp_path / "gsm8k.jsonl")
    p = load_prompts("gsm8k", dataset_file=str(rows), num_prompts=5, chat=True, few_shot=2)
    # the file is what ran: never recorded at the Hub dataset's pinned revision or split
    assert (p.dataset, p.split, p.revision) == ("gsm8k", None, None)
    assert p.source == f"{rows} (sha256 {hashlib.sha256(rows.read_bytes()).hexdigest()})"
    # CI's chat form (use_chat_completions): the whole few-shot text is one user message
    assert len(p.items) == 5 and len(p.items[0]) == 1
    assert p.items[0][0] == {"role": "user", "content": "Question: What is 0 + 0?\nAnswer: 0\n\nQuestion: What is 1 + 1?"
                                                        "\nAnswer: 2\n\nQuestion: What is 2 + 2?\nAnswer:"}
    raw = load_prompts(str(rows), num_prompts=3, chat=False, few_shot=1)
    assert raw.dataset == "gsm8k.jsonl" and raw.items[0].startswith("Question: What is 0 + 0?\nAnswer: 0\n\n")


def test_few_shot_examples_from_another_split_and_templates(tmp_path):
    from specreg.errors import SpecregError

    test_rows = write_rows(tmp_path / "test.jsonl", n=4)
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"question": f"Shot {i}?", "answer": f"#### {i}"}) + "\n" for i in range(6)))
    p = load_prompts("gsm8k", dataset_file=str(test_rows), shots_file=str(train), shots_split="train",
                     few_shot=2, chat=False)
    # every question is asked (none spent as an example), each after the train split's first two rows
    assert len(p.items) == 4 and p.shots_split == "train"
    assert p.items[3] == "Question: Shot 0?\nAnswer: #### 0\n\nQuestion: Shot 1?\nAnswer: #### 1\n\nQuestion: What is 3 + 3?\nAnswer:"
    assert "shots " in p.source and "sha256" in p.source.split("shots ")[1]
    with pytest.raises(SpecregError, match="--shots-file"):
        load_prompts("gsm8k", dataset_file=str(test_rows), shots_split="train", few_shot=2)
    t = load_prompts("gsm8k", dataset_file=str(test_rows), template="{question}\nPlease reason step by step.")
    assert t.items[1] == [{"role": "user", "content": "What is 1 + 1?\nPlease reason step by step."}]
    with pytest.raises(SpecregError, match="template"):
        load_prompts("gsm8k", dataset_file=str(test_rows), template="{prompt}")


def test_dataset_category_and_bad_input(tmp_path):
    rows = write_rows(tmp_path / "mt.jsonl", category="writing")
    p = load_prompts("mt-bench:writing", dataset_file=str(rows), num_prompts=None)
    assert p.subset == "writing" and len(p.items) == 15
    from specreg.errors import SpecregError

    with pytest.raises(SpecregError, match="no such file"):
        load_prompts("not-a-dataset")
    (tmp_path / "bad.jsonl").write_text("{not json\n")
    with pytest.raises(SpecregError, match="not a JSONL dataset"):
        load_prompts(str(tmp_path / "bad.jsonl"))


# -- --server end to end -----------------------------------------------------------------------------

ENTRY = """id = "org/draft"
algorithm = "eagle3"
status = "unpinned"

[verifier]
id = "org/verifier"

[[baselines]]
kind = "published"
source = "a test"

[baselines.harness]
dataset = "gsm8k"
num_prompts = 20
temperature = 0.0
k = 3

[baselines.metrics.acceptance_length]
value = 2.8
direction = "two-sided"
tolerance = 0.05

[baselines.metrics.per_position]
values = [0.8, 0.6, 0.4]
"""


@pytest.fixture
def setup(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    return reg, rows, tmp_path / "out" / "org--draft"


def verify_args(server, reg, rows, out, *extra):
    return ("verify", "org/draft", "--server", server.url, "--dataset", "gsm8k", "--dataset-file", str(rows),
            "--num-prompts", "20", "--k", "3", "--out", str(out), "--registry", str(reg), *extra)


def test_server_run_produces_every_output_with_the_exact_acceptance_length(setup):
    reg, rows, out = setup
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        r = run(*verify_args(server, reg, rows, out))
        chat_requests = [b for p, b in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "result.json").read_text())
    s = result["statistics"]
    assert s["acceptance_length"] == 2.8  # 1 + 0.8 + 0.6 + 0.4, from the counter deltas
    assert s["per_position"] == [0.8, 0.6, 0.4]
    assert s["draft_acceptance_rate"] == pytest.approx(1.8 / 3)
    assert s["counters"] == {"drafts": 2000, "draft_tokens": 6000, "accepted": 3600, "per_pos": [1600, 1200, 800]}
    assert s["chunks"] == 10 and s["al_interval"] == pytest.approx([2.8, 2.8])
    assert result["verdict"] == "pass" and result["environment"]["vllm_version"] == "0.33.0"
    assert result["harness"]["dataset"] == "gsm8k"
    import hashlib

    # a local file is recorded by its content, not at the named dataset's revision
    assert result["dataset_source"] == f"{rows} (sha256 {hashlib.sha256(rows.read_bytes()).hexdigest()})"
    assert result["harness"]["k"] == 3  # from the server's own counters: 6000 draft tokens / 2000 drafts
    assert len(chat_requests) == 20 and chat_requests[0]["temperature"] == 0.0
    summary = (out / "summary.md").read_text()
    assert summary.startswith("## org/draft: **pass**") and "| acceptance length | 2.800" in summary and "| position 1 | 0.800" in summary
    assert "None" not in summary and "GPU unset" in summary
    suite = ET.fromstring((out / "junit.xml").read_bytes())
    assert suite.get("failures") == "0" and int(suite.get("tests")) == 4
    assert (out / "per_position.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with sqlite3.connect(out.parent / "history.sqlite") as db:
        assert db.execute("SELECT model, verdict, acceptance_length FROM runs").fetchall() == [("org/draft", "pass", 2.8)]


def test_a_run_far_below_the_baseline_is_regressed_with_exit_1(setup):
    reg, rows, out = setup
    with OpenAIServer(rates=(0.3, 0.1, 0.0)) as server:
        r = run(*verify_args(server, reg, rows, out))
    assert r.returncode == 1, r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "regressed" and result["statistics"]["acceptance_length"] == pytest.approx(1.4)
    suite = ET.fromstring((out / "junit.xml").read_bytes())
    assert int(suite.get("failures")) >= 1
    assert "regressed" in (out / "summary.md").read_text()


def test_raw_prompts_and_thinking_are_sent_as_asked(setup):
    reg, rows, out = setup
    with OpenAIServer() as server:
        r = run(*verify_args(server, reg, rows, out, "--raw", "--few-shot", "2", "--no-thinking", "--num-prompts", "4"))
        assert r.returncode in (0, 1), r.stderr
        paths = {p for p, _ in server.requests}
        body = server.requests[0][1]
    assert paths == {"/v1/completions"}
    # raw completions have no chat template: the kwarg is not sent, and not recorded
    assert body["prompt"].startswith("Question: What is 0 + 0?") and "chat_template_kwargs" not in body
    result = json.loads((out / "result.json").read_text())
    # /v1/completions has no chat template: thinking is recorded only where it is sent
    assert result["harness"]["prompt"] == {"chat_template": False, "few_shot": 2}
    assert any("num_prompts" in d for d in result["judgement"]["differences"])
    assert "max_tokens" in result["judgement"]["not_recorded_by_baseline"]


def test_vllm_ci_harness_is_sent_as_the_baseline_states_it(setup, tmp_path):
    """The GSM8K harness of vLLM's CI, by flags: train-split shots, stop strings, raw completions;
    prompt-at-a-time runs one chunk per prompt and reports the mean per-prompt AL."""
    reg, rows, out = setup
    train = write_rows(tmp_path / "train.jsonl", n=6)
    with OpenAIServer() as server:
        r = run(*verify_args(server, reg, rows, out, "--raw", "--few-shot", "5", "--shots-split", "train",
                             "--shots-file", str(train), "--num-prompts", "6", "--mode", "prompt-at-a-time",
                             "--stop", "Question", "--stop", "Assistant:", "--stop", "<|separator|>"))
        assert r.returncode in (0, 1), r.stderr
        bodies = [b for p, b in server.requests if p == "/v1/completions"]
    assert len(bodies) == 6 and all(b["stop"] == ["Question", "Assistant:", "<|separator|>"] for b in bodies)
    assert bodies[0]["prompt"].startswith("Question: What is 0 + 0?\nAnswer: 0\n\n")
    assert bodies[0]["prompt"].endswith("Question: What is 0 + 0?\nAnswer:")  # test row 0, after 5 train rows
    result = json.loads((out / "result.json").read_text())
    h = result["harness"]
    assert (h["mode"], h["statistic"], h["stop"]) == ("prompt-at-a-time", "mean-per-prompt",
                                                      ["Question", "Assistant:", "<|separator|>"])
    assert h["prompt"] == {"chat_template": False, "few_shot": 5, "shots_split": "train"}
    assert result["statistics"]["chunks"] == 6 and result["statistics"]["statistic"] == "mean-per-prompt"


def test_mean_per_prompt_statistic_and_detectable_change():
    from specreg.verify.counters import SpecCounters
    from specreg.verify.stats import compute

    prompts = [SpecCounters(drafts=10, draft_tokens=30, accepted=20, per_pos=[8, 7, 5]),
               SpecCounters(drafts=90, draft_tokens=270, accepted=90, per_pos=[50, 30, 10]),
               SpecCounters(drafts=0, draft_tokens=0, accepted=0, per_pos=[0, 0, 0])]
    pooled, mean = compute(prompts), compute(prompts, "mean-per-prompt")
    assert pooled.acceptance_length == pytest.approx(1 + 110 / 100)
    # each prompt's own AL (3.0, 2.0, and 1 for a prompt without drafts, as vLLM's compute_acceptance_len)
    assert mean.acceptance_length == pytest.approx(2.0) and mean.chunks == 3
    lo, hi = mean.al_interval
    assert mean.detectable_change == pytest.approx((hi - lo) / 2) == pytest.approx(4.303 * 1.0 / 3 ** 0.5)


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


def test_counters_moving_while_idle_refuse_the_run(setup):
    reg, rows, out = setup
    with OpenAIServer() as server:
        server.noisy = True
        r = run(*verify_args(server, reg, rows, out))
        assert [p for p, _ in server.requests] == []  # nothing was sent
    assert r.returncode == 5
    assert "moved while idle" in json.loads((out / "result.json").read_text())["error"]


def test_an_engine_failure_is_exit_5_with_a_result(setup):
    """5, not 3: exit 3 means a bug in specreg in every command (an internal error)."""
    reg, rows, out = setup
    with OpenAIServer() as server:
        server.fail_status = 500
        r = run(*verify_args(server, reg, rows, out))
    assert r.returncode == 5
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "error" and "500" in result["error"]
    assert ET.fromstring((out / "junit.xml").read_bytes()).get("errors") == "1"


def test_the_servers_error_message_is_in_verifys_error_line(setup):
    """vLLM answers a request it refuses with an ErrorResponse body; its message is what the user needs
    (httpx's own text is a generic line and a link)."""
    reg, rows, out = setup
    with OpenAIServer() as server:
        server.fail_status = 400
        server.fail_message = "The decoder prompt cannot be empty"
        r = run(*verify_args(server, reg, rows, out))
    assert r.returncode == 5
    error = json.loads((out / "result.json").read_text())["error"]
    assert error == (f"{server.url}/v1/chat/completions: HTTP 400 Bad Request: the server said "
                     "'The decoder prompt cannot be empty'")
    assert r.stdout.splitlines()[0] == f"org/draft: error; {error}"


def test_an_error_body_that_is_not_json_is_quoted_shortened_and_escaped(setup):
    reg, rows, out = setup
    with OpenAIServer() as server:
        server.fail_status = 502
        server.fail_body = b"<html>\x1b[2J" + b"upstream down " * 100 + b"</html>"
        r = run(*verify_args(server, reg, rows, out))
    assert r.returncode == 5
    error = json.loads((out / "result.json").read_text())["error"]
    said = "'<html>\\x1b[2J" + ("upstream down " * 100)[:290] + "'… (1,417 characters)"
    assert error == f"{server.url}/v1/chat/completions: HTTP 502 Bad Gateway: the server said {said}"


def test_verify_json_prints_the_result_it_wrote_and_keeps_the_exit_status(setup):
    reg, rows, out = setup
    with OpenAIServer(rates=(0.3, 0.1, 0.0)) as server:
        r = run(*verify_args(server, reg, rows, out, "--json"))
    assert r.returncode == 1  # regressed, as without --json
    printed = json.loads(r.stdout)
    assert printed == json.loads((out / "result.json").read_text())
    assert printed["verdict"] == "regressed" and printed["statistics"]["acceptance_length"] == pytest.approx(1.4)


def test_verify_json_without_out_prints_a_failed_run_too(setup):
    reg, rows, _out = setup
    with OpenAIServer() as server:
        server.fail_status = 400
        server.fail_message = "The decoder prompt cannot be empty"
        r = run("verify", "org/draft", "--server", server.url, "--dataset", "gsm8k", "--dataset-file", str(rows),
                "--num-prompts", "20", "--k", "3", "--registry", str(reg), "--json")
    assert r.returncode == 5
    printed = json.loads(r.stdout)
    assert printed["verdict"] == "error" and printed["statistics"] is None
    assert printed["error"].endswith("HTTP 400 Bad Request: the server said 'The decoder prompt cannot be empty'")


def test_report_json_says_what_it_wrote(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
    (out.parent / "broken").mkdir()
    (out.parent / "broken" / "result.json").write_text("{not json")
    site, merged = tmp_path / "site", tmp_path / "merged.sqlite"
    r = run("report", str(out.parent), "--out", str(site), "--registry", str(reg), "--history-out", str(merged),
            "--json")
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed["index"] == str(site / "index.html") and printed["history_out"] == str(merged)
    assert len(printed["warnings"]) == 1 and "broken" in printed["warnings"][0]
    assert r.stderr == ""


def test_the_loopback_openai_server_runs_on_its_own():
    """`python tests/openai_server.py` prints its URL and serves; one request is answered."""
    import httpx

    proc = subprocess.Popen([sys.executable, str(REPO_ROOT / "tests" / "openai_server.py"), "--model", "me/mine",
                             "--version", "0.30.0"], stdout=subprocess.PIPE, text=True)
    try:
        url = proc.stdout.readline().strip()
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+", url), url
        assert httpx.get(f"{url}/v1/models", timeout=30).json()["data"][0]["id"] == "me/mine"
        assert httpx.get(f"{url}/version", timeout=30).json() == {"version": "0.30.0"}
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        proc.stdout.close()


def test_strict_harness_refuses_with_exit_2(setup):
    reg, rows, out = setup
    with OpenAIServer() as server:
        r = run(*verify_args(server, reg, rows, out, "--num-prompts", "10", "--strict-harness"))
    assert r.returncode == 2
    assert json.loads((out / "result.json").read_text())["verdict"] == "refused"


def test_update_baseline_writes_a_measured_baseline(setup):
    reg, rows, out = setup
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        r = run(*verify_args(server, reg, rows, out, "--update-baseline", "--gpu", "1xH100"))
    assert r.returncode == 0, r.stderr
    entry = entries.lookup("org/draft", reg)
    measured = [b for b in entry.baselines if b.kind == "measured"]
    assert len(measured) == 1
    b = measured[0]
    assert b.metrics.acceptance_length.value == 2.8 and b.metrics.per_position.values == (0.8, 0.6, 0.4)
    assert (b.harness.dataset, b.harness.num_prompts, b.harness.gpu, b.harness.vllm_version) == ("gsm8k", 20, "1xH100", "0.33.0")
    assert (reg / "org" / "draft.toml").read_text().startswith(ENTRY.split("\n[[baselines]]")[0])
    assert entries.check(reg).problems == ()


# -- report ----------------------------------------------------------------------------------------

def test_report_page_lists_the_catalog_and_links_plots(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
        run(*verify_args(server, reg, rows, out))  # a second run: a trend
    site = tmp_path / "site"
    r = run("report", str(out.parent), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    index = (site / "index.html").read_text()
    assert "data-model='org/draft'" in index and "<td class='verdict'>pass</td>" in index
    page = (site / "models" / "org--draft.html").read_text()
    assert "org--draft-per-position.png" in page and "org--draft-trend.png" in page
    assert (site / "models" / "org--draft-trend.png").read_bytes()[:4] == b"\x89PNG"


# -- nightly: shards, isolation, resume ------------------------------------------------------------

def test_shards_partition_the_catalog():
    every = list(entries.catalog().values())
    shards = [nightly.shard(every, i, 3) for i in (1, 2, 3)]
    ids = [e.id for s in shards for e in s]
    assert sorted(ids) == sorted(e.id for e in every) and len(ids) == len(set(ids))
    with pytest.raises(ValueError):
        nightly.parse_shard("4/3")


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


def test_all_isolates_crashes_and_timeouts_and_resumes(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    for name in ("ok", "crash", "slow"):
        (reg / "org" / f"{name}.toml").write_text(ENTRY.replace("org/draft", f"org/{name}"))
    calls = []

    def make(entry, out, history, extra):
        calls.append(entry.id)
        if entry.id == "org/crash":
            return [sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]
        if entry.id == "org/slow":
            return [sys.executable, "-c", "import time; time.sleep(30)"]
        code = (f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), "
                f"{{'model': {entry.id!r}, 'verdict': 'pass'}})")
        return [sys.executable, "-c", code]

    verdicts = nightly.run_all(tmp_path / "night", timeout=2, registry=str(reg), make_command=make, grace=0.5)
    assert verdicts == {"org/crash": "crash", "org/ok": "pass", "org/slow": "timeout"}
    crash = json.loads((tmp_path / "night" / "org--crash" / "result.json").read_text())
    assert "SIGKILL" in crash["error"]
    assert (tmp_path / "night" / "org--slow" / "junit.xml").exists()
    calls.clear()
    again = nightly.run_all(tmp_path / "night", timeout=2, registry=str(reg), make_command=make, resume=True, grace=0.5)
    assert calls == [] and again == verdicts


def test_all_through_the_cli_against_the_server(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    (reg / "org" / "chat.toml").write_text(ENTRY.replace("org/draft", "org/chat").replace('"gsm8k"', '"mt-bench"'))
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        plain = run("verify", "--all", "--server", server.url, "--dataset-file", str(rows), "--out",
                    str(tmp_path / "n"), "--registry", str(reg))
        r = run("verify", "--all", "--server", server.url, "--dataset-file", f"gsm8k={rows}", "--out",
                str(tmp_path / "n"), "--registry", str(reg), "--shard", "1/1")
    # one file is never fed to every entry whatever its dataset
    assert plain.returncode == 2 and "name the dataset of each --dataset-file" in plain.stderr
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads((tmp_path / "n" / "org--draft" / "result.json").read_text())["verdict"] == "pass"
    chat = json.loads((tmp_path / "n" / "org--chat" / "result.json").read_text())
    assert chat["verdict"] == "not-runnable" and "its baseline's dataset is mt-bench" in chat["judgement"]["reason"]


def invalid_catalog(reg: Path) -> None:
    """Two valid entries (org/a, org/b), one with a string for its baseline AL and one that is not TOML."""
    (reg / "org").mkdir(parents=True)
    for name in ("a", "b"):
        (reg / "org" / f"{name}.toml").write_text(ENTRY.replace("org/draft", f"org/{name}"))
    (reg / "org" / "typed.toml").write_text(ENTRY.replace("org/draft", "org/typed").replace("value = 2.8", 'value = "x"'))
    (reg / "org" / "broken.toml").write_text("id = [[[")


def test_all_measures_the_valid_entries_and_records_the_invalid_ones(tmp_path):
    """An invalid catalog entry refused the whole night (exit 2, nothing measured)."""
    reg = tmp_path / "registry"
    invalid_catalog(reg)
    calls = []

    def make(entry, out, history, extra):
        calls.append(entry.id)
        code = (f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), "
                f"{{'model': {entry.id!r}, 'verdict': 'pass'}})")
        return [sys.executable, "-c", code]

    verdicts = nightly.run_all(tmp_path / "night", timeout=30, registry=str(reg), make_command=make)
    assert calls == ["org/a", "org/b"]
    assert verdicts == {"org/a": "pass", "org/b": "pass", "org/broken": "invalid", "org/typed": "invalid"}
    typed = json.loads((tmp_path / "night" / "org--typed" / "result.json").read_text())
    assert typed["verdict"] == "invalid" and "typed.toml: $.baselines[0].metrics.acceptance_length.value" in typed["error"]
    broken = json.loads((tmp_path / "night" / "org--broken" / "result.json").read_text())
    assert broken["verdict"] == "invalid" and "broken.toml" in broken["error"]


def test_all_shards_the_invalid_entries_too(tmp_path):
    reg = tmp_path / "registry"
    invalid_catalog(reg)

    def make(entry, out, history, extra):
        code = f"from specreg.verify import outputs; from pathlib import Path; outputs.write_result(Path({str(out)!r}), " \
               f"{{'model': {entry.id!r}, 'verdict': 'pass'}})"
        return [sys.executable, "-c", code]

    one = nightly.run_all(tmp_path / "1", shard_spec="1/2", registry=str(reg), make_command=make)
    two = nightly.run_all(tmp_path / "2", shard_spec="2/2", registry=str(reg), make_command=make)
    assert sorted([*one, *two]) == ["org/a", "org/b", "org/broken", "org/typed"]


def test_all_through_the_cli_with_an_invalid_entry_measures_the_rest_and_exits_1(tmp_path):
    reg = tmp_path / "registry"
    invalid_catalog(reg)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        r = run("verify", "--all", "--server", server.url, "--dataset-file", f"gsm8k={rows}", "--out",
                str(tmp_path / "n"), "--registry", str(reg))
    assert r.returncode == 1, r.stderr + r.stdout
    assert r.stdout.strip().splitlines()[-1] == "4 entries: invalid 2, pass 2"
    for name in ("a", "b"):
        assert json.loads((tmp_path / "n" / f"org--{name}" / "result.json").read_text())["verdict"] == "pass"


# -- the nightly workflow --------------------------------------------------------------------------

def test_the_nightly_workflow_is_valid():
    import yaml

    wf = yaml.safe_load((REPO_ROOT / ".github" / "workflows" / "nightly.yml").read_text())
    on = wf.get("on", wf.get(True))
    assert "schedule" in on and "workflow_dispatch" in on
    verify = wf["jobs"]["verify"]
    assert "H100" in verify["runs-on"] and "self-hosted" in verify["runs-on"]
    shards = verify["strategy"]["matrix"]["shard"]
    runs = " ".join(step.get("run", "") for step in verify["steps"])
    assert "specreg verify --all" in runs and f"/{len(shards)}" in runs and "--resume" in runs
    report = wf["jobs"]["report"]
    assert report["needs"] == "verify" and "specreg report" in " ".join(s.get("run", "") for s in report["steps"])


@pytest.mark.gpu
def test_in_process_engine_on_a_gpu(tmp_path):
    """vLLM in-process (needs CUDA and vLLM): a real measurement of a small pair."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from specreg.verify.run import Options, verify

    rows = write_rows(tmp_path / "gsm8k.jsonl")
    result = verify("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                    Options(dataset="gsm8k", dataset_file=str(rows), num_prompts=8, chunks=2),
                    out=tmp_path / "out", history=None)
    assert result["statistics"]["acceptance_length"] > 1.0


def test_an_unservable_model_is_an_invalid_result_with_exit_2(tmp_path):
    draft = tmp_path / "xpress"
    draft.mkdir()
    (draft / "config.json").write_text((REPO_ROOT / "tests/data/speculators/xpress.json").read_text())
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    r = run("verify", str(draft), "--dataset-file", str(rows), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["verdict"] == "invalid" and "not servable" in result["error"]


# -- measurements that cannot be right are refused (issue: hostile server) --------------------------

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


@pytest.mark.parametrize("text, words", [
    ("vllm:spec_decode_num_drafts_total +Inf\n", "finite"),
    ("vllm:spec_decode_num_drafts_total -5\n", "finite"),
    ('vllm:spec_decode_num_accepted_tokens_per_pos_total{position="1000000000"} 1\n', "out of range"),
])
def test_hostile_prometheus_text_is_refused_without_allocating(text, words):
    from specreg.verify.counters import CounterError, from_prometheus

    with pytest.raises(CounterError, match=words):
        from_prometheus(text)


def test_a_gated_position_the_run_did_not_report_fails_like_vllms_ci():
    entry = entry_with("value = 2.0\ndirection = \"higher\"\ntolerance = 0.1", 'dataset = "gsm8k"\ntemperature = 0.0')
    entry = attrs.evolve(entry, baselines=(attrs.evolve(entry.baselines[0], metrics=attrs.evolve(
        entry.baselines[0].metrics, per_position=__import__("specreg.entries", fromlist=["PerPosition"]).PerPosition(
            values=(0.6, 0.3), direction="higher", tolerance=0.1))),))
    stats = stats_with_al(2.0)
    stats = attrs.evolve(stats, per_position=())
    j = judge(stats, RUN, entry)
    assert j.verdict == "regressed" and "no per-position count for gated positions 1, 2" in j.reason


def test_a_password_in_the_server_url_is_never_recorded(tmp_path):
    from specreg.verify.run import Options, redact, verify

    assert redact("http://user:s3cret@127.0.0.1:9/x") == "http://user:***@127.0.0.1:9/x"
    assert redact("http://127.0.0.1:9") == "http://127.0.0.1:9"
    out = tmp_path / "out"
    result = verify("org/x", Options(server="http://user:s3cret@127.0.0.1:9", dataset_file=str(_prompts_file(tmp_path))),
                    out=out, history=None, progress=lambda _m: None)
    text = "".join(p.read_text(errors="replace") for p in out.rglob("*") if p.is_file())
    assert "s3cret" not in text and "s3cret" not in json.dumps(result)


def _prompts_file(tmp_path):
    path = tmp_path / "prompts.jsonl"
    path.write_text("\n".join(json.dumps({"question": f"q{i}", "answer": "a"}) for i in range(4)))
    return path


def test_the_report_escapes_what_result_files_say(tmp_path):
    from html.parser import HTMLParser

    from specreg.verify.report import build

    results = tmp_path / "results" / "x"
    results.mkdir(parents=True)
    hostile = "org/x' onmouseover='alert(1)"
    (results / "result.json").write_text(json.dumps({
        "model": hostile, "started": "<script>alert(2)</script>", "engine": "e", "verdict": "pass' onclick='x",
        "statistics": None, "judgement": None, "baseline": None, "harness": {}, "environment": {}, "notes": []}))
    index = build(tmp_path / "results", tmp_path / "site")
    attrs_seen, scripts = [], []

    class Parser(HTMLParser):
        in_script = False

        def handle_starttag(self, tag, attributes):
            self.in_script = tag == "script"
            attrs_seen.extend(name for name, _ in attributes)

        def handle_data(self, data):
            if self.in_script:
                scripts.append(data)

    for page in (tmp_path / "site").rglob("*.html"):
        Parser().feed(page.read_text())
    assert "onmouseover" not in attrs_seen and "onclick" not in attrs_seen
    assert not any("alert" in s for s in scripts)  # only the page's own image check runs
    assert index.exists()


def test_gpu_names_take_the_catalogs_form():
    from specreg.verify.engines import gpu_name

    assert [gpu_name(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090",
                                  "NVIDIA B200", "Tesla T4", "NVIDIA H100 PCIe")] == \
        ["H100", "A100", "RTX4090", "B200", "T4", "H100"]


def test_a_secondary_baseline_is_shown_never_a_gate():
    text = ENTRY.replace('source = "a test"', 'source = "a paper"\nsecondary = true')
    entry, problems = entries.parse_entry(text, file="registry/org/draft.toml")
    assert not problems
    j = judge(stats_with_al(1.2), Harness(dataset="gsm8k"), entry)
    assert j.verdict == "secondary" and "not gated" in j.reason and "regressed" in j.reason
    from specreg.verify.run import EXIT

    assert EXIT["secondary"] == 0 and EXIT["not-runnable"] == 0


@pytest.mark.parametrize("hostile, verdict, words, code", [
    ({"metrics_flood": 64 * 1024 * 1024}, "invalid", "the answer passed 33554432 bytes", 2),
    ({"metrics_drip": 0.5}, "timeout", "--timeout", 5),
    ({"models_body": b'{"data": [{"name": 5}]}'}, "invalid", "the first model has no id", 2),
    ({"models_body": b"not json"}, "invalid", "not JSON", 2),
])
def test_a_hostile_server_is_a_recorded_result_within_the_timeout(setup, hostile, verdict, words, code):
    import time

    reg, rows, out = setup
    with OpenAIServer() as server:
        for name, value in hostile.items():
            setattr(server, name, value)
        start = time.monotonic()
        r = run(*verify_args(server, reg, rows, out, "--timeout", "5"))
        elapsed = time.monotonic() - start
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == verdict and words in result["error"], result["error"]
    assert r.returncode == code and elapsed < 20, (r.returncode, elapsed)


def test_report_replaces_links_planted_in_the_site_and_skips_bad_results(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
    bad = out.parent / "org--broken"
    bad.mkdir()
    (bad / "result.json").write_text("[1, 2")  # malformed
    (out.parent / "history.sqlite").write_bytes(b"not a database at all" * 100)  # corrupt
    site, victim, elsewhere = tmp_path / "site", tmp_path / "victim.html", tmp_path / "elsewhere"
    victim.write_text("theirs")
    elsewhere.mkdir()
    site.mkdir()
    (site / "index.html").symlink_to(victim)
    (site / "models").symlink_to(elsewhere, target_is_directory=True)
    r = run("report", str(out.parent), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "theirs" and list(elsewhere.iterdir()) == []
    assert not (site / "index.html").is_symlink() and not (site / "models").is_symlink()
    index = (site / "index.html").read_text()
    assert "skipped org--broken/result.json" in index and "history history.sqlite not read" in index
    assert "warning: skipped org--broken/result.json" in r.stderr and "<td class='verdict'>pass</td>" in index


# -- one harness, a comparison or a clear non-green, baselines reviewed (issue 24) -------------------

MT_ENTRY = ENTRY.replace('dataset = "gsm8k"', 'dataset = "mt-bench"')


def mt_rows(path: Path, n=30) -> Path:
    path.write_text("".join(json.dumps({"turns": [f"Write about {i}."], "category": "writing"}) + "\n"
                            for i in range(n)))
    return path


@pytest.fixture
def mt_setup(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(MT_ENTRY)
    return reg, mt_rows(tmp_path / "mt.jsonl"), tmp_path / "out"


@pytest.mark.parametrize("rates, code, verdict", [((0.8, 0.6, 0.4), 0, "pass"), ((0.3, 0.1, 0.05), 1, "regressed")])
def test_verify_entry_with_no_harness_flag_reproduces_its_primary_baseline(mt_setup, rates, code, verdict):
    reg, rows, out = mt_setup
    with OpenAIServer(rates=rates) as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out))
        bodies = [b for p, b in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == code, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == verdict and result["harness"]["dataset"] == "mt-bench"  # not gsm8k, not the file's name
    assert result["harness"]["num_prompts"] == 20 and len(bodies) == 20  # the baseline's 20, not verify's 80
    assert result["harness_from"] == {"baseline_index": 0, "overridden": [], "given": []}
    assert "harness: baseline 0's" in r.stdout


def test_a_flag_given_overrides_the_baseline_and_is_recorded(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--num-prompts", "10")
    result = json.loads((out / "result.json").read_text())
    assert result["harness"]["num_prompts"] == 10 and result["harness_from"]["overridden"] == ["num_prompts"]
    assert "overridden here: num_prompts" in r.stdout
    assert result["judgement"]["differences"] == ["num_prompts: here 10, baseline 20"]


def test_a_run_that_matches_no_baseline_exits_4_naming_what_it_could_be_compared_with(mt_setup):
    reg, _, out = mt_setup
    rows = write_rows(out.parent / "gsm8k.jsonl")
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset", "gsm8k", "--dataset-file", str(rows),
                "--registry", str(reg), "--out", str(out))
    assert r.returncode == 4, r.stdout + r.stderr
    assert "unmatched" in r.stdout and "baseline 0: mt-bench, k=3" in r.stdout


def test_a_draft_with_no_entry_is_measured_and_exits_0_saying_so(tmp_path):
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer() as server:
        r = run("verify", "org/unknown", "--server", server.url, "--dataset-file", str(rows), "--num-prompts", "4",
                "--registry", str(tmp_path), env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 0, r.stderr
    assert "no-baseline" in r.stdout and "not in the catalog" in r.stdout


def test_update_baseline_of_a_regressed_run_changes_no_file_and_exits_non_zero(mt_setup):
    reg, rows, out = mt_setup
    before = (reg / "org" / "draft.toml").read_bytes()
    with OpenAIServer(rates=(0.3, 0.1, 0.05)) as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--update-baseline")
    assert r.returncode == 1 and "nothing written: the run's verdict is regressed" in r.stderr
    assert (reg / "org" / "draft.toml").read_bytes() == before
    # and a passing run still needs a catalog directory named: the shipped one is never written
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--out", str(out),
                "--update-baseline", env={"SPECREG_REGISTRY": ""})
    assert r.returncode != 0


def test_update_baseline_of_a_passing_run_prints_the_change_and_never_shadows_the_published_one(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--update-baseline", "--gpu", "1xH100")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "+kind = \"measured\"" in r.stdout and "review the change" in r.stdout
    entry = entries.lookup("org/draft", reg)
    assert [b.kind for b in entry.baselines] == ["published", "measured"]
    # the same harness regressing now: the published baseline still judges it, the measured one beside it
    with OpenAIServer(rates=(0.3, 0.1, 0.05)) as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--gpu", "1xH100")
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 1 and result["verdict"] == "regressed" and result["judgement"]["baseline_index"] == 0


def test_strict_harness_refuses_before_measuring(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--strict-harness", "--num-prompts", "10")
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    assert r.returncode == 2 and sent == []
    assert "num_prompts: here 10, baseline 20" in json.loads((out / "result.json").read_text())["error"]
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--strict-harness")
    assert r.returncode == 0, r.stdout + r.stderr  # the baseline's own harness passes strict


def test_a_server_serving_another_model_is_invalid(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer(model="someone/else") as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out))
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 2 and result["verdict"] == "invalid" and sent == []
    assert "serves someone/else, not org/verifier" in result["error"]


def test_ctrl_c_writes_the_chunks_measured_so_far_marked_interrupted(mt_setup):
    import signal
    import time

    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        server.delay = 0.2
        proc = subprocess.Popen([sys.executable, "-m", "specreg", "verify", "org/draft", "--server", server.url,
                                 "--dataset-file", str(rows), "--registry", str(reg), "--out", str(out)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=as_from_a_terminal)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len([p for p, _ in server.requests if p.startswith("/v1/chat")]) < 6:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and stdout.startswith("org/draft: interrupted; AL 2.800")
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "interrupted" and 1 <= len(result["chunk_counters"]) < 10
    assert result["statistics"]["acceptance_length"] == 2.8
    kept = len(result["chunk_counters"])

    # --resume continues: the kept chunks are not sent again, the run completes and is judged
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--resume")
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    assert r.returncode == 0, r.stdout + r.stderr
    resumed = json.loads((out / "result.json").read_text())
    assert resumed["verdict"] == "pass" and len(resumed["chunk_counters"]) == 10
    assert len(sent) == 20 - 2 * kept  # 20 prompts in 10 chunks of 2
    assert any(n.startswith(f"resumed: {kept} chunk(s)") for n in resumed["notes"])
    assert resumed["statistics"]["counters"]["drafts"] == 20 * 100


def test_catalog_show_harness_prints_the_command_verify_runs(mt_setup):
    reg, _, _ = mt_setup
    r = run("catalog", "show", "org/draft", "--harness", "--registry", str(reg))
    assert r.returncode == 0
    assert r.stdout.strip() == ("specreg verify org/draft --dataset mt-bench --num-prompts=20 --temperature=0.0 "
                                "--k=3")


#: MT_ENTRY with ENTRY's gsm8k baseline added as baseline 1
TWO_BASELINES = MT_ENTRY + "\n[[baselines]]" + ENTRY.split("\n[[baselines]]", 1)[1]


def two_baseline_report(tmp_path):
    """(registry, site): an MT-Bench pass, an MT-Bench regression, then two gsm8k passes of org/draft
    (TWO_BASELINES), each against the loopback server, and the report over them."""
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(TWO_BASELINES)
    (reg / "org" / "other.toml").write_text(ENTRY.replace("org/draft", "org/other"))
    mt, gsm = mt_rows(tmp_path / "mt.jsonl"), write_rows(tmp_path / "gsm8k.jsonl")
    out = tmp_path / "results" / "org--draft"
    for rates, baseline, rows in (((0.8, 0.6, 0.4), "0", mt), ((0.3, 0.1, 0.05), "0", mt),
                                  ((0.8, 0.6, 0.4), "1", gsm), ((0.8, 0.6, 0.4), "1", gsm)):
        with OpenAIServer(rates=rates) as server:
            r = run("verify", "org/draft", "--server", server.url, "--baseline", baseline, "--dataset-file", str(rows),
                    "--registry", str(reg), "--out", str(out))
        assert r.returncode in (0, 1), r.stdout + r.stderr
    assert json.loads((out / "result.json").read_text())["verdict"] == "pass"  # the newest run alone says pass
    site = tmp_path / "site"
    r = run("report", str(tmp_path / "results"), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    return reg, site


def test_a_regression_on_one_baseline_is_not_hidden_by_later_runs_of_another(tmp_path):
    """After an MT-Bench regression and two later gsm8k runs of the same entry, the index still shows
    the entry as regressed (the worst of its baselines' latest verdicts), first, with the counts, and
    its page shows the two baselines' trends apart, saying which check failed."""
    reg, site = two_baseline_report(tmp_path)
    index = (site / "index.html").read_text()
    rows = re.findall(r"<tr class='([\w-]+)' data-model='([^']+)'>", index)
    assert rows == [("regressed", "org/draft"), ("none", "org/other")]  # regressions first
    assert "regressed 1</span>" in index and "none 1</span>" in index
    assert "vLLM of the newest runs: 0.33.0" in index
    page = (site / "models" / "org--draft.html").read_text()
    sections = re.findall(r"<section class='series' data-series='([^']+)'><h2>[^<]*<span class='([\w-]+)'>", page)
    assert sections == [("mt-bench, baseline 0", "regressed"), ("gsm8k, baseline 1", "pass")]
    assert "failed: acceptance length 1.450 (band 2.660-2.940)" in page
    assert page.count("<tr class='regressed'>") == 1 and page.count("<tr class='pass'>") == 3
    for image in ("org--draft-trend.png", "org--draft-trend-2.png"):
        assert (site / "models" / image).read_bytes()[:4] == b"\x89PNG" and image in page


def test_the_change_since_the_previous_night_is_the_verdict_of_the_earlier_runs():
    from specreg.verify.report import _verdict_before

    def run_(day, verdict, index=0):
        return {"model": "m", "started": f"{day}T01:00:00+00:00", "verdict": verdict,
                "harness": {"dataset": "gsm8k"}, "judgement": {"baseline_index": index}}

    runs = [run_("2026-11-29", "pass"), run_("2026-11-30", "pass"), run_("2026-11-30", "pass", 1),
            run_("2026-12-01", "regressed")]
    assert _verdict_before(runs, "2026-12-01") == "pass"
    assert _verdict_before(runs, "2026-11-29") is None
    assert _verdict_before(runs + [run_("2026-11-30", "regressed", 1)], "2026-12-01") == "regressed"


# -- what users measure beyond AL -----------------------------------------------------------------

def test_throughput_and_the_speedup_against_a_server_without_the_draft(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server, OpenAIServer(speculative=False) as plain:
        server.delay = plain.delay = 0.02  # the same time per request: the speedup is the tokens per request
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--out", str(out), "--compare-baseline-engine", plain.url)
        plain_requests = [p for p, _ in plain.requests if p.startswith("/v1/chat")]
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    s, t = result["statistics"], result["throughput"]
    assert s["output_tokens"] == 20 * (100 + 180) and s["output_tokens_per_s"] > 0 and s["ms_per_output_token"] > 0
    assert len(plain_requests) == 20 and t["output_tokens_per_s_without_draft"] > 0
    # 280 tokens per request with the draft, 100 without, at the same pace: 2.8x, as AL says
    assert t["speedup"] == pytest.approx(2.8, rel=0.25)
    assert "engine, GPU, batch" in t["note"]
    summary = (out / "summary.md").read_text()
    assert "tokens/s" in summary and "speedup 2." in summary and "None" not in summary


def test_a_k_sweep_needs_the_in_process_engine(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg),
                "--k", "1,3,5")
    assert r.returncode == 2 and "a server's draft length is fixed" in r.stderr
    r = run("verify", "org/draft", "--k", "3,3")
    assert r.returncode == 2 and "given twice" in r.stderr
