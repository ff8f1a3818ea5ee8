"""`specreg verify DRAFT --against ENTRY[:N]`: a draft outside the catalog judged with another entry's
baseline (its harness and its gate), saying so; and a rows file of another dataset answered with the
baselines that match it (`--baseline N`), not `--dataset`."""

import json

import pytest

from openai_server import OpenAIServer
from verify_helpers import ENTRY, REPO_ROOT, TWO_BASELINES, mt_rows, run, write_rows


def catalog(tmp_path, text=TWO_BASELINES):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(text)
    return reg


def against(server, reg, rows, out, *extra):
    return run(
        "verify",
        "me/my-draft",
        "--against",
        "org/draft:1",
        "--server",
        server.url,
        "--dataset-file",
        str(rows),
        "--registry",
        str(reg),
        "--out",
        str(out),
        *extra,
    )


def test_a_draft_outside_the_catalog_is_judged_by_the_named_baselines_harness_and_gate(tmp_path):
    reg, rows, out = catalog(tmp_path), write_rows(tmp_path / "gsm8k.jsonl"), tmp_path / "out"
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        r = against(server, reg, rows, out, "--no-early-stop")
        sent = [b for p, b in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    # baseline 1 (gsm8k, 20 prompts, AL 2.8 two-sided 5%): its harness, not verify's default of 80 prompts
    assert result["model"] == "me/my-draft" and result["verdict"] == "pass" and len(sent) == 20
    assert result["harness_from"]["baseline_index"] == 1 and result["harness"]["dataset"] == "gsm8k"
    assert [c["bounds"] for c in result["judgement"]["checks"] if c["metric"] == "acceptance_length"] == [
        pytest.approx([2.66, 2.94])
    ]
    said = "judged against baseline 1 of org/draft: another draft's baseline"
    assert result["against"]["entry"] == "org/draft" and result["against"]["text"].startswith(said)
    assert said in r.stdout and said in (out / "summary.md").read_text()


def test_a_draft_below_the_named_baseline_is_regressed_with_exit_1(tmp_path):
    reg, rows, out = catalog(tmp_path), write_rows(tmp_path / "gsm8k.jsonl"), tmp_path / "out"
    with OpenAIServer(rates=(0.3, 0.1, 0.0)) as server:
        r = against(server, reg, rows, out)
    assert r.returncode == 1, r.stdout + r.stderr
    assert json.loads((out / "result.json").read_text())["verdict"] == "regressed"


def test_the_report_says_the_baseline_is_another_drafts(tmp_path):
    reg, rows, out = catalog(tmp_path), write_rows(tmp_path / "gsm8k.jsonl"), tmp_path / "results" / "mine"
    with OpenAIServer() as server:
        assert against(server, reg, rows, out).returncode == 0
    site = tmp_path / "site"
    r = run("report", str(tmp_path / "results"), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stdout + r.stderr
    page = (site / "models" / "me--my-draft.html").read_text()
    assert "<p class='against'>judged against baseline 1 of org/draft: another draft&#39;s baseline" in page


def test_update_baseline_never_writes_a_run_of_another_draft_into_the_entry(tmp_path):
    reg, rows, out = catalog(tmp_path), write_rows(tmp_path / "gsm8k.jsonl"), tmp_path / "out"
    before = (reg / "org" / "draft.toml").read_text()
    with OpenAIServer() as server:
        r = against(server, reg, rows, out, "--update-baseline")
    assert r.returncode == 2 and "the baseline is org/draft's, another draft's: nothing written" in r.stderr
    assert (reg / "org" / "draft.toml").read_text() == before


def test_an_unknown_entry_to_judge_against_is_one_line_naming_the_closest(tmp_path):
    reg = catalog(tmp_path)
    r = run("verify", "me/my-draft", "--against", "org/draf", "--registry", str(reg))
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip().endswith(
        "--against org/draf: org/draf is not in the catalog (did you mean org/draft?); `specreg catalog list` "
        "lists the entries"
    )


def test_rows_of_another_dataset_name_the_baseline_that_matches_them_not_dataset(tmp_path):
    """The entry's primary baseline is MT-Bench; gsm8k rows match its baseline 1."""
    reg, rows = catalog(tmp_path), write_rows(tmp_path / "gsm8k.jsonl")
    for args in (("org/draft",), ("me/my-draft", "--against", "org/draft")):
        with OpenAIServer() as server:
            r = run("verify", *args, "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg))
            sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
        assert r.returncode == 2 and sent == [], r.stdout + r.stderr
        assert "these are not mt-bench rows; it holds the rows of baseline 1: gsm8k, k=3" in r.stderr
        assert "run it with --baseline 1" in r.stderr and "--dataset" not in r.stderr


def test_rows_matching_no_baseline_still_say_which_dataset_to_name(tmp_path):
    reg, rows = catalog(tmp_path, ENTRY), mt_rows(tmp_path / "mt.jsonl")
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg))
    assert r.returncode == 2 and "these are not gsm8k rows; give the file with the dataset it holds" in r.stderr


def test_a_draft_for_another_verifier_is_measured_with_a_note_saying_so(tmp_path):
    reg, rows, out = catalog(tmp_path, ENTRY), write_rows(tmp_path / "gsm8k.jsonl"), tmp_path / "out"
    draft = str(REPO_ROOT / "examples" / "qwen3-8b-dflash")  # its config names Qwen/Qwen3-8B
    with OpenAIServer(model="Qwen/Qwen3-8B") as server:
        r = run(
            "verify", draft, "--against", "org/draft", "--server", server.url, "--dataset-file", str(rows),
            "--registry", str(reg), "--out", str(out),
        )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["algorithm"] == "dflash" and result["verifier"] == "Qwen/Qwen3-8B"
    assert (
        "the draft's verifier is Qwen/Qwen3-8B, org/draft's is org/verifier: the baseline was measured on another "
        "verifier"
    ) in result["notes"]


def test_an_entry_with_no_baseline_verify_can_reproduce_is_refused_naming_why(tmp_path):
    reg = catalog(tmp_path, ENTRY.replace('dataset = "gsm8k"', 'dataset = "vllm-test-prompts"'))
    r = run("verify", "me/my-draft", "--against", "org/draft", "--registry", str(reg))
    assert r.returncode == 2 and "--against org/draft: no primary baseline on a dataset verify can load" in r.stderr
    assert "--dataset" not in r.stderr.split("(the baselines use")[0]


def test_against_does_not_go_with_all(tmp_path):
    r = run("verify", "--all", "--against", "org/draft", "--out", str(tmp_path / "o"))
    assert r.returncode == 2 and "--against judges one draft: it does not go with --all" in r.stderr
