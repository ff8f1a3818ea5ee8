"""Every number of a real draft config retyped, one field at a time, through the whole of `check`
(normalize, the verifier, the weight headers, the GPU's attention selector): the result is a
Speculator or a ConfigError naming JSON paths, never another exception. A hidden size that was an
object once reached the weight check and ended in `TypeError: mappingproxy * int` (exit 3)."""

from __future__ import annotations

import json

import pytest

import specreg
from conftest import DATA
from specreg.vllm.preflight import preflight
from weights import write_draft

FIXTURES = sorted(f"speculators/{p.name}" for p in (DATA / "speculators").glob("*.json")) + sorted(
    f"native/{p.name}" for p in (DATA / "native").glob("*.json"))
#: a non-empty object: an empty one is falsy, and slipped past the check that crashed on the other
RETYPES = {"an object": {"x": 1}, "a list": [1], "a string": "1", "a bool": True, "null": None}
VERIFIER = {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 4096,
            "num_hidden_layers": 36, "vocab_size": 151936, "num_attention_heads": 32, "num_key_value_heads": 8}
GPU = "H100"


def numbers(value, path=()):
    """The path of every int or float in a JSON value (booleans are not numbers here)."""
    if isinstance(value, dict):
        for k, v in value.items():
            yield from numbers(v, path + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from numbers(v, path + (i,))
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield path


def retyped(cfg: dict, path: tuple, value) -> dict:
    out = json.loads(json.dumps(cfg))
    node = out
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return out


def check(directory, verifier, gpu):
    spec = specreg.load(str(directory), verifier=str(verifier))
    return preflight(spec, verifier=str(verifier), check_weights=True, gpu=gpu)


def gpu_for(draft, verifier) -> str | None:
    """The GPU check runs where the unchanged fixture passes it (some drafts give no head size)."""
    try:
        check(draft, verifier, GPU)
    except specreg.SpecregError:
        return None
    return GPU


def test_the_retypes_reach_every_stage():
    cfg = json.loads((DATA / "speculators" / "eagle3_generated.json").read_text())
    assert ("transformer_layer_config", "hidden_size") in set(numbers(cfg))
    assert ("speculators_config", "proposal_methods", 0, "speculative_tokens") in set(numbers(cfg))


@pytest.mark.parametrize("fixture", FIXTURES)
def test_every_number_retyped_is_a_speculator_or_a_config_error_naming_a_path(tmp_path, fixture):
    base = json.loads((DATA / fixture).read_text())
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    (verifier / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", base)
    gpu = gpu_for(draft, verifier)
    wrong = []
    for path in numbers(base):
        for what, value in RETYPES.items():
            (draft / "config.json").write_text(json.dumps(retyped(base, path, value)))
            try:
                check(draft, verifier, gpu)
            except specreg.ConfigError as exc:
                if not all(p.path.startswith("$") for p in exc.problems):
                    wrong.append((path, what, [p.path for p in exc.problems]))
            except Exception as exc:  # noqa: BLE001 - the point: any other exception is a bug
                wrong.append((path, what, f"{type(exc).__name__}: {exc}"))
    assert wrong == []


@pytest.mark.parametrize("fixture, at", [("speculators/eagle3_generated.json", ("transformer_layer_config",)),
                                         ("native/zlab_dflash_qwen3_8b_fixture.json", ())])
@pytest.mark.parametrize("what", ["an object", "a list", "a string", "a bool"])
def test_a_hidden_size_that_is_no_integer_is_a_config_error_at_its_path(tmp_path, fixture, at, what):
    cfg = retyped(json.loads((DATA / fixture).read_text()), (*at, "hidden_size"), RETYPES[what])
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", cfg)
    with pytest.raises(specreg.ConfigError) as caught:
        check(draft, tmp_path / "verifier", None)
    path = "$." + ".".join((*at, "hidden_size"))
    assert [p.path for p in caught.value.problems] == [path]
    assert caught.value.problems[0].message.startswith("expected an integer, got ")


@pytest.mark.parametrize("what", ["an object", "a list", "a string", "a bool"])
def test_a_head_count_that_is_no_integer_stops_the_gpu_check_at_its_path(tmp_path, what):
    """num_attention_heads wrong is an error finding; the GPU's head size (hidden_size // heads) is then
    unknown (or, for true, 5120), so --gpu says which field, not 'gives neither head_dim nor ...'."""
    cfg = retyped(json.loads((DATA / "native" / "specforge_qwq_32b_eagle3.json").read_text()),
                  ("num_attention_heads",), RETYPES[what])
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(VERIFIER))
    draft = write_draft(tmp_path / "draft", cfg)
    assert "invalid-draft-shape" in [f.code for f in check(draft, tmp_path / "verifier", None).errors]
    with pytest.raises(specreg.ConfigError) as caught:
        check(draft, tmp_path / "verifier", GPU)
    assert [p.path for p in caught.value.problems] == ["$.num_attention_heads"]
    assert caught.value.problems[0].message.startswith(f"--gpu {GPU}: expected a positive integer")
