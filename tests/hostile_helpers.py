"""Helpers shared by the tests of hostile files: the CLI with a short timeout, local drafts and verifiers."""

from __future__ import annotations

import json

from conftest import DATA, run_specreg

DATA_NATIVE = DATA / "native"


def run(*args, env=None):
    return run_specreg(*args, env=env, timeout=60)


MINIMAL = 'id = "{id}"\nalgorithm = "eagle3"\nstatus = "unpinned"\n\n[verifier]\nid = "org/v"\n'


#: the fields of Qwen/Qwen3-8B's config.json the verifier checks read
QWEN3_8B = {
    "architectures": ["Qwen3ForCausalLM"],
    "model_type": "qwen3",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "vocab_size": 151936,
}


def local_verifier(tmp_path, name: str = "verifier", **changes):
    """A verifier directory holding QWEN3_8B's config.json with `changes`."""
    folder = tmp_path / name
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({**QWEN3_8B, **changes}))
    return folder


BIG_CONFIG = b'{"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}'
