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
