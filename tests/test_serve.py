"""`specreg serve` for a real deployment: vLLM flags, catalog hints, a reusable --dir, --json, the V2 env."""

import json
import shlex

import pytest

import specreg
from conftest import DATA, fixture_config, run_specreg
from weights import write_draft


run = run_specreg


@pytest.fixture
def draft(tmp_path):
    return write_draft(tmp_path / "draft", fixture_config("dflash"))


def test_serve_can_run_twice_with_the_same_dir(tmp_path, draft):
    first = run("serve", str(draft), "--dir", str(tmp_path / "d"))
    second = run("serve", str(draft), "--dir", str(tmp_path / "d"))
    assert first.returncode == second.returncode == 0, second.stderr
    assert first.stdout == second.stdout


def test_serve_refuses_a_dir_holding_another_draft_unless_force(tmp_path, draft):
    other = write_draft(tmp_path / "other", fixture_config("dflash2"))
    assert run("serve", str(other), "--dir", str(tmp_path / "d")).returncode == 0
    refused = run("serve", str(draft), "--dir", str(tmp_path / "d"))
    assert refused.returncode == 2 and "is not empty" in refused.stderr
    assert run("serve", str(draft), "--dir", str(tmp_path / "d"), "--force").returncode == 0
    assert json.loads((tmp_path / "d" / "specreg.json").read_text())["algorithm"] == "dflash"


def test_vllm_flags_after_the_double_dash_are_passed_through(tmp_path, draft):
    out = run("serve", str(draft), "--dir", str(tmp_path / "d"), "--", "--tensor-parallel-size", "2", "--port=8001")
    assert out.returncode == 0, out.stderr
    assert shlex.split(out.stdout)[-3:] == ["--tensor-parallel-size", "2", "--port=8001"]


@pytest.mark.parametrize("flag", ["--speculative-config", "--model", "--speculative_config"])
def test_flags_specreg_writes_itself_are_refused_after_the_double_dash(draft, flag):
    out = run("serve", str(draft), "--", flag, "{}")
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag} after --")


