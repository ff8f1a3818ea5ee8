"""Speculator.materialize / llm_kwargs and the `specreg materialize` and `serve` commands."""

import json
import os
import subprocess
import sys

import pytest

import specreg
from conftest import DATA, fixture_config, run_specreg
from weights import safetensors_bytes, tensors, write_draft

REPO = "RedHatAI/Qwen3-8B-speculator.dflash"


def run(*args, env=None):
    return run_specreg(*args, env=env, timeout=60)


@pytest.fixture
def dflash_dir(tmp_path):
    return write_draft(tmp_path / "src", fixture_config("dflash"))


@pytest.fixture
def eagle_dir(tmp_path):
    return write_draft(tmp_path / "eagle", fixture_config("eagle3_generated"))


def snapshot(directory):
    """Every entry under `directory`: name -> link target or bytes."""
    out = {}
    for p in sorted(directory.rglob("*")):
        out[str(p.relative_to(directory))] = (
            os.readlink(p) if p.is_symlink() else p.read_bytes() if p.is_file() else "dir"
        )
    return out


def test_the_config_is_the_draft_config_and_weights_are_linked(dflash_dir, tmp_path):
    spec = specreg.load(dflash_dir, vllm="0.33")
    out = spec.materialize(tmp_path / "out")
    assert out.files == ("config.json", "model.safetensors", "specreg.json")
    written = json.loads((out.directory / "config.json").read_text())
    assert written == spec.draft_config_dict()
    assert "speculators_config" not in written  # vLLM must not re-run its mapping on it
    assert written["is_causal"] is False  # trained bidirectional, stated explicitly (read first from vLLM 0.28)
    weights = out.directory / "model.safetensors"
    assert weights.is_symlink() and os.readlink(weights) == str((dflash_dir / "model.safetensors").resolve())
    manifest = json.loads((out.directory / "specreg.json").read_text())
    assert manifest["files"] == list(out.files)
    assert manifest["source"]["sha256"] == spec.origin.sha256
    assert manifest["weights"] == "link"


def test_copy_and_config_only(dflash_dir, tmp_path):
    spec = specreg.load(dflash_dir)
    copied = spec.materialize(tmp_path / "copy", weights="copy")
    w = copied.directory / "model.safetensors"
    assert not w.is_symlink() and w.read_bytes() == (dflash_dir / "model.safetensors").read_bytes()
    bare = spec.materialize(tmp_path / "bare", weights="none")
    assert sorted(p.name for p in bare.directory.iterdir()) == ["config.json", "specreg.json"]


