"""The public Python API for what the commands print (specreg.api: serve_plan, materialize, check, the
catalog operations): frozen values with to_dict(), the same answers as the CLI's --json, and the
trainer-saved draft whose verifier is the local path it trained with."""

import hashlib
import json
from pathlib import Path

import attrs
import hypothesis
import pytest
from hypothesis import strategies as st

import specreg
from conftest import DATA, fixture_config, run_specreg
from test_catalog import MINIMAL, registry_with
from weights import write_draft

run = run_specreg
ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def draft(tmp_path):
    return write_draft(tmp_path / "draft", fixture_config("dflash"))


def test_serve_plan_is_what_serve_json_prints(tmp_path, draft):
    cli = run("serve", str(draft), "--json", "--config-only", "--dir", str(tmp_path / "d"), "--", "--port", "8001")
    assert cli.returncode == 0, cli.stderr
    plan = specreg.serve_plan(str(draft), vllm_args=["--port", "8001"], directory=tmp_path / "d", config_only=True)
    assert json.loads(cli.stdout) == {"env": dict(plan.env), "argv": list(plan.argv)}
    assert plan.argv[:3] == ("vllm", "serve", "Qwen/Qwen3-8B") and plan.argv[-2:] == ("--port", "8001")
    assert plan.directory == str(tmp_path / "d") and plan.written and plan.verifier == "Qwen/Qwen3-8B"
    assert [n for n in plan.notes if "serving the materialized directory" in n]  # why it materialized
    assert json.loads(json.dumps(plan.to_dict()))["argv"] == list(plan.argv)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        plan.argv = ()  # type: ignore[misc]


def test_serve_plan_without_writing_names_the_directory_it_would_write(tmp_path, draft):
    plan = specreg.serve_plan(str(draft), directory=tmp_path / "d", write=False)
    assert plan.directory == str(tmp_path / "d") and not plan.written
    assert not (tmp_path / "d").exists()
    assert json.loads(plan.argv[4])["model"] == str(tmp_path / "d")


def test_serve_plan_refuses_a_flag_for_what_specreg_writes(draft):
    with pytest.raises(specreg.SpecregError, match="--speculative-config after --: specreg writes"):
        specreg.serve_plan(str(draft), vllm_args=["--speculative-config", "{}"], write=False)


def test_materialize_returns_the_directory_and_the_llm_kwargs(tmp_path, draft):
    done = specreg.materialize(str(draft), tmp_path / "m", weights="none")
    cli = run("materialize", str(draft), str(tmp_path / "m2"), "--config-only", "--json")
    assert cli.returncode == 0, cli.stderr
    expected = json.loads(cli.stdout)["llm_kwargs"]
    expected["speculative_config"]["model"] = str(tmp_path / "m")
    assert dict(done.llm_kwargs) == expected
    assert done.files == ("config.json", "specreg.json") and done.weights == "none"
    assert json.loads(json.dumps(done.to_dict()))["directory"] == str(tmp_path / "m")


def test_check_report_is_what_check_json_prints(draft):
    report = specreg.check(str(draft), verifier=str(draft), gpu="H100")
    cli = run("check", str(draft), "--verifier", str(draft), "--gpu", "H100", "--json")
    assert json.loads(cli.stdout) == json.loads(json.dumps(report.to_dict()))
    assert report.gpu.gpu == "H100" and report.weights.tensors == 3 and report.verifier.id == str(draft)
    assert report.findings == report.speculator.findings
    assert "attention-backend" in {f.code for f in report.findings}


def entry(entry_id: str, *, al: float | None = None, rate: float | None = None, k: int = 3) -> str:
    text = MINIMAL.replace("org/draft", entry_id).replace("Qwen/Qwen3-8B", "Qwen/Qwen3-32B")
    if al is None and rate is None:
        return text
    text += '\n[[baselines]]\nkind = "published"\nsource = "https://example.org/card"\n\n[baselines.harness]\ndataset = "mt-bench"\n'
    text += f"k = {k}\n"
    text += '\n[baselines.provenance]\nfigure = "printed"\nrow = "the card\'s mt-bench row"\n'
    if al is not None:
        text += f"\n[baselines.metrics.acceptance_length]\nvalue = {al}\n"
    if rate is not None:
        text += f"\n[baselines.metrics.draft_acceptance_rate]\nvalue = {rate}\n"
    return text


