"""`specreg cache list | clean`: the drafts specreg keeps in its own cache; only what specreg wrote there
(a specreg.json signed with this machine's key) is ever removed, and nothing is followed out of it."""

from __future__ import annotations

import io
import json
import os

import pytest

from conftest import fixture_config, run_in_process
from weights import write_draft


@pytest.fixture
def cache(tmp_path):
    return tmp_path / "specreg-cache" / "drafts"  # conftest's SPECREG_CACHE


@pytest.fixture
def served(tmp_path, cache):
    """A draft `specreg serve` materialized into the cache (the DFlash fixture is served differently)."""
    draft = write_draft(tmp_path / "draft", fixture_config("dflash"))
    r = run_in_process("serve", str(draft), "--vllm", "0.33", "--config-only")
    assert r.returncode == 0, r.stderr
    (name,) = os.listdir(cache)
    return name


def listing():
    r = run_in_process("cache", "list", "--json")
    assert r.returncode == 0, r.stderr
    return {d["name"]: d for d in json.loads(r.stdout)["drafts"]}


def test_an_empty_cache_lists_nothing(cache):
    r = run_in_process("cache", "list")
    assert (r.returncode, r.stdout) == (0, f"{cache}: no cached drafts\n")


def test_a_served_draft_is_listed_with_its_source_engine_and_size(served, cache, tmp_path):
    d = listing()[served]
    size = sum(os.lstat(cache / served / f).st_size for f in os.listdir(cache / served))
    assert (d["ours"], d["engine"], d["bytes"], d["files"]) == (True, "vLLM 0.33", size, 2)
    assert d["source"] == str(tmp_path / "draft" / "config.json")
    text = run_in_process("cache", "list").stdout
    assert text.splitlines()[-1].startswith("1 draft, ")


def test_clean_yes_removes_the_drafts_specreg_wrote(served, cache):
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("removed 1 cached draft (") and not (cache / served).exists()


def test_clean_without_a_terminal_or_yes_removes_nothing(served, cache):
    r = run_in_process("cache", "clean")
    assert r.returncode == 2
    assert "confirm with --yes" in r.stderr and (cache / served).is_dir()


@pytest.mark.parametrize("answer, kept", [("y\n", False), ("n\n", True), ("\n", True)])
def test_clean_asks_on_a_terminal(served, cache, monkeypatch, answer, kept):
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr("sys.stdin", Terminal(answer))
    r = run_in_process("cache", "clean")
    assert r.returncode == 0, r.stderr
    assert "remove 1 cached draft" in r.stderr and (cache / served).is_dir() is kept


def test_a_folder_specreg_did_not_write_is_listed_and_left_alone(served, cache):
    mine = cache / "my-own-draft"
    mine.mkdir()
    (mine / "config.json").write_text("{}")
    forged = cache / "forged"
    forged.mkdir()
    manifest = json.loads((cache / served / "specreg.json").read_text())
    manifest["source"] = {"path": "/elsewhere"}  # the signature no longer matches
    (forged / "specreg.json").write_text(json.dumps(manifest))
    assert {n: d["ours"] for n, d in listing().items()} == {served: True, "my-own-draft": False, "forged": False}
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 0 and not (cache / served).exists()
    assert (mine / "config.json").read_text() == "{}" and (forged / "specreg.json").exists()
    r = run_in_process("cache", "clean", "my-own-draft", "--yes")
    assert r.returncode == 2 and "not written by specreg here" in r.stderr and mine.is_dir()


def test_a_link_in_the_cache_is_never_followed(served, cache, tmp_path):
    outside = tmp_path / "outside"
    os.symlink(cache / served, tmp_path / "alias")  # a real draft, reached through a link
    outside.mkdir()
    (outside / "keep").write_text("x")
    os.symlink(outside, cache / "link-out")
    os.symlink(tmp_path / "alias", cache / "link-to-a-draft")
    assert set(listing()) == {served}
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 0
    assert (outside / "keep").read_text() == "x" and os.path.islink(cache / "link-out")


def test_a_linked_weight_is_removed_as_a_link(tmp_path, cache):
    draft = write_draft(tmp_path / "draft", fixture_config("dflash"))
    r = run_in_process("serve", str(draft), "--vllm", "0.33")
    assert r.returncode == 0, r.stderr
    (name,) = os.listdir(cache)
    assert any(os.path.islink(cache / name / f) for f in os.listdir(cache / name))
    assert run_in_process("cache", "clean", "--yes").returncode == 0
    assert not (cache / name).exists()
    assert all(p.is_file() for p in draft.iterdir())  # the weights it linked are still there


def test_clean_of_a_name_not_there_says_the_closest(served):
    r = run_in_process("cache", "clean", served[:-1], "--yes")
    assert r.returncode == 2 and r.stderr.endswith(f"(did you mean {served}?)\n")


