"""specreg/speculators: the fields each speculators release's config classes write are data
(facts/<version>.json), computed by running that release's own classes (`python -m specreg.speculators
refresh`, here on a stand-in wheel; the committed files were read from the PyPI wheels)."""

from __future__ import annotations

import json
import os
import sys
import zipfile

import pytest
from packaging.version import Version

from specreg import speculators
from specreg.speculators import refresh

KEYS = {
    "speculators",
    "run_with",
    "algorithms",
    "speculators_config",
    "verifier",
    "proposal_methods",
    "unreadable_modules",
}


@pytest.mark.parametrize("release", speculators.known())
def test_every_committed_release_file_is_well_formed(release):
    found = speculators.facts(release)
    assert set(found) == KEYS and found["speculators"] == release
    assert found["algorithms"], "a release file with no algorithm read nothing"
    for algo in found["algorithms"].values():
        for entry in algo["fields"].values():
            assert isinstance(entry["type"], str)
            assert len({"default", "default_object", "required"} & set(entry)) <= 1
    assert (speculators.FOLDER / f"{release}.json").read_text(encoding="utf-8") == refresh.text(found)


def test_the_releases_from_0_1_to_0_9_are_known_and_0_9_writes_dflash_and_dspark():
    known = speculators.known()
    assert known[0] == "0.1.0" and known[-1] == "0.9.0" and len(known) >= 14
    newest = speculators.facts(known[-1])["algorithms"]
    # read from 0.9.0's own DFlashSpeculatorConfig: block_size defaults to 8, mask_token_id to None
    assert newest["dflash"]["fields"]["block_size"] == {"default": 8, "type": "int"}
    assert newest["dflash"]["fields"]["mask_token_id"] == {"default": None, "type": "int | None"}
    assert newest["dspark"]["class"] == "DSparkSpeculatorConfig"
    assert "dflash" not in speculators.facts(known[0])["algorithms"]


def test_written_gives_every_releases_fields_with_the_newest_that_writes_each():
    fields = speculators.written("algorithms", "eagle3")
    assert fields["norm_before_residual"][0] == speculators.known()[-1]
    assert "name_or_path" in speculators.written("verifier")
    assert "speculative_tokens" in speculators.written("proposal_methods", "greedy")


def test_diff_names_the_fields_added_removed_and_changed():
    old = {"algorithms": {"a": {"class": "A", "fields": {"x": {"type": "int", "default": 1}, "y": {"type": "str"}}}},
           "speculators_config": {}, "verifier": {}, "proposal_methods": {}}  # fmt: skip
    new = {"algorithms": {"a": {"class": "A", "fields": {"x": {"type": "int", "default": 2}, "z": {"type": "bool", "default": False}}},
                          "b": {"class": "B", "fields": {}}},
           "speculators_config": {"w": {"type": "str", "required": True}}, "verifier": {}, "proposal_methods": {}}  # fmt: skip
    assert refresh.diff(old, new) == [
        "~ a.x: int = 1 -> int = 2",
        "- a.y: str",
        "+ a.z: bool = false",
        "+ algorithm b (B)",
        "+ speculators_config.w: str, required",
    ]


def test_diff_and_list_commands(capsys):
    known = speculators.known()
    assert refresh.main(["list"]) == 0
    assert capsys.readouterr().out.splitlines()[0].startswith(f"{known[0]}  ")
    assert refresh.main(["diff", known[-2], known[-1]]) == 0
    assert refresh.main(["diff", "0.0.9", known[-1]]) == 2
    assert "no committed speculators facts" in capsys.readouterr().err


def _stand_in_wheel(tmp_path, version="9.9.9"):
    """A wheel whose speculators has the shape of a real release (config.py with the registries, one
    registered config class) and needs only pydantic, so the child runs without torch."""
    wheel = tmp_path / f"speculators-{version}-py3-none-any.whl"
    config = """
from typing import ClassVar, Literal
from pydantic import BaseModel, Field

class TokenProposalConfig(BaseModel):
    registry: ClassVar[dict] = {}
    proposal_type: str

class GreedyTokenProposalConfig(TokenProposalConfig):
    proposal_type: Literal["greedy"] = "greedy"
    speculative_tokens: int = 5

TokenProposalConfig.registry["greedy"] = GreedyTokenProposalConfig

class VerifierConfig(BaseModel):
    name_or_path: str | None
    architectures: list[str]

class SpeculatorsConfig(BaseModel):
    algorithm: str
    verifier: VerifierConfig

class SpeculatorModelConfig(BaseModel):
    registry: ClassVar[dict] = {}
    speculators_model_type: str = ""
    speculators_version: str = "9.9.9"
"""
    models = """
from typing import Literal
from pydantic import Field
from speculators.config import SpeculatorModelConfig

class FancySpeculatorConfig(SpeculatorModelConfig):
    speculators_model_type: Literal["fancy"] = "fancy"
    projector_type: str = Field(default="linear")
    gru_hidden_dim: int | None = None
    layer_ids: list[int] = Field(default_factory=lambda: [1, 2])

SpeculatorModelConfig.registry["fancy"] = FancySpeculatorConfig
"""
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("speculators/__init__.py", "")
        zf.writestr("speculators/config.py", config)
        zf.writestr("speculators/models/__init__.py", "")
        zf.writestr("speculators/models/fancy.py", models)
        zf.writestr(
            f"speculators-{version}.dist-info/METADATA",
            f"Metadata-Version: 2.1\nName: speculators\nVersion: {version}\n",
        )
    return wheel


