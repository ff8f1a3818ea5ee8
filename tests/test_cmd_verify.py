"""`specreg verify`: `--server` end to end against the loopback vLLM-like server, every output file,
exit codes, harness flags, --update-baseline, --all, interruption and throughput."""

import json
import sqlite3
import subprocess
import sys
from xml.etree import ElementTree as ET

import pytest

from interrupt import as_from_a_terminal
from openai_server import OpenAIServer
from specreg import entries
from verify_helpers import (
    ENTRY,
    HEADLINE,
    REPO_ROOT,
    headline_server,
    invalid_catalog,
    mt_rows,
    run,
    verify_args,
    write_rows,
)


def test_server_run_produces_every_output_with_the_exact_acceptance_length(setup):
    reg, rows, out = setup
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        # every planned prompt (the fixed-count test): the loopback server's counters never vary, so the
        # sequential test would decide at its first look
        r = run(*verify_args(server, reg, rows, out, "--no-early-stop"))
        chat_requests = [b for p, b in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == 0, r.stderr
    result = json.loads((out / "result.json").read_text())
    assert (result["prompts_used"], result["prompts_planned"], result["sequential"]) == (20, 20, None)
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
    assert (
        summary.startswith("## org/draft: **pass**")
        and "| acceptance length | 2.800" in summary
        and "| position 1 | 0.800" in summary
    )
    assert "None" not in summary and "GPU unset" in summary
    suite = ET.fromstring((out / "junit.xml").read_bytes())
    assert suite.get("failures") == "0" and int(suite.get("tests")) == 4
    assert (out / "per_position.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with sqlite3.connect(out.parent / "history.sqlite") as db:
        assert db.execute("SELECT model, verdict, acceptance_length FROM runs").fetchall() == [
            ("org/draft", "pass", 2.8)
        ]


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
        r = run(
            *verify_args(
                server,
                reg,
                rows,
                out,
                "--raw",
                "--few-shot",
                "5",
                "--shots-split",
                "train",
                "--shots-file",
                str(train),
                "--num-prompts",
                "6",
                "--mode",
                "prompt-at-a-time",
                "--stop",
                "Question",
                "--stop",
                "Assistant:",
                "--stop",
                "<|separator|>",
                "--no-early-stop",  # every prompt, in the dataset's order
            )
        )
        assert r.returncode in (0, 1), r.stderr
        bodies = [b for p, b in server.requests if p == "/v1/completions"]
    assert len(bodies) == 6 and all(b["stop"] == ["Question", "Assistant:", "<|separator|>"] for b in bodies)
    assert bodies[0]["prompt"].startswith("Question: What is 0 + 0?\nAnswer: 0\n\n")
    assert bodies[0]["prompt"].endswith("Question: What is 0 + 0?\nAnswer:")  # test row 0, after 5 train rows
    result = json.loads((out / "result.json").read_text())
    h = result["harness"]
    assert (h["mode"], h["statistic"], h["stop"]) == (
        "prompt-at-a-time",
        "mean-per-prompt",
        ["Question", "Assistant:", "<|separator|>"],
    )
    assert h["prompt"] == {"chat_template": False, "few_shot": 5, "shots_split": "train"}
    assert result["statistics"]["chunks"] == 6 and result["statistics"]["statistic"] == "mean-per-prompt"


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
    assert error == (
        f"{server.url}/v1/chat/completions: HTTP 400 Bad Request: the server said 'The decoder prompt cannot be empty'"
    )
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
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset",
            "gsm8k",
            "--dataset-file",
            str(rows),
            "--num-prompts",
            "20",
            "--k",
            "3",
            "--registry",
            str(reg),
            "--json",
        )
    assert r.returncode == 5
    printed = json.loads(r.stdout)
    assert printed["verdict"] == "error" and printed["statistics"] is None
    assert printed["error"].endswith("HTTP 400 Bad Request: the server said 'The decoder prompt cannot be empty'")


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
    assert (b.harness.dataset, b.harness.num_prompts, b.harness.gpu, b.harness.vllm_version) == (
        "gsm8k",
        20,
        "1xH100",
        "0.33.0",
    )
    assert (reg / "org" / "draft.toml").read_text().startswith(ENTRY.split("\n[[baselines]]")[0])
    assert entries.check(reg).problems == ()


def test_all_through_the_cli_against_the_server(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    (reg / "org" / "chat.toml").write_text(ENTRY.replace("org/draft", "org/chat").replace('"gsm8k"', '"mt-bench"'))
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        plain = run(
            "verify",
            "--all",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--out",
            str(tmp_path / "n"),
            "--registry",
            str(reg),
        )
        r = run(
            "verify",
            "--all",
            "--server",
            server.url,
            "--dataset-file",
            f"gsm8k={rows}",
            "--out",
            str(tmp_path / "n"),
            "--registry",
            str(reg),
            "--shard",
            "1/1",
        )
    # one file is never fed to every entry whatever its dataset
    assert plain.returncode == 2 and "name the dataset of each --dataset-file" in plain.stderr
    assert r.returncode == 0, r.stderr + r.stdout
    assert json.loads((tmp_path / "n" / "org--draft" / "result.json").read_text())["verdict"] == "pass"
    chat = json.loads((tmp_path / "n" / "org--chat" / "result.json").read_text())
    assert chat["verdict"] == "not-runnable" and "its baseline's dataset is mt-bench" in chat["judgement"]["reason"]


def test_all_through_the_cli_with_an_invalid_entry_measures_the_rest_and_exits_1(tmp_path):
    reg = tmp_path / "registry"
    invalid_catalog(reg)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer(rates=(0.8, 0.6, 0.4)) as server:
        r = run(
            "verify",
            "--all",
            "--server",
            server.url,
            "--dataset-file",
            f"gsm8k={rows}",
            "--out",
            str(tmp_path / "n"),
            "--registry",
            str(reg),
        )
    assert r.returncode == 1, r.stderr + r.stdout
    assert r.stdout.strip().splitlines()[-1] == "4 entries: invalid 2, pass 2"
    for name in ("a", "b"):
        assert json.loads((tmp_path / "n" / f"org--{name}" / "result.json").read_text())["verdict"] == "pass"


def test_an_unservable_model_is_an_invalid_result_with_exit_2(tmp_path):
    draft = tmp_path / "xpress"
    draft.mkdir()
    (draft / "config.json").write_text((REPO_ROOT / "tests/data/speculators/xpress.json").read_text())
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    r = run("verify", str(draft), "--dataset-file", str(rows), "--out", str(tmp_path / "out"))
    assert r.returncode == 2
    result = json.loads((tmp_path / "out" / "result.json").read_text())
    assert result["verdict"] == "invalid" and "not servable" in result["error"]


@pytest.mark.parametrize(
    "hostile, verdict, words, code, timeout",
    [
        ({"metrics_flood": 64 * 1024 * 1024}, "invalid", "the answer passed 33554432 bytes", 2, "5"),
        # the smallest --timeout verify takes: the drip (a byte per 0.5 s) outlasts it, and the run waits it out
        ({"metrics_drip": 0.5}, "timeout", "--timeout", 5, "1"),
        ({"models_body": b'{"data": [{"name": 5}]}'}, "invalid", "the first model has no id", 2, "5"),
        ({"models_body": b"not json"}, "invalid", "not JSON", 2, "5"),
    ],
)
def test_a_hostile_server_is_a_recorded_result_within_the_timeout(setup, hostile, verdict, words, code, timeout):
    import time

    reg, rows, out = setup
    with OpenAIServer() as server:
        for name, value in hostile.items():
            setattr(server, name, value)
        start = time.monotonic()
        r = run(*verify_args(server, reg, rows, out, "--timeout", timeout))
        elapsed = time.monotonic() - start
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == verdict and words in result["error"], result["error"]
    assert r.returncode == code and elapsed < 20, (r.returncode, elapsed)


@pytest.mark.parametrize("rates, code, verdict", [((0.8, 0.6, 0.4), 0, "pass"), ((0.3, 0.1, 0.05), 1, "regressed")])
def test_verify_entry_with_no_harness_flag_reproduces_its_primary_baseline(mt_setup, rates, code, verdict):
    reg, rows, out = mt_setup
    with OpenAIServer(rates=rates) as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
        )
        bodies = [b for p, b in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == code, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == verdict and result["harness"]["dataset"] == "mt-bench"  # not gsm8k, not the file's name
    # the baseline's 20 planned, not verify's 80; the loopback server's counters never vary, so the verdict is
    # decided at the first look, after 3 chunks of 2 (updated for issue 46: it ran all 20)
    assert result["harness"]["num_prompts"] == result["prompts_planned"] == 20
    assert len(bodies) == result["prompts_used"] == 6 and result["sequential"]["stopped_early"]
    assert result["harness_from"] == {"baseline_index": 0, "overridden": [], "given": []}
    assert "harness: baseline 0's" in r.stdout


def test_a_flag_given_overrides_the_baseline_and_is_recorded(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--num-prompts",
            "10",
        )
    result = json.loads((out / "result.json").read_text())
    assert result["harness"]["num_prompts"] == 10 and result["harness_from"]["overridden"] == ["num_prompts"]
    assert "overridden here: num_prompts" in r.stdout
    assert result["judgement"]["differences"] == ["num_prompts: here 10, baseline 20"]


def test_a_run_that_matches_no_baseline_exits_4_naming_what_it_could_be_compared_with(mt_setup):
    reg, _, out = mt_setup
    rows = write_rows(out.parent / "gsm8k.jsonl")
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset",
            "gsm8k",
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
        )
    assert r.returncode == 4, r.stdout + r.stderr
    assert "unmatched" in r.stdout and "baseline 0: mt-bench, k=3" in r.stdout


def measure_without_an_entry(tmp_path, model, *registry):
    """`verify MODEL` against the loopback server, on four local rows."""
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer() as server:
        return run(
            "verify", model, "--server", server.url, "--dataset-file", str(rows), "--num-prompts", "4", *registry
        )  # fmt: skip


def test_a_draft_with_no_entry_is_measured_and_exits_0_saying_so(tmp_path):
    r = measure_without_an_entry(tmp_path, "org/unknown", "--registry", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert "no-baseline" in r.stdout and "not in the catalog" in r.stdout


def test_a_mistyped_catalog_id_is_measured_with_the_id_it_meant_named(tmp_path):
    r = measure_without_an_entry(tmp_path, "RedHatAI/Qwen3-8B-speculator.dflsh")
    assert r.returncode == 0, r.stderr
    assert (
        "# RedHatAI/Qwen3-8B-speculator.dflsh is not in the catalog (did you mean "
        "RedHatAI/Qwen3-8B-speculator.dflash?): no baseline to judge against\n"
    ) in r.stderr


def test_update_baseline_of_a_regressed_run_changes_no_file_and_exits_non_zero(mt_setup):
    reg, rows, out = mt_setup
    before = (reg / "org" / "draft.toml").read_bytes()
    with OpenAIServer(rates=(0.3, 0.1, 0.05)) as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--update-baseline",
        )
    assert r.returncode == 1 and "nothing written: the run's verdict is regressed" in r.stderr
    assert (reg / "org" / "draft.toml").read_bytes() == before
    # and a passing run still needs a catalog directory named: the shipped one is never written
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--out",
            str(out),
            "--update-baseline",
            env={"SPECREG_REGISTRY": ""},
        )
    assert r.returncode != 0