# -- only what specreg wrote, where it wrote it (issue 55) ------------------------------------------------------


def test_a_copy_of_a_cached_folder_is_not_specregs_and_is_left(served, cache):
    """The signature is bound to its folder: a user's `cp -a` of a cached draft was removed by clean."""
    import shutil

    shutil.copytree(cache / served, cache / "my-copy", symlinks=True)
    assert listing()["my-copy"]["ours"] is False
    text = run_in_process("cache", "list").stdout
    assert "not written by specreg here (its specreg.json was written into another folder (a copy))" in text
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 0, r.stderr
    assert not (cache / served).exists() and (cache / "my-copy" / "specreg.json").is_file()


def test_cache_list_says_why_a_folder_is_not_specregs(served, cache):
    (cache / "mine").mkdir()
    (cache / "mine" / "config.json").write_text("{}")
    (cache / "forged").mkdir()
    doc = json.loads((cache / served / "specreg.json").read_text())
    (cache / "forged" / "specreg.json").write_text(json.dumps({**doc, "algorithm": "other"}))
    why = {n: d["why"] for n, d in listing().items()}
    assert why == {
        served: None,
        "mine": "no readable specreg.json",
        "forged": "its specreg.json is not signed with this machine's key (edited, or written elsewhere)",
    }


def test_clean_removes_only_the_files_the_manifest_lists_and_says_what_it_left(served, cache):
    folder = cache / served
    (folder / "notes.txt").write_text("mine")
    (folder / "config.json").write_text('{"my": "edit"}')
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 1, r.stderr
    assert sorted(os.listdir(folder)) == ["config.json", "notes.txt"]
    assert (folder / "config.json").read_text() == '{"my": "edit"}'
    assert f"{served}: left config.json, notes.txt: not specreg's" in r.stderr
    assert r.stdout.startswith("removed 0 cached drafts")


def test_a_folder_renamed_into_place_after_the_check_survives(served, cache, tmp_path, monkeypatch):
    """clean checked the folder's signature through its descriptor, then removed whatever was at its name:
    a folder renamed into place in between was deleted though it holds no specreg.json."""
    from specreg.vllm import manifest

    impostor = tmp_path / "impostor"
    impostor.mkdir()
    (impostor / "thesis.txt").write_text("four years of work")
    calls = []

    def checked_then_swapped(real):
        def check(*args, **kwargs):
            answer = real(*args, **kwargs)
            calls.append(args)
            if len(calls) == 2:  # the listing's look, then clean's check of the folder it removes
                os.rename(cache / served, tmp_path / "moved-away")
                os.rename(impostor, cache / served)
            return answer

        return check

    for reader in ("judged_manifest", "trusted_manifest"):  # (the unfixed clean checked with trusted_manifest alone)
        if hasattr(manifest, reader):
            monkeypatch.setattr(manifest, reader, checked_then_swapped(getattr(manifest, reader)))
    r = run_in_process("cache", "clean", served, "--yes")
    assert (cache / served / "thesis.txt").read_text() == "four years of work", r.stderr
    assert r.returncode == 1 and "its name now holds another folder" in r.stderr, r.stderr
    assert os.listdir(tmp_path / "moved-away") == []  # what was checked is what was emptied


def test_a_locked_folder_is_waited_for_with_a_bound_and_a_message(served, cache):
    import fcntl

    from specreg.cli.cache import LockWait, remove

    now = [0.0]
    fd = os.open(cache / served, os.O_RDONLY | os.O_DIRECTORY)
    fcntl.flock(fd, fcntl.LOCK_EX)  # another writer
    said: list[str] = []
    try:
        done = remove(
            [served],
            wait=LockWait(5, clock=lambda: now[0], sleep=lambda s: now.__setitem__(0, now[0] + s)),
            say=said.append,
        )
    finally:
        os.close(fd)
    assert said == [f"{served}: another specreg process is writing it; waiting up to 5 s"]
    assert done.removed == () and done.left == (
        f"{served}: left (another specreg process held it for 5 s: run `specreg cache clean` again)",
    )
    assert now[0] == 5 and (cache / served / "specreg.json").is_file()


def test_a_folder_that_is_a_working_directory_is_left_and_named(served, cache, monkeypatch):
    monkeypatch.chdir(cache / served)
    r = run_in_process("cache", "clean", "--yes")
    assert r.returncode == 1 and (cache / served / "specreg.json").is_file()
    assert f"{served}: left (the working directory of process {os.getpid()} (" in r.stderr, r.stderr


def _clean_killed_at(name: str, n: int) -> None:
    """In a forked child: `remove([name])` killed (SIGKILL) before its n-th unlink or rmdir."""
    import signal

    from specreg.cli.cache import remove

    calls = [0]

    def killing(real):
        def call(*args, **kwargs):
            calls[0] += 1
            if calls[0] == n:
                os.kill(os.getpid(), signal.SIGKILL)
            return real(*args, **kwargs)

        return call

    os.unlink, os.rmdir = killing(os.unlink), killing(os.rmdir)
    remove([name])


