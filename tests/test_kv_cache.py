"""The KV-cache groups of the verifier's and the draft's layers (`specreg check`; specreg.vllm.kv_cache).
The model is held to each wheel's own get_kv_cache_groups by tests/conformance/test_kv_cache_groups.py;
these tests hold what `check` builds from the configs and says."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import specreg
from specreg.sources import decoder
from specreg.vllm import kv_cache
from specreg.vllm.gpu_plan import verifier_groups

ROOT = Path(__file__).resolve().parent.parent
GEMMA = {
    "architectures": ["Gemma3ForCausalLM"],
    "model_type": "gemma3_text",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
    "sliding_window": 512,
    "layer_types": (["sliding_attention"] * 5 + ["full_attention"]) * 6,
}


def pair(tmp_path: Path, verifier: dict, **layer) -> Path:
    """The example DFlash with `layer` set in its transformer_layer_config, beside `verifier`."""
    cfg = json.loads((ROOT / "examples" / "qwen3-8b-dflash" / "config.json").read_text())
    cfg["transformer_layer_config"].update(layer)
    for name, body in (("draft", cfg), ("verifier", verifier)):
        (tmp_path / name).mkdir(parents=True)
        (tmp_path / name / "config.json").write_text(json.dumps(body))
    return tmp_path


def check(tmp_path: Path, *flags: str) -> tuple[int, dict[str, dict]]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "check",
            str(tmp_path / "draft"),
            "--verifier",
            str(tmp_path / "verifier"),
            "--no-weights",
            "--json",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode in (0, 1), out.stderr
    return out.returncode, {f["code"]: f for f in json.loads(out.stdout)["findings"]}


SLIDING_DRAFT = {
    "layer_types": ["sliding_attention", "full_attention"] * 2 + ["full_attention"],
    "sliding_window": 2048,
    "use_sliding_window": True,
    "max_window_layers": 5,
}


@pytest.mark.parametrize("vllm", ["0.24", "0.28", "0.33"])
def test_a_draft_page_that_does_not_divide_the_verifiers_is_padded(tmp_path, vllm):
    """3 KV heads of 128 (24576 bytes a page of 16 tokens) next to a sliding-window verifier's 8 (65536)."""
    rc, found = check(pair(tmp_path, GEMMA, num_key_value_heads=3, num_attention_heads=6), "--vllm", vllm)
    f = found["kv-cache-pages-padded"]
    assert f["severity"] == "info" and rc == 0, found
    assert (
        f"vLLM {vllm} pads the KV page of draft layers 0, 1, 2, 3, 4 (24576 bytes per 16 tokens) to the largest "
        "(65536 bytes)" in f["message"]
    )
    assert "62% of each of those pages is unused" in f["message"]
    # with the manager off every layer is allocated as full attention: one group, nothing padded
    _, off = check(tmp_path, "--vllm", vllm, "--disable-hybrid-kv-cache-manager")
    assert not {c for c in off if c.startswith("kv-cache")}, off


def test_a_page_that_divides_is_not_padded_and_a_full_verifier_needs_no_groups(tmp_path):
    rc, found = check(pair(tmp_path, GEMMA, num_key_value_heads=4, num_attention_heads=8), "--vllm", "0.33")
    assert rc == 0 and not {c for c in found if c.startswith("kv-cache")}, found
    plain = {k: v for k, v in GEMMA.items() if k not in ("sliding_window", "layer_types")}
    rc, found = check(pair(tmp_path / "full", plain, num_key_value_heads=3, num_attention_heads=6), "--vllm", "0.33")
    assert rc == 0 and not {c for c in found if c.startswith("kv-cache")}, found


@pytest.mark.parametrize("vllm", ["0.28", "0.33"])  # a DFlash with sliding layers is served from 0.26
def test_two_sliding_windows_fail_with_the_hybrid_manager_off(tmp_path, vllm):
    rc, found = check(pair(tmp_path, GEMMA, **SLIDING_DRAFT), "--vllm", vllm)
    f = found["kv-cache-groups-hybrid-off"]
    assert rc == 0 and f["severity"] == "warning", found
    # vLLM's words, from vllm/v1/kv_cache_interface.py `merge_window_sizes` (0.24-0.33 wheels); the
    # conformance tier holds specreg's message to each wheel's own exception
    assert (
        "is_kv_cache_spec_uniform raises ValueError: All attention layers in the same KV cache group must have "
        "the same window size." in f["message"]
    )
    assert "(the verifier's 512; the draft's 2048)" in f["fix"]
    rc, found = check(tmp_path, "--vllm", vllm, "--disable-hybrid-kv-cache-manager")
    f = found["kv-cache-groups"]
    assert rc == 1 and f["severity"] == "error" and f"vLLM {vllm} cannot put" in f["message"], found
    # the verifier's window for the draft's sliding layers: nothing to say
    rc, found = check(
        pair(tmp_path / "same", GEMMA, **{**SLIDING_DRAFT, "sliding_window": 512}),
        "--vllm",
        vllm,
        "--disable-hybrid-kv-cache-manager",
    )
    assert rc == 0 and not {c for c in found if c.startswith("kv-cache")}, found


