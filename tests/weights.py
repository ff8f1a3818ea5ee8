"""Tiny real weight files for tests, written with the safetensors library."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from safetensors.numpy import save, save_file


def tensors(**shapes: tuple[int, ...]) -> dict[str, np.ndarray]:
    """name=shape -> small float16 arrays (dots in names are written as double underscores)."""
    return {k.replace("__", "."): np.zeros(s, dtype=np.float16) for k, s in shapes.items()}


def safetensors_bytes(arrays: dict[str, np.ndarray]) -> bytes:
    return save(arrays)


def write_draft(directory: Path, config: dict, *, shards: int = 1) -> Path:
    """A draft directory: config.json plus model.safetensors (or `shards` files and an index)."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "config.json").write_text(json.dumps(config))
    arrays = tensors(fc__weight=(4, 12), layers__0__mlp__weight=(4, 4), lm_head__weight=(8, 4))
    if shards == 1:
        save_file(arrays, str(directory / "model.safetensors"))
        return directory
    names = sorted(arrays)
    weight_map = {}
    for i in range(shards):
        part = {n: arrays[n] for n in names[i::shards]}
        fname = f"model-{i + 1:05d}-of-{shards:05d}.safetensors"
        save_file(part, str(directory / fname))
        weight_map.update({n: fname for n in part})
    (directory / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    return directory
