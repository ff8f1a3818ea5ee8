"""specreg/vllm/draft_weights.py: weight files are never followed out of the draft directory or read
when they are not regular files."""

from __future__ import annotations

import json
import os

import specreg
from conftest import fixture_config
from hostile_helpers import run
from weights import write_draft

# -- weight files ----------------------------------------------------------------------------------


def draft_with(tmp_path, name: str, make) -> object:
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    make(src / name)
    return src


def test_a_weight_link_out_of_the_draft_directory_is_refused_not_copied(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("not yours")
    src = draft_with(tmp_path, "model.safetensors", lambda p: p.symlink_to(secret))
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "outside the draft directory" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").glob("*.safetensors"))


def test_a_shard_named_by_the_index_that_links_out_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"), shards=2)
    shard = src / "model-00002-of-00002.safetensors"
    (tmp_path / "secret").write_bytes(shard.read_bytes())
    shard.unlink()
    shard.symlink_to(tmp_path / "secret")
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "outside the draft directory" in r.stderr, r.stderr


def test_a_weight_that_is_a_device_beside_a_real_one_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (src / "b.safetensors").symlink_to("/dev/zero")
    r = run("materialize", str(src), str(tmp_path / "out"), "--copy", "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "/dev/zero" in r.stderr, r.stderr


def test_a_weight_that_is_a_fifo_is_refused(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    os.mkfifo(src / "x.safetensors")
    r = run("materialize", str(src), str(tmp_path / "out"), "--verifier", "Qwen/Qwen3-8B")
    assert r.returncode == 2 and "FIFO" in r.stderr, r.stderr


def test_a_link_inside_the_draft_directory_is_still_a_weight(tmp_path):
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    (src / "model.safetensors").rename(src / "real.bin")
    (src / "model.safetensors").symlink_to("real.bin")
    spec = specreg.load(src)
    done = spec.materialize(tmp_path / "out", weights="copy")
    assert (done.directory / "model.safetensors").read_bytes() == (src / "real.bin").read_bytes()
