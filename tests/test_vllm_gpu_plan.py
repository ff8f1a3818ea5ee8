"""`specreg check DRAFT --gpu NAME`: the attention backend vLLM picks for the draft's layers on a GPU,
from facts each wheel's own code computed (specreg/vllm/attention_backends.json; the vLLM tier holds
them and the selection to every wheel 0.24-0.33, tests/conformance/test_attention_selector.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from specreg.vllm import attention, backend_table, gpu_plan

ROOT = Path(__file__).resolve().parent.parent


def dflash_draft(tmp_path, head_dim: int = 512) -> Path:
    """The example DFlash (trained non-causal) with wide heads, and a Qwen3-shaped verifier beside it."""
    cfg = json.loads((ROOT / "examples" / "qwen3-8b-dflash" / "config.json").read_text())
    layer = cfg["transformer_layer_config"]
    layer.update(head_dim=head_dim, num_attention_heads=8, num_key_value_heads=8)
    (tmp_path / "draft").mkdir()
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "verifier").mkdir()
    (tmp_path / "verifier" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Qwen3ForCausalLM"],
                "model_type": "qwen3",
                "hidden_size": 4096,
                "num_hidden_layers": 36,
                "num_attention_heads": 32,
                "num_key_value_heads": 8,
                "head_dim": 128,
                "vocab_size": 151936,
                "torch_dtype": "bfloat16",
            }
        )
    )
    return tmp_path


def check(tmp_path, *flags) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "check",
            str(tmp_path / "draft"),
            "--verifier",
            str(tmp_path / "verifier"),
            "--no-weights",
            "--vllm",
            "0.33",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_non_causal_head_512_dflash_on_an_a100_names_vllms_pick(tmp_path):
    out = check(dflash_draft(tmp_path), "--gpu", "A100")
    assert out.returncode == 0, out.stdout + out.stderr
    assert "A100 (sm_80), vLLM 0.33's attention selector" in out.stdout
    assert "picks    FLASHINFER  (valid: FLASHINFER, TRITON_ATTN, FLEX_ATTENTION)" in out.stdout
    assert "refuses  FLASH_ATTN: head_size not supported" in out.stdout
    # the verifier's causal head-128 layers get FlashAttention: the draft's differ, and how to pin it is said
    assert "draft-attention-backend" in out.stdout and "attention_backend = FLASHINFER pins it" in out.stdout


def test_forcing_flash_attention_there_is_an_error_in_vllms_words(tmp_path):
    out = check(dflash_draft(tmp_path), "--gpu", "A100", "--attention-backend", "FLASH_ATTN", "--json")
    assert out.returncode == 1
    doc = json.loads(out.stdout)
    (f,) = [f for f in doc["findings"] if f["code"] == "attention-backend-refused"]
    assert f["severity"] == "error" and f["message"].endswith(": head_size not supported")
    assert f["path"] == "$.speculative_config.attention_backend"
    assert "FLASHINFER or TRITON_ATTN or FLEX_ATTENTION" in f["fix"]
    assert doc["checks"]["gpu"]["draft"][0]["case"] == {
        "head_size": 512,
        "dtype": "bfloat16",
        "kv_cache_dtype": "auto",
        "non_causal": True,
        "sliding": False,
        "sink": False,
    }


def test_no_backend_is_an_error_with_what_would_serve_it(tmp_path):
    """Head size 16 with an FP8 KV cache on an A100: FlashAttention 2 has no FP8 KV cache, FlashInfer no
    head size 16, Triton none below 32, FlexAttention no FP8 cache, TurboQuant no non-causal."""
    out = check(dflash_draft(tmp_path, head_dim=16), "--gpu", "A100", "--kv-cache-dtype", "fp8", "--json")
    assert out.returncode == 1, out.stderr
    (f,) = [f for f in json.loads(out.stdout)["findings"] if f["code"] == "no-attention-backend"]
    assert "TRITON_ATTN: head_size not supported" in f["message"]
    assert f["fix"].startswith("give the draft its own KV cache dtype, speculative_config's kv_cache_dtype = auto")
    assert "H100" in f["fix"]  # FlashAttention 3 takes an FP8 cache there
    old = check(tmp_path, "--gpu", "A100", "--kv-cache-dtype", "fp8", "--json", "--vllm", "0.25")
    (f,) = [f for f in json.loads(old.stdout)["findings"] if f["code"] == "no-attention-backend"]
    assert f["fix"].startswith("serve with --kv-cache-dtype auto (vLLM 0.25's draft always has the server's")


@pytest.mark.parametrize(
    ("name", "cap"),
    [
        ("H100", (9, 0)),
        ("rtx 4090", (8, 9)),
        ("RTX-6000-Ada", (8, 9)),
        ("sm_90", (9, 0)),
        ("sm90", (9, 0)),
        ("sm_121", (12, 1)),
        ("10.0", (10, 0)),
        ("GB10", (12, 1)),
    ],
)
def test_gpus_by_name_or_capability(name, cap):
    assert attention.capability(name) == cap


def test_an_unknown_gpu_is_a_clear_error(tmp_path):
    out = check(dflash_draft(tmp_path), "--gpu", "Voodoo5")
    assert out.returncode == 2 and "Traceback" not in out.stderr
    assert "argument --gpu: unknown GPU 'Voodoo5': give one of V100" in out.stderr


def test_every_named_gpu_is_covered_for_every_version():
    for version in attention.versions():
        for name, cap in attention.GPUS.items():
            assert attention.select(version, cap, attention.Case(head_size=128)).valid, (version, name)


def test_the_versions_differ_where_the_wheels_code_does():
    """FlashAttention with an FP8 KV cache on SM100, head size 256, as each wheel's code answers it: no
    FP8 cache in 0.26, accepted in 0.27, refused by FA4's head-size rule in 0.28, accepted from 0.29."""
    case = attention.Case(head_size=256, kv_cache_dtype="fp8")
    got = {v: attention.reasons(v, (10, 0), "FLASH_ATTN", case) for v in attention.versions()}
    assert got["0.26"] == ("kv_cache_dtype not supported",) and got["0.27"] == ()
    assert got["0.28"] == ("FP8 KV cache requires FA3 on SM90 or FA4 on SM100",)
    assert all(got[v] == () for v in ("0.29", "0.30", "0.31", "0.32", "0.33"))
    # on SM100 a non-causal draft gets FlashInfer first up to 0.25, FlashAttention from 0.26 (vLLM #48167)
    first = {
        v: attention.select(v, (10, 0), attention.Case(head_size=128, non_causal=True)).chosen for v in ("0.25", "0.26")
    }
    assert first == {"0.25": "FLASHINFER", "0.26": "FLASH_ATTN"}