def test_update_baseline_of_a_passing_run_prints_the_change_and_never_shadows_the_published_one(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--update-baseline",
            "--gpu",
            "1xH100",
        )
    assert r.returncode == 0, r.stdout + r.stderr
    assert '+kind = "measured"' in r.stdout and "review the change" in r.stdout
    entry = entries.lookup("org/draft", reg)
    assert [b.kind for b in entry.baselines] == ["published", "measured"]
    # the same harness regressing now: the published baseline still judges it, the measured one beside it
    with OpenAIServer(rates=(0.3, 0.1, 0.05)) as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--gpu",
            "1xH100",
        )
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 1 and result["verdict"] == "regressed" and result["judgement"]["baseline_index"] == 0


def test_strict_harness_refuses_before_measuring(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--strict-harness",
            "--num-prompts",
            "10",
        )
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    assert r.returncode == 2 and sent == []
    assert "num_prompts: here 10, baseline 20" in json.loads((out / "result.json").read_text())["error"]
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--strict-harness",
        )
    assert r.returncode == 0, r.stdout + r.stderr  # the baseline's own harness passes strict


def test_a_server_serving_another_model_is_invalid(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer(model="someone/else") as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
        )
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
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "specreg",
                "verify",
                "org/draft",
                "--server",
                server.url,
                "--dataset-file",
                str(rows),
                "--registry",
                str(reg),
                "--out",
                str(out),
                "--no-early-stop",  # interrupted mid-run: the sequential test would end it at 6 prompts
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            preexec_fn=as_from_a_terminal,
        )
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
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--resume",
            "--no-early-stop",
        )
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    assert r.returncode == 0, r.stdout + r.stderr
    resumed = json.loads((out / "result.json").read_text())
    assert resumed["verdict"] == "pass" and len(resumed["chunk_counters"]) == 10
    assert len(sent) == 20 - 2 * kept  # 20 prompts in 10 chunks of 2
    assert any(n.startswith(f"resumed: {kept} chunk(s)") for n in resumed["notes"])
    assert resumed["statistics"]["counters"]["drafts"] == 20 * 100


