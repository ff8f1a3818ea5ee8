"""Run one vLLM wheel's own attention-backend selector on this CPU machine (a script, run per wheel).

    python attention_selector.py WHEEL SRC [--cubins]    # SRC: a folder holding that wheel's `vllm/` sources

It needs torch and vLLM's pure-Python dependencies (the engine tier's venv has them), and the
flashinfer package (the FlashInfer backend imports it).

It prints one JSON object: the facts `specreg.vllm.attention` models the selector from (for each
GPU capability: the backend priorities, and each backend's `supports_*` answers, which
`validate_configuration` combines) and the selector's own answers (`CudaPlatform.get_valid_backends`)
on a matrix of cases, which specreg's answers must equal.

What runs is the wheel's Python. What cannot run here is replaced, and only that:
- the compiled modules (`vllm._C*`, `vllm._moe_C*`) are empty modules (the selector calls none);
- FlashAttention's kernels: `vllm.vllm_flash_attn._vllm_fa2_C` / `_vllm_fa3_C` exist exactly when
  the wheel ships them (its file list), and FA4's `cute/interface.py` is looked up in the wheel;
  `flash_attn_interface` then decides availability per capability with its own code;
- the GPU: `CudaPlatform.get_device_capability` answers the capability asked for;
- FlashInfer's TRTLLM kernels (sinks, and SM100's paths): vLLM finds them when the flashinfer-cubin
  package is installed or NVIDIA's artifactory is reachable (`has_nvidia_artifactory`). This
  machine has neither; `--cubins` sets VLLM_HAS_FLASHINFER_CUBIN=1, vLLM's own switch for "the
  cubins are there", so both answers are computed.
"""

from __future__ import annotations

import json
import os
import sys
import types
import zipfile

HEADS = list(range(8, 577, 8))  # head sizes asked of supports_head_size (a draft's head_dim)
DTYPES = ("bfloat16", "float16", "float32")
KV = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
CAPS = ((7, 0), (7, 5), (8, 0), (8, 6), (8, 7), (8, 9), (9, 0), (10, 0), (10, 3), (11, 0), (12, 0), (12, 1))
MATRIX_HEADS = (64, 80, 128, 256, 512)


def ranges(heads: list[int]) -> list[list[int]]:
    """[8, 16, 24, 64] -> [[8, 24], [64, 64]] (runs of HEADS' step)."""
    out: list[list[int]] = []
    for h in heads:
        if out and h == out[-1][1] + 8:
            out[-1][1] = h
        else:
            out.append([h, h])
    return out


def stub(wheel: str) -> bool:
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in ("vllm._C", "vllm._C_stable_libtorch", "vllm._moe_C", "vllm._moe_C_stable_libtorch"):
        sys.modules.setdefault(name, types.ModuleType(name))
    for kernel in ("_vllm_fa2_C", "_vllm_fa3_C"):
        if any(n.startswith(f"vllm/vllm_flash_attn/{kernel}.") for n in names):
            sys.modules[f"vllm.vllm_flash_attn.{kernel}"] = types.ModuleType(kernel)
    return "vllm/vllm_flash_attn/cute/interface.py" in names


def main() -> None:
    wheel, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, src)
    os.environ["VLLM_TARGET_DEVICE"] = "cuda"
    if "--cubins" in sys.argv[3:]:
        os.environ["VLLM_HAS_FLASHINFER_CUBIN"] = "1"
    else:
        os.environ.pop("VLLM_HAS_FLASHINFER_CUBIN", None)
    fa4_shipped = stub(wheel)
    import torch

    import vllm
    import vllm.platforms
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.selector import AttentionSelectorConfig

    platform_cls = getattr(cuda, "NonNvmlCudaPlatform", None) or cuda.CudaPlatform
    import vllm.vllm_flash_attn.flash_attn_interface as fai

    if hasattr(fai, "FA4_AVAILABLE"):  # the wheel's own test is whether cute/interface.py is there
        fai.FA4_AVAILABLE = fa4_shipped
    state = {"cap": DeviceCapability(8, 0)}
    platform_cls.get_device_capability = classmethod(lambda cls, device_id=0: state["cap"])
    vllm.platforms._current_platform = platform_cls()

    def at(cap):
        state["cap"] = DeviceCapability(*cap)
        for fn in (getattr(cuda, "_get_backend_priorities", None),):
            if hasattr(fn, "cache_clear"):
                fn.cache_clear()
        return state["cap"]

    from vllm.config import VllmConfig, set_current_vllm_config

    with set_current_vllm_config(VllmConfig()):  # as in an engine: some answers read the current config
        facts, cases = survey(platform_cls, cuda, at, AttentionBackendEnum, AttentionSelectorConfig, torch)
    print("SELECTOR " + json.dumps({"facts": facts, "cases": cases}))


