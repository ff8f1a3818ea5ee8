"""The small edges of the user's path: each one a clear answer instead of a silent or wrong one."""

import json
import subprocess
import sys

import pytest

import specreg
from conftest import DATA, fixture_config, run_specreg
from weights import write_draft


run = run_specreg


def test_a_future_vllm_target_gets_a_warning_finding(fx):
    spec = specreg.normalize(fx("dflash"), vllm="0.40")
    (f,) = [f for f in spec.findings if f.code == "vllm-version-unchecked"]
    assert f.severity == "warning" and "vLLM 0.40 is newer than 0.33" in f.message
    assert "vllm-version-unchecked" not in [f.code for f in specreg.normalize(fx("dflash"), vllm="0.33").findings]


def test_convert_without_a_verifier_refuses_to_write_a_twin_vllm_would_refuse(tmp_path):
    out = run("convert", str(DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json"), str(tmp_path / "twin"),
              "--config-only")
    assert out.returncode == 2 and "names no verifier" in out.stderr and "--verifier ORG/NAME" in out.stderr
    assert not (tmp_path / "twin").exists()  # nothing written
    with_verifier = run("convert", str(DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json"), str(tmp_path / "t2"),
                        "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert with_verifier.returncode == 0 and "no verifier" not in with_verifier.stderr
    assert "warnings" not in json.loads((tmp_path / "t2" / "specreg.json").read_text())


def test_report_on_a_missing_directory_exits_2(tmp_path):
    out = run("report", str(tmp_path / "nope"), "--out", str(tmp_path / "site"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: {tmp_path / 'nope'}: no such results directory")
    assert not (tmp_path / "site").exists()


@pytest.mark.parametrize(("flag", "value", "hint"), [("--algorithm", "dflsh", "did you mean 'dflash'?"),
                                                     ("--tag", "vllm_ci", "did you mean 'vllm-ci'?"),
                                                     ("--verifier", "Qwen/Qwen3-9B", "known: ")])
def test_catalog_list_filters_refuse_values_no_entry_has(flag, value, hint):
    out = run("catalog", "list", flag, value)
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag} {value!r}: no catalog entry has it")
    assert hint in out.stderr


def test_an_algorithm_plugins_own_exception_names_the_plugin(tmp_path):
    """A plugin registered through the entry-point group (here: a package dropped on sys.path with its
    dist-info, as pip installs one) that raises is reported by name, exit 2, not as a specreg bug."""
    site = tmp_path / "site"
    (site / "brokenalgo").mkdir(parents=True)
    (site / "brokenalgo" / "__init__.py").write_text(
        "from specreg import register_speculator\n"
        "@register_speculator('medusa-x', method='medusa', vllm_min='0.10')\n"
        "def medusa(cfg, ctx):\n"
        "    raise KeyError('heads')\n")
    dist = site / "brokenalgo-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: brokenalgo\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[specreg.algorithms]\nmedusa-x = brokenalgo\n")
    cfg = fixture_config("dflash")
    cfg["speculators_model_type"] = "medusa-x"
    src = write_draft(tmp_path / "draft", cfg)
    import os

    out = subprocess.run([sys.executable, "-m", "specreg", "show", str(src)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(site)}, timeout=120)
    assert out.returncode == 2, out.stderr
    assert "the algorithm plugin brokenalgo:medusa for 'medusa-x' failed on this config (KeyError: 'heads')" in out.stderr
    assert "internal error" not in out.stderr


def test_the_python_api_gives_plain_dicts_where_users_serialize(fx):
    spec = specreg.normalize(fx("dflash2"), vllm="0.33")
    with pytest.raises(TypeError):
        json.dumps(spec.draft_config)  # read-only views of a frozen value
    assert json.loads(json.dumps(spec.draft_config_dict())) == spec.draft_config_dict()
    assert json.loads(json.dumps(spec.speculative_config_dict())) == {"method": "dflash", "num_speculative_tokens": 15}
    assert json.loads(json.dumps(spec.to_dict()))["draft_config"] == spec.draft_config_dict()
    kwargs = spec.llm_kwargs(draft="/d")
    assert type(json.loads(json.dumps(kwargs))) is dict and kwargs.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"}


@pytest.mark.parametrize("option", [["--num-prompts", "-1"], ["--few-shot", "-2"], ["--chunks", "0"], ["--k", "-3"],
                                    ["--max-tokens", "0"], ["--temperature", "nan"], ["--temperature", "inf"],
                                    ["--timeout", "-5"], ["--concurrency", "0"]])
def test_verify_range_checks_its_numeric_options(option):
    out = run("verify", "org/x", "--server", "http://127.0.0.1:9", *option)
    assert out.returncode == 2
    assert f"argument {option[0]}: must be" in out.stderr.strip().splitlines()[-1]
