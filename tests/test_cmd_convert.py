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
    )
    assert with_verifier.returncode == 0 and "no verifier" not in with_verifier.stderr
    assert "warnings" not in json.loads((tmp_path / "t2" / "specreg.json").read_text())
