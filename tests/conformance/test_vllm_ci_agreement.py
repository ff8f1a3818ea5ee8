"""The catalog's CI-sourced baselines against vLLM's CI files themselves (pytest -m conformance).

The files are read from the sdist of the release the catalog cites (vLLM 0.33.0 on PyPI, commit
4ba787ec9) with `ast`: every number, tolerance, gate direction, listed position and harness field
that CI's test uses must be the catalog's, field by field."""

from __future__ import annotations

import re

import pytest

from specreg import facts
from specreg.entries import catalog

pytestmark = pytest.mark.conformance

RELEASE = facts.wheel(facts.tested_by("ci_agreement")[-1])
CORRECTNESS = "tests/v1/spec_decode/test_speculators_correctness.py"
ACCEPTANCE = "tests/v1/spec_decode/test_acceptance_length.py"


def baseline(entry_id: str, source_file: str):
    (b,) = [b for b in catalog().get(entry_id).baselines if b.source.endswith(source_file)]
    return b


def test_the_catalog_cites_the_release_commit():
    from conformance import vllm_ci

    sha = vllm_ci.commit(RELEASE)
    cited = {
        b.source_commit for e in catalog().values() for b in e.baselines if b.source.endswith((CORRECTNESS, ACCEPTANCE))
    }
    assert cited == {sha}
    assert all(
        f"v{RELEASE} " in b.source
        for e in catalog().values()
        for b in e.baselines
        if b.source.endswith((CORRECTNESS, ACCEPTANCE))
    )


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

    ids = set(catalog())
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
        got = {
            "al": al.value,
            "al_direction": al.direction,
            "al_rtol": al.tolerance,
            "positions": tuple(pp.values),
            "pos_direction": pp.direction,
            "pos_rtol": pp.tolerance,
            "accuracy": (b.metrics.accuracy.value, b.metrics.accuracy.direction, b.metrics.accuracy.tolerance),
            "max_model_len": entry.serving.max_model_len,
            "batch": b.harness.batch_size,
            "dataset": b.harness.dataset,
            "max_tokens": b.harness.max_tokens,
        }
        want = {
            "al": c["expected_acceptance_len"],
            "al_direction": "higher",
            "al_rtol": c["acceptance_len_rtol"],
            "positions": tuple(c["expected_per_pos_acceptance_rates"]),
            "pos_direction": "higher",
            "pos_rtol": c["per_pos_rtol"],
            "accuracy": (c["expected_gsm8k_accuracy"], "higher", c["accuracy_rtol"]),
            "max_model_len": llm["max_model_len"],
            "batch": llm["max_num_seqs"],
            "dataset": "gsm8k",
            "max_tokens": 256,
        }
        assert got == want, c["model_path"]


def test_acceptance_length_entries_match_ci_field_by_field():
    from conformance import vllm_ci

    text = vllm_ci.read(RELEASE, ACCEPTANCE)
    defaults = vllm_ci.constants(text)
    for c in vllm_ci.calls(text, "Eagle3ModelConfig"):
        entry = catalog().get(c["drafter"])
        b = baseline(c["drafter"], ACCEPTANCE)
        al, pp = b.metrics.acceptance_length, b.metrics.per_position
        got = {
            "al": al.value,
            "al_direction": al.direction,
            "al_rtol": al.tolerance,
            "positions": list(pp.values),
            "pos_direction": pp.direction,
            "pos_rtol": pp.tolerance,
            "verifier": entry.verifier.id,
            "k": b.harness.k,
            "num_prompts": b.harness.num_prompts,
            "max_tokens": b.harness.max_tokens,
            "dataset": b.harness.dataset,
            "temperature": b.harness.temperature,
        }
        want = {
            "al": c["expected_acceptance_length"],
            "al_direction": "two-sided",
            "al_rtol": defaults["DEFAULT_RTOL"],
            "positions": list(c["expected_acceptance_lengths_per_pos"]),
            "pos_direction": "higher",
            "pos_rtol": c.get("rtol", defaults["DEFAULT_RTOL"]),
            "verifier": c["verifier"],
            "k": defaults["DEFAULT_NUM_SPEC_TOKENS"],
            "num_prompts": defaults["DEFAULT_NUM_PROMPTS"],
            "max_tokens": defaults["DEFAULT_OUTPUT_LEN"],
            "dataset": "mt-bench",
            "temperature": 0.0,
        }
        assert got == want, c["drafter"]


