"""`specreg serve` for a real deployment: vLLM flags, catalog hints, a reusable --dir, --json, the V2 env."""

import json
import shlex
from pathlib import Path

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


def with_v1() -> str:
    """The newest known release that still has Model Runner V1 (where a V2-only draft needs the variable)."""
    from specreg import facts

    return [r for r in facts.known() if facts.holds("model_runner_v1", r)][-1]


def test_a_release_without_model_runner_v1_gets_no_runner_variable(tmp_path):
    from specreg import facts

    without = [r for r in facts.known() if not facts.holds("model_runner_v1", r)]
    if not without:
        pytest.skip("every known release has Model Runner V1")
    src = write_draft(tmp_path / "src", fixture_config("dflash2"))
    out = run("serve", str(src), "--vllm", without[-1], "--dir", str(tmp_path / "d"), "--json")
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["env"] == {} and "needs-v2-model-runner" not in out.stderr


def test_serve_json_gives_the_env_and_argv(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash2"))  # mixed layers and a candidate head: V2 only
    out = run(
        "serve", str(src), "--vllm", with_v1(), "--dir", str(tmp_path / "d"), "--json", "--", "--max-model-len", "8192"
    )
    assert out.returncode == 0, out.stderr
    data = json.loads(out.stdout)
    assert data["env"] == {"VLLM_USE_V2_MODEL_RUNNER": "1"}
    assert data["argv"][:3] == ["vllm", "serve", "Qwen/Qwen3-8B"]
    assert json.loads(data["argv"][4])["model"] == str(tmp_path / "d")
    assert data["argv"][5:] == ["--max-model-len", "8192"]
    line = run("serve", str(src), "--vllm", with_v1(), "--dir", str(tmp_path / "d"))
    assert line.stdout.startswith("VLLM_USE_V2_MODEL_RUNNER=1 vllm serve ")


def test_the_readme_example_is_served_with_config_only(tmp_path):
    from conftest import DATA

    example = DATA.parent.parent / "examples" / "qwen3-8b-dflash"
    out = run("serve", str(example), "--config-only", "--dir", str(tmp_path / "d"))
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "d" / "config.json").exists()


def test_llm_kwargs_carry_the_environment_vllm_needs(tmp_path):
    spec = specreg.load(write_draft(tmp_path / "src", fixture_config("dflash2")), vllm=with_v1())
    kwargs = spec.materialize(tmp_path / "d", weights="none").llm_kwargs()
    assert kwargs.env == {"VLLM_USE_V2_MODEL_RUNNER": "1"} and isinstance(kwargs, dict)
    assert json.loads(json.dumps(kwargs)) == dict(kwargs)  # a plain dict for json and vllm.LLM(**kwargs)
    m = run("materialize", str(tmp_path / "src"), str(tmp_path / "m"), "--config-only", "--json", "--vllm", with_v1())
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


# -- the verifier it runs with (issue 45) ------------------------------------------------------------------

#: what `specreg check` finds for the DFlash fixture (Qwen3-8B: hidden 4096, aux ids up to 34) beside a
#: 12-layer, 5376-wide verifier
MISMATCH = ["verifier-layer-out-of-range", "verifier-hidden-size-mismatch"]


def wide_verifier(tmp_path):
    from hostile_helpers import local_verifier

    return local_verifier(tmp_path, "wide-verifier", hidden_size=5376, num_hidden_layers=12)


def error_codes(stderr: str) -> list[str]:
    return [line.split(":")[1].strip() for line in stderr.splitlines() if line.startswith("# error: ")]


def test_check_finds_the_mismatch_the_serve_tests_below_refuse(tmp_path, draft):
    r = run("check", str(draft), "--verifier", str(wide_verifier(tmp_path)), "--no-weights", "--json")
    assert r.returncode == 1
    assert [f["code"] for f in json.loads(r.stdout)["findings"] if f["severity"] == "error"] == MISMATCH


