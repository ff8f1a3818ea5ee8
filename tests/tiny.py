"""Tiny, consistent draft/verifier pairs for the pre-flight tests: real-shaped configs (the
fixtures, shrunk) and real safetensors files whose tensors match them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save

from conftest import fixture_config

HIDDEN, VOCAB, LAYERS_VERIFIER, MASK = 8, 64, 6, 60

FIXTURE = {"eagle3": "eagle3_generated", "peagle": "peagle", "dflash": "dflash", "dspark": "dspark_generated"}


def draft_config(algo: str) -> dict:
    cfg = fixture_config(FIXTURE[algo])
    cfg.pop("auto_map", None)
    tl = cfg["transformer_layer_config"]
    tl.update(
        hidden_size=HIDDEN,
        vocab_size=VOCAB,
        head_dim=2,
        intermediate_size=16,
        num_attention_heads=4,
        num_key_value_heads=2,
    )
    if algo in ("eagle3", "peagle"):
        cfg["eagle_aux_hidden_state_layer_ids"] = [1, 3, 5]
        cfg["draft_vocab_size"] = 32
    else:
        cfg["aux_hidden_state_layer_ids"] = [1, 2, 3, 4, 5]
        cfg["draft_vocab_size"] = VOCAB
    if "mask_token_id" in cfg:
        cfg["mask_token_id"] = MASK
    if algo == "dspark":
        cfg["markov_rank"] = 4
    return cfg


def verifier_config(algo: str) -> dict:
    qwen = algo != "eagle3"
    return {
        "architectures": ["Qwen3ForCausalLM" if qwen else "LlamaForCausalLM"],
        "model_type": "qwen3" if qwen else "llama",
        "hidden_size": HIDDEN,
        "num_hidden_layers": LAYERS_VERIFIER,
        "vocab_size": VOCAB,
    }


def weights(algo: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """name -> (shape, dtype) of a draft checkpoint matching draft_config(algo)."""
    cfg = draft_config(algo)
    n_aux = len(cfg.get("eagle_aux_hidden_state_layer_ids") or cfg.get("aux_hidden_state_layer_ids"))
    layers = cfg["transformer_layer_config"]["num_hidden_layers"]
    dv = cfg["draft_vocab_size"]
    w: dict[str, tuple[tuple[int, ...], str]] = {
        "fc.weight": ((HIDDEN, HIDDEN * n_aux), "float16"),
        "norm.weight": ((HIDDEN,), "float16"),
    }
    for i in range(layers):
        w[f"layers.{i}.self_attn.q_proj.weight"] = ((HIDDEN, HIDDEN), "float16")
        w[f"layers.{i}.mlp.down_proj.weight"] = ((HIDDEN, 16), "float16")
    if algo != "dspark":
        w["lm_head.weight"] = ((dv, HIDDEN), "float16")
    if dv < VOCAB:
        w["d2t"] = ((dv,), "int64")
        w["t2d"] = ((VOCAB,), "bool")
    if algo == "peagle":
        w["mask_hidden"] = ((1, 1, HIDDEN * n_aux), "float16")
    if algo == "dspark":
        r = cfg["markov_rank"]
        w["markov_head.markov_w1.weight"] = ((dv, r), "float16")
        w["markov_head.markov_w2.weight"] = ((dv, r), "float16")
        w["confidence_head.proj.weight"] = ((1, HIDDEN + r), "float16")
        w["confidence_head.proj.bias"] = ((1,), "float16")
    return w


def safetensors_files(spec: dict[str, tuple[tuple[int, ...], str]], shards: int = 1) -> dict[str, bytes]:
    """Real safetensors bytes (one file, or `shards` files and their index)."""
    arrays = {n: np.zeros(shape, dtype=dtype) for n, (shape, dtype) in spec.items()}
    if shards == 1:
        return {"model.safetensors": save(arrays)}
    names = sorted(arrays)
    out, weight_map = {}, {}
    for i in range(shards):
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: arrays[n] for n in names[i::shards]}
        out[fname] = save(part)
        weight_map.update({n: fname for n in part})
    out["model.safetensors.index.json"] = json.dumps({"metadata": {}, "weight_map": weight_map}).encode()
    return out


def write_pair(
    root: Path, algo: str, *, config: dict | None = None, verifier: dict | None = None, tensors: dict | None = None
) -> tuple[Path, Path]:
    """A local draft directory and a local verifier directory."""
    draft, ver = root / "draft", root / "verifier"
    draft.mkdir(parents=True)
    ver.mkdir(parents=True)
    (draft / "config.json").write_text(json.dumps(config or draft_config(algo)))
    (ver / "config.json").write_text(json.dumps(verifier or verifier_config(algo)))
    if tensors is not False:
        for name, data in safetensors_files(tensors or weights(algo)).items():
            (draft / name).write_bytes(data)
    return draft, ver
