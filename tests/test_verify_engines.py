"""specreg.verify.engines: the in-process engine and the GPU names it records."""

import pytest

from verify_helpers import write_rows


@pytest.mark.gpu
def test_in_process_engine_on_a_gpu(tmp_path):
    """vLLM in-process (needs CUDA and vLLM): a real measurement of a small pair."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from specreg.verify.run import Options, verify

    rows = write_rows(tmp_path / "gsm8k.jsonl")
    result = verify("RedHatAI/Llama-3.1-8B-Instruct-speculator.eagle3",
                    Options(dataset="gsm8k", dataset_file=str(rows), num_prompts=8, chunks=2),
                    out=tmp_path / "out", history=None)
    assert result["statistics"]["acceptance_length"] > 1.0


def test_gpu_names_take_the_catalogs_form():
    from specreg.verify.engines import gpu_name

    assert [gpu_name(n) for n in ("NVIDIA H100 80GB HBM3", "NVIDIA A100-SXM4-80GB", "NVIDIA GeForce RTX 4090",
                                  "NVIDIA B200", "Tesla T4", "NVIDIA H100 PCIe")] == \
        ["H100", "A100", "RTX4090", "B200", "T4", "H100"]
