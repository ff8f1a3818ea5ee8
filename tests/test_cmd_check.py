"""`specreg check` on the CLI: a hostile verifier config or draft is one line, never an internal error."""

from __future__ import annotations

import json
import os

import pytest

from conftest import fixture_config
from hostile_helpers import BIG_CONFIG, DATA_NATIVE, local_verifier, run
from weights import write_draft

# -- every config fetch is capped ------------------------------------------------------------------------


def test_the_verifier_config_of_the_pre_flight_is_capped(hub, tmp_path):
    """A 300 MiB verifier config.json was downloaded into the HF cache and kept."""
    hub.add("org/huge-verifier", {"config.json": BIG_CONFIG})
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    r = run("check", str(src), "--verifier", "org/huge-verifier", "--no-weights")
    assert r.returncode == 2 and "over the 4194304-byte limit" in r.stderr, r.stderr
    assert hub.bytes_sent("config.json") == 0


# -- every reader, every file-system shape ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["speculators", "native"])
def test_a_hidden_size_that_is_an_object_is_not_an_internal_error(tmp_path, where):
    if where == "native":
        cfg = json.loads((DATA_NATIVE / "zlab_dflash_qwen3_8b_fixture.json").read_text())
        cfg["hidden_size"] = {}
    else:
        cfg = fixture_config("eagle3_generated")
        cfg["transformer_layer_config"]["hidden_size"] = {}
    src = write_draft(tmp_path / "src", cfg)
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode in (1, 2) and "internal error" not in r.stderr, r.stderr


def test_a_verifier_config_that_is_a_fifo_is_refused_not_waited_on(tmp_path):
    """read_config opened whatever it was given: a FIFO verifier config.json made check wait for ever."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    os.mkfifo(verifier / "config.json")
    r = run("check", str(src), "--verifier", str(verifier), "--no-weights")
    assert r.returncode == 2 and "a FIFO, not a regular file" in r.stderr, r.stderr
