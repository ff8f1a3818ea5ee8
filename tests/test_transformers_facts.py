"""specreg/transformers: the facts read from each transformers release are data (facts/<version>.json),
the code reads them, and `python -m specreg.transformers refresh` writes them (here from a stand-in
wheel; tests/engine_tier/test_composite_types.py runs it on the real wheels)."""

from __future__ import annotations

import json
import os
import sys
import zipfile
from pathlib import Path

import pytest

import specreg
from specreg import transformers
from specreg.normalization import fields, model_types
from specreg.transformers import refresh

KEYS = {"transformers", "model_types", "composite_model_types", "config_keys"}


@pytest.mark.parametrize("release", transformers.known())
def test_every_committed_release_file_is_well_formed(release):
    found = transformers.facts(release)
    assert set(found) == KEYS and found["transformers"] == release
    for key in KEYS - {"transformers"}:
        assert found[key] == sorted(set(found[key])) and all(isinstance(t, str) for t in found[key]), key
    assert set(found["composite_model_types"]) <= set(found["model_types"])
    assert (transformers.FOLDER / f"{release}.json").read_text(encoding="utf-8") == refresh.text(found)


def test_the_model_type_tables_are_the_facts_of_the_release_in_use():
    used = transformers.facts()
    assert model_types.TRANSFORMERS_VERSION == transformers.target() == used["transformers"]
    assert model_types.TRANSFORMERS_MODEL_TYPES == set(used["model_types"])
    assert model_types.KNOWN_MODEL_TYPES == set(used["model_types"]) | model_types.VLLM_MODEL_TYPES
    assert model_types.COMPOSITE_MODEL_TYPES == set(used["composite_model_types"])
    assert fields.HF_CONFIG_KEYS >= set(used["config_keys"]) | set(fields.HF_CONFIG_KEYS_V4)


def test_a_model_type_only_the_newest_transformers_has_is_known(variant, monkeypatch):
    # transformers 5.25.0 added `lfm3_vl`'s text sibling `lfm3` (5.19.0 had neither): read from the data
    monkeypatch.setattr(transformers, "installed", lambda: None)
    transformers.target.cache_clear()
    try:
        newest = transformers.facts(transformers.known()[-1])
        added = sorted(set(newest["model_types"]) - set(transformers.facts(transformers.known()[0])["model_types"]))
        text = next(t for t in added if t not in newest["composite_model_types"])
        spec = specreg.normalize(variant("dflash", transformer_layer_config__model_type=text), vllm="0.33")
        assert "unknown-model-type" not in [f.code for f in spec.findings]
        spec = specreg.normalize(variant("dflash", transformer_layer_config__model_type="nosuchtype"), vllm="0.33")
        (f,) = [f for f in spec.findings if f.code == "unknown-model-type"]
        assert f"transformers ({transformers.known()[-1]})" in f.message
    finally:
        transformers.target.cache_clear()


def test_the_installed_transformers_facts_are_used_when_committed(tmp_path, monkeypatch):
    site = tmp_path / "site"
    (site / "transformers").mkdir(parents=True)
    (site / f"transformers-{transformers.known()[0]}.dist-info").mkdir()
    monkeypatch.setattr(sys, "path", [str(site), *sys.path])
    transformers.target.cache_clear()
    try:
        assert transformers.installed() == transformers.known()[0] == transformers.target()
        (site / f"transformers-{transformers.known()[0]}.dist-info").rename(site / "transformers-99.1.0.dist-info")
        transformers.target.cache_clear()
        assert transformers.installed() == "99.1.0" and transformers.target() == transformers.known()[-1]
    finally:
        transformers.target.cache_clear()


#: a stand-in transformers: three config classes, one of them composite (a text_config, no vocab_size)
FAKE = """
__version__ = "9.1.0"

class PretrainedConfig:
    sub_configs = {}
    def __init__(self, **kw):
        self.__dict__.update({"architectures": None, "vocab_size": 10}, **kw)
    def to_dict(self):
        return dict(self.__dict__)

class Decoder(PretrainedConfig):
    def __init__(self):
        super().__init__(rope_parameters={})

class Composite(PretrainedConfig):
    sub_configs = {"text_config": PretrainedConfig}
    def __init__(self):
        self.text_config = {}

class NeedsArguments(PretrainedConfig):
    def __init__(self, required):
        super().__init__()

CONFIG_MAPPING = {name: Decoder for name in DECODERS}
CONFIG_MAPPING.update({"fakevl": Composite, "picky": NeedsArguments})
"""


