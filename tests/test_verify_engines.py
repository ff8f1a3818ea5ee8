"""specreg.verify.engines: the in-process engine, the GPU names it records, and a server's answers read
bounded and shown escaped."""

import json

import pytest

from conftest import run_specreg
from openai_server import OpenAIServer
from verify_helpers import write_rows


@pytest.mark.gpu
def test_in_process_engine_on_a_gpu(tmp_path):
    """vLLM in-process (needs CUDA and vLLM): a real measurement of a small pair."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from specreg.verify.run import Options, verify

    rows = write_rows(tmp_path / "gsm8k.jsonl")
    result = verify(
        "RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
        Options(dataset="gsm8k", dataset_file=str(rows), num_prompts=8, chunks=2),
        out=tmp_path / "out",
        history=None,
    )
    assert result["statistics"]["acceptance_length"] > 1.0


def test_gpu_names_take_the_catalogs_form():
    from specreg.verify.engines import gpu_name

    assert [
        gpu_name(n)
        for n in (
            "NVIDIA H100 80GB HBM3",
            "NVIDIA A100-SXM4-80GB",
            "NVIDIA GeForce RTX 4090",
            "NVIDIA B200",
            "Tesla T4",
            "NVIDIA H100 PCIe",
        )
    ] == ["H100", "A100", "RTX4090", "B200", "T4", "H100"]


@pytest.mark.parametrize(
    "body, said",
    [
        (b"x" * (16 * 2**20), "'" + "x" * 300 + "'… (65,536 characters)"),  # read up to 64 KiB, shown shortened
        (json.dumps({"error": {"message": "\x1b[2J\u202eok"}}).encode(), "'\\x1b[2J\\u202eok'"),  # escaped
    ],
)
def test_a_servers_huge_or_hostile_error_answer_is_read_bounded_and_shown_escaped(tmp_path, body, said):
    rows = tmp_path / "rows.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    with OpenAIServer() as server:
        server.fail_status, server.fail_body = 500, body
        r = run_specreg(
            "verify",
            "org/x",
            "--server",
            server.url,
            "--dataset-file",
            str(rows),
            "--dataset",
            "gsm8k",
            "--num-prompts",
            "4",
            env={"HF_HUB_OFFLINE": "1"},
        )
    assert r.returncode == 5 and "Traceback" not in r.stderr, r.stderr
    assert r.stdout.splitlines()[0] == (
        f"org/x: error; {server.url}/v1/chat/completions: HTTP 500 Internal Server Error: the server said {said}"
    )