def test_throughput_and_the_speedup_against_a_server_without_the_draft(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server, OpenAIServer(speculative=False) as plain:
        # the same time per request: the speedup is the tokens per request. The pause must dwarf the rest
        # of a request's time, which a loaded machine stretches (at 0.02 s the speedup read 3.6 once)
        server.delay = plain.delay = 0.1
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--out",
            str(out),
            "--compare-baseline-engine",
            plain.url,
        )
        plain_requests = [p for p, _ in plain.requests if p.startswith("/v1/chat")]
    assert r.returncode == 0, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    s, t = result["statistics"], result["throughput"]
    # the verdict is decided after 6 of the 20 prompts (the loopback server's counters never vary), and the
    # server without the draft is sent those 6, no more (updated for issue 46: 20 each)
    assert result["prompts_used"] == 6
    assert s["output_tokens"] == 6 * (100 + 180) and s["output_tokens_per_s"] > 0 and s["ms_per_output_token"] > 0
    assert len(plain_requests) == 6 and t["output_tokens_per_s_without_draft"] > 0
    # 280 tokens per request with the draft, 100 without, at the same pace: 2.8x, as AL says
    assert t["speedup"] == pytest.approx(2.8, rel=0.25)
    assert "engine, GPU, batch" in t["note"]
    summary = (out / "summary.md").read_text()
    assert "tokens/s" in summary and "speedup 2." in summary and "None" not in summary


