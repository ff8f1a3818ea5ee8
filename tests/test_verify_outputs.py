"""specreg/verify/outputs.py: what a verify run writes survives a disk that fills up."""

from __future__ import annotations

import json

import pytest

# -- every reader, every file-system shape ---------------------------------------------------------------------


def test_a_disk_that_fills_up_after_measuring_does_not_lose_the_measurement(tmp_path, monkeypatch, capsys):
    """verify on a full disk lost the measurement: the result is printed whole before the error."""
    import errno

    from openai_server import OpenAIServer
    from specreg.cli.main import main
    from specreg.verify import outputs
    from verify_helpers import ENTRY, verify_args, write_rows

    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device", str(tmp_path / "out" / "result.json"))

    monkeypatch.setattr(outputs, "write_all", full)
    with OpenAIServer() as server:
        code = main(list(verify_args(server, reg, rows, tmp_path / "out")))
    err = capsys.readouterr().err
    assert code == 2 and "No space left on device" in err and "no space left" in err.lower()
    line = next(x for x in err.splitlines() if x.startswith("{"))
    assert json.loads(line)["statistics"]["acceptance_length"] == pytest.approx(2.8)