def test_catalog_list_for_a_verifier_ranks_figures_only_within_their_metric_k_dataset_and_engine(tmp_path):
    root = registry_with(
        tmp_path,
        {
            "org/a.toml": entry("org/a"),
            "org/b.toml": entry("org/b", al=2.1),
            "org/c.toml": entry("org/c", rate=0.4),
            "org/d.toml": entry("org/d", al=3.4, k=7),
            "org/e.toml": entry("org/e", al=2.8, rate=0.3),
        },
    )
    listing = specreg.catalog_list(verifier="qwen/QWEN3-32b", registry=root)
    # the entries in catalog order; d's 3.4 at k = 7 is not ranked above b's and e's at k = 3
    assert [e.id for e in listing.entries] == ["org/a", "org/b", "org/c", "org/d", "org/e"]
    assert [(f.entry_id, f.metric, f.k, f.value) for f in listing.figures] == [
        ("org/e", "acceptance_length", 3, 2.8),
        ("org/b", "acceptance_length", 3, 2.1),
        ("org/d", "acceptance_length", 7, 3.4),
        ("org/c", "draft_acceptance_rate", 3, 0.4),
        ("org/e", "draft_acceptance_rate", 3, 0.3),
    ]
    assert listing.total == 5
    assert listing.to_dict()["figures"][0] == {
        "entry_id": "org/e",
        "baseline": 0,
        "metric": "acceptance_length",
        "value": 2.8,
        "k": 3,
        "dataset": "mt-bench",
        "engine": None,
        "algorithm": "dflash",
    }
    # without a verifier, the catalog's own order and no figures
    plain = specreg.catalog_list(registry=root)
    assert [e.id for e in plain.entries] == ["org/a", "org/b", "org/c", "org/d", "org/e"] and plain.figures == ()


def test_catalog_list_refuses_a_verifier_no_entry_has(tmp_path):
    root = registry_with(tmp_path, {"org/a.toml": entry("org/a")})
    with pytest.raises(
        specreg.SpecregError, match="--verifier 'Qwen/Qwen3-33B': no catalog entry has it .*did you mean"
    ):
        specreg.catalog_list(verifier="Qwen/Qwen3-33B", registry=root)


def test_catalog_show_separates_baselines_with_blank_lines_not_escapes(tmp_path):
    root = registry_with(tmp_path, {"org/b.toml": entry("org/b", al=2.1)})
    r = run("catalog", "show", "org/b", "--registry", str(root))
    assert r.returncode == 0
    assert "\\x0a" not in r.stdout
    assert "  file       " in r.stdout and r.stdout.split("  file       ")[1].splitlines()[1:3] == [
        "",
        "baseline 0: published, https://example.org/card",
    ]
    empty = run(
        "catalog", "show", "org/a", "--registry", str(registry_with(tmp_path / "2", {"org/a.toml": entry("org/a")}))
    )
    assert empty.stdout.splitlines()[-2:] == ["", "no baselines (nothing published with numbers)"]


def test_catalog_entry_and_check_as_values(tmp_path):
    root = registry_with(tmp_path, {"org/b.toml": entry("org/b", al=2.1)})
    assert specreg.catalog_entry("org/b", registry=root).baselines[0].metrics.acceptance_length.value == 2.1
    with pytest.raises(specreg.SpecregError, match=r"no catalog entry org/c \(did you mean org/b\?\)"):
        specreg.catalog_entry("org/c", registry=root)
    report = specreg.catalog_check(registry=root)
    assert report.to_dict() == {"entries": 1, "problems": [], "warnings": []}


def test_catalog_check_json_lists_every_problem(tmp_path):
    root = registry_with(tmp_path, {"org/b.toml": entry("org/b").replace('algorithm = "dflash"', "algorithm = 3")})
    r = run("catalog", "check", "--registry", str(root), "--json")
    assert r.returncode == 1
    doc = json.loads(r.stdout)
    assert doc["entries"] == 0 and [p["path"] for p in doc["problems"]] == ["$.algorithm"]
    assert doc["problems"][0]["file"].endswith("org/b.toml")


def test_catalog_pin_json(hub, tmp_path):
    config = json.dumps(fixture_config("dflash")).encode()
    commit = hub.add("org/draft", {"config.json": config})
    root = registry_with(tmp_path, {"org/draft.toml": MINIMAL})
    r = run("catalog", "pin", "org/draft", "--registry", str(root), "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "entry_id": "org/draft",
        "path": str(root / "org" / "draft.toml"),
        "revision": commit,
        "config_sha256": hashlib.sha256(config).hexdigest(),
        "previous_revision": None,
        "changed": True,
    }


