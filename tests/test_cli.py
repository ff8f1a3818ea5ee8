"""The specreg command line: output, exit codes, and one-line errors."""

import json
import os
import shutil
import subprocess
import sys

import pytest

import specreg
import specreg.facts
from conftest import DATA, fixture_config, run_specreg
from interrupt import as_from_a_terminal
from weights import write_draft


def run(*args, cwd=None):
    return run_specreg(*args, cwd=cwd, timeout=60)


@pytest.fixture
def draft(tmp_path):
    return write_draft(tmp_path / "draft", fixture_config("dflash"))


def test_show_prints_the_plan_provenance_and_findings(draft):
    r = run("show", str(draft), "--vllm", "0.33")
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "  method        dflash\n" in out
    assert "  verifier      Qwen/Qwen3-8B\n" in out
    assert "  0      full     -       no\n" in out
    assert "  dflash_config.target_layer_ids = [1, 9, 17, 25, 33]\n" in out
    assert "derived from $.aux_hidden_state_layer_ids" in out
    assert "warning served-causal-mismatch  at $.sliding_window_non_causal" in out


def test_show_json_prints_to_dict(draft):
    r = run("show", str(draft / "config.json"), "--json", "--vllm", "0.26")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert d["vllm_version"] == "0.26"
    assert d["draft_config"]["dflash_config"] == {
        "mask_token_id": 151669,
        "target_layer_ids": [1, 9, 17, 25, 33],
        "causal": False,
    }
    assert d["origin"]["path"].endswith("config.json")


def test_show_exits_1_when_the_draft_has_error_findings(tmp_path):
    shutil.copy(DATA / "speculators" / "mtp.json", tmp_path / "config.json")
    r = run("show", str(tmp_path))
    assert r.returncode == 1
    assert "error   unservable-algorithm" in r.stdout


