"""specreg/vllm/weight_headers.py: hostile safetensors headers are bad input naming the tensor, read by
one rule for `check` and `materialize`."""

from __future__ import annotations

import json
import os

import pytest

from conftest import fixture_config
from hostile_helpers import local_verifier, run
from weights import write_draft

# -- safetensors headers ----------------------------------------------------------------------------------


def header_file(path, header_text: str) -> None:
    raw = header_text.encode()
    path.write_bytes(len(raw).to_bytes(8, "little") + raw)


@pytest.mark.parametrize(
    "shape",
    ['["a"]', "[null]", "[1e400]", "[NaN]", "[{}]", "[-1]", "[1.5]", "[true]", "[" + ",".join(["1"] * 40) + "]"],
)
def test_a_hostile_tensor_shape_is_bad_input_naming_the_tensor(tmp_path, shape):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    header_file(
        src / "model.safetensors", '{"fc.weight": {"dtype": "F16", "shape": ' + shape + ', "data_offsets": [0, 0]}}'
    )
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2, r.stderr
    assert "fc.weight" in r.stderr and "shape" in r.stderr and "internal error" not in r.stderr


def test_a_deeply_nested_safetensors_header_is_bad_input(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "config.json").write_text(json.dumps(fixture_config("dflash")))
    header_file(src / "model.safetensors", '{"x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2 and "internal error" not in r.stderr, r.stderr


# -- every reader, every file-system shape ---------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["fifo", "link outside"])
def test_check_reads_weight_headers_by_the_same_rule_as_materialize(tmp_path, shape):
    """check opened a FIFO x.safetensors and waited for ever; it read headers through links out of the draft."""
    src = write_draft(tmp_path / "src", fixture_config("dflash"))
    if shape == "fifo":
        os.mkfifo(src / "x.safetensors")
    else:
        (tmp_path / "elsewhere.safetensors").write_bytes((src / "model.safetensors").read_bytes())
        (src / "x.safetensors").symlink_to(tmp_path / "elsewhere.safetensors")
    r = run("check", str(src), "--verifier", str(local_verifier(tmp_path)))
    assert r.returncode == 2 and "x.safetensors" in r.stderr, r.stderr
