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


# -- a DSpark draft's own head and embedding: the names vLLM's loader maps --------------------------------


def _reduced_dspark(name: str | None):
    """A DSpark draft of a reduced vocabulary (32 of the verifier's 64) whose head, if any, is `name`."""
    import tiny
    from test_preflight import reshape

    def change(c, v, w):
        c.update(draft_vocab_size=32)
        w.update({"d2t": ((32,), "int64"), "t2d": ((tiny.VOCAB,), "bool")})
        w.update(reshape(w, "markov_head.markov_w1.weight", (32, 4)))
        w.update(reshape(w, "markov_head.markov_w2.weight", (32, 4)))
        if name is not None:
            w[name] = ((32, tiny.HIDDEN), "float16")

    return change


@pytest.mark.parametrize("name", ["model.lm_head.weight", "draft.lm_head.weight"])
def test_a_dspark_head_under_another_prefix_is_no_head_vllms_loader_maps(tmp_path, name):
    """qwen3_dspark.py's load_weights passes a name holding "lm_head" on as it is, and AutoWeightsLoader
    places only `lm_head.weight` on the head (another prefix names no module: the load fails); it was
    taken for the head under any prefix."""
    from test_preflight import checked, pair

    spec = checked(*pair(tmp_path, "dspark", _reduced_dspark(name)))
    assert [f.message for f in spec.findings if f.code == "weights-lm-head-missing"] == [
        f"draft_vocab_size 32 < the verifier's 64, but the weights carry no lm_head.weight ({name} is not a name "
        "vLLM's DSpark loader maps): the verifier's full-vocabulary head cannot score the draft's reduced vocabulary"
    ]
    assert not spec.servable


def test_a_dspark_head_saved_as_lm_head_weight_is_its_own(tmp_path):
    from test_preflight import checked, pair

    spec = checked(*pair(tmp_path, "dspark", _reduced_dspark("lm_head.weight")))
    assert "weights-lm-head-missing" not in {f.code for f in spec.findings}


def test_a_dspark_embedding_under_the_model_prefix_is_no_embedding_vllms_loader_maps(tmp_path):
    """Every name without "lm_head" gets "model." put before it: `model.embed_tokens.weight` becomes
    `model.model.embed_tokens.weight`, which names no module."""
    import tiny
    from test_preflight import checked, pair

    def change(c, v, w):
        v.update(vocab_size=tiny.VOCAB // 2)
        w["model.embed_tokens.weight"] = ((tiny.VOCAB, tiny.HIDDEN), "float16")

    spec = checked(*pair(tmp_path, "dspark", change))
    assert [f.message for f in spec.findings if f.code == "weights-embed-missing"] == [
        f"vocab_size {tiny.VOCAB} > the verifier's {tiny.VOCAB // 2}, but the weights carry no embed_tokens.weight "
        "(model.embed_tokens.weight is not a name vLLM's DSpark loader maps): the verifier's embedding has no rows "
        f"for ids {tiny.VOCAB // 2} and up"
    ]


def test_a_dspark_markov_head_under_the_model_prefix_is_no_head_vllms_loader_maps(tmp_path):
    """load_weights puts "model." before it: `model.markov_head...` becomes `model.model.markov_head...`."""
    from test_preflight import checked, pair

    def change(c, v, w):
        w["model.markov_head.markov_w1.weight"] = w.pop("markov_head.markov_w1.weight")

    spec = checked(*pair(tmp_path, "dspark", change))
    assert [f.message for f in spec.findings if f.code == "weights-dspark-heads"] == [
        "markov_head.markov_w1.weight is missing (expected [64, 4]) (model.markov_head.markov_w1.weight is not a "
        "name vLLM's DSpark loader maps)"
    ]
