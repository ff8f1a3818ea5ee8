"""load() against a loopback Hub (HF_ENDPOINT), never against mocks of huggingface_hub."""


import pytest

import specreg
from conftest import DATA

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
        f"offline mode is on (HF_HUB_OFFLINE). {REPO} is in specreg's catalog: a dflash draft for Qwen/Qwen3-8B")
    assert f"`specreg catalog show {REPO}` works offline" in str(info.value) and "specreg show DIR" in str(info.value)
    assert str(info.value).count(REPO) == 5  # the source, no such directory, the entry, the two commands
    assert hub.count() == 0


def test_an_unreachable_hub_for_a_catalog_id_says_what_the_catalog_knows(tmp_path):
    import os
    import subprocess
    import sys

    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "cache"),
           "HF_HUB_OFFLINE": "0"}
    shown = subprocess.run([sys.executable, "-m", "specreg", "show", "RedHatAI/gemma-4-31B-it-speculator.dflash"],
                           capture_output=True, text=True, env=env, timeout=120)
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    line = shown.stderr.strip()
    assert line.count("could not fetch config.json: the connection failed") == 1
    assert "is in specreg's catalog: a dflash draft for google/gemma-4-31B-it; serving hints tensor_parallel_size=2" in line
    assert "works offline" in line
    catalog = subprocess.run([sys.executable, "-m", "specreg", "catalog", "show",
                              "RedHatAI/gemma-4-31B-it-speculator.dflash"], capture_output=True, text=True, env=env,
                             timeout=120)
    assert catalog.returncode == 0 and "verifier" in catalog.stdout


def test_a_missing_repo_is_a_clear_error(hub):
    with pytest.raises(specreg.RepoNotFoundError, match="no repository nobody/nothing on the Hub"):
        specreg.load("nobody/nothing")


def test_a_mistyped_local_directory_says_it_is_neither_here_nor_on_the_hub(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "drafts" / "q8").mkdir(parents=True)
    with pytest.raises(specreg.RepoNotFoundError) as info:
        specreg.load("drafts/q9")
    assert str(info.value) == ("drafts/q9: no local directory drafts/q9, and no repository drafts/q9 on the Hub "
                               "(or it is private and no valid token was sent)")


def test_a_mistyped_local_directory_offline_says_it_is_not_here(hub, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as info:
        specreg.load("drafts/q9")
    assert str(info.value) == ("drafts/q9: no local directory drafts/q9; as a Hub repository: config.json is not in "
                               "the Hugging Face cache and offline mode is on (HF_HUB_OFFLINE)")
    assert hub.count() == 0


def test_a_mistyped_local_directory_with_no_hub_server_is_one_line_saying_it_is_not_here(tmp_path):
    from conftest import run_specreg

    done = run_specreg("show", "drafts/q9", cwd=tmp_path,
                       env={"HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_OFFLINE": "0"})
    assert done.returncode == 2
    assert done.stderr.splitlines() == ["error: drafts/q9: no local directory drafts/q9; as a Hub repository: could "
                                        "not fetch config.json: the connection failed (ConnectError) (tried 3 times)"]


def test_a_source_with_a_revision_names_a_hub_repository_only(hub):
    with pytest.raises(specreg.RepoNotFoundError) as info:
        specreg.load("drafts/q9@main")
    assert str(info.value) == ("drafts/q9@main: no repository drafts/q9 on the Hub (or it is private and no valid "
                               "token was sent)")


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
    out = subprocess.run([sys.executable, "-m", "specreg", "show", "org/broken"], capture_output=True, text=True,
                         timeout=120)
    took = time.monotonic() - start
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "error: org/broken: the Hub answered HTTP 500 for config.json of org/broken (tried 3 times)"]
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
    env = {**os.environ, "HF_ENDPOINT": "http://127.0.0.1:9", "HF_HUB_CACHE": str(tmp_path / "hf"),
           "HF_DATASETS_CACHE": str(tmp_path / "ds"), "HF_HUB_OFFLINE": "0", "HF_DATASETS_OFFLINE": "0"}
    commands = [
        ["show", "RedHatAI/Qwen3-8B-speculator.dflash"],
        ["check", str(root / "examples" / "qwen3-8b-dflash"), "--verifier", "Qwen/Qwen3-8B", "--no-weights"],
        ["catalog", "pin", "RedHatAI/Qwen3-8B-speculator.dflash", "--registry", str(registry)],
        ["verify", "RedHatAI/Qwen3-8B-speculator.eagle3", "--server", "http://127.0.0.1:9"],
    ]
    for argv in commands:
        done = subprocess.run([sys.executable, "-m", "specreg", *argv], capture_output=True, text=True, env=env,
                              timeout=300)
        lines = [line for line in done.stderr.splitlines() if not line.startswith("#")]
        assert done.returncode == 2, (argv, done.stderr)
        assert len(lines) == 1 and lines[0].startswith("error: "), (argv, done.stderr)
        assert "(tried 3 times)" in lines[0] and "Retrying in" not in done.stderr + done.stdout, (argv, done.stderr)
