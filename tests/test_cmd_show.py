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


# -- a near-miss of a catalog id ------------------------------------------------------------------------------

NEAR = "RedHatAI/Qwen3-8B-speculator.dflsh"
MEANT = "RedHatAI/Qwen3-8B-speculator.dflash"


def test_a_mistyped_catalog_id_offline_names_the_id_it_meant():
    from conftest import run_in_process

    r = run_in_process("show", NEAR, env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert r.stderr.rstrip().endswith(f"(did you mean {MEANT}? It is in specreg's catalog)")


def test_a_mistyped_catalog_id_the_hub_does_not_have_names_the_id_it_meant(hub):
    from conftest import run_in_process

    r = run_in_process("show", NEAR.lower(), env={"SPECREG_HUB_RETRIES": "0"})
    assert r.returncode == 2
    assert f"(did you mean {MEANT}? It is in specreg's catalog)" in r.stderr


def test_an_id_like_no_catalog_id_gets_no_guess(hub):
    from conftest import run_in_process

    r = run_in_process("show", "someone/something-else", env={"SPECREG_HUB_RETRIES": "0"})
    assert r.returncode == 2 and "did you mean" not in r.stderr


def test_a_catalog_id_offline_is_named_with_its_article():
    """ "a eagle3 draft" """
    from conftest import run_in_process

    r = run_in_process("show", "RedHatAI/Qwen3-8B-speculator.eagle3", env={"HF_HUB_OFFLINE": "1"})
    assert r.returncode == 2
    assert "is in specreg's catalog: an eagle3 draft for Qwen/Qwen3-8B" in r.stderr


# -- the next step, on the first screen -----------------------------------------------------------------------


def next_line(*argv):
    from conftest import run_in_process

    r = run_in_process("show", *argv)
    return next(line for line in r.stdout.splitlines()[:10] if line.startswith("  next "))


def test_show_names_the_command_that_serves_the_draft_near_the_top(tmp_path):
    """The first screen of `show` ended without saying what to run next."""
    draft = write_draft(tmp_path / "d", fixture_config("dflash"))
    assert next_line(str(draft), "--vllm", "0.33") == (
        f"  next          specreg serve {draft} --vllm 0.33  (materializes it as trained, then prints the "
        "`vllm serve` line)"
    )
    plain = write_draft(tmp_path / "e", fixture_config("eagle3_generated"))
    assert next_line(str(plain), "--vllm", "0.33") == (
        f"  next          specreg serve {plain} --vllm 0.33  (prints the `vllm serve` line)"
    )


def test_show_of_a_draft_vllm_cannot_serve_says_so_where_the_command_would_be(tmp_path):
    from conftest import DATA

    assert next_line(str(DATA / "speculators" / "mtp.json"), "--vllm", "0.33") == (
        "  next          none: vLLM 0.33 cannot serve it as trained (the errors under findings)"
    )


def test_a_hub_failing_for_an_id_near_a_catalog_id_is_not_called_a_typo(hub):
    """A 503 for the user's own repo is the Hub failing, not a mistyped catalog id."""
    from conftest import run_in_process

    hub.add(NEAR, {"config.json": json.dumps(fixture_config("dflash")).encode()})
    hub.fault("config.json", "forever:503")
    r = run_in_process("show", NEAR, env={"SPECREG_HUB_RETRIES": "0"})
    assert r.returncode == 2 and "503" in r.stderr and "did you mean" not in r.stderr


@pytest.mark.parametrize("version", ["0.22", "0.23"])
def test_show_names_the_first_release_that_serves_a_mixed_dflash_draft(tmp_path, version):
    """`--vllm 0.22` said "Needs vLLM >= 0.23", and `--vllm 0.23` then ">= 0.26"."""
    cfg = fixture_config("dflash")
    cfg["transformer_layer_config"].update(
        layer_types=["sliding_attention", "full_attention"] * 2 + ["full_attention"], sliding_window=2048
    )
    draft = write_draft(tmp_path / "d", cfg)
    spec = specreg.load(draft, vllm=version)
    assert not spec.servable and specreg.load(draft, vllm="0.26").servable
    (f,) = [f for f in spec.errors if f.code == "vllm-unsupported-feature"]
    assert f.message.endswith("Needs vLLM >= 0.26.")
    assert next_line(str(draft), "--vllm", version) == (
        f"  next          none for vLLM {version} (the errors under findings); vLLM 0.26 is the first release "
        f"that serves it as trained: specreg show {draft} --vllm 0.26"
    )
