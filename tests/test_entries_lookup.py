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


def test_a_snapshot_that_is_not_the_pinned_content_is_refused_saying_so(pinned, monkeypatch):
    root, commit = pinned()
    other = CONFIG.replace(b"dflash", b"eagle3")
    snapshot = root / "org" / "draft.config.json"
    snapshot.write_bytes(other)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as caught:
        specreg.load(REPO)
    message = str(caught.value)
    assert (
        f"offline mode is on (HF_HUB_OFFLINE), and the catalog pins {REPO} at revision {commit}, but the snapshot "
        f"beside the catalog entry ({snapshot}) holds a config.json with sha256 "
        f"{hashlib.sha256(other).hexdigest()[:12]}..., not the pinned {SHA[:12]}...: a copy that no longer "
        f"matches its pin is not used. Restore it, or re-pin where the Hub is reachable (`specreg catalog pin {REPO}`)"
    ) in message
    assert "set HF_HUB_OFFLINE" not in message  # it is on already


def test_offline_without_any_copy_never_advises_the_offline_mode_already_on(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("SPECREG_REGISTRY", str(registry_with(tmp_path, {"org/draft.toml": MINIMAL})))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as caught:
        specreg.load(REPO)
    assert "set HF_HUB_OFFLINE=1" not in str(caught.value)
    assert "put it in the Hugging Face cache (offline mode is on)" in str(caught.value)


def test_a_load_racing_a_pin_sees_the_old_pair_or_the_new_one(pinned, hub, monkeypatch):
    """An offline load that starts just after `catalog pin`'s first write (the snapshot; it was the
    TOML, and 70 of 300 racing loads failed) reads the new pair: it finds the snapshot differing from
    the pin it read, waits on the entry folder's lock the pin holds, and reads both again."""
    import threading

    from specreg import atomic

    root, _first = pinned()
    second = CONFIG.replace(b'"dflash"', b'"dflash" ')  # the same draft, other bytes: another sha256
    commit = hub.add(REPO, {"config.json": second})
    loaded, readers = [], []
    real_write = atomic.write_bytes

    def write_then_load(target, data):
        real_write(target, data)
        if not readers:  # after the first write, the Hub's answer in hand: a load offline, on another thread
            monkeypatch.setenv("HF_HUB_OFFLINE", "1")
            monkeypatch.setenv("HF_HUB_CACHE", str(root.parent / "another-empty-cache"))  # the snapshot alone
            readers.append(threading.Thread(target=lambda: loaded.append(specreg.load(REPO))))
            readers[0].start()
            readers[0].join(timeout=0.5)  # it reaches the lock (or, reading the pair half written, fails)

    monkeypatch.setattr(atomic, "write_bytes", write_then_load)
    entries.pin(REPO, revision=commit, directory=root)
    readers[0].join(timeout=60)
    assert [spec.origin.sha256 for spec in loaded] == [hashlib.sha256(second).hexdigest()]


@pytest.mark.parametrize("which", ["draft.toml", "draft.config.json"])
def test_pin_refuses_an_entry_file_or_snapshot_that_links_out_of_the_catalog(pinned, tmp_path, which):
    root, _commit = pinned()
    outside = tmp_path / "outside"
    outside.mkdir()
    planted = root / "org" / which
    target = outside / which
    target.write_bytes(planted.read_bytes())
    planted.unlink()
    planted.symlink_to(target)
    before = target.read_bytes()
    with pytest.raises(specreg.SpecregError, match=f"outside the catalog directory {root}: refusing"):
        entries.pin(REPO, directory=root)
    assert target.read_bytes() == before and planted.is_symlink()


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


@pytest.mark.parametrize("how", ["the snapshot", "its org folder"])
def test_a_snapshot_that_links_out_of_the_catalog_is_not_read(pinned, tmp_path, monkeypatch, how):
    """As an entry file linked out is refused: the pinned content outside the catalog (a link the user
    did not mean, or one planted) is never read, and the load says why in one error."""
    root, commit = pinned()
    outside = tmp_path / "outside"
    outside.mkdir()
    snapshot = root / "org" / "draft.config.json"
    if how == "the snapshot":
        (outside / "draft.config.json").write_bytes(snapshot.read_bytes())  # the pinned content itself
        snapshot.unlink()
        snapshot.symlink_to(outside / "draft.config.json")
        real = outside / "draft.config.json"
    else:  # the entry and its snapshot in a folder outside, linked in as the org folder
        (root / "org").rename(outside / "org")
        (root / "org").symlink_to(outside / "org")
        real = outside / "org" / "draft.config.json"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(specreg.OfflineError) as caught:
        specreg.load(REPO)
    message = str(caught.value)
    assert (
        f"the snapshot beside the catalog entry ({snapshot}) leads to {real}, outside the catalog directory "
        f"{root}: not read"
    ) in message
    assert "hub-pinned-copy" not in message