def test_the_table_in_the_semantics_doc_is_the_models():
    text = (ROOT / "docs" / "semantics.md").read_text()
    assert backend_table.table_markdown() in text


def serve(tmp_path, draft: Path, *flags, env: dict | None = None) -> subprocess.CompletedProcess:
    import os

    return subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "serve",
            str(draft),
            "--verifier",
            str(tmp_path / "verifier"),
            "--config-only",
            "--dir",
            str(tmp_path / "served"),
            "--vllm",
            "0.33",
            "--json",
            *flags,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


def test_serve_gives_the_draft_its_own_kv_cache_dtype_where_the_servers_has_no_backend(tmp_path):
    dflash_draft(tmp_path, head_dim=16)
    out = serve(tmp_path, tmp_path / "draft", "--gpu", "A100", "--", "--kv-cache-dtype", "fp8")
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout)["argv"]
    assert json.loads(argv[argv.index("--speculative-config") + 1])["kv_cache_dtype"] == "auto"
    assert argv[-2:] == ["--kv-cache-dtype", "fp8"]  # the verifier keeps the user's
    assert "# gpu: no attention backend serves the draft's layers with the server's KV cache fp8" in out.stderr
    plain = serve(tmp_path, tmp_path / "draft", "--gpu", "A100", "--", "--kv-cache-dtype", "auto")
    argv = json.loads(plain.stdout)["argv"]
    assert "kv_cache_dtype" not in json.loads(argv[argv.index("--speculative-config") + 1])
    assert "# gpu: vLLM 0.33 picks FLASH_ATTN for the draft's layers on A100 (sm_80)" in plain.stderr