def test_a_k_sweep_needs_the_in_process_engine(mt_setup):
    reg, rows, out = mt_setup
    with OpenAIServer() as server:
        r = run(
            "verify",
            "org/draft",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--registry",
            str(reg),
            "--k",
            "1,3,5",
        )
    assert r.returncode == 2 and "a server's draft length is fixed" in r.stderr
    r = run("verify", "org/draft", "--k", "3,3")
    assert r.returncode == 2 and "given twice" in r.stderr


# -- the headline entry: a draft-acceptance-rate baseline only -------------------------------------------


def verify_headline(server, rows, out, *extra):
    return run("verify", HEADLINE, "--server", server.url, "--dataset-file", str(rows), "--out", str(out), *extra)


@pytest.mark.parametrize(
    "scale, code, verdict, rate",
    [(1.0, 0, "pass", 0.2882), (1 / 3, 1, "regressed", 0.0962)],  # 962 of 10,000 draft tokens a third of the way
)
def test_the_headline_entry_is_judged_by_its_draft_acceptance_rate(tmp_path, scale, code, verdict, rate):
    """RedHatAI/gemma-4-31B-it-speculator.dflash records only a draft acceptance rate (28.82%, k=8, MT-Bench):
    it ended `unmatched` (exit 4) with advice that gave the same again."""
    rows = mt_rows(tmp_path / "mt-bench.jsonl", n=80)
    out = tmp_path / "out"
    with headline_server(scale) as server:
        r = verify_headline(server, rows, out)
    assert r.returncode == code, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == verdict and result["harness"]["dataset"] == "mt-bench" and result["harness"]["k"] == 8
    (check,) = result["judgement"]["checks"]
    assert check["metric"] == "draft_acceptance_rate" and check["measured"] == pytest.approx(rate)
    assert check["baseline"] == 0.2882 and check["tolerance_from"] == "default" and check["direction"] == "two-sided"
    # AL = 1 + k x rate from the same deltas, said beside the rate
    assert check["statistic"] == f"pooled accepted / draft tokens; at k=8, AL 1 + 8 x rate = {1 + 8 * rate:.3f}"
    assert result["statistics"]["acceptance_length"] == pytest.approx(1 + 8 * rate)
    assert f"draft acceptance rate {rate:.4g}: {verdict} (baseline 0.2882, two-sided ±5% (specreg's default)" in (
        r.stdout
    )
    # the loopback server's counters never vary: decided at the first look, after 3 chunks of 8
    assert (result["prompts_used"], result["prompts_planned"]) == (24, 80) and result["sequential"]["stopped_early"]
    assert "prompts: 24 of 80 (the verdict was decided: the rest was not run)" in r.stdout


