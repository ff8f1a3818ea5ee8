"""The trainer tier (`pytest -m trainer`, docs/testing.md): the whole pipeline of pipeline.py run
afresh in the trainer venv (.ci/trainer-venv) into a temporary folder, then held against what is
committed under tests/data/trained: the verifier byte for byte, each draft's config as speculators
wrote it, and the trainer's own validation numbers (its AL at least the aim of 2.5 at k = 3).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from safetensors import safe_open

pytestmark = pytest.mark.trainer

HERE = Path(__file__).resolve().parent
TRAINED = HERE.parent / "data" / "trained"
VENV = Path(os.environ.get("SPECREG_TRAINER_VENV", Path.home() / ".cache" / "specreg" / "trainer-venv"))
AIM = 2.5


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    python = VENV / "bin" / "python"
    if not (VENV / "bin" / "speculators").exists():
        pytest.fail(f"the trainer tier needs its venv at {VENV}: bash .ci/trainer-venv", pytrace=False)
    root = tmp_path_factory.mktemp("trainer")
    done = subprocess.run(
        [str(python), str(HERE / "pipeline.py"), str(root / "work"), str(root / "out")],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return root / "out"


def shapes(path: Path) -> dict[str, list[int]]:
    with safe_open(str(path), framework="numpy") as f:
        return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}


def test_the_verifier_is_rebuilt_byte_for_byte(fresh):
    committed = sorted(p.name for p in (TRAINED / "verifier").iterdir())
    assert committed == sorted(p.name for p in (fresh / "verifier").iterdir())
    for name in committed:
        assert (fresh / "verifier" / name).read_bytes() == (TRAINED / "verifier" / name).read_bytes(), name


@pytest.mark.parametrize("name", ["dflash-2l", "eagle3", "peagle"])
def test_the_trainer_reaches_the_aim_and_writes_the_committed_config(fresh, name):
    record = json.loads((fresh / name / "trainer.json").read_text())
    assert record["acceptance_length"] >= AIM, record["validation"]
    assert json.loads((fresh / name / "config.json").read_text()) == json.loads(
        (TRAINED / name / "config.json").read_text()
    )
    assert shapes(fresh / name / "model.safetensors") == shapes(TRAINED / name / "model.safetensors")


def test_the_committed_drafts_reach_the_aim():
    for name in ("dflash-2l", "eagle3", "peagle"):
        assert json.loads((TRAINED / name / "trainer.json").read_text())["acceptance_length"] >= AIM, name


def test_speculators_writes_the_non_causal_dflash_layers_as_not_non_causal():
    """The case specreg's DFlash fix is about: two full-attention layers, trained non-causal in the block
    (speculators/models/dflash/attention.py), saved with sliding_window_non_causal false."""
    config = json.loads((TRAINED / "dflash-2l" / "config.json").read_text())
    tc = config["transformer_layer_config"]
    assert tc["num_hidden_layers"] == 2 and tc.get("layer_types") == ["full_attention"] * 2, tc
    assert config.get("sliding_window_non_causal", tc.get("sliding_window_non_causal")) is False, config


def test_the_eagle3_draft_has_a_reduced_vocabulary():
    config = json.loads((TRAINED / "eagle3" / "config.json").read_text())
    found = shapes(TRAINED / "eagle3" / "model.safetensors")
    assert config["draft_vocab_size"] < config["transformer_layer_config"]["vocab_size"]
    assert found["d2t"] == [config["draft_vocab_size"]], sorted(found)
