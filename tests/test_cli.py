"""The specreg command line: output, exit codes, and one-line errors."""

import json
import shutil
import subprocess
import sys

import pytest

import specreg
import specreg.facts
from conftest import DATA, fixture_config, run_specreg
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
    assert '  dflash_config.target_layer_ids = [1, 9, 17, 25, 33]\n' in out
    assert "derived from $.aux_hidden_state_layer_ids" in out
    assert "warning served-causal-mismatch  at $.sliding_window_non_causal" in out


def test_show_json_prints_to_dict(draft):
    r = run("show", str(draft / "config.json"), "--json", "--vllm", "0.26")
    assert r.returncode == 0
    d = json.loads(r.stdout)
    assert d["vllm_version"] == "0.26"
    assert d["draft_config"]["dflash_config"] == {"mask_token_id": 151669, "target_layer_ids": [1, 9, 17, 25, 33], "causal": False}
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
        f"error: {draft}: $.aux_hidden_state_layer_ids[2]: layer id 10 repeats; ids must be unique and increasing\n"
    )


@pytest.mark.parametrize(
    "content, message",
    [
        (b"{not json", "$: invalid JSON: Expecting property name enclosed in double quotes at line 1 column 2"),
        (b"[1, 2]", "$: the top level must be a JSON object, got a list"),
        (b'{"a": NaN}', "$: invalid JSON: NaN is not valid JSON"),
        (b"\xff\xfe", "$: not UTF-8 text (byte 0)"),
    ],
)
def test_unreadable_files_exit_2_with_one_line(tmp_path, content, message):
    (tmp_path / "config.json").write_bytes(content)
    r = run("show", str(tmp_path))
    assert r.returncode == 2
    assert r.stderr == f"error: {tmp_path}: {message}\n"


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
    assert r.stderr == (f"error: {draft}: --vllm: not a vLLM version: 'newest' "
                        f"(expected e.g. {newest} or {specreg.facts.wheel(newest)})\n")


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


def test_serve_adds_parallel_drafting_for_peagle(tmp_path):
    write_draft(tmp_path, fixture_config("peagle"))
    r = run("serve", str(tmp_path))
    cfg = json.loads(r.stdout.split("--speculative-config ")[1].strip().strip("'"))
    assert {k: v for k, v in cfg.items() if k != "model"} == {
        "method": "eagle3", "num_speculative_tokens": 8, "parallel_drafting": True
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
        f"error: {draft}: $.speculators_config.verifier.name_or_path: the config names no usable verifier; "
        "pass --verifier ORG/NAME"
    )
    r = run("serve", str(draft), "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 0
    assert r.stdout.startswith("vllm serve Qwen/Qwen3-8B ")


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