def test_a_removal_interrupted_at_every_step_is_finished_by_the_next_clean(tmp_path, cache):
    """Ctrl-C (here a SIGKILL, the harder case) between any two removals leaves a folder that the next
    `cache clean` removes whole: specreg.json goes last, an emptied folder is removed too. A half-removed
    folder without its specreg.json was never removed."""
    import functools

    from test_dirwrite import in_child

    draft = write_draft(tmp_path / "draft", fixture_config("dflash"))
    n = 1
    while True:
        r = run_in_process("serve", str(draft), "--vllm", "0.33")  # config.json, a weight link, specreg.json
        assert r.returncode == 0, r.stderr
        (name,) = os.listdir(cache)
        status = in_child(functools.partial(_clean_killed_at, name, n), lambda _w: None)
        if not os.WIFSIGNALED(status):
            break
        r = run_in_process("cache", "clean", "--yes")
        assert r.returncode == 0 and os.listdir(cache) == [], (n, r.stderr, os.listdir(cache / name))
        n += 1
    assert n == 5  # three files, then the folder: a kill before each removal, then none


def test_an_unsigned_folder_planted_at_a_serve_folders_name_is_not_written_into(served, cache, tmp_path):
    import shutil

    shutil.rmtree(cache / served)
    (cache / served).mkdir()
    (cache / served / "config.json").write_text('{"planted": true}')
    draft = tmp_path / "draft"
    r = run_in_process("serve", str(draft), "--vllm", "0.33", "--config-only")
    assert r.returncode == 2 and f"{cache / served} is not empty" in r.stderr, r.stderr
    assert os.listdir(cache / served) == ["config.json"]
    assert (cache / served / "config.json").read_text() == '{"planted": true}'


def test_serve_refuses_to_write_over_an_edit_in_its_cache_folder(served, cache, tmp_path):
    (cache / served / "config.json").write_text('{"my": "edit"}')
    r = run_in_process("serve", str(tmp_path / "draft"), "--vllm", "0.33", "--config-only")
    assert r.returncode == 2 and "changed since specreg wrote it: config.json (changed)" in r.stderr, r.stderr
    assert (cache / served / "config.json").read_text() == '{"my": "edit"}'
    r = run_in_process("cache", "clean", "--yes")  # and clean leaves the edit too
    assert r.returncode == 1 and os.listdir(cache / served) == ["config.json"]


def test_two_drafts_normalized_from_dicts_are_served_from_two_folders(cache):
    """A draft without a source has no identity: its cache folder is keyed by its draft config, so a
    second one is not refused at (nor, before, written over) the first one's folder."""
    import specreg
    from specreg.api.serve import serve_plan

    first, second = fixture_config("dflash"), fixture_config("dflash")
    second["block_size"] = 17
    second["speculators_config"]["proposal_methods"][0]["speculative_tokens"] = 16
    folders = [
        serve_plan(specreg.normalize(c, vllm="0.33"), config_only=True).directory for c in (first, second, first)
    ]
    assert folders[0] != folders[1] and folders[0] == folders[2]
    assert len(os.listdir(cache)) == 2


def test_an_earlier_specregs_serve_folder_neither_blocks_serve_nor_is_touched(served, cache, tmp_path):
    """A folder an earlier specreg served into (its signed specreg.json bound to no folder, recording no
    content) is not specreg's to rewrite; after an upgrade `serve` writes beside it, not refusing the draft
    it served before, and `cache list` says why the old one is left."""
    import hashlib

    import specreg
    from specreg.vllm import manifest

    draft = tmp_path / "draft"
    old_doc = json.loads((cache / served / "specreg.json").read_text())
    for key in (manifest.FOLDER, manifest.WRITTEN, manifest.SIGNATURE):
        old_doc.pop(key)
    old_doc[manifest.SIGNATURE] = manifest.signature(old_doc)  # signed as an earlier specreg signed
    spec = specreg.load(draft, vllm="0.33")
    digest = hashlib.sha256(json.dumps(manifest.draft_identity(spec), sort_keys=True, default=str).encode())
    earlier = cache / served.replace(manifest.identity_digest(spec), digest.hexdigest()[:16])
    assert earlier != cache / served
    (cache / served).rename(earlier)
    (earlier / "specreg.json").write_text(json.dumps(old_doc))
    before = {name: (earlier / name).read_bytes() for name in os.listdir(earlier)}

    r = run_in_process("serve", str(draft), "--vllm", "0.33", "--config-only")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(cache)) == sorted([earlier.name, served])
    assert {name: (earlier / name).read_bytes() for name in os.listdir(earlier)} == before
    assert "an earlier specreg's" in listing()[earlier.name]["why"]