def eagle3_draft(tmp_path, head_dim: int) -> Path:
    from conftest import fixture_config

    cfg = fixture_config("eagle3_generated")
    cfg["transformer_layer_config"]["head_dim"] = head_dim
    (tmp_path / "eagle").mkdir()
    (tmp_path / "eagle" / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "eagle"


@pytest.mark.parametrize("v2", [True, False])
def test_serve_pins_the_draft_backend_only_where_the_draft_inherits_the_servers(tmp_path, v2):
    """vLLM 0.31+'s V2 Eagle drafter keeps the server's --attention-backend (apply_draft_overrides);
    FlashInfer has no head size 80, so there the draft is given the backend vLLM picks for it. The V1
    drafter selects its own: nothing is written."""
    dflash_draft(tmp_path)
    draft = eagle3_draft(tmp_path, head_dim=80)
    out = serve(
        tmp_path,
        draft,
        "--gpu",
        "H100",
        "--",
        "--attention-backend",
        "FLASHINFER",
        env={"VLLM_USE_V2_MODEL_RUNNER": "1"} if v2 else {"VLLM_USE_V2_MODEL_RUNNER": "0"},
    )
    assert out.returncode == 0, out.stderr
    argv = json.loads(out.stdout)["argv"]
    sc = json.loads(argv[argv.index("--speculative-config") + 1])
    if v2:
        assert sc["attention_backend"] == "FLASH_ATTN"
        assert "V2 drafter keeps the server's --attention-backend FLASHINFER" in out.stderr
    else:
        assert "attention_backend" not in sc


def test_serve_gpu_and_spec_flags_say_what_the_flags_cannot_carry(tmp_path):
    dflash_draft(tmp_path, head_dim=16)
    out = serve(tmp_path, tmp_path / "draft", "--gpu", "A100", "--spec-flags", "--", "--kv-cache-dtype", "fp8")
    assert out.returncode == 2 and "also sets kv_cache_dtype" in out.stderr


def codes(out: subprocess.CompletedProcess) -> dict[str, dict]:
    return {f["code"]: f for f in json.loads(out.stdout)["findings"]}


@pytest.mark.parametrize(
    ("vllm", "code"),
    [("0.26", "draft-positions-short"), ("0.30", "draft-positions-short"), ("0.33", "draft-positions-raised")],
)
def test_a_dflash_shorter_than_the_served_length_per_version(tmp_path, vllm, code):
    """The example DFlash has 40960 positions; served at 100000 only vLLM 0.33 raises them for method dflash."""
    dflash_draft(tmp_path, head_dim=128)
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
            "--vllm",
            vllm,
            "--max-model-len",
            "100000",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    found = codes(out)
    assert code in found and found[code]["path"] == "$.transformer_layer_config.max_position_embeddings"
    if code == "draft-positions-short":
        assert found[code]["fix"].startswith("serve with --max-model-len 40960 or less")
        assert "(0.33+)" in found[code]["fix"]


def test_yarn_rope_is_not_resized_by_0_33_and_limits_the_length(tmp_path):
    dflash_draft(tmp_path, head_dim=128)
    cfg = json.loads((tmp_path / "draft" / "config.json").read_text())
    cfg["transformer_layer_config"]["rope_parameters"] = {
        "rope_type": "yarn",
        "factor": 4.0,
        "rope_theta": 1e6,
        "original_max_position_embeddings": 32768,
    }
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    out = check(tmp_path, "--max-model-len", "100000", "--json")
    assert "draft-positions-limit" in codes(out), out.stdout[-2000:]


def test_quantization_and_dtype_come_from_the_draft_and_the_verifier(tmp_path):
    dflash_draft(tmp_path, head_dim=128)
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    verifier["quantization_config"] = {"quant_method": "fp8"}
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(verifier))
    cfg = json.loads((tmp_path / "draft" / "config.json").read_text())
    cfg["transformer_layer_config"]["dtype"] = "float32"
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    found = codes(check(tmp_path, "--json"))
    assert (
        "own quantization config (none: unquantized), not the verifier's (fp8)"
        in found["draft-quantization"]["message"]
    )
    assert "runs the draft in bfloat16" in found["draft-dtype-differs"]["message"]