def test_sharded_weights_link_the_index_and_every_shard(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    out = specreg.load(src).materialize(tmp_path / "out")
    assert out.files == (
        "config.json",
        "model.safetensors.index.json",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "specreg.json",
    )
    assert all((out.directory / n).exists() for n in out.files)


def test_llm_kwargs_point_vllm_at_the_materialized_directory(dflash_dir, tmp_path):
    out = specreg.load(dflash_dir, vllm="0.33").materialize(tmp_path / "out")
    assert out.llm_kwargs() == {
        "model": "Qwen/Qwen3-8B",
        "speculative_config": {"method": "dflash", "model": str(tmp_path / "out"), "num_speculative_tokens": 15},
    }


def test_spec_materialize_returns_the_verifier_and_env_docs_api_describes(dflash_dir, tmp_path):
    spec = specreg.load(dflash_dir, vllm="0.33")
    out = spec.materialize(tmp_path / "out", weights="none")
    api = specreg.materialize(dflash_dir, tmp_path / "api", vllm="0.33", weights="none")
    assert (out.verifier, out.env) == (spec.verifier, spec.serve_env) == (api.verifier, dict(api.env))
    assert out.verifier == "Qwen/Qwen3-8B"


def test_llm_kwargs_refuse_the_unmodified_file_when_it_would_be_served_differently(dflash_dir):
    spec = specreg.load(dflash_dir, vllm="0.33")
    with pytest.raises(specreg.SpecregError, match=r"served differently .*served-causal-mismatch.*materialize"):
        spec.llm_kwargs()


def test_llm_kwargs_use_the_source_when_it_is_served_as_trained(eagle_dir):
    spec = specreg.load(eagle_dir)
    assert spec.materialize_reason is None
    assert spec.llm_kwargs() == {
        "model": "meta-llama/Llama-3.1-8B-Instruct",
        "speculative_config": {"method": "eagle3", "model": str(eagle_dir), "num_speculative_tokens": 3},
    }


def test_a_config_file_not_named_config_json_must_be_materialized():
    spec = specreg.load(DATA / "speculators" / "eagle3_generated.json")
    assert "eagle3_generated.json" in spec.materialize_reason
    with pytest.raises(specreg.SpecregError, match="vLLM reads config.json"):
        spec.llm_kwargs()


def test_a_non_empty_directory_is_refused_and_left_as_it_was(dflash_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    with pytest.raises(specreg.SpecregError, match=r"is not empty \(notes.txt\).*--force"):
        specreg.load(dflash_dir).materialize(out)
    assert snapshot(out) == before


def test_force_replaces_only_what_specreg_writes(dflash_dir, tmp_path):
    out = tmp_path / "out"
    spec = specreg.load(dflash_dir)
    spec.materialize(out, weights="copy")
    (out / "notes.txt").write_text("mine")
    spec.materialize(out, weights="none", force=True)
    # the copied weights listed by the previous manifest are gone; the user's file stays
    assert sorted(p.name for p in out.iterdir()) == ["config.json", "notes.txt", "specreg.json"]
    assert (out / "notes.txt").read_text() == "mine"


def test_a_planted_symlink_is_replaced_not_followed(dflash_dir, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text("precious")
    out = tmp_path / "out"
    out.mkdir()
    (out / "config.json").symlink_to(outside)
    specreg.load(dflash_dir).materialize(out, force=True)
    assert outside.read_text() == "precious"
    assert not (out / "config.json").is_symlink()


@pytest.mark.parametrize("name", ["../escape.safetensors", "/etc/passwd", "sub/x.safetensors", ".hidden", ""])
def test_weight_names_from_an_index_must_be_plain_file_names(tmp_path, name):
    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    index = json.loads((src / "model.safetensors.index.json").read_text())
    index["weight_map"]["fc.weight"] = name
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    out = tmp_path / "out"
    with pytest.raises(specreg.ConfigError) as err:
        specreg.load(src).materialize(out)
    assert err.value.path == '$.weight_map["fc.weight"]'
    assert "model.safetensors.index.json" in str(err.value)
    assert not out.exists()
    assert not (tmp_path / "escape.safetensors").exists()


def test_the_source_directory_itself_is_refused(dflash_dir):
    before = snapshot(dflash_dir)
    with pytest.raises(specreg.SpecregError, match="own directory"):
        specreg.load(dflash_dir).materialize(dflash_dir, force=True)
    assert snapshot(dflash_dir) == before


def test_an_unservable_draft_is_not_materialized(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("xpress"))
    with pytest.raises(specreg.SpecregError):
        specreg.load(src).materialize(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_missing_weights_say_how_to_write_the_config_alone(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    with pytest.raises(specreg.SpecregError, match="config-only"):
        specreg.load(src).materialize(tmp_path / "out")
    assert not (tmp_path / "out").exists()


# -- from the (loopback) Hub ----------------------------------------------------------------------


def hub_files(shards=1):
    cfg = json.dumps(fixture_config("dflash")).encode()
    arrays = tensors(fc__weight=(4, 12), lm_head__weight=(8, 4))
    if shards == 1:
        return {"config.json": cfg, "model.safetensors": safetensors_bytes(arrays)}
    a, b = ({"fc.weight": arrays["fc.weight"]}, {"lm_head.weight": arrays["lm_head.weight"]})
    index = {
        "weight_map": {
            "fc.weight": "model-00001-of-00002.safetensors",
            "lm_head.weight": "model-00002-of-00002.safetensors",
        }
    }
    return {
        "config.json": cfg,
        "model.safetensors.index.json": json.dumps(index).encode(),
        "model-00001-of-00002.safetensors": safetensors_bytes(a),
        "model-00002-of-00002.safetensors": safetensors_bytes(b),
    }


def test_hub_weights_are_fetched_at_the_config_commit_and_linked_from_the_cache(hub, tmp_path):
    files = hub_files(shards=2)
    commit = hub.add(REPO, files)
    hub.add(REPO, {"config.json": b"{}"}, ref="main-moved")  # another ref: must not be used
    spec = specreg.load(REPO)
    out = spec.materialize(tmp_path / "out")
    gets = [p for m, p, _ in hub.requests if m == "GET" and "/resolve/" in p]
    assert all(f"/resolve/{commit}/" in p for p in gets if not p.endswith("/config.json"))
    cache = str(tmp_path / "hf-cache")
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"):
        link = out.directory / name
        assert os.readlink(link).startswith(cache)
        assert link.read_bytes() == files[name]
    assert out.llm_kwargs()["speculative_config"]["model"] == str(tmp_path / "out")


def test_a_directory_of_the_users_own_files_is_refused_before_any_weight_is_fetched(hub, tmp_path):
    hub.add(REPO, hub_files(shards=2))
    spec = specreg.load(REPO)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    with pytest.raises(specreg.SpecregError, match=r"is not empty \(notes.txt\); choose an empty directory"):
        spec.materialize(mine)
    assert hub.bytes_sent(".safetensors") == 0  # nothing downloaded for a write that was never going to happen
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_a_rerun_of_the_same_write_is_not_refused_early(hub, tmp_path):
    """A signed manifest (or a killed write's leftovers: the kill tests in test_dirwrite.py and test_cmd_materialize.py) is for
    the check under DIR's lock to judge: the same write again succeeds without --force."""
    hub.add(REPO, hub_files())
    spec = specreg.load(REPO)
    spec.materialize(tmp_path / "out")
    again = spec.materialize(tmp_path / "out")  # the signed manifest matches this write
    assert (again.directory / "config.json").exists()


def test_a_second_materialize_from_a_cached_commit_makes_no_request(hub, tmp_path):
    commit = hub.add(REPO, hub_files())
    specreg.load(f"{REPO}@{commit}").materialize(tmp_path / "a")
    before = hub.count()
    specreg.load(f"{REPO}@{commit}").materialize(tmp_path / "b")
    assert hub.count() == before


def test_hub_llm_kwargs_pin_the_commit_when_no_materialize_is_needed(hub):
    eagle = json.dumps(fixture_config("eagle3_generated")).encode()
    commit = hub.add("org/eagle", {"config.json": eagle})
    kw = specreg.load("org/eagle").llm_kwargs()
    assert kw["speculative_config"] == {
        "method": "eagle3",
        "model": "org/eagle",
        "revision": commit,
        "num_speculative_tokens": 3,
    }


# -- the command line ---------------------------------------------------------------------------


def test_cli_materialize_json_prints_the_llm_kwargs(dflash_dir, tmp_path):
    r = run("materialize", str(dflash_dir), str(tmp_path / "out"), "--json", "--vllm", "0.33")
    assert r.returncode == 0, r.stderr
    kwargs = specreg.load(dflash_dir, vllm="0.33").llm_kwargs(draft=str(tmp_path / "out"))
    assert json.loads(r.stdout) == {"env": {}, "llm_kwargs": kwargs}


def test_cli_materialize_refuses_a_non_empty_dir_with_exit_2(dflash_dir, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "x").write_text("1")
    r = run("materialize", str(dflash_dir), str(out))
    assert r.returncode == 2
    assert r.stderr.splitlines()[-1] == f"error: {out} is not empty (x); choose an empty directory or pass --force"
    r = run("materialize", str(dflash_dir), str(out), "--force", "--copy")
    assert r.returncode == 0
    assert r.stdout.startswith(f"wrote {out}: config.json, specreg.json, 1 weight files copied\n")


def test_cli_materialize_refuses_an_unservable_draft_with_exit_1(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("xpress"))
    r = run("materialize", str(src), str(tmp_path / "out"))
    assert r.returncode == 1
    assert not (tmp_path / "out").exists()


def test_serve_uses_a_materialized_directory_when_the_file_would_be_served_differently(dflash_dir, tmp_path):
    cache = tmp_path / "cache"
    r = run("serve", str(dflash_dir), "--vllm", "0.33", env={"SPECREG_CACHE": str(cache)})
    assert r.returncode == 0, r.stderr
    cfg = json.loads(r.stdout.split("--speculative-config ")[1].strip().strip("'"))
    draft = cfg["model"]
    assert draft.startswith(str(cache / "drafts"))
    assert json.loads(open(os.path.join(draft, "config.json")).read())["is_causal"] is False
    assert "served differently" in r.stderr and "served-causal-mismatch" in r.stderr
    # served again: the same directory, rewritten in place
    again = run("serve", str(dflash_dir), "--vllm", "0.33", env={"SPECREG_CACHE": str(cache)})
    assert again.stdout == r.stdout


def test_serve_with_dir_materializes_there(dflash_dir, tmp_path):
    r = run("serve", str(dflash_dir), "--dir", str(tmp_path / "mine"))
    assert r.returncode == 0, r.stderr
    assert f'"model": "{tmp_path / "mine"}"' in r.stdout


def test_serve_points_at_the_source_when_it_is_served_as_trained(eagle_dir, tmp_path):
    r = run("serve", str(eagle_dir), env={"SPECREG_CACHE": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    cfg = json.loads(r.stdout.split("--speculative-config ")[1].strip().strip("'"))
    assert cfg["model"] == str(eagle_dir)
    assert not (tmp_path / "cache").exists()


def test_peagle_gets_the_class_name_vllms_plain_path_keeps(tmp_path):
    from conftest import serving_release

    src = write_draft(tmp_path / "src", fixture_config("peagle"))
    spec = specreg.load(src, vllm=serving_release("peagle"))
    assert spec.draft_config["architectures"] == ("PeagleQwen3ForCausalLM",)  # what vLLM's mapping writes
    out = spec.materialize(tmp_path / "out", weights="none")
    written = json.loads((out.directory / "config.json").read_text())
    assert written["architectures"] == ["Eagle3Qwen3ForCausalLM"]
    assert written["pard_token"] == spec.draft_config["pard_token"]
    assert {k: v for k, v in written.items() if k != "architectures"} == {
        k: v for k, v in spec.draft_config_dict().items() if k != "architectures"
    }
    manifest = json.loads((out.directory / "specreg.json").read_text())
    assert "PeagleQwen3ForCausalLM" in manifest["config_changes"][0]


# -- the round trip: a materialized directory reads back as the same plan --------------------------

ROUND_TRIP = sorted(p.name for p in (DATA / "speculators").glob("*.json")) + sorted(
    f"native/{p.name}" for p in (DATA / "native").glob("*.json")
)


def plan_of(spec) -> dict:
    d = spec.draft_config
    return {
        "method": spec.method,
        "tokens": spec.num_speculative_tokens,
        "attention": [a.to_dict() for a in spec.attention],
        "aux": list(d.get("eagle_aux_hidden_state_layer_ids") or []),
        "parallel_drafting": spec.speculative_config.get("parallel_drafting"),
        "verifier": spec.verifier,
    }


@pytest.mark.parametrize("vllm", ["0.26", "0.33"])
@pytest.mark.parametrize("name", ROUND_TRIP)
def test_show_on_a_materialized_directory_reports_the_same_plan(tmp_path, name, vllm):
    path = DATA / ("" if name.startswith("native/") else "speculators") / name
    try:
        spec = specreg.normalize(json.loads(path.read_text()), vllm=vllm, verifier="Qwen/Qwen3-8B", source=str(path))
    except specreg.ConfigError:
        return  # a refused layout: nothing to materialize
    if not spec.servable:
        return
    out = spec.materialize(tmp_path / "draft", weights="none")
    back = specreg.load(out.directory)
    assert back.format == "materialized"
    assert back.vllm_version == spec.vllm_version
    assert plan_of(back) == plan_of(spec)
    assert not back.errors, [f.message for f in back.errors]


def _materialize_on_a_terminal(hub, tmp_path, *flags):
    """Run `specreg materialize` for a Hub draft with a 20 MB weight file, stderr on a pseudo-terminal."""
    import pty
    import select

    hub.add(
        "org/big",
        {
            "config.json": json.dumps(fixture_config("dflash")).encode(),
            "model.safetensors": b"\0" * (20 * 1024 * 1024),
        },
    )
    import fcntl
    import struct
    import termios

    main, sub = pty.openpty()
    fcntl.ioctl(sub, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))  # a terminal 120 columns wide
    proc = subprocess.Popen(
        [sys.executable, "-m", "specreg", "materialize", "org/big", str(tmp_path / "out"), *flags],
        stdout=subprocess.PIPE,
        stderr=sub,
        stdin=subprocess.DEVNULL,
    )
    os.close(sub)
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], 120)
        if not ready:
            break
        try:
            chunk = os.read(main, 65536)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    proc.wait(timeout=120)
    os.close(main)
    return proc.returncode, seen.decode(errors="replace")


def test_a_weight_download_shows_progress_on_a_terminal(hub, tmp_path):
    code, seen = _materialize_on_a_terminal(hub, tmp_path)
    assert code == 0, seen
    assert "model.safetensors" in seen and "100%" in seen and ("MB" in seen or "M/" in seen)


def test_quiet_turns_the_progress_off(hub, tmp_path):
    code, seen = _materialize_on_a_terminal(hub, tmp_path, "-q")
    assert code == 0, seen
    assert "100%" not in seen


@pytest.mark.parametrize("name", ["config.json", "modeling_evil.py", "tokenizer.json", "specreg.json"])
def test_a_weight_index_may_name_weight_files_only(tmp_path, name):
    """An index naming config.json would replace the normalized config with a link to the source's
    (bringing vLLM's own mapping back); a .py file would be fetched and linked. Both are refused."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    index = json.loads((src / "model.safetensors.index.json").read_text())
    index["weight_map"]["fc.weight"] = name
    (src / "model.safetensors.index.json").write_text(json.dumps(index))
    if name != "config.json":
        (src / name).write_text("planted")
    out = tmp_path / "out"
    with pytest.raises(specreg.ConfigError, match="is not a weight file") as err:
        specreg.load(src).materialize(out)
    assert err.value.path == '$.weight_map["fc.weight"]'
    assert not out.exists()


def test_a_number_json_reads_as_infinity_is_bad_input(tmp_path):
    cfg = json.dumps(fixture_config("dflash")).replace('"hidden_size": 4096', '"hidden_size": 1e400')
    (tmp_path / "config.json").write_text(cfg)
    with pytest.raises(specreg.ConfigError, match="1e400 is out of range"):
        specreg.load(tmp_path)


def test_force_trusts_only_a_manifest_specreg_signed(dflash_dir, tmp_path):
    """A planted specreg.json (unsigned, or signed with another key) cannot make --force delete a file
    specreg did not write: only the names written now are replaced."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "precious.txt").write_text("keep me")
    (out / "specreg.json").write_text(
        json.dumps({"written_by": "specreg", "files": ["precious.txt", "config.json"], "signature": "0" * 64})
    )
    specreg.load(dflash_dir).materialize(out, weights="none", force=True)
    assert (out / "precious.txt").read_text() == "keep me"
    doc = json.loads((out / "specreg.json").read_text())
    assert len(doc["signature"]) == 64 and "precious.txt" not in doc["files"]
    # the signed manifest is honoured: a later --force removes what specreg copied earlier
    specreg.load(dflash_dir).materialize(out, weights="copy", force=True)
    assert (out / "model.safetensors").is_file()
    specreg.load(dflash_dir).materialize(out, weights="none", force=True)
    assert not (out / "model.safetensors").exists() and (out / "precious.txt").exists()


def test_a_force_that_fails_half_way_leaves_the_directory_as_it_was(tmp_path, monkeypatch):
    import specreg.dirwrite as m

    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    out = tmp_path / "out"
    specreg.load(src).materialize(out, weights="copy")
    (out / "notes.txt").write_text("mine")
    before = snapshot(out)
    real_copy, calls = m.shutil.copyfileobj, []

    def fail_on_the_second_shard(a, b, length):
        calls.append(a)
        if len(calls) == 3:  # index, shard 1, then the disk fills
            raise OSError(28, "No space left on device")
        return real_copy(a, b, length)

    monkeypatch.setattr(m.shutil, "copyfileobj", fail_on_the_second_shard)
    with pytest.raises(OSError, match="No space left"):
        specreg.load(src).materialize(out, weights="copy", force=True)
    assert snapshot(out) == before  # the old config, weights and manifest, and nothing else


# -- a ModelOpt checkpoint's hf_quant_config.json --------------------------------------------------

QUANT = {
    "producer": {"name": "modelopt", "version": "0.29.0"},
    "quantization": {"quant_algo": "FP8", "kv_cache_quant_algo": None, "exclude_modules": ["lm_head"]},
}


def test_hf_quant_config_json_becomes_the_directorys_quantization_config(dflash_dir, tmp_path):
    """vLLM's get_config reads hf_quant_config.json beside a config.json that has no quantization_config;
    the directory holds specreg's config.json, so it carries the file's content where vLLM reads it."""
    (dflash_dir / "hf_quant_config.json").write_text(json.dumps(QUANT))
    out = specreg.load(dflash_dir, vllm="0.33").materialize(tmp_path / "out", weights="none")
    written = json.loads((out.directory / "config.json").read_text())
    assert written["quantization_config"] == QUANT
    manifest = json.loads((out.directory / "specreg.json").read_text())
    assert any(c.startswith("quantization_config from hf_quant_config.json") for c in manifest["config_changes"])


def test_a_config_that_states_its_quantization_keeps_it(dflash_dir, tmp_path):
    cfg = json.loads((dflash_dir / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors"}
    (dflash_dir / "config.json").write_text(json.dumps(cfg))
    (dflash_dir / "hf_quant_config.json").write_text(json.dumps(QUANT))  # vLLM reads it only without one
    out = specreg.load(dflash_dir, vllm="0.33").materialize(tmp_path / "out", weights="none")
    assert json.loads((out.directory / "config.json").read_text())["quantization_config"] == {
        "quant_method": "compressed-tensors"
    }


@pytest.mark.parametrize("bad", ["link-out", "not-json", "fifo"])
def test_a_hostile_hf_quant_config_is_refused_naming_it_and_nothing_is_written(dflash_dir, tmp_path, bad):
    path = dflash_dir / "hf_quant_config.json"
    if bad == "link-out":
        (tmp_path / "secret.json").write_text("{}")
        path.symlink_to(tmp_path / "secret.json")
    elif bad == "fifo":
        os.mkfifo(path)
    else:
        path.write_text("{not json")
    with pytest.raises(specreg.ConfigError) as info:
        specreg.load(dflash_dir, vllm="0.33").materialize(tmp_path / "out", weights="none")
    assert "hf_quant_config.json" in str(info.value)
    assert not (tmp_path / "out").exists()


def test_a_hub_drafts_hf_quant_config_is_fetched_at_the_commit(hub, tmp_path):
    commit = hub.add(REPO, {**hub_files(), "hf_quant_config.json": json.dumps(QUANT).encode()})
    out = specreg.load(REPO).materialize(tmp_path / "out")
    assert json.loads((out.directory / "config.json").read_text())["quantization_config"] == QUANT
    assert any(p.endswith(f"/resolve/{commit}/hf_quant_config.json") for m, p, _ in hub.requests if m == "GET")


# -- values that would allocate ---------------------------------------------------------------------


def test_a_lone_surrogate_in_a_passed_through_string_is_written_as_it_was(tmp_path):
    """JSON can carry "\\ud800"; UTF-8 cannot: materialize was exit 3 (UnicodeEncodeError)."""
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["note"] = "\ud800x"
    src = write_draft(tmp_path / "src", cfg)
    r = run("materialize", str(src), str(tmp_path / "out"), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "out" / "config.json").read_text())["note"] == "\ud800x"


# -- the file system says no ---------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["link to an empty directory", "dangling link", "regular file"])
def test_a_target_that_is_not_a_real_directory_is_one_line_exit_2(tmp_path, shape):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    target = tmp_path / "out"
    if shape == "link to an empty directory":
        (tmp_path / "empty").mkdir()
        target.symlink_to(tmp_path / "empty", target_is_directory=True)
    elif shape == "dangling link":
        target.symlink_to(tmp_path / "gone")
    else:
        target.write_text("mine")
    r = run("materialize", str(src), str(target), "--config-only", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr
    assert str(target) in r.stderr
    assert not (tmp_path / "gone").exists() and (
        shape != "link to an empty directory" or list((tmp_path / "empty").iterdir()) == []
    )


def test_an_unusable_specreg_cache_is_one_line_naming_it(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (tmp_path / "a-file").write_text("x")
    r = run(
        "materialize",
        str(src),
        str(tmp_path / "out"),
        "--config-only",
        "--verifier",
        "Qwen/Qwen3-8B",
        env={"SPECREG_CACHE": str(tmp_path / "a-file" / "cache")},
    )
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr
    assert str(tmp_path / "a-file") in r.stderr and "not a directory" in r.stderr.lower()


@pytest.mark.parametrize("name", ["dflash", "dflash2"])
def test_reading_back_keeps_the_fields_a_variant_passes_into_dflash_config(tmp_path, name):
    """The read-back restores every field a variant's traits pass through (its extras, wherever
    config.json holds them), so the directory's plan keeps them: DFlash's value scale and DFlash2's
    embedding scale were dropped when the reader listed the fields by algorithm name."""
    from conftest import fixture_config

    cfg = fixture_config(name)
    cfg["attention_value_scale"] = 0.5
    if name == "dflash2":
        cfg["input_embedding_scale"] = 2.0
    spec = specreg.normalize(cfg, verifier="Qwen/Qwen3-8B")
    back = specreg.load(spec.materialize(tmp_path / "draft", weights="none").directory)
    kept = {k: back.draft_config["dflash_config"].get(k) for k in ("attention_value_scale", "input_embedding_scale")}
    assert kept == {"attention_value_scale": 0.5, "input_embedding_scale": 2.0 if name == "dflash2" else None}
    assert back.provenance["draft_config.dflash_config.attention_value_scale"].sources == (
        "$.dflash_config.attention_value_scale",
    )
