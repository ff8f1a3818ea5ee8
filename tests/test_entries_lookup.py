"""A pinned catalog entry when the Hub cannot be reached: its config.json at the pinned revision stands
in, from huggingface_hub's cache or else the snapshot `catalog pin` wrote beside the entry, with a
`hub-pinned-copy` finding naming the revision (against the loopback Hub)."""

import hashlib

import pytest

import specreg
from conftest import run_in_process
from specreg import entries
from test_catalog import CONFIG, MINIMAL, REPO, pinned_entry, registry_with

SHA = hashlib.sha256(CONFIG).hexdigest()


def test_offline_a_pinned_entry_is_loaded_from_the_cache_at_its_pinned_revision(hub, tmp_path, monkeypatch):
    commit = hub.add(REPO, {"config.json": CONFIG})
    monkeypatch.setenv("SPECREG_REGISTRY", str(registry_with(tmp_path, {"org/draft.toml": pinned_entry(commit, SHA)})))
    specreg.load(f"{REPO}@{commit}")  # the cache holds the pinned commit, not the default branch
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    spec = specreg.load(REPO)
    assert (spec.origin.commit, spec.origin.sha256, spec.origin.revision) == (commit, SHA, None)
    assert spec.catalog is not None and spec.catalog.revision == commit
    found = [f for f in spec.findings if f.code == "hub-pinned-copy"]
    assert [(f.severity, f.message) for f in found] == [
        (
            "warning",
            f"offline mode is on (HF_HUB_OFFLINE): config.json of {REPO} at the catalog's pinned revision "
            f"{commit} was used, from huggingface_hub's cache ({spec.origin.path})",
        )
    ]
    assert not {"catalog-pin-mismatch", "catalog-other-revision"} & {f.code for f in spec.findings}


@pytest.fixture
def pinned(hub, tmp_path, monkeypatch):
    """org/draft pinned by `specreg catalog pin` (the pin and the snapshot beside the entry) in the catalog
    SPECREG_REGISTRY names, and an empty Hugging Face cache: (the catalog directory, the pinned commit)."""

    def pin(config: bytes = CONFIG):
        commit = hub.add(REPO, {"config.json": config})
        root = registry_with(tmp_path, {"org/draft.toml": MINIMAL})
        entries.pin(REPO, directory=root)
        monkeypatch.setenv("SPECREG_REGISTRY", str(root))
        monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
        return root, commit

    return pin


def test_with_nothing_cached_the_snapshot_beside_the_entry_is_used(pinned, monkeypatch):
    root, commit = pinned()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: no connection
    spec = specreg.load(REPO)
    snapshot = root / "org" / "draft.config.json"
    assert (spec.origin.commit, spec.origin.sha256, spec.origin.path) == (commit, SHA, str(snapshot))
    found = next(f for f in spec.findings if f.code == "hub-pinned-copy")
    assert found.message == (
        f"the Hub could not be reached: config.json of {REPO} at the catalog's pinned revision "
        f"{commit} was used, from the snapshot beside the catalog entry ({snapshot})"
    )


def test_the_cli_shows_a_pinned_entry_offline_with_the_finding(pinned):
    _root, commit = pinned()
    done = run_in_process("show", REPO, env={"HF_HUB_OFFLINE": "1"})
    assert done.returncode == 0, done.stderr
    assert "warning hub-pinned-copy" in done.stdout and commit in done.stdout


def test_check_reads_a_pinned_entry_offline_against_a_local_verifier(pinned, tmp_path):
    import json

    from tiny import draft_config, verifier_config

    _root, commit = pinned(json.dumps(draft_config("dflash")).encode())
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "config.json").write_text(json.dumps(verifier_config("dflash")))
    done = run_in_process(
        "check", REPO, "--verifier", str(verifier), "--no-weights", "--json", env={"HF_HUB_OFFLINE": "1"}
    )
    assert done.returncode == 0, done.stderr
    checked = json.loads(done.stdout)
    assert checked["origin"]["commit"] == commit
    assert [f["code"] for f in checked["findings"] if f["code"].startswith("hub-")] == ["hub-pinned-copy"]


def test_a_snapshot_that_is_not_the_pinned_content_is_not_used(pinned, monkeypatch):
    root, _commit = pinned()
    (root / "org" / "draft.config.json").write_bytes(CONFIG.replace(b"dflash", b"eagle3"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError, match="is in specreg's catalog"):
        specreg.load(REPO)


def test_another_revision_asked_for_is_never_replaced_by_the_pin(pinned, monkeypatch):
    pinned()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError):
        specreg.load(f"{REPO}@v2")


def test_the_hubs_refusal_is_never_replaced_by_the_pin(pinned, hub):
    """No such repository is the Hub's answer, not an outage: the pin does not hide it."""
    pinned()
    hub.repos.clear()
    with pytest.raises(specreg.RepoNotFoundError):
        specreg.load(REPO)