def _python_with_pydantic() -> str:
    """An interpreter with pydantic for the child: SPECREG_SPECULATORS_PYTHON (the venv the committed
    files were read with), else this one where it has pydantic."""
    given = os.environ.get("SPECREG_SPECULATORS_PYTHON")
    if given:
        return given
    pytest.importorskip("pydantic", reason="the child needs pydantic: set SPECREG_SPECULATORS_PYTHON")
    return sys.executable


def test_refresh_runs_the_wheels_own_config_classes(tmp_path):
    out = refresh.refresh(None, _stand_in_wheel(tmp_path), _python_with_pydantic(), tmp_path / "facts")
    found = json.loads(out.read_text(encoding="utf-8"))
    assert out.name == "9.9.9.json" and found["speculators"] == "9.9.9"
    assert found["algorithms"]["fancy"]["fields"] == {
        "gru_hidden_dim": {"default": None, "type": "int | None"},
        "layer_ids": {"default": [1, 2], "type": "list[int]"},
        "projector_type": {"default": "linear", "type": "str"},
        "speculators_model_type": {"default": "fancy", "type": "Literal['fancy']"},
        "speculators_version": {"type": "str"},
    }
    assert found["verifier"]["name_or_path"] == {"required": True, "type": "str | None"}
    assert found["proposal_methods"]["greedy"]["fields"]["speculative_tokens"] == {"default": 5, "type": "int"}


def test_refresh_of_a_wheel_with_no_config_classes_is_an_error(tmp_path):
    wheel = tmp_path / "speculators-0.0.1-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:  # 0.0.1 on PyPI: a name placeholder, no speculators.config
        zf.writestr("speculators/__init__.py", "")
        zf.writestr(
            "speculators-0.0.1.dist-info/METADATA", "Metadata-Version: 2.1\nName: speculators\nVersion: 0.0.1\n"
        )
    with pytest.raises(refresh.RefreshError, match="speculators.config"):
        refresh.refresh(None, wheel, sys.executable, tmp_path / "facts")
    assert not (tmp_path / "facts").exists()


def test_known_is_sorted_by_version():
    assert list(speculators.known()) == sorted(speculators.known(), key=Version)


@pytest.mark.parametrize(
    "writes, said",
    [
        (None, "exited 0 but wrote no facts (is it a Python with speculators?)"),
        ("{", "wrote no facts file that reads as JSON (Expecting property name"),
        ('{"speculators": "../x", "algorithms": {}}', "reported $.speculators = '../x': not a speculators version"),
        ('{"speculators": 9, "algorithms": {}}', "reported $.speculators = 9: not a speculators version"),
        ('{"speculators": "9.1.0", "algorithms": []}', "reported $.algorithms = []: not an object of algorithms"),
        ('{"speculators": "9.1.0", "algorithms": {"x": 1}}', "reported $.algorithms = {'x': 1}: not an object"),
    ],
    ids=["writes nothing", "invalid JSON", "a path", "a number", "no object", "no fields"],
)
def test_a_child_that_reports_no_facts_is_one_line_and_writes_nothing(tmp_path, capsys, writes, said):
    """The speculators refresh reads its child's answer by the transformers refresh's one rule
    (specreg/facts/upstream.py): these were tracebacks, or (a version "../x") a file outside --out."""
    from test_transformers_facts import refused_writing_nothing, stand_in_python

    refused_writing_nothing(refresh.main, stand_in_python(tmp_path, writes), tmp_path, capsys, said)


def test_refresh_refuses_an_out_that_is_a_file(tmp_path, capsys):
    out = tmp_path / "out"
    out.write_text("mine\n")
    assert refresh.main(["refresh", "--python", sys.executable, "--out", str(out)]) == 2
    assert (
        capsys.readouterr().err
        == f"error: {out}: is not a directory: --out names the folder <version>.json is written into\n"
    )
    assert out.read_text() == "mine\n"