# -- a draft fresh from the speculators trainer: its verifier is the local path it trained with -----


def trained(tmp_path, verifier: str):
    config = fixture_config("dflash")
    config["speculators_config"]["verifier"]["name_or_path"] = verifier
    return write_draft(tmp_path / "trained", config)


def test_serve_uses_the_recorded_local_verifier_when_it_exists(tmp_path):
    local = tmp_path / "models" / "Qwen3-8B"
    local.mkdir(parents=True)
    src = trained(tmp_path, str(local))
    r = run("serve", str(src), "--json", "--config-only", "--dir", str(tmp_path / "d"))
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["argv"][2] == str(local)
    assert "# warning: verifier-local-path:" in r.stderr
    m = run("materialize", str(src), str(tmp_path / "m"), "--config-only", "--json")
    assert m.returncode == 0, m.stderr
    assert json.loads(m.stdout)["llm_kwargs"]["model"] == str(local)


def test_serve_still_asks_for_a_recorded_local_verifier_that_is_not_here(tmp_path):
    src = trained(tmp_path, str(tmp_path / "gone" / "Qwen3-8B"))
    r = run("serve", str(src), "--config-only", "--dir", str(tmp_path / "d"))
    assert r.returncode == 2
    assert "the config names no usable verifier; pass --verifier ORG/NAME" in r.stderr


def test_serve_never_prints_a_relative_training_path_as_the_verifier_to_serve(tmp_path):
    src = trained(tmp_path, "verifier")
    r = run("serve", str(src), "--config-only", "--dir", str(tmp_path / "d"))
    assert r.returncode == 2 and "vllm serve verifier" not in r.stdout
    assert "the config names no usable verifier; pass --verifier ORG/NAME" in r.stderr


def test_the_local_verifier_finding_names_the_vllm_targeted(tmp_path):
    src = trained(tmp_path, "/mnt/ckpt/Qwen3-8B")
    spec = specreg.load(src, vllm="0.30")
    (f,) = [f for f in spec.findings if f.code == "verifier-local-path"]
    assert "vLLM 0.30 refuses it on its automatic path" in f.message