@pytest.mark.parametrize("seed, used", [(0, 24), (1, 32)])
def test_a_regressed_run_whose_prompts_differ_stops_early_saying_how_many_it_used(tmp_path, seed, used):
    """Each request's rates a third of the headline's times its own factor (sd 0.3, seeded): the
    sequential test decides at a look; the looks before it are recorded undecided."""
    rows = mt_rows(tmp_path / "mt-bench.jsonl", n=80)
    out = tmp_path / "out"
    with headline_server(1 / 3, spread=0.3, seed=seed) as server:
        r = verify_headline(server, rows, out)
        sent = [p for p, _ in server.requests if p == "/v1/chat/completions"]
    assert r.returncode == 1, r.stdout + r.stderr
    result = json.loads((out / "result.json").read_text())
    assert result["verdict"] == "regressed" and result["prompts_used"] == len(sent) == used
    looks = result["sequential"]["looks"]
    assert [look["prompts"] for look in looks] == list(range(24, used + 1, 8))
    assert [look["decided"] for look in looks] == [False] * (len(looks) - 1) + [True]
    assert f"prompts: {used} of 80" in r.stdout


def test_no_early_stop_runs_every_planned_prompt(tmp_path):
    rows = mt_rows(tmp_path / "mt-bench.jsonl", n=80)
    out = tmp_path / "out"
    with headline_server(1 / 3) as server:
        r = verify_headline(
            server,
            rows,
            out,
            "--no-early-stop",
        )
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 1 and (result["prompts_used"], result["sequential"]) == (80, None)


def test_the_headline_entry_with_another_datasets_rows_is_an_error_not_a_switch(tmp_path):
    """With no harness flags it once ran gsm8k (verify's default) on the MT-Bench rows."""
    rows = write_rows(tmp_path / "gsm8k.jsonl", n=80)
    with headline_server() as server:
        r = run("verify", HEADLINE, "--server", server.url, "--dataset-file", str(rows))
        sent = [p for p, _ in server.requests]
    assert r.returncode == 2 and sent == [], r.stdout + r.stderr
    assert (
        f"{rows}: row 1 has no 'turns'" in r.stdout + r.stderr and "these are not mt-bench rows" in r.stdout + r.stderr
    )