def survey(platform_cls, cuda, at, AttentionBackendEnum, AttentionSelectorConfig, torch):
    import inspect

    accepted = set(inspect.signature(cuda._get_backend_priorities).parameters)  # the version's own parameters
    from vllm.v1.attention.backend import AttentionBackend

    validate = inspect.getsource(AttentionBackend.validate_configuration)
    # the checks of validate_configuration that depend on the case and that not every version makes
    facts: dict = {"validates": {"sliding": "sliding window not supported" in validate}}
    cases = []
    for cap in CAPS:
        dc = at(cap)
        key = f"{cap[0]}.{cap[1]}"
        priorities = {}
        for non_causal in (False, True):
            for kv in KV:
                asked = {
                    "use_mla": False,
                    "device_capability": dc,
                    "kv_cache_dtype": kv,
                    "use_non_causal": non_causal,
                    "head_size": 128,
                }
                got = cuda._get_backend_priorities(**{k: v for k, v in asked.items() if k in accepted})
                priorities[f"{'non-causal' if non_causal else 'causal'}|{kv}"] = [b.name for b in got]
        backends = {}
        for name in sorted({n for order in priorities.values() for n in order}):  # every backend it may ask
            try:
                b = getattr(AttentionBackendEnum, name).get_class()
            except (ImportError, OSError) as exc:
                backends[name] = {"unavailable": f"{type(exc).__name__}: {exc}"}
                continue
            f = {
                "heads": [h for h in HEADS if b.supports_head_size(h)],
                "dtypes": [d for d in DTYPES if b.supports_dtype(getattr(torch, d))],
                "kv": [k for k in KV if b.supports_kv_cache_dtype(k)],
                "block_size_none": bool(b.supports_block_size(None)),
                "mla": bool(b.is_mla()),
                "sparse": bool(b.is_sparse()),
                "sink": bool(b.supports_sink()),
                "capability": bool(b.supports_compute_capability(dc)),
                "decoder": bool(b.supports_attn_type("decoder")),
                "sliding": bool(b.supports_sliding_window()) if hasattr(b, "supports_sliding_window") else True,
                "non_causal": bool(b.supports_non_causal()),
                "combination": {},
            }
            combination: dict[str, dict[str, list[int]]] = {}
            for h in HEADS:
                for d in DTYPES:
                    for k in KV:
                        for sink in (False, True):
                            why = b.supports_combination(h, getattr(torch, d), k, None, False, sink, False, False, dc)
                            if why is not None:
                                combination.setdefault(why, {}).setdefault(f"{d}|{k}|{int(sink)}", []).append(h)
            f["heads"] = ranges(f["heads"])
            f["combination"] = {
                why: {key: ranges(hs) for key, hs in sorted(by.items())} for why, by in sorted(combination.items())
            }
            backends[name] = f
        facts[key] = {"priorities": priorities, "backends": backends}
        for head in MATRIX_HEADS:
            for kv in ("auto", "fp8"):
                for non_causal in (False, True):
                    for sliding, sink in ((False, False), (True, False), (False, True)):
                        asked = {
                            "head_size": head,
                            "dtype": torch.bfloat16,
                            "kv_cache_dtype": kv,
                            "block_size": None,
                            "has_sink": sink,
                            "has_sliding_window": sliding,
                            "use_non_causal": non_causal,
                        }
                        # a version without a field never asks about it (0.24-0.25: no sliding window)
                        config = AttentionSelectorConfig(
                            **{k: v for k, v in asked.items() if k in AttentionSelectorConfig._fields}
                        )
                        valid, invalid = platform_cls.get_valid_backends(dc, config)
                        cases.append(
                            {
                                "capability": key,
                                "head_size": head,
                                "dtype": "bfloat16",
                                "kv_cache_dtype": kv,
                                "non_causal": non_causal,
                                "sliding": sliding,
                                "sink": sink,
                                "valid": [c.backend.name for c in sorted(valid, key=lambda c: c.priority)],
                                "refused": {b.name: r for b, (_, r) in invalid.items()},
                            }
                        )
    return facts, cases


if __name__ == "__main__":
    main()