# -- what verify would run, against what CI's test builds ------------------------------------------

GSM8K_EVAL = "tests/evals/gsm8k/gsm8k_eval.py"
DSPARK = "tests/v1/e2e/spec_decode/acceptance_rates/dspark/test_dspark.py"
DFLASH = "tests/v1/e2e/spec_decode/acceptance_rates/dflash/test_dflash.py"
REFERENCE_UTILS = "tests/v1/e2e/spec_decode/acceptance_rates/utils.py"
#: what specreg sets that CI's tests leave at vLLM's default: a sampling seed (CI sets none)
SPECREG_ADDS = {"seed"}
#: what CI sets that specreg leaves to the plan or the machine: the draft (specreg's own plan passes it),
#: remote code, memory fraction, CUDA graphs, block size, compilation, and a GPU-only attention backend
CI_RESOURCE_KEYS = {
    "model",
    "trust_remote_code",
    "gpu_memory_utilization",
    "enforce_eager",
    "block_size",
    "enable_chunked_prefill",
    "compilation_config",
    "language_model_only",
    "speculative_config",
    "disable_log_stats",
}


@pytest.fixture(scope="module")
def gsm8k_rows(tmp_path_factory):
    """GSM8K-shaped rows (question, answer with '#### n') as CI's train.jsonl and test.jsonl hold them."""
    import json

    d = tmp_path_factory.mktemp("gsm8k")
    train = [
        {"question": f"Train question {i}: what is {i} + {i}?", "answer": f"{i} + {i} = {2 * i}\n#### {2 * i}"}
        for i in range(10)
    ]
    test = [
        {"question": f"Test question {i}: what is {i} * 3?", "answer": f"{i} * 3 = {3 * i}\n#### {3 * i}"}
        for i in range(1400)
    ]
    for name, rows in (("train", train), ("test", test)):
        (d / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return d, train, test


def ci_gsm8k_prompts(train, test, **kwargs):
    """CI's own `_build_gsm8k_prompts`, executed from the release's file on the given rows."""
    import ast
    import re

    from conformance import vllm_ci

    text = vllm_ci.read(RELEASE, GSM8K_EVAL)
    ns = vllm_ci.functions(
        text,
        "_build_gsm8k_prompts",
        "get_answer_value",
        namespace={"re": re, "ast": ast, "INVALID": -9999999, "load_gsm8k_data": lambda: (train, test)},
    )
    return ns["_build_gsm8k_prompts"](**kwargs)[0]


def ci_offline_sampling():
    """evaluate_gsm8k_offline's SamplingParams(...) keywords, its parameters resolved to their defaults."""
    from conformance import vllm_ci

    text = vllm_ci.read(RELEASE, GSM8K_EVAL)
    defaults = vllm_ci.function_defaults(text, "evaluate_gsm8k_offline")
    (call,) = [
        c for c in vllm_ci.calls(text, "SamplingParams") if "stop" in c and c.get("temperature") == "temperature"
    ]
    return {k: defaults.get(v, v) if isinstance(v, str) else v for k, v in call.items()}, defaults


def verify_plan(entry_id, rows_dir, dataset=None):
    """What `specreg verify ENTRY` with the nightly's harness flags would run: vllm.LLM kwargs (less the
    draft's own plan), SamplingParams kwargs, the prompts, and the run's options."""
    from specreg.cli.main import _parser
    from specreg.cli.verify import verify_options
    from specreg.verify.engines import engine_kwargs, sampling_kwargs
    from specreg.verify.nightly import runnable_baseline
    from specreg.verify.run import engine_options, run_prompts

    entry = catalog().get(entry_id)
    h = runnable_baseline(entry).harness
    # no harness flag: `verify ENTRY` builds the baseline's harness itself (as the nightly's runs do);
    # each split's rows from its own file: shots from the split the harness names (CI's are train.jsonl's)
    args = _parser().parse_args(
        [
            "verify",
            entry_id,
            "--dataset-file",
            str(rows_dir / f"{h.split}.jsonl"),
            "--shots-file",
            str(rows_dir / f"{h.prompt.shots_split}.jsonl"),
        ]
    )
    opts = verify_options(args, entry)
    llm = engine_kwargs({}, **engine_options(opts, entry))
    sampling = sampling_kwargs(temperature=opts.temperature, max_tokens=opts.max_tokens, seed=opts.seed, stop=opts.stop)
    return llm, sampling, run_prompts(opts), opts


def test_speculators_correctness_runs_ci_prompts_sampling_and_engine(gsm8k_rows):
    """For every entry test_speculators_correctness gates: the LLM(...) kwargs, the SamplingParams and
    every prompt verify would use equal CI's, field by field (CI's prompt builder executed on the same rows)."""
    from conformance import vllm_ci

    d, train, test = gsm8k_rows
    text = vllm_ci.read(RELEASE, CORRECTNESS)
    (ci_llm,) = vllm_ci.calls(text, "LLM")
    ci_sampling, defaults = ci_offline_sampling()
    ci_prompts = ci_gsm8k_prompts(
        train,
        test,
        num_questions=defaults["num_questions"],
        num_shots=defaults["num_shots"],
        gen_prefix=defaults["gen_prefix"],
    )
    assert defaults["use_chat_completions"] is False and len(ci_prompts) == 1319
    for c in _correctness_configs():
        llm, sampling, prompts, opts = verify_plan(c["model_path"], d)
        assert {k: v for k, v in sampling.items() if k not in SPECREG_ADDS} == ci_sampling, c["model_path"]
        assert {k: llm[k] for k in ci_llm if k in llm} == {k: ci_llm[k] for k in ci_llm if k in llm}, c["model_path"]
        assert set(ci_llm) - set(llm) <= CI_RESOURCE_KEYS and set(llm) - set(ci_llm) <= SPECREG_ADDS
        assert llm["disable_log_stats"] is ci_llm["disable_log_stats"] is False
        assert list(prompts.items) == ci_prompts, c["model_path"]
        assert (opts.mode, opts.statistic) == ("batched", "pooled")  # one llm.generate, get_metrics() once


def test_dspark_entries_match_ci_numbers_gates_engine_and_prompts(gsm8k_rows):
    from conformance import vllm_ci

    d, train, test = gsm8k_rows
    text = vllm_ci.read(RELEASE, DSPARK)
    tolerance = 1 - vllm_ci.constants(text)["REGRESSION_TOLERANCE"]
    (spec,) = vllm_ci.keyword_dicts(text, "test_dspark_correctness_and_acceptance_rate", "speculative_config")
    (runner,) = vllm_ci.keyword_dicts(text, "test_dspark_correctness_and_acceptance_rate", "runner_config")
    (evaluate,) = vllm_ci.calls(text, "evaluate_gsm8k_offline")
    ci_sampling, _defaults = ci_offline_sampling()
    ids = set(catalog())
    configs = [c for c in vllm_ci.instances(text, "DSparkCorrectnessConfig").values() if c["draft_model"] in ids]
    assert len(configs) == 2
    for c in configs:
        entry = catalog().get(c["draft_model"])
        (b,) = entry.baselines
        assert b.source.endswith(DSPARK) and b.source_commit == vllm_ci.commit(RELEASE)[:9]
        m = b.metrics
        for metric, ref in (
            (m.acceptance_length, c["reference_acceptance_len"]),
            (m.draft_acceptance_rate, c["reference_acceptance_rate"]),
            (m.accuracy, c["reference_accuracy"]),
        ):
            assert (metric.value, metric.direction, metric.tolerance) == (ref, "higher", pytest.approx(tolerance))
        assert entry.verifier.id == c["model"]
        llm, sampling, prompts, opts = verify_plan(c["draft_model"], d)
        assert eval(spec["draft_sample_method"]) == opts.draft_sample_method == "probabilistic"
        assert eval(runner["enable_prefix_caching"]) is llm["enable_prefix_caching"] is False
        assert llm["max_model_len"] == c["max_model_len"] and llm.get("max_num_seqs") == c["max_num_seqs"]
        assert b.harness.k == c["num_speculative_tokens"] and opts.k == c["num_speculative_tokens"]
        assert evaluate["temperature"] == sampling["temperature"] == 1.0
        assert sampling["max_tokens"] == c["max_tokens"] and sampling["stop"] == ci_sampling["stop"]
        ci_prompts = ci_gsm8k_prompts(train, test, num_questions=c["num_questions"], num_shots=5)
        if c["use_chat_completions"]:  # CI: [{"role": "user", "content": prompt}] per question
            ci_prompts = [[{"role": "user", "content": p}] for p in ci_prompts]
        assert opts.chat is c["use_chat_completions"] and list(prompts.items) == ci_prompts
        assert opts.thinking is None and c["chat_template_kwargs"] is None


def test_dflash_reference_entries_match_ci_gate_and_harness():
    """z-lab's DFlash: the paper's numbers as test_dflash_reference_acceptance_lengths gates them
    (mean per-prompt AL >= 0.95 x expected, one generate per prompt, at most 200 prompts)."""
    import ast

    from conformance import vllm_ci

    text, utils = vllm_ci.read(RELEASE, DFLASH), vllm_ci.read(RELEASE, REFERENCE_UTILS)
    (call,) = [
        n
        for n in ast.walk(ast.parse(text))
        if isinstance(n, ast.Call) and getattr(n.func, "id", None) == "run_acceptance_length_eval"
    ]
    kw = {k.arg: k.value for k in call.keywords}
    expected = eval(compile(ast.Expression(kw["expected_acceptance_lengths"]), DFLASH, "eval"), {"__builtins__": {}})
    spec = ast.literal_eval(
        ast.unparse(kw["spec_config"])
        .replace("QWEN3_DFLASH.model", "'m'")
        .replace("QWEN3_DFLASH.draft_model", "'d'")
        .replace("QWEN3_DFLASH.num_speculative_tokens", "16")
    )
    qwen3 = vllm_ci.instances(text, "DFlashCorrectnessConfig")["QWEN3_DFLASH"]
    assert qwen3["num_speculative_tokens"] == 16
    thinking = ast.literal_eval(kw["chat_template_kwargs"])["enable_thinking"]
    factor = float(re.search(r"expected_len \* ([0-9.]+)", utils).group(1))
    max_prompts = int(re.search(r"max_prompts_per_dataset = (\d+)", utils).group(1))
    max_tokens = int(re.search(r"SamplingParams\(temperature=0, max_tokens=(\d+)\)", utils).group(1))
    templates = {"gsm8k": None, "humaneval": None}
    for node in ast.walk(ast.parse(utils)):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Compare):
            name = node.test.comparators[0].value
            fmt = [n.value.value for n in node.body if isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant)]
            if name in templates:
                templates[name] = fmt[0]
    entry = catalog().get(qwen3["draft_model"])
    by_dataset = {"mt-bench-h4" if k == "mt-bench" else k: v for k, v in expected.items()}
    refs = [b for b in entry.baselines if b.harness.mode == "prompt-at-a-time"]
    assert {b.harness.dataset for b in refs} == set(by_dataset)
    for b in refs:
        al, h = b.metrics.acceptance_length, b.harness
        assert al.direction == "higher" and al.value * (1 - al.tolerance) == pytest.approx(
            by_dataset[h.dataset] * factor
        )
        assert (h.statistic, h.temperature, h.max_tokens, h.k) == ("mean-per-prompt", 0.0, max_tokens, 16)
        assert h.num_prompts <= max_prompts and (h.max_model_len, h.batch_size) == (
            spec["max_model_len"],
            spec["max_num_seqs"],
        )
        assert h.prompt.chat_template is True and h.prompt.thinking is thinking
        assert h.prompt.template == templates.get(h.dataset)
        assert b.source_commit == vllm_ci.commit(RELEASE)[:9] and b.source.endswith(DFLASH + " gates it")