@pytest.mark.parametrize(
    ("gpu", "picks", "refused"),
    [
        (
            "A100",
            "TRITON_ATTN",
            {
                "FLASH_ATTN": "sink not supported on compute capability < 9.0",
                "FLASHINFER": "attention sinks not supported",
            },
        ),
        ("H100", "FLASH_ATTN", {}),
    ],
)
def test_a_dflash_with_attention_sinks_asks_the_selector_for_sinks(tmp_path, gpu, picks, refused):
    """qwen3_dflash gives every layer's Attention the sinks dflash_config.attention_sink_bias asks for,
    so the selector is asked has_sink: on an A100 FlashAttention and FlashInfer refuse them."""
    dflash_draft(tmp_path, head_dim=128)
    cfg = json.loads((tmp_path / "draft" / "config.json").read_text())
    cfg["attention_sink_bias"] = True
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    doc = json.loads(check(tmp_path, "--gpu", gpu, "--json").stdout)
    (group,) = doc["checks"]["gpu"]["draft"]
    assert group["case"]["sink"] is True and group["chosen"] == picks
    for backend, why in refused.items():
        assert why in group["refused"][backend]
    # FlashInfer's sinks need its TRTLLM cubins, which a 0.33 install finds only with flashinfer-cubin or
    # NVIDIA's artifactory reachable: on an H100 the answer with them is given beside
    assert group["cubins"] is False
    if gpu == "H100":
        assert group["refused"]["FLASHINFER"] == ["attention sinks not supported"]
        without_flashinfer = {k: v for k, v in group["refused"].items() if k != "FLASHINFER"}
        assert group["other"] == {
            "chosen": "FLASH_ATTN",
            "valid": ["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"],
            "refused": without_flashinfer,
            "cubins": True,
        }
        text = check(tmp_path, "--gpu", gpu).stdout
        assert "where FlashInfer's TRTLLM cubins are found (flashinfer-cubin installed" in text
    else:
        assert group["other"] is None
    assert (
        gpu_plan.draft_sinks(
            "0.24", {"architectures": ["DFlashDraftModel"], "dflash_config": {"attention_sink_bias": True}}
        )
        is False
    )  # 0.24 reads no sinks


def test_0_24_and_0_25_installs_have_flashinfers_cubins():
    """Those wheels depend on flashinfer-cubin; later ones do not, so their default is without."""
    assert [attention.cubins_by_default(v) for v in ("0.24", "0.25", "0.26", "0.33")] == [True, True, False, False]
    case = attention.Case(head_size=128, sink=True)
    assert "FLASHINFER" in attention.select("0.25", (10, 0), case).valid
    assert "FLASHINFER" not in attention.select("0.26", (10, 0), case).valid
    assert "FLASHINFER" in attention.select("0.26", (10, 0), case, cubins=True).valid


def quantized_dflash(tmp_path, quantization: dict) -> Path:
    dflash_draft(tmp_path, head_dim=128)
    cfg = json.loads((tmp_path / "draft" / "config.json").read_text())
    cfg["quantization_config"] = quantization
    (tmp_path / "draft" / "config.json").write_text(json.dumps(cfg))
    return tmp_path / "draft"


def test_a_top_level_quantization_config_stays_in_the_directory_serve_writes(tmp_path):
    """vLLM's get_config reads the file's top-level quantization_config for any format, so the
    directory serve writes (specreg's draft_config, not the file) must hold it too."""
    import specreg

    q = {"quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"]}
    draft = quantized_dflash(tmp_path, q)
    spec = specreg.load(draft, vllm="0.33")
    assert spec.draft_config_dict()["quantization_config"] == q
    assert spec.provenance["draft_config.quantization_config"].sources == ("$.quantization_config",)
    assert not [f for f in spec.findings if "quantiz" in f.message]  # vLLM reads it from the file as well
    out = serve(tmp_path, draft)
    assert out.returncode == 0, out.stderr
    assert json.loads((tmp_path / "served" / "config.json").read_text())["quantization_config"] == q
    # one inside transformer_layer_config is part of the layer config
    cfg = json.loads((draft / "config.json").read_text())
    cfg["transformer_layer_config"]["quantization_config"] = cfg.pop("quantization_config")
    (draft / "config.json").write_text(json.dumps(cfg))
    spec = specreg.load(draft, vllm="0.33")
    assert spec.draft_config_dict()["quantization_config"] == q