@pytest.mark.parametrize("extra", [["--config-only"], []])
def test_serve_refuses_a_verifier_the_draft_does_not_match(tmp_path, draft, extra):
    out = tmp_path / "d"
    r = run("serve", str(draft), "--verifier", str(wide_verifier(tmp_path)), "--dir", str(out), *extra)
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert error_codes(r.stderr) == MISMATCH
    assert "does not match the verifier" in r.stderr and "--force-verifier" in r.stderr
    assert not out.exists() and not (tmp_path / "specreg-cache" / "drafts").exists()


def test_materialize_refuses_a_verifier_the_draft_does_not_match(tmp_path, draft):
    out = tmp_path / "m"
    r = run("materialize", str(draft), str(out), "--copy", "--verifier", str(wide_verifier(tmp_path)))
    assert r.returncode == 1 and r.stdout == "" and error_codes(r.stderr) == MISMATCH
    assert not out.exists()


def test_force_verifier_serves_it_beside_that_verifier_with_the_errors_as_warnings(tmp_path, draft):
    verifier = wide_verifier(tmp_path)
    r = run("serve", str(draft), "--verifier", str(verifier), "--config-only", "--force-verifier")
    assert r.returncode == 0, r.stderr
    assert shlex.split(r.stdout)[:3] == ["vllm", "serve", str(verifier)]
    warned = [line for line in r.stderr.splitlines() if line.startswith("# warning: verifier-")]
    assert len(warned) == 2 and all(line.endswith("(served anyway: --force-verifier)") for line in warned)
    m = run(
        "materialize", str(draft), str(tmp_path / "m"), "--config-only", "--verifier", str(verifier), "--force-verifier"
    )
    assert m.returncode == 0 and (tmp_path / "m" / "config.json").exists(), m.stderr
    # specreg.json records which verifier the directory was written for and what was overridden
    assert json.loads((tmp_path / "m" / "specreg.json").read_text())["served_beside"] == {
        "verifier": str(verifier),
        "checked": True,
        "overridden": sorted(MISMATCH),
    }


def test_serve_for_sglang_refuses_a_verifier_the_draft_does_not_match(tmp_path, draft):
    out = tmp_path / "d"
    r = run("serve", str(draft), "--engine", "sglang", "--verifier", str(wide_verifier(tmp_path)), "--dir", str(out))
    assert r.returncode == 1 and r.stdout == "" and not out.exists(), r.stderr
    assert all(code in r.stderr for code in MISMATCH)


def test_a_given_verifier_that_is_the_one_the_draft_names_is_not_read(hub, tmp_path, draft):
    r = run("serve", str(draft), "--verifier", "Qwen/Qwen3-8B", "--config-only")
    assert r.returncode == 0, r.stderr
    assert hub.count() == 0


def gemma_draft() -> dict:
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["hidden_size"] = 5376
    cfg["aux_hidden_state_layer_ids"] = [2, 20, 40, 58]
    cfg["speculators_config"]["verifier"] = {
        "architectures": ["Gemma4ForCausalLM"],
        "name_or_path": "google/gemma-4-31B-it",
    }
    return cfg


def test_serve_refuses_a_hub_verifier_the_hub_draft_does_not_match(hub, tmp_path):
    """The catalog's entry serves this draft with -tp 2 beside Gemma 4: beside Qwen3-8B it was printed with it."""
    draft = "RedHatAI/gemma-4-31B-it-speculator.dflash"
    hub.add(draft, {"config.json": json.dumps(gemma_draft()).encode()})
    from hostile_helpers import QWEN3_8B

    hub.add("Qwen/Qwen3-8B", {"config.json": json.dumps(QWEN3_8B).encode()})
    r = run("serve", draft, "--verifier", "Qwen/Qwen3-8B", "--config-only")
    assert r.returncode == 1 and r.stdout == "", r.stderr
    assert error_codes(r.stderr) == MISMATCH
    forced = run("serve", draft, "--verifier", "Qwen/Qwen3-8B", "--config-only", "--force-verifier")
    assert forced.returncode == 0, forced.stderr
    assert "--tensor-parallel-size" not in shlex.split(forced.stdout)
    assert (
        "the catalog's serving hints are for google/gemma-4-31B-it; beside Qwen/Qwen3-8B none is added" in forced.stderr
    )
    own = run("serve", draft, "--config-only")
    assert shlex.split(own.stdout)[-2:] == ["--tensor-parallel-size", "2"], own.stderr


