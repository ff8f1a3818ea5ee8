"""What `specreg serve --gpu` writes for the draft, taken by vLLM 0.33's own parser (pytest -m vllm)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.vllm

ENGINE = """
import json, sys
from vllm.engine.arg_utils import EngineArgs
from vllm.utils.argparse_utils import FlexibleArgumentParser
argv = json.loads(sys.argv[1])
parser = EngineArgs.add_cli_args(FlexibleArgumentParser())
args = parser.parse_args(["--model", argv[2], *argv[3:], "--max-model-len", "4096", "--skip-tokenizer-init"])
sc = EngineArgs.from_cli_args(args).create_engine_config().speculative_config
print("RESULT " + json.dumps({"kv_cache_dtype": sc.kv_cache_dtype, "attention_backend":
                              None if sc.attention_backend is None else sc.attention_backend.name}))
"""


@pytest.mark.parametrize(
    ("flags", "env", "want"),
    [
        (["--kv-cache-dtype", "fp8"], {}, {"kv_cache_dtype": "auto", "attention_backend": None}),
        (
            ["--attention-backend", "FLASHINFER"],
            {"VLLM_USE_V2_MODEL_RUNNER": "1"},
            {"kv_cache_dtype": None, "attention_backend": "FLASH_ATTN"},
        ),
    ],
)
def test_vllm_takes_what_serve_gpu_writes_for_the_draft(tmp_path, flags, env, want):
    """The line `serve --gpu` prints, parsed by vLLM 0.33's own parser: the draft's own KV-cache dtype
    and attention backend reach vLLM's SpeculativeConfig."""
    from test_vllm_configs import build, case_config
    from weights import write_draft

    import specreg

    cfg = case_config("dflash" if "--kv-cache-dtype" in flags else "eagle3_generated")
    cfg["transformer_layer_config"]["head_dim"] = 16 if "--kv-cache-dtype" in flags else 80
    src = write_draft(tmp_path / "src", cfg)
    build(tmp_path, specreg.load(src))
    base = {**os.environ, **env, "VLLM_TARGET_DEVICE": "cpu", "HF_HUB_OFFLINE": "1"}
    served = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "serve",
            str(src),
            "--verifier",
            str(tmp_path / "target"),
            "--config-only",
            "--dir",
            str(tmp_path / "d"),
            "--gpu",
            "H100" if env else "A100",
            "--json",
            "--",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=base,
    )
    assert served.returncode == 0, served.stderr[-2000:]
    argv = json.loads(served.stdout)["argv"]
    out = subprocess.run(
        [sys.executable, "-c", ENGINE, json.dumps(argv)], capture_output=True, text=True, timeout=300, env=base
    )
    from test_plugin_in_vllm import needs_triton_cpu

    needs_triton_cpu(out)
    line = next((ln for ln in out.stdout.splitlines() if ln.startswith("RESULT ")), None)
    assert line, out.stderr[-3000:]
    assert json.loads(line[len("RESULT ") :]) == want