@pytest.mark.parametrize(
    ("vllm", "unrenamed"),
    [
        ("0.30", ["layers.0.mlp.down_proj", "model.layers.1.self_attn*"]),
        ("0.31", ["model.layers.1.self_attn*"]),  # _add_global_draft_layer_exclusions: bare layers.N only
        ("0.33", []),  # map_draft_quant_config: every ModelOpt name
    ],
)
def test_modelopt_layer_names_per_version(tmp_path, vllm, unrenamed):
    """The draft's layers run as layers.{i + the verifier's 36}: a ModelOpt ignore list naming draft
    layers by their index names other modules than the checkpoint's unless the version renames it."""
    quantized_dflash(
        tmp_path,
        {
            "quant_method": "modelopt",
            "quant_algo": "FP8",
            "ignore": ["lm_head", "layers.0.mlp.down_proj", "model.layers.1.self_attn*", "vision.layers.0.proj"],
        },
    )
    out = check(tmp_path, "--vllm", vllm, "--json")
    found = codes(out)
    if not unrenamed:
        assert out.returncode == 0 and "draft-quant-layer-names" not in found
        return
    f = found["draft-quant-layer-names"]
    assert out.returncode == 1 and f["severity"] == "error"
    assert repr(unrenamed[0]) in f["message"] and "builds draft layer i as model.layers.{i + 36}" in f["message"]
    assert f["path"] == f"$.quantization_config.ignore[{1 if len(unrenamed) == 2 else 2}]"
    assert "-> 'model.layers.36.mlp.down_proj'" in f["fix"] or "-> 'model.layers.37.self_attn*'" in f["fix"]
    assert f["fix"].endswith("or serve with vLLM 0.33+, which renames them")
    assert (" and 1 more" in f["message"]) is (len(unrenamed) == 2)


def test_no_eagle3_class_renames_a_quantization_configs_layer_names(tmp_path):
    dflash_draft(tmp_path)
    draft = eagle3_draft(tmp_path, head_dim=128)
    cfg = json.loads((draft / "config.json").read_text())
    cfg["quantization_config"] = {"quant_method": "compressed-tensors", "ignore": ["layers.0.self_attn.o_proj"]}
    (draft / "config.json").write_text(json.dumps(cfg))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "check",
            str(draft),
            "--verifier",
            str(tmp_path / "verifier"),
            "--no-weights",
            "--vllm",
            "0.33",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    f = codes(out)["draft-quant-layer-names"]
    assert (
        "llama_eagle3 builds draft layer i as model.layers.{i + 36} and fc as model.fc, and renames no name"
        in f["message"]
    )
    assert "or serve with" not in f["fix"]


@pytest.mark.parametrize(
    ("method", "ignore", "named"),
    [
        ("compressed-tensors", ["lm_head", "fc"], True),  # whole names: fc runs as model.fc
        ("compressed-tensors", ["lm_head", "model.fc"], False),
        ("compressed-tensors", ["re:.*fc$"], False),  # a pattern, matched against model.fc
        ("compressed-tensors", ["fc_norm", "lm_head.fc"], False),  # other names
        ("modelopt", ["fc"], False),  # ModelOpt's exclusions match substrings too
    ],
)
def test_a_quantization_config_naming_the_drafts_fc(tmp_path, method, ignore, named):
    """The draft's model is built under the prefix `model`: the checkpoint's fc runs as model.fc
    (held to each wheel by the conformance tier, shown on the engine by test_quantized_draft.py)."""
    quantized_dflash(tmp_path, {"quant_method": method, "quant_algo": "FP8", "ignore": ignore})
    out = check(tmp_path, "--vllm", "0.32", "--json")
    found = codes(out)
    assert ("draft-quant-layer-names" in found) is named, found
    if named:
        f = found["draft-quant-layer-names"]
        assert out.returncode == 1 and f["path"] == "$.quantization_config.ignore[1]"
        assert "('fc')" in f["message"] and f["fix"] == "name them as vLLM runs them ('fc' -> 'model.fc')"


