"""`specreg convert`: the speculators-format twin of a native draft, on the CLI."""

import json

from conftest import DATA, run_specreg

run = run_specreg


def test_convert_without_a_verifier_refuses_to_write_a_twin_vllm_would_refuse(tmp_path):
    out = run(
        "convert", str(DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json"), str(tmp_path / "twin"), "--config-only"
    )
    assert out.returncode == 2 and "names no verifier" in out.stderr and "--verifier ORG/NAME" in out.stderr
    assert not (tmp_path / "twin").exists()  # nothing written
    with_verifier = run(
        "convert",
        str(DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json"),
        str(tmp_path / "t2"),
        "--config-only",
        "--verifier",
        "Qwen/Qwen3-8B",
        "--skip-verifier-check",  # offline here: the pair cannot be checked
    )
    assert with_verifier.returncode == 0 and "no verifier" not in with_verifier.stderr
    assert "warnings" not in json.loads((tmp_path / "t2" / "specreg.json").read_text())


ZLAB = DATA / "native" / "zlab_dflash_qwen3_8b_fixture.json"


def test_convert_refuses_a_verifier_the_draft_does_not_fit_unless_forced(tmp_path):
    """convert --verifier wrote the twin for a verifier the draft does not fit, exit 0, no warning."""
    from hostile_helpers import local_verifier

    wide = local_verifier(tmp_path, "wide-verifier", hidden_size=5376, num_hidden_layers=12)
    r = run("convert", str(ZLAB), str(tmp_path / "twin"), "--config-only", "--verifier", str(wide))
    assert r.returncode == 1 and r.stdout == "" and not (tmp_path / "twin").exists(), r.stderr
    errors = [line.split(":")[1].strip() for line in r.stderr.splitlines() if line.startswith("# error: ")]
    assert errors == ["verifier-layer-out-of-range", "verifier-hidden-size-mismatch"]
    assert r.stderr.splitlines()[-1].startswith(f"error: {ZLAB}: does not match the verifier {wide} ")
    forced = run(
        "convert", str(ZLAB), str(tmp_path / "twin"), "--config-only", "--verifier", str(wide), "--force-verifier"
    )
    assert forced.returncode == 0, forced.stderr
    warned = [line for line in forced.stderr.splitlines() if line.startswith("# warning: verifier-")]
    assert len(warned) == 2 and all(line.endswith("(served anyway: --force-verifier)") for line in warned)
    manifest = json.loads((tmp_path / "twin" / "specreg.json").read_text())
    assert manifest["verifier"] == str(wide)
    assert manifest["served_beside"] == {
        "verifier": str(wide),
        "checked": True,
        "overridden": ["verifier-hidden-size-mismatch", "verifier-layer-out-of-range"],
    }


def test_convert_beside_a_verifier_that_fits_records_the_check(tmp_path):
    from hostile_helpers import local_verifier

    fits = local_verifier(tmp_path)
    r = run("convert", str(ZLAB), str(tmp_path / "twin"), "--config-only", "--verifier", str(fits))
    assert r.returncode == 0, r.stderr
    manifest = json.loads((tmp_path / "twin" / "specreg.json").read_text())
    assert manifest["served_beside"] == {"verifier": str(fits), "checked": True, "overridden": []}


def test_convert_offline_refuses_a_verifier_it_cannot_read_unless_the_check_is_skipped(tmp_path):
    r = run(
        "convert",
        str(ZLAB),
        str(tmp_path / "twin"),
        "--config-only",
        "--verifier",
        "org/v",
        env={"HF_HUB_OFFLINE": "1"},
    )
    assert r.returncode == 2 and not (tmp_path / "twin").exists()
    assert "the draft was not checked against org/v" in r.stderr and "pass --skip-verifier-check" in r.stderr
