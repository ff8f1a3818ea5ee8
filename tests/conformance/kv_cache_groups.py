"""Run one vLLM wheel's own KV-cache grouping on this CPU machine (a script, run per wheel).

    python kv_cache_groups.py WHEEL SRC    # SRC: a folder holding that wheel's `vllm/` sources

Same environment as attention_selector.py (the engine venv, flashinfer beside it, the compiled
modules replaced by empty ones, the GPU's capability answered). It prints one JSON object:

- `facts`: for each CUDA attention backend, whether it lays a KV page out block-first, as the
  wheel's grouping asks it: `indexes_kv_by_block_stride()` (0.24-0.28, asked per layer), or whether
  the first layout of `get_supported_kv_cache_layouts()` is block-outermost (0.29+, resolved once
  for the model). specreg/vllm/kv_cache.json is these facts.
- `cases`: `get_kv_cache_groups(vllm_config, specs)` (vLLM's engine core calls it on the verifier's
  and the draft's layers together) on a matrix of verifier layouts, draft layers, the hybrid
  KV-cache manager on or off, and block-first pages or not: whether it groups them, which error it
  raises otherwise, and which layers' pages it padded. specreg.vllm.kv_cache.grouping must answer
  the same.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from attention_selector import stub  # noqa: E402

BLOCK = 16
VERIFIERS = {
    # name: layers as (kind, kv heads, head size); kind: full, sliding (window 128), chunked (chunk
    # 8192), mla. The shapes of real verifiers: Llama (full), Gemma 3 and gpt-oss (sliding first),
    # Mistral (all sliding), Llama 4 (chunked local), DeepSeek (MLA).
    "full": [("full", 8, 128)] * 4,
    "sliding": [("sliding", 8, 128), ("full", 8, 128)] * 2,
    "full-sliding": [("full", 8, 128), ("sliding", 8, 128)] * 2,
    "all-sliding": [("sliding", 8, 128)] * 4,
    "chunked": [("chunked", 8, 128), ("full", 8, 128)] * 2,
    "mla": [("mla", 1, 576)] * 4,
    "mla-sliding": [("mla", 1, 576), ("sliding", 1, 128)] * 2,
    # Qwen3-Next's shape: linear-attention (Mamba-type) layers whose state page vLLM pads to the
    # attention layers' page (HybridAttentionMambaModelConfig), and full attention
    "mamba": [("mamba", 8, 128), ("mamba", 8, 128), ("mamba", 8, 128), ("full", 8, 128)],
}
#: the windows of the kinds
WINDOWS = {"sliding": 128, "chunked": 8192}
DRAFT_HEADS = (64, 128, 256)
DRAFT_KV = (1, 3, 8)
DRAFT_KINDS = ("full", "sliding", "sliding-2048")
BACKENDS = (
    "FLASH_ATTN",
    "FLASHINFER",
    "TRITON_ATTN",
    "FLEX_ATTENTION",
    "FLASHMLA",
    "TRITON_MLA",
    "CUTLASS_MLA",
    "FLASHINFER_MLA",
    "FLASH_ATTN_MLA",
)


def main() -> None:
    wheel, src = sys.argv[1], sys.argv[2]
    sys.path.insert(0, src)
    os.environ["VLLM_TARGET_DEVICE"] = "cuda"
    stub(wheel)
    import torch

    import vllm
    import vllm.platforms
    import vllm.platforms.cuda as cuda
    from vllm.platforms.interface import DeviceCapability

    platform_cls = getattr(cuda, "NonNvmlCudaPlatform", None) or cuda.CudaPlatform
    platform_cls.get_device_capability = classmethod(lambda cls, device_id=0: DeviceCapability(9, 0))
    vllm.platforms._current_platform = platform_cls()
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.v1 import kv_cache_interface as k
    from vllm.v1.attention.backends.registry import AttentionBackendEnum

    try:
        from vllm.v1.core.kv_cache_planning import get_kv_cache_groups
    except ImportError:
        from vllm.v1.core.kv_cache_utils import get_kv_cache_groups
    cfg = VllmConfig()
    fields = {f.name for f in dataclasses.fields(k.FullAttentionSpec)}
    per_layer = "indexes_kv_by_block_stride" in fields  # 0.24-0.28: each layer's backend
    resolved = hasattr(cfg.cache_config, "get_resolved_kv_cache_layout")  # 0.29+: one layout for the model

    facts = {}
    with set_current_vllm_config(cfg):
        for name in BACKENDS:
            try:
                b = getattr(AttentionBackendEnum, name).get_class()
            except (AttributeError, ImportError, OSError, AssertionError, RuntimeError) as exc:
                facts[name] = f"unavailable: {type(exc).__name__}"
                continue
            try:
                if resolved:  # None: any layout, and then vLLM's default preference (LBNHC first)
                    layouts = b.supported_kv_cache_layouts()
                    facts[name] = bool(layouts) and bool(layouts[0].is_block_outermost)
                elif per_layer:
                    facts[name] = bool(b.indexes_kv_by_block_stride())
                else:
                    facts[name] = None  # the version pads no attention page
            except (AttributeError, NotImplementedError, AssertionError, RuntimeError) as exc:
                facts[name] = f"unavailable: {type(exc).__name__}"

    def spec(kind: str, heads: int, head: int, block_first: bool):
        if kind == "mamba":  # a state of a few bytes, its page padded to that of (heads, head) attention
            return k.MambaSpec(
                block_size=BLOCK, shapes=((4,),), dtypes=(torch.float32,), page_size_padded=2 * BLOCK * heads * head * 2
            )
        common = {"block_size": BLOCK, "num_kv_heads": heads, "head_size": head, "dtype": torch.bfloat16}
        if per_layer:
            common["indexes_kv_by_block_stride"] = block_first
        if kind == "mla":
            return k.MLAAttentionSpec(**common)
        if kind.startswith("sliding"):
            return k.SlidingWindowSpec(**common, sliding_window=window(kind))
        if kind == "chunked":
            return k.ChunkedLocalAttentionSpec(**common, attention_chunk_size=window(kind))
        return k.FullAttentionSpec(**common)

    cases = []
    for (vname, vlayers), head, kv, dkind, hybrid, block_first in itertools.product(
        VERIFIERS.items(), DRAFT_HEADS, DRAFT_KV, DRAFT_KINDS, (True, False), (True, False)
    ):
        if not (per_layer or resolved) and not block_first:
            continue  # the version has no such choice
        specs = {
            f"model.layers.{i}.self_attn.attn": spec(kind, h, d, block_first) for i, (kind, h, d) in enumerate(vlayers)
        }
        specs[f"model.layers.{len(vlayers)}.self_attn.attn"] = spec(dkind, kv, head, block_first)
        cfg.scheduler_config.disable_hybrid_kv_cache_manager = not hybrid
        if resolved:
            object.__setattr__(cfg.cache_config, "kv_cache_layout", "BLNHC" if block_first else "LBNHC")
        case = {"verifier": vname, "draft": [dkind, kv, head], "hybrid": hybrid, "block_first": block_first}
        try:
            with set_current_vllm_config(cfg):
                groups = get_kv_cache_groups(cfg, dict(specs))
            # the layers whose page the grouping padded (a Mamba layer's page comes padded already)
            padded = sorted(
                {
                    n
                    for g in groups
                    for n, s in _members(g.kv_cache_spec, g.layer_names)
                    if n in specs
                    and getattr(s, "page_size_padded", None) != getattr(specs[n], "page_size_padded", None)
                }
            )
            case.update(outcome="ok", groups=len(groups), padded=[int(n.split(".")[2]) for n in padded])
        except Exception as exc:  # noqa: BLE001 - the wheel's answer, whatever it is, is the datum
            import traceback

            frames = traceback.extract_tb(exc.__traceback__)[-3:]
            case.update(
                outcome=type(exc).__name__,
                message=str(exc)[:300],
                raised_in=" < ".join(f"{Path(f.filename).name}:{f.name}" for f in reversed(frames)),
            )
        cases.append(case)
    print("KVGROUPS " + json.dumps({"facts": facts, "cases": cases}))


def window(kind: str) -> int:
    """sliding -> 128, sliding-2048 -> 2048, chunked -> 8192"""
    return int(kind.split("-")[1]) if "-" in kind else WINDOWS[kind]


def _members(spec, names):
    inner = getattr(spec, "kv_cache_specs", None)
    if isinstance(inner, dict):
        return list(inner.items())
    return [(n, spec) for n in names]


if __name__ == "__main__":
    main()