def test_an_entry_with_no_baseline_verify_can_reproduce_is_not_run_on_the_default_dataset(tmp_path):
    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY.replace('dataset = "gsm8k"', 'dataset = "vllm-test-prompts"'))
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    with OpenAIServer() as server:
        r = run("verify", "org/draft", "--server", server.url, "--dataset-file", str(rows), "--registry", str(reg))
        assert server.requests == []
    assert r.returncode == 2, r.stdout + r.stderr
    assert (
        "org/draft: no primary baseline on a dataset verify can load (the baselines use vllm-test-prompts" in (r.stderr)
        and "give --dataset to measure it anyway" in r.stderr
    )


def test_in_process_verify_without_vllm_fails_before_the_weights_are_downloaded(hub, tmp_path):
    """The in-process run materialized the draft (downloading its weights) before finding no vLLM."""
    from conftest import fixture_config, run_in_process
    from weights import write_draft

    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    hub.add("org/draft", {p.name: p.read_bytes() for p in src.iterdir()})
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    r = run_in_process(
        "verify", "org/draft", "--dataset-file", str(rows), "--num-prompts", "4", "--registry", str(tmp_path)
    )
    assert r.returncode == 5, r.stderr
    assert "the in-process engine needs vLLM" in r.stdout + r.stderr
    assert hub.bytes_sent(".safetensors") == 0


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (
            lambda r: r.update(model="org/other-draft"),
            "the earlier run's model was 'org/other-draft', this run's is 'org/draft'",
        ),
        (
            lambda r: r.update(verifier="org/other-verifier"),
            "the earlier run's verifier was 'org/other-verifier', this run's is 'org/verifier'",
        ),
        (lambda r: r.pop("verifier"), "the earlier run's verifier was not recorded"),
        (
            lambda r: r["environment"].update(vllm_version="0.0.1"),
            "the earlier run's vLLM version was '0.0.1', this run's is",
        ),
        (lambda r: r["harness"].update(seed=r["harness"]["seed"] + 1), "the earlier run's harness differs (seed)"),
    ],
)
def test_resume_keeps_no_chunk_of_another_model_verifier_release_or_harness(mt_setup, change, why):
    """The chunks an interrupted run of another model left in --out were kept: a draft at AL 1.35 was
    reported at 2.22; a server now on another vLLM release kept the old chunks too."""
    reg, rows, out = mt_setup
    args = ("verify", "org/draft", "--dataset-file", str(rows), "--registry", str(reg), "--out", str(out))
    with OpenAIServer(rates=(0.1, 0.1, 0.1)) as server:  # the earlier run: another AL
        assert run(*args, "--server", server.url, "--no-early-stop").returncode == 1
    earlier = json.loads((out / "result.json").read_text())
    earlier.update(verdict="interrupted", chunk_counters=earlier["chunk_counters"][:4])
    change(earlier)
    (out / "result.json").write_text(json.dumps(earlier))
    with OpenAIServer() as server:
        r = run(*args, "--server", server.url, "--no-early-stop", "--resume")
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    resumed = json.loads((out / "result.json").read_text())
    assert r.returncode == 0 and resumed["verdict"] == "pass" and len(sent) == 20
    assert resumed["statistics"]["acceptance_length"] == 2.8
    (note,) = [n for n in resumed["notes"] if n.startswith("--resume")]
    assert why in note and note.endswith("; measured from the start") and note in r.stderr


def test_resume_of_the_same_run_keeps_its_chunks_and_records_the_verifier(mt_setup):
    reg, rows, out = mt_setup
    args = ("verify", "org/draft", "--dataset-file", str(rows), "--registry", str(reg), "--out", str(out))
    with OpenAIServer() as server:
        run(*args, "--server", server.url, "--no-early-stop")
    earlier = json.loads((out / "result.json").read_text())
    assert earlier["verifier"] == "org/verifier"
    earlier.update(verdict="interrupted", chunk_counters=earlier["chunk_counters"][:4])
    (out / "result.json").write_text(json.dumps(earlier))
    with OpenAIServer() as server:
        r = run(*args, "--server", server.url, "--no-early-stop", "--resume")
        sent = [p for p, _ in server.requests if p.startswith("/v1/chat")]
    assert r.returncode == 0 and len(sent) == 20 - 2 * 4