@pytest.mark.parametrize("vllm", ["0.24", "0.33"])
def test_a_chunked_local_attention_verifier_loses_the_hybrid_kv_cache_manager(tmp_path, vllm):
    dflash_draft(tmp_path, head_dim=128)
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    (tmp_path / "verifier" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["Llama4ForConditionalGeneration"],
                "text_config": {**verifier, "attention_chunk_size": 8192},
            }
        )
    )
    found = codes(check(tmp_path, "--vllm", vllm, "--json"))
    f = found["draft-disables-hybrid-kv"]
    assert (
        "attention_chunk_size 8192" in f["message"]
        and f"vLLM {vllm} turns the hybrid KV-cache manager off" in f["message"]
    )
    assert f["severity"] == "info"
    import specreg
    from specreg.vllm.deployment import hybrid_kv_findings

    eagle = specreg.load(eagle3_draft(tmp_path, head_dim=128), vllm="0.33")
    assert hybrid_kv_findings(eagle, verifier_chunk=8192) and not hybrid_kv_findings(eagle, verifier_chunk=None)


def test_a_gpt_oss_verifiers_layers_are_asked_with_their_sinks_and_windows(tmp_path):
    """vLLM's GptOssForCausalLM gives every layer sinks and even layers the sliding window: on an A100
    FlashAttention refuses sinks, so the verifier gets Triton while the Eagle-3 draft gets FlashAttention."""
    dflash_draft(tmp_path)
    draft = eagle3_draft(tmp_path, head_dim=64)
    (tmp_path / "verifier" / "config.json").write_text(
        json.dumps(
            {
                "architectures": ["GptOssForCausalLM"],
                "model_type": "gpt_oss",
                "hidden_size": 2880,
                "num_hidden_layers": 24,
                "num_attention_heads": 64,
                "num_key_value_heads": 8,
                "head_dim": 64,
                "sliding_window": 128,
                "vocab_size": 201088,
                "torch_dtype": "bfloat16",
            }
        )
    )
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "specreg",
            "check",
            str(draft),
            "--verifier",
            str(tmp_path / "verifier"),
            "--no-weights",
            "--vllm",
            "0.33",
            "--gpu",
            "A100",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    doc = json.loads(out.stdout)
    verifier = doc["checks"]["gpu"]["verifier"]
    assert [(v["case"]["sliding"], v["case"]["sink"], v["chosen"]) for v in verifier] == [
        (True, True, "TRITON_ATTN"),
        (False, True, "TRITON_ATTN"),
    ]
    assert verifier[0]["layers"].startswith("verifier layers 0, 2, 4, 6, ... (12) (sliding, sinks, causal; vLLM's ")
    assert "sink not supported on compute capability < 9.0" in verifier[0]["refused"]["FLASH_ATTN"]
    (f,) = [f for f in doc["findings"] if f["code"] == "draft-attention-backend"]
    assert "gives the verifier's layers TRITON_ATTN and the draft's FLASH_ATTN" in f["message"]


def test_other_verifiers_layers_come_from_layer_types(tmp_path):
    dflash_draft(tmp_path, head_dim=128)
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    verifier["num_hidden_layers"] = 4
    verifier["layer_types"] = ["sliding_attention", "sliding_attention", "sliding_attention", "full_attention"]
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(verifier))
    doc = json.loads(check(tmp_path, "--gpu", "H100", "--json").stdout)
    assert [(v["layers"], v["case"]["sliding"]) for v in doc["checks"]["gpu"]["verifier"]] == [
        ("verifier layers 0, 1, 2 (sliding, causal; layer_types)", True),
        ("verifier layers 3 (full, causal; layer_types)", False),
    ]
    assert doc["checks"]["verifier"]["layers"][0]["layers"] == [0, 1, 2]