QWEN3_NEXT = {
    "architectures": ["Qwen3NextForCausalLM"],
    "model_type": "qwen3_next",
    "hidden_size": 4096,
    "num_hidden_layers": 36,
    "num_attention_heads": 16,
    "num_key_value_heads": 2,
    "head_dim": 256,
    "vocab_size": 151936,
    "torch_dtype": "bfloat16",
    "layer_types": (["linear_attention"] * 3 + ["full_attention"]) * 9,
}


def test_a_mamba_hybrid_verifier_with_a_larger_draft_page(tmp_path):
    """Qwen3-Next's shape: linear-attention (Mamba-type) layers whose state page vLLM pads to its
    attention page (2 KV heads of 256); a draft of 8 KV heads of 128 has twice that page. vLLM 0.25
    raises at startup (a bare assert in unify_kv_cache_spec_page_size); 0.26 pads the state pages."""
    pair(tmp_path, QWEN3_NEXT, num_key_value_heads=8, num_attention_heads=8, head_dim=128)
    rc, found = check(tmp_path, "--vllm", "0.25")
    f = found["kv-cache-groups"]
    assert rc == 1 and "unify_kv_cache_spec_page_size raises AssertionError" in f["message"], found
    assert [c for c, x in found.items() if x["severity"] == "error"] == ["kv-cache-groups"], found
    assert "verifier layer 0's, does not grow with the block size" in f["message"]
    rc, found = check(tmp_path, "--vllm", "0.26")
    f = found["kv-cache-pages-padded"]
    assert rc == 0 and "verifier layers 0, 1, 2, 4, ..." in f["message"] and "50% of each" in f["message"], found
    # the same verifier with a draft page that equals its attention page: nothing to say
    rc, found = check(
        pair(tmp_path / "equal", QWEN3_NEXT, num_key_value_heads=4, num_attention_heads=8, head_dim=128),
        "--vllm",
        "0.25",
    )
    assert rc == 0 and not {c for c in found if c.startswith("kv-cache")}, found


def test_a_chunked_local_attention_verifier_is_not_modelled(tmp_path):
    verifier = {**{k: v for k, v in GEMMA.items() if k != "layer_types"}, "attention_chunk_size": 8192}
    _, found = check(pair(tmp_path, verifier, num_key_value_heads=3, num_attention_heads=6), "--vllm", "0.33")
    assert not {c for c in found if c.startswith("kv-cache")}, found


def test_the_layers_as_vllm_registers_them():
    groups = verifier_groups({"num_hidden_layers": 4, "layer_types": ["sliding_attention", "full_attention"] * 2}, ())
    got = kv_cache.verifier_kv_layers(groups, kv_heads=8, head_size=128, window=512, latent=None, tp=16, dtype_bytes=1)
    assert [(x.label, x.kind, x.kv_heads, x.window, x.page_bytes()) for x in got] == [
        ("verifier layer 0", "sliding", 1, 512, 4096),
        ("verifier layer 1", "full", 1, None, 4096),
        ("verifier layer 2", "sliding", 1, 512, 4096),
        ("verifier layer 3", "full", 1, None, 4096),
    ]
    deepseek = {"kv_lora_rank": 512, "qk_rope_head_dim": 64}
    assert decoder.mla_latent(deepseek) == 576 and decoder.mla_latent({}) is None
    (mla,) = kv_cache.verifier_kv_layers(
        verifier_groups({"num_hidden_layers": 1}, ()),
        kv_heads=128,
        head_size=192,
        window=None,
        latent=576,
        tp=8,
        dtype_bytes=2,
    )
    assert (mla.kind, mla.kv_heads, mla.page_bytes()) == ("mla", 1, 16 * 576 * 2)  # one latent, not K and V
    assert [
        kv_cache.dtype_bytes(k, d) for k, d in (("auto", "bfloat16"), ("fp8", "bfloat16"), ("auto", "float32"))
    ] == [2, 1, 4]


def test_versions_outside_the_wheels_surveyed_are_not_claimed(tmp_path):
    pair(tmp_path, GEMMA, num_key_value_heads=3, num_attention_heads=6)
    spec = specreg.load(tmp_path / "draft", vllm="0.22")
    layers = [
        kv_cache.KvLayer("verifier layer 0", "sliding", 8, 128, 2, 512),
        kv_cache.KvLayer("verifier layer 1", "full", 8, 128),
    ]
    assert (
        kv_cache.kv_cache_findings(spec, layers, kv_cache.draft_kv_layers(spec, tp=1, dtype_bytes=2), hybrid=True) == []
    )
