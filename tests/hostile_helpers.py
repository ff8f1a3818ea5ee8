"""Helpers shared by the tests of hostile files: the CLI with a short timeout, local drafts and verifiers."""

from __future__ import annotations

import json

from conftest import DATA, run_specreg

DATA_NATIVE = DATA / "native"


def run(*args, env=None):
    return run_specreg(*args, env=env, timeout=60)


MINIMAL = 'id = "{id}"\nalgorithm = "eagle3"\nstatus = "unpinned"\n\n[verifier]\nid = "org/v"\n'


def local_verifier(tmp_path):
    folder = tmp_path / "verifier"
    folder.mkdir()
    (folder / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 4096,
                "num_hidden_layers": 36,
                "vocab_size": 151936,
            }
        )
    )
    return folder


BIG_CONFIG = b'{"pad": "' + b"x" * (5 * 1024 * 1024) + b'"}'
