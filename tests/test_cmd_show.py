"""`specreg show` on the CLI: what a hostile config makes it print and write."""

from __future__ import annotations

import json

import pytest

import specreg
from conftest import fixture_config
from hostile_helpers import run
from weights import write_draft

# -- names that end in a newline, terminal escapes --------------------------------------------------


def test_show_escapes_terminal_controls_from_the_config(tmp_path):
    cfg = fixture_config("eagle3_generated")
    cfg["speculators_version"] = "0.9.0\x1b[31mRED"
    cfg["speculators_config"]["verifier"]["name_or_path"] = "org/v\x1b]0;pwned\x07\u202e"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    r = run("show", str(path))
    assert "\x1b" not in r.stdout + r.stderr and "\x07" not in r.stdout and "\u202e" not in r.stdout
    assert "org/v\\x1b]0;pwned\\x07\\u202e" in r.stdout


# -- bytes vLLM's reader refuses ------------------------------------------------------------------------------


def test_a_config_with_a_byte_order_mark_is_named_and_written_without_it(tmp_path):
    """transformers reads config.json as `json.loads(open(f, encoding="utf-8").read())`, which refuses a BOM
    (transformers 5.19.0, configuration_utils.py `PretrainedConfig._dict_from_json_file`; the engine tier
    shows vLLM failing on such a file); specreg read it and said nothing."""
    src = write_draft(tmp_path / "src", fixture_config("eagle3_generated"))
    (src / "config.json").write_bytes(b"\xef\xbb\xbf" + (src / "config.json").read_bytes())
    with pytest.raises(json.JSONDecodeError, match="BOM"):
        json.loads((src / "config.json").read_text(encoding="utf-8"))  # what transformers does
    spec = specreg.load(src)
    assert "config-byte-order-mark" in [f.code for f in spec.served_differently]
    r = run("show", str(src))
    assert "config-byte-order-mark" in r.stdout
    done = spec.materialize(tmp_path / "out", weights="none")
    json.loads((done.directory / "config.json").read_text(encoding="utf-8"))  # transformers can read it


# -- the verifier it runs with (issue 45) ------------------------------------------------------------------


def test_show_with_a_verifier_reports_what_check_finds_for_that_pair(tmp_path):
    from test_serve import MISMATCH, wide_verifier

    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    verifier = str(wide_verifier(tmp_path))
    shown = run("show", str(src), "--verifier", verifier, "--json")
    checked = run("check", str(src), "--verifier", verifier, "--no-weights", "--json")
    assert shown.returncode == checked.returncode == 1, shown.stderr
    assert json.loads(shown.stdout)["findings"] == json.loads(checked.stdout)["findings"]
    assert [f["code"] for f in json.loads(shown.stdout)["findings"] if f["severity"] == "error"] == MISMATCH
    text = run("show", str(src), "--verifier", verifier)
    assert text.returncode == 1 and all(f"error   {code}" in text.stdout for code in MISMATCH)
