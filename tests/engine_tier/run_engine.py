"""Run vLLM's engine in-process on token prompts, once per job; print each job's spec-decode counters.

    python run_engine.py JOBS.json     # [{"model": DIR, "speculative_config": {...} | null,
                                       #   "prompts": [[ids]], "max_tokens": N}, ...]

Each job gets its own `vllm.LLM`, built and torn down in turn in this process (the engine core
runs in-process, VLLM_ENABLE_V1_MULTIPROCESSING=0, with the single-process executor). A job that
fails to start is reported with its error and the next one runs. One line per job on stdout:
`ENGINE-RESULT {json}`. The plugin switch (SPECREG_VLLM_PLUGIN) is the process's: vLLM loads its
plugins once per process.

A job may set `dtype` (float32 by default) and `amx_gemms` (true or false): vLLM 0.32 then picks its
GEMMs as on a CPU with (or without) AMX tiles. Its rule, `check_cpu_sgl_kernel`
(vllm/model_executor/layers/utils.py; called by `dispatch_cpu_unquantized_gemm` there and by
`CPUInt8ScaledMMLinearKernel.process_weights_after_loading`, vllm/model_executor/kernels/linear/
scaled_mm/cpu.py), is asked with `torch.cpu._is_amx_tile_supported` answering that, so the other
CPU's kernels run here: oneDNN's anywhere, the SGL kernels wherever vLLM loads its `_C` library
(AVX-512 BF16; measured on an AMD EPYC without AMX). Attention still asks the real CPU: its "amx"
path (vllm/v1/attention/backends/cpu_attn.py `_get_attn_isa`) runs AMX tile instructions, and
forced on a CPU without them the engine dies of SIGILL (measured). Each result names the int8 GEMM
each quantized layer took (`int8_gemms`: "sgl" or "onednn").
"""

from __future__ import annotations

import gc
import json
import os
import sys
import time

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")


def counters(metrics) -> dict:
    found = {"num_drafts": 0, "num_draft_tokens": 0, "num_accepted_tokens": 0, "per_position": []}
    for m in metrics:
        name = m.name.removeprefix("vllm:spec_decode_")
        if name in ("num_drafts", "num_draft_tokens", "num_accepted_tokens"):
            found[name] = int(m.value)
        elif name == "num_accepted_tokens_per_pos":
            found["per_position"] = [int(v) for v in m.values]
    return found


#: the int8 GEMM each quantized layer took in this job, in load order
_int8_gemms: list[str] = []
_amx_gemms: list[bool | None] = [None]


def watch_gemms() -> None:
    """Record which int8 GEMM vLLM picks per layer; with `_amx_gemms` set, vLLM's own rule for every
    GEMM (check_cpu_sgl_kernel, at both its call sites) is asked with the CPU said to have AMX tiles
    (True) or not (False)."""
    import torch
    from vllm.model_executor.kernels.linear.scaled_mm import cpu
    from vllm.model_executor.layers import utils

    if getattr(cpu.CPUInt8ScaledMMLinearKernel, "_watched", False):
        return
    picked, choose = cpu.CPUInt8ScaledMMLinearKernel.process_weights_after_loading, utils.check_cpu_sgl_kernel

    def check_cpu_sgl_kernel(n, k, dtype):
        said = _amx_gemms[0]
        if said is None:
            return choose(n, k, dtype)
        real = torch.cpu._is_amx_tile_supported
        torch.cpu._is_amx_tile_supported = lambda: said
        try:
            return choose(n, k, dtype)
        finally:
            torch.cpu._is_amx_tile_supported = real

    def process_weights_after_loading(self, layer):
        picked(self, layer)
        _int8_gemms.append("sgl" if self.linear_method == self._apply_weights_sgl else "onednn")

    # dispatch_cpu_unquantized_gemm looks the rule up in utils; the int8 kernel imported it by name
    utils.check_cpu_sgl_kernel = cpu.check_cpu_sgl_kernel = check_cpu_sgl_kernel
    cpu.CPUInt8ScaledMMLinearKernel.process_weights_after_loading = process_weights_after_loading
    cpu.CPUInt8ScaledMMLinearKernel._watched = True


def run(job: dict) -> dict:
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    watch_gemms()
    _int8_gemms.clear()
    _amx_gemms[0] = job.get("amx_gemms")
    started = time.perf_counter()
    kwargs = dict(
        model=job["model"],
        dtype=job.get("dtype", "float32"),
        max_model_len=256,
        enforce_eager=True,
        disable_log_stats=False,
        max_num_seqs=8,
        seed=0,
        distributed_executor_backend="uni",
    )
    if job.get("speculative_config") is not None:
        kwargs["speculative_config"] = job["speculative_config"]
    kwargs.update(job.get("engine_args", {}))  # more of vLLM's engine arguments, as `vllm serve` flags set them
    llm = LLM(**kwargs)
    ready = time.perf_counter()
    params = SamplingParams(temperature=0.0, max_tokens=job["max_tokens"], ignore_eos=True)
    outputs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in job["prompts"]], params, use_tqdm=False)
    spec = llm.llm_engine.vllm_config.speculative_config
    draft = getattr(spec, "draft_model_config", None)
    hf = getattr(draft, "hf_config", None)
    result = {
        **counters(llm.get_metrics()),
        "outputs": [list(o.outputs[0].token_ids) for o in outputs],
        "method": getattr(spec, "method", None),
        "num_speculative_tokens": getattr(spec, "num_speculative_tokens", None),
        "parallel_drafting": bool(getattr(spec, "parallel_drafting", False)),
        "draft_architecture": (getattr(hf, "architectures", None) or [None])[0],
        "dtype": str(llm.llm_engine.vllm_config.model_config.dtype).removeprefix("torch."),
        "int8_gemms": list(_int8_gemms),
        "start_s": round(ready - started, 2),
        "generate_s": round(time.perf_counter() - ready, 2),
    }
    llm.llm_engine.engine_core.shutdown()
    del llm, outputs
    gc.collect()
    return result


def main() -> None:
    with open(sys.argv[1]) as fh:
        jobs = json.load(fh)
    for job in jobs:
        try:
            result = {"name": job.get("name"), **run(job)}
        except Exception as exc:  # noqa: BLE001 - report it and go on with the next job
            result = {"name": job.get("name"), "error": f"{type(exc).__name__}: {exc}", "int8_gemms": list(_int8_gemms)}
        print("ENGINE-RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