def test_refresh_writes_a_release_file_from_a_wheel_by_running_its_code(tmp_path, capsys):
    wheel = tmp_path / "transformers-9.1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("transformers/__init__.py", f"DECODERS = {list(fields.HF_CONFIG_MODEL_TYPES)!r}\n" + FAKE)
    out = tmp_path / "facts"
    assert refresh.main(["refresh", "--wheel", str(wheel), "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"{out / '9.1.0.json'}\n"
    written = json.loads((out / "9.1.0.json").read_text())
    assert written == {
        "transformers": "9.1.0",
        "model_types": sorted([*fields.HF_CONFIG_MODEL_TYPES, "fakevl", "picky"]),
        "composite_model_types": ["fakevl"],
        "config_keys": ["architectures", "rope_parameters", "vocab_size"],
    }


def test_refresh_of_a_file_that_is_no_wheel_is_one_line_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "transformers-9.1.0-py3-none-any.whl"
    bad.write_text("not a zip")
    assert refresh.main(["refresh", "--wheel", str(bad), "--out", str(tmp_path / "facts")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {bad}: not a readable wheel") and err.count("\n") == 1
    assert not (tmp_path / "facts").exists()


def stand_in_python(tmp_path: Path, writes: str | None) -> Path:
    """An executable standing in for `--python`: called as `PYTHON -c CODE OUT TYPES`, it writes
    `writes` to OUT (nothing when None) and exits 0."""
    script = tmp_path / "python"
    body = "exit 0\n" if writes is None else f"cat > \"$3\" <<'END'\n{writes}\nEND\n"
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return script


LISTS = '"model_types": [], "composite_model_types": [], "config_keys": []'


@pytest.mark.parametrize(
    "writes, said",
    [
        (None, "exited 0 but wrote no facts (is it a Python with transformers?)"),
        ("{", "wrote no facts file that reads as JSON (Expecting property name"),
        ("[1]", "reported $ = [1]: not an object"),
        ('{"transformers": "../x", ' + LISTS + "}", "reported $.transformers = '../x': not a transformers version"),
        ('{"transformers": 5, ' + LISTS + "}", "reported $.transformers = 5: not a transformers version"),
        ('{"transformers": "9.01", ' + LISTS + "}", "reported $.transformers = '9.01': not a transformers version"),
        (
            '{"transformers": "9.1.0", "model_types": "all", "composite_model_types": [], "config_keys": []}',
            "reported $.model_types = 'all': not a list of names",
        ),
    ],
    ids=["writes nothing", "invalid JSON", "no object", "a path", "a number", "not canonical", "no list"],
)
def test_a_child_that_reports_no_facts_is_one_line_and_writes_nothing(tmp_path, capsys, writes, said):
    """These were tracebacks, or (a version "../x") a file written outside --out."""
    refused_writing_nothing(refresh.main, stand_in_python(tmp_path, writes), tmp_path, capsys, said)


def refused_writing_nothing(main, python: Path, tmp_path: Path, capsys, said: str) -> None:
    """A refresh command run with `python` as its child: exit 2, one error line naming the interpreter and
    starting with `said`, nothing written under tmp_path (the speculators refresh's tests use it too)."""
    out = tmp_path / "out" / "facts"
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert main(["refresh", "--python", str(python), "--out", str(out)]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.count("\n") == 1
    assert captured.err.startswith(f"error: {python}: {said}")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


@pytest.mark.parametrize("shape", ["a regular file", "a link to a directory"])
def test_refresh_refuses_an_out_that_is_no_directory_of_its_own(tmp_path, capsys, shape):
    python = stand_in_python(tmp_path, '{"transformers": "9.1.0", ' + LISTS + "}")
    out, real = tmp_path / "out", tmp_path / "real"
    if shape == "a regular file":
        out.write_text("mine\n")
        said = f"error: {out}: is not a directory: --out names the folder <version>.json is written into\n"
    else:
        real.mkdir()
        out.symlink_to(real)
        said = f"error: {out}: is a link to {real}: give the directory itself\n"
    assert refresh.main(["refresh", "--python", str(python), "--out", str(out)]) == 2
    assert capsys.readouterr().err == said
    assert (out.read_text() == "mine\n") if shape == "a regular file" else os.listdir(real) == []