def test_bad_input_exits_2_with_one_line_and_no_traceback(draft):
    cfg = json.loads((draft / "config.json").read_text())
    cfg["aux_hidden_state_layer_ids"] = [2, 10, 10]
    (draft / "config.json").write_text(json.dumps(cfg))
    r = run("show", str(draft))
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr == (
        f"error: {draft / 'config.json'}: $.aux_hidden_state_layer_ids[2]: layer id 10 repeats; ids must be "
        "unique and increasing\n"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "$: invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b"[1, 2]", "$: the top level must be a JSON object, got a list"),
        (b'{"a": NaN}', "$: invalid JSON: NaN is not valid JSON"),
        (b"\xff\xfe", "$: not UTF-8 text (byte 0)"),
        (b"", "$: config.json is empty (0 bytes): a config.json holds one JSON object"),
        (b" \n", "$: config.json is blank (2 bytes of whitespace): a config.json holds one JSON object"),
    ],
)
def test_unreadable_files_exit_2_with_one_line_naming_the_file(tmp_path, content, message):
    """An empty file said "Expecting value"; a directory's errors named the directory, not its file."""
    (tmp_path / "config.json").write_bytes(content)
    r = run("show", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == f"error: {tmp_path / 'config.json'}: {message}\n"


def test_a_huge_file_is_refused_without_reading_it_all(tmp_path):
    with open(tmp_path / "config.json", "wb") as f:
        f.write(b'{"x": "' + b"a" * (5 * 1024 * 1024) + b'"}')
    r = run("show", str(tmp_path))
    assert r.returncode == 2
    assert "is larger than 4194304 bytes: not a config.json" in r.stderr


def test_a_missing_local_path_exits_2(tmp_path):
    r = run("show", str(tmp_path / "nope" / "config.json"))
    assert r.returncode == 2
    assert r.stderr.endswith("source: no such file or directory\n")


def test_a_bad_vllm_version_exits_2(draft):
    r = run("show", str(draft), "--vllm", "newest")
    assert r.returncode == 2
    newest = specreg.facts.known()[-1]
    assert r.stderr == (
        f"error: {draft}: --vllm: not a vLLM version: 'newest' "
        f"(expected e.g. {newest} or {specreg.facts.wheel(newest)})\n"
    )


def test_serve_prints_an_explicit_speculative_config(tmp_path):
    draft = write_draft(tmp_path / "eagle", fixture_config("eagle3_generated"))
    r = run("serve", str(draft), "--vllm", "0.33")
    assert r.returncode == 0
    cfg = {"method": "eagle3", "model": str(draft), "num_speculative_tokens": 3}
    assert r.stdout == f"vllm serve meta-llama/Llama-3.1-8B-Instruct --speculative-config '{json.dumps(cfg)}'\n"


def test_serve_reports_findings_on_stderr(draft):
    r = run("serve", str(draft), "--vllm", "0.33")
    assert r.returncode == 0
    assert "# warning: served-causal-mismatch" in r.stderr


def test_serve_sets_the_v2_runner_for_mixed_attention(tmp_path):
    write_draft(tmp_path, fixture_config("dflash2"))
    r = run("serve", str(tmp_path), "--vllm", "0.33")
    assert r.returncode == 0
    assert r.stdout.startswith("VLLM_USE_V2_MODEL_RUNNER=1 vllm serve Qwen/Qwen3-8B --speculative-config ")


def test_serve_refuses_peagle_on_a_release_that_removed_it_in_that_releases_words(tmp_path):
    from packaging.version import Version

    from specreg import facts
    from specreg.normalization import algorithms

    removed = [
        r
        for r in facts.known()
        if not facts.holds("algorithm_peagle", r) and algorithms.get("peagle").last_served_before(Version(r))
    ]
    if not removed:
        pytest.skip("no known release removed P-EAGLE")
    write_draft(tmp_path / "src", fixture_config("peagle"))
    r = run("serve", str(tmp_path / "src"), "--vllm", removed[-1], "--dir", str(tmp_path / "d"))
    assert r.returncode == 1 and r.stdout == "" and not (tmp_path / "d").exists()
    assert "vllm-removed-algorithm" in r.stderr and facts.refusal(removed[-1], "peagle") in r.stderr


def test_serve_adds_parallel_drafting_for_peagle(tmp_path):
    from conftest import serving_release

    write_draft(tmp_path, fixture_config("peagle"))
    r = run("serve", str(tmp_path), "--vllm", serving_release("peagle"))
    cfg = json.loads(r.stdout.split("--speculative-config ")[1].strip().strip("'"))
    assert {k: v for k, v in cfg.items() if k != "model"} == {
        "method": "eagle3",
        "num_speculative_tokens": 8,
        "parallel_drafting": True,
    }


def test_serve_refuses_an_unservable_draft(tmp_path):
    shutil.copy(DATA / "speculators" / "xpress.json", tmp_path / "config.json")
    r = run("serve", str(tmp_path))
    assert r.returncode == 1
    assert r.stdout == ""
    assert "no `xpress` mapping" in r.stderr


def test_serve_needs_a_verifier_when_the_config_has_a_local_one(draft):
    cfg = json.loads((draft / "config.json").read_text())
    cfg["speculators_config"]["verifier"]["name_or_path"] = "/mnt/train/qwen3-8b"
    (draft / "config.json").write_text(json.dumps(cfg))
    r = run("serve", str(draft))
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == (
        f"error: {draft / 'config.json'}: $.speculators_config.verifier.name_or_path: the config names no "
        "usable verifier; "
        "pass --verifier ORG/NAME"
    )
    # not the verifier the config names, so it is read first: offline and uncached here, refused unless waived
    r = run_specreg("serve", str(draft), "--verifier", "Qwen/Qwen3-8B", env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2 and "pass --skip-verifier-check" in r.stderr
    r = run_specreg(
        "serve", str(draft), "--verifier", "Qwen/Qwen3-8B", "--skip-verifier-check", env={"HF_HUB_OFFLINE": "1"}
    )
    assert r.returncode == 0
    assert r.stdout.startswith("vllm serve Qwen/Qwen3-8B ")
    assert "# warning: verifier-unread: the draft was not checked against Qwen/Qwen3-8B: " in r.stderr


def test_a_revision_with_a_local_path_is_bad_input(draft):
    r = run("show", str(draft), "--revision", "main")
    assert r.returncode == 2
    assert r.stderr == f"error: {draft}: revision: a revision applies to Hub sources, not to a local path\n"


def test_the_readme_example_runs():
    from conftest import DATA as data

    root = data.parent.parent
    r = run("show", "examples/qwen3-8b-dflash", cwd=root)
    assert r.returncode == 0
    assert "served-causal-mismatch" in r.stdout


def test_show_prints_each_finding_once(tmp_path):
    # a DFlash config shaped like the RedHat gemma-4-31B release (speculators 0.5.0, block 8, 8 tokens)
    cfg = json.loads((DATA / "speculators" / "dflash.json").read_text())
    del cfg["sample_from_anchor"]
    cfg.update(block_size=8, speculators_version="0.5.0")
    cfg["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 8
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    out = subprocess.run([sys.executable, "-m", "specreg", "show", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    spec = specreg.load(tmp_path)
    for f in spec.findings:
        assert out.stdout.count(f"{f.severity:<7} {f.code} ") == 1, f.code
    assert "draft tokens  7" in out.stdout


def test_version_names_specreg_the_target_vllm_and_huggingface_hub():
    out = subprocess.run([sys.executable, "-m", "specreg", "--version"], capture_output=True, text=True)
    assert out.returncode == 0
    assert out.stdout.startswith("specreg 0.1.0; targets vLLM ") and "huggingface_hub " in out.stdout


# -- every hostile input of issue 15 -----------------------------------------------------------------
# Every hostile input through the CLI, in one sweep: bad input is one `error:` line and exit 2 (a
# catalog with several bad entries: one line per problem); never exit 3 ("internal error") and never
# a traceback. The hostile Hub is the loopback one.

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
    "infinity-as-hidden-size": (
        lambda t: [
            "show",
            str(
                _local(
                    t,
                    config=json.dumps(fixture_config("dflash")).replace('"hidden_size": 4096', '"hidden_size": 1e400'),
                )
            ),
        ],
        "1e400",
    ),
    "index-names-config-json": (
        lambda t: ["materialize", str(_local(t, index={"fc.weight": "config.json"})), str(t / "out")],
        "config.json",
    ),
    "index-names-python": (
        lambda t: ["materialize", str(_local(t, index={"fc.weight": "modeling_evil.py"})), str(t / "out")],
        "modeling_evil.py",
    ),
    "materialize-into-the-source": (
        lambda t: ["materialize", str(_local(t)), str(t / "src"), "--config-only", "--force"],
        "own directory",
    ),
    "convert-into-the-source": (lambda t: ["convert", str(_native(t)), str(t / "zlab"), "--force"], "own directory"),
    "catalog-tags-a-string": (lambda t: _catalog(t, 'tags = "vllm-ci"\n' + ENTRY), "list of strings"),
    "catalog-id-an-integer": (lambda t: _catalog(t, ENTRY.replace('"org/x"', "5")), "expected a string"),
    "catalog-nan": (
        lambda t: _catalog(
            t,
            ENTRY + '[[baselines]]\nkind = "published"\nsource = "s"\n'
            "[baselines.harness]\n[baselines.metrics.acceptance_length]\nvalue = nan\n",
        ),
        "finite",
    ),
    "catalog-5000-digits": (lambda t: _catalog(t, ENTRY + "[serving]\nk = " + "9" * 5000 + "\n"), "digits"),
    "catalog-deep-nesting": (lambda t: _catalog(t, DEEP), "x.toml"),
    "catalog-2-MB-entry": (lambda t: _catalog(t, ENTRY + "# " + "x" * (2 * 1024 * 1024) + "\n"), "larger than"),
    "model-id-with-a-quote": (lambda t: ["show", "org/x'onmouseover=alert(1)"], "org/x'"),
}


FLAGS = {
    "negative-num-prompts": ["--num-prompts", "-1"],
    "negative-few-shot": ["--few-shot", "-1"],
    "zero-chunks": ["--chunks", "0"],
    "zero-k": ["--k", "0"],
    "negative-max-tokens": ["--max-tokens", "-5"],
    "nan-temperature": ["--temperature", "nan"],
    "negative-timeout": ["--timeout", "-1"],
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


def test_ctrl_c_is_one_line_and_exit_130(hub):
    """Ctrl-C printed a 25-line traceback."""
    import signal
    import subprocess
    import sys
    import time

    hub.add("org/slow", {"config.json": json.dumps(fixture_config("dflash")).encode()})
    hub.fault("config.json", "forever:slow:30")
    proc = subprocess.Popen(
        [sys.executable, "-m", "specreg", "show", "org/slow"],
        stderr=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "SPECREG_HUB_DEADLINE": "60"},
        preexec_fn=as_from_a_terminal,
    )
    deadline = time.monotonic() + 30
    while hub.count() == 0 and time.monotonic() < deadline:  # until the request is in flight
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert err.strip() == "interrupted: specreg show stopped"


# -- with --json, every failure prints one JSON document on stdout (issue 47) --------------------


def _json_failure(r, status: int) -> dict:
    assert r.returncode == status, r.stderr
    doc = json.loads(r.stdout)
    assert doc["exit_status"] == status and r.stderr.startswith(("error: ", "# "))
    return doc


def test_with_json_an_offline_failure_prints_a_json_document(tmp_path):
    from conftest import run_in_process

    env = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(tmp_path / "cache"), "SPECREG_REGISTRY": str(tmp_path)}
    doc = _json_failure(run_in_process("show", "org/not-cached", "--json", env=env), 2)
    assert doc["kind"] == "OfflineError" and doc["source"] == "org/not-cached"
    assert doc["error"].startswith("org/not-cached: ")


def test_with_json_another_specreg_error_prints_a_json_document(draft):
    from conftest import run_in_process

    doc = _json_failure(run_in_process("serve", str(draft), "--json", "--", "--speculative-config", "{}"), 2)
    assert doc["kind"] == "SpecregError" and "--speculative-config after --: specreg writes" in doc["error"]


def test_with_json_a_draft_not_servable_prints_its_findings(tmp_path):
    from conftest import run_in_process

    shutil.copy(DATA / "speculators" / "mtp.json", tmp_path / "config.json")
    doc = _json_failure(run_in_process("serve", str(tmp_path), "--json", "--config-only"), 1)
    assert "not servable as trained" in doc["error"]
    assert [f["code"] for f in doc["findings"]] == ["unservable-algorithm"]


def test_with_json_a_usage_error_prints_a_json_document():
    from conftest import run_in_process

    doc = _json_failure(run_in_process("check", "x", "--json", "--tensor-parallel-size", "0"), 2)
    assert "must be an integer from 1 to 1000000000, got 0" in doc["error"]


def test_a_long_value_is_echoed_cut_to_its_start_and_length(draft):
    from conftest import run_in_process

    cfg = json.loads((draft / "config.json").read_text())
    cfg["transformer_layer_config"]["head_dim"] = int("9" * 4000)
    (draft / "config.json").write_text(json.dumps(cfg))
    r = run_in_process("check", str(draft), "--no-weights", "--verifier", str(draft), "--gpu", "H100", "--json")
    doc = _json_failure(r, 2)
    assert "9" * 60 + "… (4,000 characters)" in doc["error"] and "9" * 61 not in r.stdout + r.stderr
    assert max(map(len, r.stderr.splitlines())) < 400


def test_a_verifier_longer_than_any_path_is_refused_in_one_short_line(draft):
    from conftest import run_in_process

    r = run_in_process("serve", str(draft), "--config-only", "--verifier", "org/" + "b" * 100_000)
    assert r.returncode == 2 and r.stdout == ""
    assert len(r.stderr) < 400 and "100,004 characters" in r.stderr


@pytest.mark.parametrize("module", ["specreg.cli.main", "specreg.cli.show", "specreg.cli.common"])
def test_ctrl_c_while_the_command_line_is_imported_is_one_line_and_exit_130(tmp_path, module):
    """Ctrl-C in the first 0.2 s (the imports, before main() runs) printed a traceback. The Ctrl-C is
    made to arrive exactly while `module` is being imported: a sitecustomize import hook raises it."""
    hook = tmp_path / "sitecustomize.py"
    hook.write_text(
        "import sys\n"
        "class Interrupt:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        f"        if name == {module!r}:\n"
        "            raise KeyboardInterrupt\n"
        "sys.meta_path.insert(0, Interrupt())\n"
    )
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "show", "org/x"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
        preexec_fn=as_from_a_terminal,
    )
    assert (out.returncode, out.stderr, out.stdout) == (130, "interrupted: specreg show stopped\n", "")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["shwo", "x"], "invalid choice: 'shwo' (choose from 'show', "),
        (["catalog", "lst"], "invalid choice: 'lst' (choose from 'list', 'show', 'check', 'pin'); did you mean list?"),
        (["show", "x", "--vlm", "0.33"], "unrecognized arguments: --vlm 0.33; did you mean --vllm?"),
        (["show", "x", "--jsn", "--vlm=0.33"], "did you mean --json for --jsn, --vllm for --vlm?"),
    ],
)
def test_a_mistyped_command_or_option_is_answered_with_the_one_meant(argv, said):
    r = run(*argv)
    assert r.returncode == 2 and len(r.stderr.splitlines()) == 1 and said in r.stderr, r.stderr
    if argv[0] == "shwo":
        assert "; did you mean show? (see specreg --help)" in r.stderr


def test_an_option_like_none_is_not_given_a_guess():
    r = run("show", "x", "--zzzzzz")
    assert r.returncode == 2 and "did you mean" not in r.stderr