# -- a draft is its source and its weights (issue 45) --------------------------------------------------------


def two_epochs(tmp_path, config: dict | None = None):
    """run/epoch1/draft and run/epoch2/draft: the same config.json, different weights."""
    from safetensors.numpy import save_file

    from weights import tensors

    out = []
    for n in (1, 2):
        folder = tmp_path / "run" / f"epoch{n}" / "draft"
        folder.mkdir(parents=True)
        (folder / "config.json").write_text(json.dumps(config or fixture_config("dflash")))
        arrays = tensors(fc__weight=(4, 12))
        arrays["fc.weight"][:] = n
        save_file(arrays, str(folder / "model.safetensors"))
        out.append(folder)
    return out


def served_dir(stdout: str) -> str:
    argv = shlex.split(stdout)
    return json.loads(argv[argv.index("--speculative-config") + 1])["model"]


def native_draft(tmp_path, n: int):
    from conftest import DATA

    folder = tmp_path / "run" / f"epoch{n}" / "draft"
    folder.mkdir(parents=True)
    (folder / "config.json").write_bytes((DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json").read_bytes())
    (folder / "model.safetensors").write_bytes(b"epoch %d" % n)
    return folder


@pytest.mark.parametrize("kind", ["speculators", "native"])
def test_two_checkpoints_with_the_same_config_are_served_from_two_folders(tmp_path, kind):
    if kind == "native":
        from hostile_helpers import local_verifier

        epochs, extra = (
            [native_draft(tmp_path, 1), native_draft(tmp_path, 2)],
            ["--verifier", str(local_verifier(tmp_path))],
        )
    else:
        epochs, extra = two_epochs(tmp_path), []
    first = run("serve", str(epochs[0]), *extra)
    second = run("serve", str(epochs[1]), *extra)
    assert first.returncode == second.returncode == 0, first.stderr + second.stderr
    one, two = Path(served_dir(first.stdout)), Path(served_dir(second.stdout))
    assert one != two
    assert (one / "model.safetensors").resolve() == (epochs[0] / "model.safetensors").resolve()
    assert (two / "model.safetensors").resolve() == (epochs[1] / "model.safetensors").resolve()
    again = run("serve", str(epochs[0]), *extra)
    assert served_dir(again.stdout) == str(one)  # the same draft, rerun: the same folder


def test_new_weights_in_the_same_folder_are_another_draft(tmp_path):
    from safetensors.numpy import save_file

    from weights import tensors

    (draft,) = two_epochs(tmp_path)[:1]
    before = served_dir(run("serve", str(draft)).stdout)
    save_file(tensors(fc__weight=(4, 12), lm_head__weight=(8, 4)), str(draft / "model.safetensors"))
    after = served_dir(run("serve", str(draft)).stdout)
    assert before != after


def test_two_checkpoints_for_sglang_are_served_from_two_folders(tmp_path):
    epochs = two_epochs(tmp_path)
    dirs = []
    for folder in epochs:
        r = run("serve", str(folder), "--engine", "sglang")
        assert r.returncode == 0, r.stderr
        argv = shlex.split(r.stdout)
        dirs.append(Path(argv[argv.index("--speculative-draft-model-path") + 1]))
    assert dirs[0] != dirs[1]
    assert [(d / "model.safetensors").resolve() for d in dirs] == [(e / "model.safetensors").resolve() for e in epochs]


@pytest.mark.parametrize("engine", ["vllm", "sglang"])
def test_serve_dir_never_replaces_copied_weights_of_another_checkpoint(tmp_path, engine):
    import shutil

    epoch1, epoch2 = two_epochs(tmp_path)
    keep = tmp_path / "keep"
    m = run("materialize", str(epoch1), str(keep), "--copy", "--engine", engine)
    assert m.returncode == 0, m.stderr
    copied = (keep / "model.safetensors").read_bytes()
    shutil.rmtree(epoch1)
    r = run("serve", str(epoch2), "--dir", str(keep), "--engine", engine)
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert "with its weights copied" in r.stderr and "--force" in r.stderr
    assert not (keep / "model.safetensors").is_symlink() and (keep / "model.safetensors").read_bytes() == copied
    forced = run("serve", str(epoch2), "--dir", str(keep), "--engine", engine, "--force")
    assert forced.returncode == 0 and (keep / "model.safetensors").is_symlink(), forced.stderr


def test_serve_dir_never_replaces_copied_weights_with_links_to_them(tmp_path):
    (draft,) = two_epochs(tmp_path)[:1]
    keep = tmp_path / "keep"
    assert run("materialize", str(draft), str(keep), "--copy").returncode == 0
    r = run("serve", str(draft), "--dir", str(keep))
    assert r.returncode == 2 and "with its weights copied" in r.stderr
    assert not (keep / "model.safetensors").is_symlink()
    linked = tmp_path / "linked"
    assert run("materialize", str(draft), str(linked)).returncode == 0
    assert run("serve", str(draft), "--dir", str(linked)).returncode == 0  # links of the same draft: refreshed


def test_same_draft_is_the_source_and_its_weights_not_the_config(tmp_path):
    from specreg.vllm.manifest import same_draft

    epoch1, epoch2 = two_epochs(tmp_path)
    spec1, spec2 = specreg.load(epoch1), specreg.load(epoch2)
    spec1.materialize(tmp_path / "d", weights="link")
    assert same_draft(tmp_path / "d", spec1) and not same_draft(tmp_path / "d", spec2)


def test_a_given_verifier_the_hub_cannot_give_is_refused_unless_the_check_is_waived(tmp_path, draft, monkeypatch):
    """Offline, `serve --verifier HUB_ID` served unchecked with only a warning: a check the user asked
    for that cannot run refuses, or is waived by name."""
    from conftest import run_in_process as run
    from test_cmd_check import closed_port_url

    env = {"HF_ENDPOINT": closed_port_url()}
    for command in (["serve", str(draft)], ["materialize", str(draft), str(tmp_path / "m")]):
        r = run(*command, "--verifier", "org/other", "--config-only", env=env)
        assert r.returncode == 2 and r.stdout == "" and not (tmp_path / "m").exists(), r.stderr
        assert r.stderr.splitlines()[-1].startswith(f"error: {draft}: the draft was not checked against org/other: ")
        assert r.stderr.splitlines()[-1].endswith(
            "; nothing written: give a verifier this machine can read, or pass --skip-verifier-check "
            "(skip_verifier_check=True in Python) to serve the draft beside it unchecked"
        )
    r = run("serve", str(draft), "--verifier", "org/other", "--config-only", "--skip-verifier-check", env=env)
    assert r.returncode == 0 and shlex.split(r.stdout)[:3] == ["vllm", "serve", "org/other"], r.stderr
    (line,) = [x for x in r.stderr.splitlines() if "verifier-unread" in x]
    assert line.startswith("# warning: verifier-unread: the draft was not checked against org/other: could not fetch")
    assert line.endswith("(served unchecked: --skip-verifier-check)")
    monkeypatch.setenv("HF_ENDPOINT", env["HF_ENDPOINT"])
    with pytest.raises(specreg.SpecregError, match="pass --skip-verifier-check"):
        specreg.serve_plan(str(draft), verifier="org/other", config_only=True, write=False)
    plan = specreg.serve_plan(str(draft), verifier="org/other", config_only=True, skip_verifier_check=True)
    assert plan.written and plan.verifier == "org/other"
    recorded = json.loads((Path(plan.directory) / "specreg.json").read_text())["served_beside"]
    assert recorded == {"verifier": "org/other", "checked": False, "overridden": []}


def test_a_refusal_comes_before_anything_is_written_or_downloaded(hub, tmp_path):
    """serve materialized the draft (downloading its weights) and only then refused --spec-flags."""
    src = write_draft(tmp_path / "src", fixture_config("peagle"))
    hub.add("org/peagle", {p.name: p.read_bytes() for p in src.iterdir()})
    from conftest import serving_release

    out = run("serve", "org/peagle", "--vllm", serving_release("peagle"), "--spec-flags", "--dir", str(tmp_path / "d"))
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
