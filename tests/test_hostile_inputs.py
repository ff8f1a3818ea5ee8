"""Every hostile input of issue 15 through the CLI, in one sweep: bad input is one `error:` line and
exit 2 (a catalog with several bad entries: one line per problem), a hostile vLLM server is a recorded
result; never exit 3 ("internal error") and never a traceback. The hostile Hub is the loopback one."""

from __future__ import annotations

import json

import pytest

from conftest import fixture_config, run_specreg
from openai_server import OpenAIServer
from weights import write_draft

ENTRY = 'id = "org/x"\nalgorithm = "eagle3"\nstatus = "unpinned"\n[verifier]\nid = "a/b"\n'


def _local(tmp_path, config=None, index=None):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    if config is not None:
        (src / "config.json").write_text(config)
    if index is not None:
        (src / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": index}))
        (src / "model.safetensors").unlink()
    return src


def _native(tmp_path):
    from conftest import DATA

    src = tmp_path / "zlab"
    src.mkdir()
    (src / "config.json").write_bytes((DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json").read_bytes())
    return src


def _catalog(tmp_path, text: str | bytes):
    reg = tmp_path / "reg"
    (reg / "org").mkdir(parents=True)
    path = reg / "org" / "x.toml"
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return ["catalog", "list", "--registry", str(reg)]


DEEP = ENTRY + "notes = " + "[" * 400 + "1" + "]" * 400 + "\n"

LOCAL = {
    "infinity-as-hidden-size": (lambda t: ["show", str(_local(t, config=json.dumps(fixture_config("dflash"))
                                                            .replace('"hidden_size": 4096', '"hidden_size": 1e400')))],
                                "1e400"),
    "index-names-config-json": (lambda t: ["materialize", str(_local(t, index={"fc.weight": "config.json"})),
                                           str(t / "out")], "config.json"),
    "index-names-python": (lambda t: ["materialize", str(_local(t, index={"fc.weight": "modeling_evil.py"})),
                                      str(t / "out")], "modeling_evil.py"),
    "materialize-into-the-source": (lambda t: ["materialize", str(_local(t)), str(t / "src"), "--config-only",
                                               "--force"], "own directory"),
    "convert-into-the-source": (lambda t: ["convert", str(_native(t)), str(t / "zlab"), "--force"], "own directory"),
    "catalog-tags-a-string": (lambda t: _catalog(t, 'tags = "vllm-ci"\n' + ENTRY), "list of strings"),
    "catalog-id-an-integer": (lambda t: _catalog(t, ENTRY.replace('"org/x"', "5")), "expected a string"),
    "catalog-nan": (lambda t: _catalog(t, ENTRY + '[[baselines]]\nkind = "published"\nsource = "s"\n'
                                       '[baselines.harness]\n[baselines.metrics.acceptance_length]\nvalue = nan\n'),
                    "finite"),
    "catalog-5000-digits": (lambda t: _catalog(t, ENTRY + "[serving]\nk = " + "9" * 5000 + "\n"), "digits"),
    "catalog-deep-nesting": (lambda t: _catalog(t, DEEP), "x.toml"),
    "catalog-2-MB-entry": (lambda t: _catalog(t, ENTRY + "# " + "x" * (2 * 1024 * 1024) + "\n"), "larger than"),
    "model-id-with-a-quote": (lambda t: ["show", "org/x'onmouseover=alert(1)"], "org/x'"),
}
FLAGS = {
    "negative-num-prompts": ["--num-prompts", "-1"], "negative-few-shot": ["--few-shot", "-1"],
    "zero-chunks": ["--chunks", "0"], "zero-k": ["--k", "0"], "negative-max-tokens": ["--max-tokens", "-5"],
    "nan-temperature": ["--temperature", "nan"], "negative-timeout": ["--timeout", "-1"],
    "zero-max-model-len": ["--max-model-len", "0"],
}
HUB = {
    "etag-an-absolute-path": ({"ETag": '"/tmp/specreg-sweep-escape"'}, None, "not a content hash"),
    "etag-climbing-out": ({"ETag": '"../../specreg-sweep-escape"'}, None, "not a content hash"),
    "commit-climbing-out": ({"X-Repo-Commit": "../.."}, None, "not a 40-hex commit"),
    "config-never-answered": ({}, ("slow", 600.0), "within 2 s"),
    "config-dripped": ({}, ("drip", 3.0), "within 2 s"),
    "config-flooded": ({}, ("flood", 32 * 1024 * 1024), "byte limit"),
}


def _one_error_line(r, words, *, one=True):
    """Exit 2, no traceback; stderr is `# ` notes (findings printed before the refusal) and the error:
    one `error:` line, or (a catalog) one summary line and one line per problem naming its file."""
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r.stderr
    lines = [line for line in r.stderr.strip().splitlines() if not line.startswith("# ")]
    errors = [line for line in lines if line.startswith("error:")]
    assert errors and all(line.startswith("error:") or ".toml: $" in line for line in lines), lines
    if one:
        assert len(lines) == 1, lines
    assert words in r.stderr, r.stderr


@pytest.mark.parametrize("case", sorted(LOCAL))
def test_hostile_files_and_names_are_one_line_and_exit_2(tmp_path, case):
    argv, words = LOCAL[case]
    r = run_specreg(*argv(tmp_path), env={"HF_HUB_OFFLINE": "1"})
    _one_error_line(r, words, one=not case.startswith("catalog"))


@pytest.mark.parametrize("case", sorted(FLAGS))
def test_out_of_range_options_are_one_line_and_exit_2(case):
    r = run_specreg("verify", "org/x", *FLAGS[case], env={"HF_HUB_OFFLINE": "1"})
    _one_error_line(r, FLAGS[case][0])


@pytest.mark.parametrize("case", sorted(HUB))
def test_a_hostile_hub_is_one_line_and_exit_2(hub, tmp_path, case):
    override, fault, words = HUB[case]
    hub.add("org/hostile", {"config.json": json.dumps(fixture_config("dflash")).encode()})
    hub.override = override
    if fault:
        hub.fault("config.json", fault, method="GET")
    r = run_specreg("show", "org/hostile", env={"SPECREG_HUB_DEADLINE": "2", "SPECREG_HUB_RETRIES": "0"}, timeout=60)
    _one_error_line(r, words)


def test_a_server_with_impossible_counters_is_a_recorded_invalid_result(tmp_path):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    out = tmp_path / "out"
    with OpenAIServer(rates=(1.5, 0.2, 0.1)) as server:  # more accepted at position 1 than drafts
        r = run_specreg("verify", "org/x", "--server", server.url, "--dataset-file", str(rows), "--dataset", "gsm8k",
                        "--num-prompts", "4", "--out", str(out), env={"HF_HUB_OFFLINE": "1"})
    result = json.loads((out / "result.json").read_text())
    assert r.returncode == 2 and result["verdict"] == "invalid" and "Traceback" not in r.stderr, r.stderr


@pytest.mark.parametrize("body, said", [
    (b"x" * (16 * 2**20), "'" + "x" * 300 + "'… (65,536 characters)"),  # read up to 64 KiB, shown shortened
    (json.dumps({"error": {"message": "\x1b[2J\u202eok"}}).encode(), "'\\x1b[2J\\u202eok'"),  # escaped
])
def test_a_servers_huge_or_hostile_error_answer_is_read_bounded_and_shown_escaped(tmp_path, body, said):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    with OpenAIServer() as server:
        server.fail_status, server.fail_body = 500, body
        r = run_specreg("verify", "org/x", "--server", server.url, "--dataset-file", str(rows), "--dataset", "gsm8k",
                        "--num-prompts", "4", env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[0] == (f"org/x: error; {server.url}/v1/chat/completions: HTTP 500 Internal Server "
                                        f"Error: the server said {said}")