def test_serve_json_gives_the_env_and_argv(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash2"))  # mixed layers and a candidate head: V2 only
    out = run("serve", str(src), "--dir", str(tmp_path / "d"), "--json", "--", "--max-model-len", "8192")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert data["argv"][:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert json.loads(data["argv"][4])["model"] == str(tmp_path / "d")
    assert data["argv"][5:] == ["--max-model-len", "8192"]
    line = run("serve", str(src), "--dir", str(tmp_path / "d"))
    assert line.stdout.startswith("VLLM_USE_V2_MODEL_RUNNER=1 vllm serve ")


def test_the_readme_example_is_served_with_config_only(tmp_path):
    from conftest import DATA

    example = DATA.parent.parent / "examples" / "qwen3-8b-dflash"
    out = run("serve", str(example), "--config-only", "--dir", str(tmp_path / "d"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "d" / "config.json").exists()


def test_llm_kwargs_carry_the_environment_vllm_needs(tmp_path):
    spec = specreg.load(write_draft(tmp_path / "src", fixture_config("dflash2")))
    kwargs = spec.materialize(tmp_path / "d", weights="none").llm_kwargs()
    assert kwargs.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"} and isinstance(kwargs, dict)
    assert json.loads(json.dumps(kwargs)) == dict(kwargs)  # a plain dict for json and vllm.LLM(**kwargs)
    m = run("materialize", str(tmp_path / "src"), str(tmp_path / "m"), "--config-only", "--json")
    assert json.loads(m.stdout)["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "1"}


def hinted_entry(hub, tmp_path, serving: str) -> dict:
    """org/draft on the loopback Hub, with a catalog entry holding these [serving] hints; the env to use it."""
    registry = tmp_path / "registry" / "org"
    registry.mkdir(parents=True)
    (registry / "draft.toml").write_text(
        'id = "org/draft"\nalgorithm = "dflash"\nstatus = "unpinned"\n\n[verifier]\nid = "Qwen/Qwen3-8B"\n\n'
        f"[serving]\n{serving}"
    )
    hub.add("org/draft", {"config.json": json.dumps(fixture_config("dflash")).encode()})
    return {"SPECREG_REGISTRY": str(tmp_path / "registry")}


def test_catalog_serving_hints_are_used_and_a_differing_flag_is_noted(hub, tmp_path, monkeypatch):
    env = hinted_entry(hub, tmp_path, "tensor_parallel_size = 4\nmax_model_len = 8192\n")
    out = run("serve", "org/draft", "--dir", str(tmp_path / "d"), "--config-only", env=env)
    assert out.returncode == 0, out.stderr
    assert shlex.split(out.stdout)[-4:] == ["--tensor-parallel-size", "4", "--max-model-len", "8192"]
    mine = run(
        "serve",
        "org/draft",
        "--dir",
        str(tmp_path / "d"),
        "--config-only",
        "--",
        "--tensor-parallel-size",
        "2",
        env=env,
    )
    assert shlex.split(mine.stdout)[-4:] == ["--tensor-parallel-size", "2", "--max-model-len", "8192"]
    assert "the catalog entry serves this draft with --tensor-parallel-size 4; you asked for 2" in mine.stderr


@pytest.mark.parametrize(
    "flags, want",
    [
        (["-tp", "2"], "2"),
        (["--tensor_parallel_size", "2"], "2"),
        (["--tensor-parallel-size=2"], "2"),
        (["--tensor-parallel", "2"], "2"),
        (["--tensor_par=2"], "2"),
        (["-t", "2"], "2"),  # abbreviations, as argparse
    ],
)
def test_any_spelling_of_a_hinted_setting_wins_and_appears_once(hub, tmp_path, flags, want):
    """A catalog hint tensor_parallel_size = 4 and the user's `-tp 2`: vLLM takes the last flag, so the
    hint must not be added after the user's spelling of the same setting."""
    env = hinted_entry(hub, tmp_path, "tensor_parallel_size = 4\n")
    out = run("serve", "org/draft", "--dir", str(tmp_path / "d"), "--config-only", "--", *flags, env=env)
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert argv[-len(flags) :] == flags and "--tensor-parallel-size" not in argv[: -len(flags)]
    assert f"you asked for {want}" in out.stderr


@pytest.mark.parametrize(
    "flag", ["-sc", "--spec-model", "--spec_tokens", "--speculative-config.num_speculative_tokens"]
)
def test_vllms_other_spellings_of_the_draft_are_refused_too(draft, flag):
    out = run("serve", str(draft), "--", flag, "3")
    assert out.returncode == 2 and out.stderr.startswith(f"error: {flag} after --"), out.stderr


def test_serve_can_write_the_spec_flags_form(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))  # model, method and k say all of it
    out = run(
        "serve", str(src), "--spec-flags", "--verifier", "Qwen/Qwen3-8B", "--dir", str(tmp_path / "d"), "--config-only"
    )
    assert out.returncode == 0, out.stderr
    argv = shlex.split(out.stdout)
    assert "--speculative-config" not in argv
    assert (argv[argv.index("--spec-method") + 1], argv[argv.index("--spec-tokens") + 1]) == ("dflash", "15")
    old = run(
        "serve",
        str(src),
        "--spec-flags",
        "--vllm",
        "0.20",
        "--verifier",
        "Qwen/Qwen3-8B",
        "--dir",
        str(tmp_path / "e"),
        "--config-only",
    )
    assert old.returncode == 2 and "has no --spec-model" in old.stderr


def test_serve_escapes_terminal_controls_a_config_holds(tmp_path):
    """A model_type holding ESC and a C1 control (CSI) reaches stderr in a finding: escaped, as show prints it."""
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["model_type"] = "qwen3\x1b[31mRED\x9b"
    out = run("serve", str(write_draft(tmp_path / "src", cfg)), "--config-only", "--dir", str(tmp_path / "d"))
    assert out.returncode == 1, out.stderr  # an unknown model_type: not servable
    assert "\x1b" not in out.stderr + out.stdout and "\x9b" not in out.stderr + out.stdout
    assert "`qwen3\\x1b[31mRED\\x9b`" in out.stderr


def test_a_refusal_comes_before_anything_is_written_or_downloaded(hub, tmp_path):
    """serve materialized the draft (downloading its weights) and only then refused --spec-flags."""
    src = write_draft(tmp_path / "src", fixture_config("peagle"))
    hub.add("org/peagle", {p.name: p.read_bytes() for p in src.iterdir()})
    out = run("serve", "org/peagle", "--spec-flags", "--dir", str(tmp_path / "d"))
    assert out.returncode == 2 and "--spec-flags: this draft's speculative config also sets" in out.stderr
    assert not (tmp_path / "d").exists()
    assert hub.bytes_sent(".safetensors") == 0


@pytest.mark.parametrize("command", ["serve", "materialize"])
def test_quiet_silences_the_warnings_and_notes_not_the_errors(tmp_path, command):
    """-q silenced the progress bars only: every warning and note still printed."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    where = ["--dir", str(tmp_path / "d")] if command == "serve" else [str(tmp_path / "d")]
    loud = run(command, str(src), *where, "--config-only", "--vllm", "0.33", "--force")
    assert "# warning: served-causal-mismatch" in loud.stderr
    quiet = run(command, str(src), *where, "--config-only", "--vllm", "0.33", "--force", "-q")
    assert (quiet.returncode, quiet.stderr) == (0, "") and quiet.stdout == loud.stdout
    refused = run(command, str(DATA / "speculators" / "xpress.json"), *where, "--config-only", "-q")
    assert refused.returncode == 1 and "error" in refused.stderr