def test_convert_json_says_what_was_written(tmp_path):
    native = ROOT / "tests" / "data" / "native" / "zlab_dflash_qwen3_8b_fixture.json"
    src = tmp_path / "native"
    src.mkdir()
    (src / "config.json").write_bytes(native.read_bytes())
    r = run(
        "convert",
        str(src),
        str(tmp_path / "twin"),
        "--verifier",
        "Qwen/Qwen3-8B",
        "--config-only",
        "--json",
        "--skip-verifier-check",
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {
        "directory": str(tmp_path / "twin"),
        "format": "zlab",
        "files": ["config.json", "specreg.json"],
        "verifier": "Qwen/Qwen3-8B",
    }


def test_serve_plan_raises_not_servable_with_the_findings_that_say_why(tmp_path):
    src = tmp_path / "dta"
    src.mkdir()
    (src / "config.json").write_bytes((ROOT / "tests/data/real/specforge-history/qwen3-8b-dta.json").read_bytes())
    with pytest.raises(specreg.NotServable) as err:
        specreg.serve_plan(str(src), verifier="Qwen/Qwen3-8B", write=False)
    assert err.value.gpu is None and err.value.findings and all(f.severity == "error" for f in err.value.findings)
    assert err.value.message.startswith("not servable as trained by vLLM ")
    with pytest.raises(specreg.NotServable):
        specreg.materialize(str(src), tmp_path / "m", verifier="Qwen/Qwen3-8B", weights="none")
    assert not (tmp_path / "m").exists()


def test_serve_plan_raises_not_servable_where_no_backend_serves_the_gpu(tmp_path):
    from test_vllm_gpu_plan import dflash_draft

    dflash_draft(tmp_path, head_dim=16)  # head size 16 with an FP8 KV cache: no backend of 0.25 on an A100
    with pytest.raises(specreg.NotServable) as err:
        specreg.serve_plan(
            str(tmp_path / "draft"),
            verifier=str(tmp_path / "verifier"),
            vllm="0.25",
            gpu="A100",
            vllm_args=["--kv-cache-dtype", "fp8"],
            write=False,
        )
    assert err.value.gpu == "A100" and [f.code for f in err.value.findings] == ["no-attention-backend"]


# --------------------------------------------------------------------------------------------------
# load() against a loopback Hub (HF_ENDPOINT), never against mocks of huggingface_hub.

DFLASH = (DATA / "speculators" / "dflash.json").read_bytes()


REPO = "RedHatAI/Qwen3-8B-speculator.dflash"


def test_load_downloads_config_json_only_and_normalizes_it(hub):
    commit = hub.add(REPO, {"config.json": DFLASH, "model.safetensors": b"x" * 1000})
    spec = specreg.load(REPO, vllm="0.33")
    assert spec.method == "dflash"
    assert spec.num_speculative_tokens == 15
    assert spec.origin.repo_id == REPO
    assert spec.origin.commit == commit
    assert len(spec.origin.sha256) == 64
    # huggingface_hub itself may ask /api/agent-harnesses once a day; every file request is config.json
    files = {path for _, path, _ in hub.requests if "/resolve/" in path}
    assert files == {f"/{REPO}/resolve/main/config.json"}


def test_a_cached_commit_revision_makes_no_request(hub):
    commit = hub.add(REPO, {"config.json": DFLASH})
    specreg.load(f"{REPO}@{commit}")
    before = hub.count()
    spec = specreg.load(f"{REPO}@{commit}")
    assert hub.count() == before
    assert spec.origin.commit == commit


def test_the_revision_argument_and_at_syntax_agree(hub):
    commit = hub.add(REPO, {"config.json": DFLASH}, ref="v1")
    assert specreg.load(REPO, revision="v1").origin.commit == commit
    with pytest.raises(specreg.ConfigError, match="two revisions given"):
        specreg.load(f"{REPO}@v1", revision="main")


def test_offline_mode_uses_the_cache(hub, monkeypatch):
    commit = hub.add(REPO, {"config.json": DFLASH})
    specreg.load(REPO)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    before = hub.count()
    spec = specreg.load(REPO)
    assert hub.count() == before
    assert spec.origin.commit == commit


def test_offline_without_cache_is_a_clear_error(hub, monkeypatch):
    hub.add(REPO, {"config.json": DFLASH})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load(REPO)
    # it may be a local directory too; as it is a catalog id, what the catalog knows and how to go on without the Hub
    assert str(info.value).startswith(
        f"{REPO}: no local directory {REPO}; as a Hub repository: config.json is not in the Hugging Face cache and "
        f"offline mode is on (HF_HUB_OFFLINE). {REPO} is in specreg's catalog: a dflash draft for Qwen/Qwen3-8B"
    )
    assert f"`specreg catalog show {REPO}` works offline" in str(info.value) and "specreg show DIR" in str(info.value)
    assert str(info.value).count(REPO) == 5  # the source, no such directory, the entry, the two commands
    assert hub.count() == 0


def test_an_unreachable_hub_for_a_catalog_id_says_what_the_catalog_knows(tmp_path):
    import os
    import subprocess
    import sys

    env = {
        **os.environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_CACHE": str(tmp_path / "cache"),
        "HF_HUB_OFFLINE": "0",
    }
    shown = subprocess.run(
        [sys.executable, "-m", "specreg", "show", "RedHatAI/gemma-4-31B-it-speculator.dflash"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    line = shown.stderr.strip()
    assert line.count("could not fetch config.json: the connection failed") == 1
    assert (
        "is in specreg's catalog: a dflash draft for google/gemma-4-31B-it; serving hints tensor_parallel_size=2"
        in line
    )
    assert "works offline" in line
    catalog = subprocess.run(
        [sys.executable, "-m", "specreg", "catalog", "show", "RedHatAI/gemma-4-31B-it-speculator.dflash"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert catalog.returncode == 0 and "verifier" in catalog.stdout


def test_a_missing_repo_is_a_clear_error(hub):
    with pytest.raises(specreg.RepoNotFoundError, match="no repository nobody/nothing on the Hub"):
        specreg.load("nobody/nothing")


def test_a_mistyped_local_directory_says_it_is_neither_here_nor_on_the_hub(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "drafts" / "q8").mkdir(parents=True)
    with pytest.raises(specreg.RepoNotFoundError) as info:
        specreg.load("drafts/q17")  # nothing close to it in drafts/: it may be a Hub repo
    assert str(info.value) == (
        "drafts/q17: no local directory drafts/q17, and no repository drafts/q17 on the Hub "
        "(or it is private and no valid token was sent)"
    )


def test_a_local_folder_one_letter_away_is_suggested_before_the_hub_is_asked(hub, tmp_path, monkeypatch):
    """It once waited for the Hub's three tries (3.7 s unreachable) and then named a catalog draft."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "drafts" / "q8").mkdir(parents=True)
    with pytest.raises(specreg.ConfigError) as info:
        specreg.load("drafts/q9")
    assert str(info.value) == (
        "drafts/q9: source: no such file or directory (did you mean drafts/q8?); a folder so close to it is "
        "here, so the Hub was not asked"
    )
    assert hub.requests == []


def test_a_mistyped_local_directory_offline_says_it_is_not_here(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load("drafts/q9")
    assert str(info.value) == (
        "drafts/q9: no local directory drafts/q9; as a Hub repository: config.json is not in "
        "the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE)"
    )
    assert hub.count() == 0


def test_a_mistyped_local_directory_with_no_hub_server_is_one_line_saying_it_is_not_here(tmp_path):
    from conftest import run_specreg

    done = run_specreg(
        "show", "drafts/q9", cwd=tmp_path, env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"}
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "error: drafts/q9: no local directory drafts/q9; as a Hub repository: could "
        "not fetch config.json: the connection failed (ConnectError) (tried 3 times)"
    ]


def test_a_source_with_a_revision_names_a_hub_repository_only(hub):
    with pytest.raises(specreg.RepoNotFoundError) as info:
        specreg.load("drafts/q9@main")
    assert str(info.value) == (
        "drafts/q9@main: no repository drafts/q9 on the Hub (or it is private and no valid token was sent)"
    )


def test_a_gated_repo_is_a_clear_error(hub):
    hub.add("meta-llama/gated-draft", {"config.json": DFLASH}, gated=True)
    with pytest.raises(specreg.GatedRepoError, match="is gated: accept its conditions"):
        specreg.load("meta-llama/gated-draft")


def test_a_gated_repo_loads_with_a_token_and_the_token_is_never_shown(hub, monkeypatch):
    hub.add("meta-llama/gated-draft", {"config.json": DFLASH}, gated=True)
    monkeypatch.setenv("HF_TOKEN", "hf_secret_token_value")
    spec = specreg.load("meta-llama/gated-draft")
    assert "hf_secret_token_value" not in spec.to_json()
    assert any(h.get("authorization") == "Bearer hf_secret_token_value" for _, _, h in hub.requests)


def test_a_bad_revision_is_a_clear_error(hub):
    hub.add(REPO, {"config.json": DFLASH})
    with pytest.raises(specreg.RevisionNotFoundError, match="has no revision 'v9'"):
        specreg.load(f"{REPO}@v9")


def test_a_repo_without_config_json_is_a_clear_error(hub):
    hub.add(REPO, {"README.md": b"# hi"})
    with pytest.raises(specreg.FileNotFoundOnHubError, match="has no config.json"):
        specreg.load(REPO)


def test_invalid_json_on_the_hub_is_a_config_error(hub):
    hub.add(REPO, {"config.json": b'{"speculators_model_type": "dflash",'})
    with pytest.raises(specreg.ConfigError) as info:
        specreg.load(REPO)
    assert info.value.path == "$"
    assert "invalid JSON" in str(info.value)


@pytest.mark.parametrize("source", ["not a repo", "org/name/extra", "org/na..me", "-org/name"])
def test_a_source_that_is_neither_path_nor_repo_id_is_refused_before_any_request(hub, source):
    with pytest.raises(specreg.ConfigError, match="neither an existing local path nor a Hub repo id"):
        specreg.load(source)
    assert hub.count() == 0


@pytest.mark.parametrize("revision", ["../../etc", "a b", "main/"])
def test_a_malformed_revision_is_refused_before_any_request(hub, revision):
    with pytest.raises(specreg.ConfigError, match="not a valid revision"):
        specreg.load(REPO, revision=revision)
    assert hub.count() == 0


def test_a_hub_500_is_one_line_naming_the_status_with_specregs_retries_only(hub, tmp_path):
    import subprocess
    import sys
    import time

    hub.add("org/broken", {"config.json": b"{}"})
    hub.fault("config.json", "forever:500")
    start = time.monotonic()
    out = subprocess.run(
        [sys.executable, "-m", "specreg", "show", "org/broken"], capture_output=True, text=True, timeout=120
    )
    took = time.monotonic() - start
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: org/broken: the Hub answered HTTP 500 for config.json of org/broken (tried 3 times)"
    ]
    heads = [r for r in hub.requests if r[0] == "HEAD" and r[1].endswith("config.json")]
    assert len(heads) == 3  # the first try and SPECREG_HUB_RETRIES=2 (default); none of huggingface_hub's own
    print(f"HTTP 500 reported after {took:.1f} s")


def test_hub_retries_are_configurable_and_honoured(hub, monkeypatch):
    hub.add("org/broken", {"config.json": b"{}"})
    hub.fault("config.json", "forever:503")
    monkeypatch.setenv("SPECREG_HUB_RETRIES", "0")
    with pytest.raises(specreg.HubError, match="HTTP 503 .*tried 1 time"):
        specreg.load("org/broken")
    assert len([r for r in hub.requests if r[1].endswith("config.json")]) == 1


def test_the_gated_hint_names_the_current_login_command(hub):
    hub.add("org/gated", {"config.json": b"{}"}, gated=True)
    with pytest.raises(specreg.GatedRepoError, match=r"hf auth login"):
        specreg.load("org/gated")


def test_every_fetch_follows_one_hub_policy_against_an_unreachable_endpoint(tmp_path):
    """show, check's verifier fetch, catalog pin and verify's dataset load, with the Hub unreachable:
    each is one `error:` line saying it tried specreg's 3 times (SPECREG_HUB_RETRIES), and none prints
    huggingface_hub's or datasets' own retry lines ("Retrying in 8s"). (How long each takes is measured
    by benchmarks/, not asserted here.)"""
    import os
    import shutil
    import subprocess
    import sys

    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    registry = tmp_path / "registry"
    shutil.copytree(root / "registry", registry)
    env = {
        **os.environ,
        "HF_ENDPOINT": "http://127.0.0.1:9",
        "HF_HUB_CACHE": str(tmp_path / "hf"),
        "HF_DATASETS_CACHE": str(tmp_path / "ds"),
        "HF_HUB_OFFLINE": "0",
        "HF_DATASETS_OFFLINE": "0",
    }
    commands = [
        ["show", "RedHatAI/Qwen3-8B-speculator.dflash"],
        ["check", str(root / "examples" / "qwen3-8b-dflash"), "--verifier", "Qwen/Qwen3-8B", "--no-weights"],
        ["catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflash", "--registry", str(registry)],
        ["verify", "RedHatAI/Qwen3-8B-speculator.eagle3", "--server", "http://127.0.0.1:9"],
    ]
    for argv in commands:
        done = subprocess.run(
            [sys.executable, "-m", "specreg", *argv], capture_output=True, text=True, env=env, timeout=300
        )
        lines = [line for line in done.stderr.splitlines() if not line.startswith("#")]
        assert done.returncode == 2, (argv, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, done.stderr)
        assert "(tried 3 times)" in lines[0] and "Retrying in" not in done.stderr + done.stdout, (argv, done.stderr)


# -- the verifier it runs with (issue 45) ------------------------------------------------------------------


def test_load_with_a_verifier_reports_what_check_finds_for_that_pair(tmp_path, draft):
    from test_serve import MISMATCH, wide_verifier

    verifier = str(wide_verifier(tmp_path))
    loaded = specreg.load(draft, verifier=verifier)
    checked = specreg.check(draft, verifier=verifier, weights=False)
    assert loaded.findings == checked.findings and [f.code for f in loaded.errors] == MISMATCH
    assert loaded.checks.verifier.id == verifier and not loaded.servable
    assert specreg.load(draft, verifier=verifier, check_verifier=False).errors == ()


def test_serve_plan_and_materialize_refuse_a_verifier_the_draft_does_not_match(tmp_path, draft):
    from test_serve import MISMATCH, wide_verifier

    verifier = str(wide_verifier(tmp_path))
    with pytest.raises(specreg.NotServable) as err:
        specreg.serve_plan(str(draft), verifier=verifier, config_only=True, directory=tmp_path / "d")
    assert [f.code for f in err.value.findings] == MISMATCH and not (tmp_path / "d").exists()
    unchecked = specreg.load(draft)  # a Speculator loaded without it is checked there too
    with pytest.raises(specreg.NotServable):
        specreg.materialize(unchecked, tmp_path / "m", verifier=verifier, weights="none")
    assert not (tmp_path / "m").exists()
    plan = specreg.serve_plan(str(draft), verifier=verifier, config_only=True, force_verifier=True)
    assert plan.verifier == verifier and plan.argv[2] == verifier
    assert [f.severity for f in plan.findings if f.code in MISMATCH] == ["warning", "warning"]
    done = specreg.materialize(unchecked, tmp_path / "m", verifier=verifier, weights="none", force_verifier=True)
    assert done.verifier == verifier


# What a program hands the API is checked as the CLI and the file reader check it (issue 47).


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (float("nan"), "nan is not a JSON number"),
        (float("inf"), "inf is not a JSON number"),
        (float("-inf"), "-inf is not a JSON number"),
    ],
)
def test_normalize_refuses_a_number_a_config_file_cannot_hold(value, message):
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["rms_norm_eps"] = value
    with pytest.raises(specreg.ConfigError) as caught:
        specreg.normalize(cfg, vllm="0.33", source="mine")
    assert caught.value.path == "$.transformer_layer_config.rms_norm_eps"
    assert message in str(caught.value) and caught.value.source == "mine"


def test_materialize_never_writes_nan_into_config_json(tmp_path):
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["rms_norm_eps"] = float("nan")
    with pytest.raises(specreg.ConfigError, match="rms_norm_eps: nan is not a JSON number"):
        specreg.normalize(cfg, vllm="0.33").materialize(tmp_path / "m", weights="none")
    assert not (tmp_path / "m").exists()


def test_a_decimal_is_refused_where_it_is_not_when_to_json_runs():
    from decimal import Decimal

    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"]["rms_norm_eps"] = Decimal("1e-6")
    with pytest.raises(specreg.ConfigError, match=r"rms_norm_eps: a Decimal \(.*\) is not a JSON value"):
        specreg.normalize(cfg, vllm="0.33")


def test_a_nested_cycle_is_a_config_error_naming_where_it_closes():
    cfg = fixture_config("dflash")
    loop: list = []
    loop.append(loop)
    cfg["transformer_layer_config"]["extra"] = [loop]
    with pytest.raises(specreg.ConfigError) as caught:
        specreg.normalize(cfg, vllm="0.33")
    assert caught.value.path == "$.transformer_layer_config.extra[0][0]"
    assert "holds itself (a cycle)" in str(caught.value)


JSON_LEAVES = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), st.text()
)
NOT_JSON = st.one_of(
    st.sampled_from([float("nan"), float("inf"), float("-inf")]),
    st.decimals(allow_nan=False),
    st.binary(),
    st.sets(st.integers(), max_size=2),
    st.complex_numbers(),
)


@hypothesis.settings(max_examples=60, deadline=None)
@hypothesis.given(junk=NOT_JSON, key=st.text(min_size=1, max_size=8), around=st.lists(JSON_LEAVES, max_size=3))
def test_any_value_a_json_file_cannot_hold_is_a_config_error_naming_its_path(junk, key, around):
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"] = {**cfg["transformer_layer_config"], "zz_added": [*around, {key: junk}]}
    with pytest.raises(specreg.ConfigError) as caught:
        specreg.normalize(cfg, vllm="0.33")
    assert caught.value.path.startswith(f"$.transformer_layer_config.zz_added[{len(around)}]")


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("tensor_parallel_size", 0, "tensor_parallel_size must be an integer from 1 to 1000000000, got 0"),
        ("tensor_parallel_size", -1, "got -1"),
        ("tensor_parallel_size", True, "got true"),
        ("tensor_parallel_size", 2.5, "got 2.5"),
        ("tensor_parallel_size", "2", 'got "2"'),
        ("max_model_len", 0, "max_model_len must be an integer from 1 to 1000000000, got 0"),
        ("max_model_len", 10**30, "got 1000000000000000000000000000000"),
        ("draft_tensor_parallel_size", 0, "draft_tensor_parallel_size must be an integer from 1 to"),
        ("gpu", True, "gpu must be a string, got bool true"),
        ("gpu", "H9000", "gpu: "),
        ("weights", "no", "weights must be True or False"),
    ],
)
def test_check_refuses_what_the_cli_refuses(draft, argument, value, message):
    with pytest.raises(specreg.SpecregError) as caught:
        specreg.check(str(draft), **{argument: value})
    assert message in str(caught.value)


def test_the_cli_refuses_the_same_tensor_parallel_size(draft):
    r = run("check", str(draft), "--tensor-parallel-size", "0")
    assert r.returncode == 2 and "must be an integer from 1 to 1000000000, got 0" in r.stderr


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("gpu", True, "gpu must be a string, got bool true"),
        ("vllm_args", "--port 8000", 'vllm_args must be a list of flags, got the string "--port 8000"'),
        ("vllm_args", ["--port", 8000], "vllm_args must be a list of strings; it holds int 8000"),
        ("directory", "", "directory is empty"),
        ("write", "no", "write must be True or False"),
    ],
)
def test_serve_plan_refuses_a_malformed_argument_in_words(draft, argument, value, message):
    with pytest.raises(specreg.SpecregError) as caught:
        specreg.serve_plan(str(draft), **{argument: value})
    assert message in str(caught.value)


def test_materialize_into_an_empty_path_is_refused_not_the_current_directory(tmp_path, draft, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(specreg.SpecregError, match="directory is empty: name the directory to write"):
        specreg.materialize(str(draft), "", weights="none")
    assert list(tmp_path.iterdir()) == [tmp_path / "draft"]


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (b"/path", "the source must be a str, got bytes b'/path': decode it first"),
        (42, "the source must be a path or an org/name Hub id, got int 42"),
    ],
)
def test_load_refuses_a_source_of_another_type_in_words(source, message):
    with pytest.raises(specreg.SpecregError) as caught:
        specreg.load(source)
    assert str(caught.value) == message


def test_release_rules_hands_out_a_copy_of_the_cached_facts():
    from specreg import facts

    release = facts.known()[-1]
    first = facts.release_rules(release)
    expected = dict(first)
    first.clear()
    assert facts.release_rules(release) == expected and expected


NOT_A_SIZE = st.one_of(
    st.integers(max_value=0),
    st.integers(min_value=10**9 + 1),
    st.booleans(),
    st.floats(),
    st.text(max_size=5),
    st.none().map(lambda _: [2]),
)


@hypothesis.settings(
    max_examples=40, deadline=None, suppress_health_check=[hypothesis.HealthCheck.function_scoped_fixture]
)  # the draft is only read: one for every example
@hypothesis.given(
    argument=st.sampled_from(["tensor_parallel_size", "draft_tensor_parallel_size", "max_model_len"]), value=NOT_A_SIZE
)
def test_any_size_the_cli_would_refuse_is_a_specreg_error_naming_the_argument(draft, argument, value):
    with pytest.raises(specreg.SpecregError) as caught:
        specreg.check(str(draft), **{argument: value})
    assert str(caught.value).startswith(f"{argument} must be an integer from 1 to 1000000000, got ")


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda d, t: specreg.load(d, vllm="9" * 5000), "--vllm: not a vLLM version: '9999"),
        (lambda d, t: specreg.materialize(d, t, weights="hardlink"), "weights must be 'link', 'copy' or 'none'"),
        (lambda d, t: specreg.convert(d, t, weights=None), "weights must be 'link', 'copy' or 'none', got null"),
        (lambda d, t: specreg.catalog_list(verifier=5), "verifier must be a string, got int 5"),
        (lambda d, t: specreg.catalog_list("x" * 5000), "pattern"),
        (lambda d, t: specreg.catalog_entry(None), "entry_id must be a catalog id such as org/name, got None"),
        (lambda d, t: specreg.catalog_entry(5), "entry_id must be a string, got int 5"),
        (lambda d, t: specreg.catalog_pin(None), "entry_id must be a catalog id"),
        (lambda d, t: specreg.serve_plan(d, force_verifier="yes"), "force_verifier must be True or False, got str"),
        (lambda d, t: specreg.materialize(d, t, force_verifier=1), "force_verifier must be True or False, got int"),
    ],
)
def test_a_malformed_argument_is_specregs_own_error_never_a_builtin_one(tmp_path, draft, call, message):
    """ValueError (a 5,000-digit version, weights='hardlink'), AttributeError (verifier=5) and
    TypeError (catalog_entry(None)) escaped the API; 'yes' passed as force_verifier."""
    with pytest.raises(specreg.SpecregError) as caught:
        call(str(draft), str(tmp_path / "out"))
    assert type(caught.value) in (specreg.SpecregError, specreg.ConfigError)
    assert message in str(caught.value)
    assert not (tmp_path / "out").exists()


def test_show_with_a_5000_digit_vllm_is_one_error_line_exit_2(draft):
    r = run_specreg("show", str(draft), "--vllm", "9" * 5000)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "not a vLLM version" in r.stderr and "(5,000 characters)" in r.stderr