@pytest.mark.parametrize(
    ("vllm", "gpu", "quantization", "refused"),
    [
        ("0.33", "V100", {"quant_method": "fp8"}, "Minimum capability: 75. Current capability: 70."),
        ("0.33", "A100", {"quant_method": "fp8"}, None),
        (
            "0.24",
            "A100",
            {"quant_method": "modelopt", "quant_algo": "FP8"},
            "Minimum capability: 89. Current capability: 80.",
        ),
        ("0.33", "A100", {"quant_method": "modelopt", "quant_algo": "FP8"}, None),
        (
            "0.33",
            "T4",
            {"quant_method": "modelopt", "quant_algo": "FP8"},
            "Minimum capability: 80. Current capability: 75.",
        ),
        ("0.33", "RTX 4090", {"quant_method": "FP_QUANT"}, "Minimum capability: 100. Current capability: 89."),
    ],
)
def test_a_quantized_draft_on_a_gpu_its_method_does_not_support(tmp_path, vllm, gpu, quantization, refused):
    """_get_quantization_config checks the draft's own method against the GPU's capability at startup
    (the minimums are read from each wheel's classes: quantization_methods.json)."""
    quantized_dflash(tmp_path, quantization)
    out = check(tmp_path, "--vllm", vllm, "--gpu", gpu, "--json")
    found = codes(out)
    if refused is None:
        assert "quantization-gpu" not in found
        return
    f = found["quantization-gpu"]
    assert out.returncode == 1 and f["severity"] == "error" and refused in f["message"]
    assert "the draft's quantization method" in f["message"] and f["path"] == "$.quantization_config"


def test_a_quantization_method_that_does_not_run_in_the_verifiers_dtype(tmp_path):
    """The draft runs in the verifier's dtype: fp_quant supports bfloat16 only."""
    quantized_dflash(tmp_path, {"quant_method": "fp_quant"})
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    verifier["torch_dtype"] = "float16"
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(verifier))
    f = codes(check(tmp_path, "--gpu", "B200", "--json"))["quantization-gpu"]
    assert "in float16, the dtype the draft runs in (the verifier's): it supports bfloat16" in f["message"]
    assert f["fix"] == "serve with --dtype bfloat16"


def test_the_verifiers_quantization_is_checked_on_the_gpu_too(tmp_path):
    dflash_draft(tmp_path, head_dim=128)
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    verifier["quantization_config"] = {"quant_method": "fp8"}
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(verifier))
    f = codes(check(tmp_path, "--gpu", "V100", "--json"))["quantization-gpu"]
    assert "refuses the verifier's quantization method fp8 on V100 (sm_70)" in f["message"] and f["path"] is None


@pytest.mark.parametrize(
    ("config", "method"),
    [
        ({"quant_method": "Compressed_Tensors"}, "compressed-tensors"),
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "modelopt_fp4"),
        ({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}, "modelopt"),  # hf_quant_config.json
        ({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "MIXED_PRECISION"}}, "modelopt_mixed"),
        ({"quant_method": 4}, None),
    ],
)
def test_the_method_vllm_loads_a_quantization_config_with(config, method):
    from specreg.vllm.deployment import served_quant_method

    assert served_quant_method(config) == method


def test_a_hybrid_verifiers_linear_attention_layers_are_not_asked():
    groups = gpu_plan.verifier_groups(
        {
            "num_hidden_layers": 4,
            "layer_types": ["linear_attention", "linear_attention", "linear_attention", "full_attention"],
        },
        ("Qwen3NextForCausalLM",),
    )
    assert [(g.layers, g.sliding, g.source) for g in groups] == [
        ((3,), False, "layer_types; 3 other layers not attention")
    ]
    assert gpu_plan.verifier_groups({"num_hidden_layers": True}, ()) == ()


def test_a_verifiers_quantization_is_looked_up_by_the_name_vllm_loads_it_with(tmp_path):
    """A ModelOpt FP8 verifier (hf_quant_config.json's shape, no quant_method) is vLLM's modelopt
    (sm_80 from 0.27), not fp8 (sm_75): on a T4 it is refused, as modelopt."""
    dflash_draft(tmp_path, head_dim=128)
    verifier = json.loads((tmp_path / "verifier" / "config.json").read_text())
    verifier["quantization_config"] = {"producer": {"name": "modelopt"}, "quantization": {"quant_algo": "FP8"}}
    (tmp_path / "verifier" / "config.json").write_text(json.dumps(verifier))
    found = codes(check(tmp_path, "--gpu", "T4", "--json"))
    assert "refuses the verifier's quantization method modelopt on T4 (sm_75)" in found["quantization-gpu"]["message"]
    assert "not the verifier's (modelopt)" in found["draft-quantization"]["message"]
