"""The native trainers' facts (specreg/sources/native/facts/) are what tests/native_trainer_facts.py reads
from each trainer's code at its cited commit, and the reader finds what a writer writes."""

from __future__ import annotations

import json

import pytest

import native_trainer_facts as reader
from specreg.sources.native import trainers

WRITER = """
def export(model, draft_config):
    config = {
        "architectures": ["DFlashDraftModel"],
        "block_size": model.block_size,
        "rope_scaling": None,
        "dflash_config": {"mask_token_id": model.mask_token_id},
    }
    config["num_target_layers"] = 36
    config["dflash_config"].update({"shift_label": getattr(draft_config, "shift_label", True)})
    return config
"""

READER = """
class Draft:
    def __init__(self, config):
        self.block_size = config.block_size
        self.layers = getattr(config, "num_draft_layers", 5)
        self.mask = config.dflash_config.get("mask_token_id", None)
        self.fc = config.to_dict()
"""


def test_the_reader_finds_a_writers_keys_and_the_defaults_its_code_states():
    found = reader.python_fields(WRITER, "w.py", writes=["config"])
    top, dflash = found["$"], found["$.dflash_config"]
    assert set(top) == {"architectures", "block_size", "rope_scaling", "dflash_config", "num_target_layers"}
    assert top["architectures"]["default"] == ["DFlashDraftModel"] and top["architectures"]["from"] == "w.py:4"
    assert "default" not in top["block_size"] and "default" not in top["rope_scaling"]  # a slot filled in
    assert top["num_target_layers"] == {"type": "int", "default": 36, "from": "w.py:9"}
    assert dflash["shift_label"]["default"] is True and "mask_token_id" in dflash


def test_the_reader_finds_what_a_draft_class_takes_from_its_config():
    found = reader.python_fields(READER, "r.py", reads=True)
    assert set(found["$"]) == {"block_size", "num_draft_layers", "dflash_config"}  # to_dict is no field
    assert found["$"]["num_draft_layers"]["default"] == 5
    assert found["$.dflash_config"]["mask_token_id"] == {"type": "null", "default": None, "from": "r.py:6"}
    assert reader.python_fields(READER, "r.py") == {}  # a writer's file is not read for reads


RECIPE = """
class Recipe:
    def setup(self, recipe_cfg):
        draft_config["fc_norm"] = bool(recipe_cfg.get("fc_norm", False))
        draft_config.num_anchors = int(recipe_cfg.num_anchors)
        draft_config._attn_implementation = "flex_attention"

    def _build_dflash_config(self, recipe_cfg):
        return {"mask_token_id": self.mask_token_id}

class Causal(Recipe):
    def _build_dflash_config(self, recipe_cfg):
        cfg = super()._build_dflash_config(recipe_cfg)
        cfg["causal"] = True
        return cfg
"""


def test_the_reader_follows_a_recipes_helpers_into_dflash_config():
    found = reader.python_fields(
        RECIPE,
        "t.py",
        writes=["draft_config"],
        objects={"cfg": "dflash_config"},
        returns={"_build_dflash_config": "dflash_config"},
    )
    assert found["$"]["fc_norm"]["default"] is False  # the .get default, through bool()
    assert set(found["$"]) == {"fc_norm", "num_anchors"}  # an attribute set (DeepSpec's way); private ones not
    assert set(found["$.dflash_config"]) == {"mask_token_id", "causal"}
    assert found["$.dflash_config"]["causal"]["default"] is True


@pytest.mark.parametrize("name", sorted(reader.TRAINERS))
def test_each_trainers_facts_cite_the_repository_commit_and_files_every_field_came_from(name):
    facts = trainers.known()[name]
    about, spec = facts["_about"], reader.TRAINERS[name]
    assert (about["repo"], about["commit"], about["formats"]) == (spec["repo"], spec["commit"], spec["formats"])
    for fields in facts["fields"].values():
        for entry in fields.values():
            assert entry["from"].split(":")[0] in about["files"]


@pytest.mark.parametrize("name", sorted(reader.TRAINERS))
def test_the_committed_facts_are_what_the_trainers_code_says(name):
    spec = reader.TRAINERS[name]
    git_dir = reader.MIRROR / spec["repo"].replace("/", "+") / "repo"
    if not git_dir.is_dir():
        pytest.skip(f"no git mirror of {spec['repo']} at {git_dir} (fetch it to re-read the trainer's code)")
    text = json.dumps(reader.read_trainer(name, git_dir), indent=1) + "\n"
    assert text == (reader.FACTS / f"{name}.json").read_text(encoding="utf-8")
