"""Which attention backend vLLM picks for a draft's layers on a GPU, per vLLM version.

vLLM decides it in `CudaPlatform.get_valid_backends` (vllm/platforms/cuda.py): it walks
`_get_backend_priorities(...)` for the GPU's compute capability and keeps each backend whose
`validate_configuration` (vllm/v1/attention/backend.py) returns no reason. That method is a fixed
sequence of checks, each asking one of the backend's class methods (`supports_head_size`,
`supports_dtype`, `supports_kv_cache_dtype`, `supports_sink`, `supports_compute_capability`,
`supports_sliding_window`, `supports_non_causal`, ...), then `supports_combination`.

`facts/<X.Y>/attention_backends.json` holds, for each known vLLM version from 0.24 and each capability, the
priorities and every backend's answers to those methods, *computed by running the wheel's own
code* (tests/conformance/attention_selector.py); this module combines them in
`validate_configuration`'s order, with vLLM's reason strings. The conformance tier checks the
result against each wheel's `get_valid_backends` on 720 cases per version, without and with
FlashInfer's TRTLLM cubins (which decide its sinks: flashinfer-cubin installed, as 0.24-0.25 require,
or NVIDIA's artifactory reachable at startup). What is modelled rather than
run is the compiled part: which FlashAttention kernels exist (a wheel ships `_vllm_fa2_C` and
`_vllm_fa3_C`, and FA4's `cute/interface.py`; their availability per capability is then decided by
the wheel's `flash_attn_interface`), the GPU itself (its capability is given), and the settings
the check leaves at vLLM's defaults (no MLA, no sparse attention, no multimodal prefix, no
per-head quantization scales, no KV connector, no context parallelism, block size unset).

A draft's layers on a GPU, through this selector, are specreg.vllm.gpu_plan's; the docs table is
specreg.vllm.backend_table's.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import attrs

from specreg.errors import clipped
from specreg.vllm.fact_files import read_all

#: GPUs by the name users give, and their compute capability (NVIDIA's CUDA GPU table)
GPUS: dict[str, tuple[int, int]] = {
    "V100": (7, 0),
    "T4": (7, 5),
    "A100": (8, 0),
    "A30": (8, 0),
    "A10": (8, 6),
    "A10G": (8, 6),
    "A40": (8, 6),
    "RTX 3090": (8, 6),
    "RTX A6000": (8, 6),
    "L4": (8, 9),
    "L40": (8, 9),
    "L40S": (8, 9),
    "RTX 4090": (8, 9),
    "RTX 6000 Ada": (8, 9),
    "H100": (9, 0),
    "H200": (9, 0),
    "H20": (9, 0),
    "GH200": (9, 0),
    "B200": (10, 0),
    "GB200": (10, 0),
    "B300": (10, 3),
    "GB300": (10, 3),
    "RTX 5090": (12, 0),
    "RTX PRO 6000": (12, 0),
    "GB10": (12, 1),
    "DGX Spark": (12, 1),
}
DTYPES = ("bfloat16", "float16", "float32")
KV_CACHE_DTYPES = ("auto", "fp8", "fp8_e4m3", "fp8_e5m2")
HEAD_STEP, HEAD_MAX = 8, 576  # the head sizes the facts were computed for: 8, 16, ..., 576


class AttentionError(ValueError):
    """A GPU, dtype or version the facts do not cover."""


@lru_cache(maxsize=1)
def _facts() -> dict[str, Any]:
    return read_all("attention_backends")


def _overlaid(base: Any, over: Any) -> Any:
    if isinstance(base, dict) and isinstance(over, dict):
        return {k: _overlaid(base.get(k), over[k]) if k in over else v for k, v in base.items()} | {
            k: v for k, v in over.items() if k not in base
        }
    return over


@lru_cache(maxsize=None)
def _merged(version_key: str, cubins: bool) -> dict[str, Any]:
    """One version's facts without FlashInfer's TRTLLM cubins, or with them (the `cubins` overlay:
    the answers that change when vLLM finds them, `has_nvidia_artifactory`)."""
    facts = _facts()[version_key]
    return _overlaid(facts, facts.get("cubins") or {}) if cubins else facts


def cubins_by_default(version: str) -> bool:
    """Whether every install of `version` has FlashInfer's TRTLLM cubins: 0.24-0.25 depend on
    flashinfer-cubin; later wheels find them only where that package is installed or NVIDIA's
    artifactory is reachable at startup."""
    return bool(_facts()[version_key(version)].get("cubins_required"))


def versions() -> list[str]:
    return sorted(_facts(), key=lambda v: tuple(int(x) for x in v.split(".")))


def capability(gpu: str) -> tuple[int, int]:
    """'H100', 'rtx 4090', 'sm_90', 'sm90', 'sm_121' or '9.0' -> (9, 0)."""
    text = gpu.strip()
    by_name = {re.sub(r"[\s_-]+", "", k).lower(): v for k, v in GPUS.items()}
    key = re.sub(r"[\s_-]+", "", text).lower()
    if key in by_name:
        return by_name[key]
    m = re.fullmatch(r"(?:sm_?)?(\d{2,3})", text.lower()) or re.fullmatch(r"(\d+)\.(\d)", text)
    if m and len(m.groups()) == 1:
        digits = m.group(1)
        return int(digits[:-1]), int(digits[-1])
    if m:
        return int(m.group(1)), int(m.group(2))
    raise AttentionError(
        f"unknown GPU {clipped(gpu)}: give one of {', '.join(GPUS)}, or its compute capability as sm_XY (sm_90) or X.Y"
    )


def gpu_label(gpu: str) -> str:
    major, minor = capability(gpu)
    sm = f"sm_{major}{minor}"
    return sm if re.sub(r"[\s_.-]+", "", gpu).lower() in (sm.replace("_", ""), f"{major}{minor}") else f"{gpu} ({sm})"


@attrs.frozen
class Case:
    """What the selector is asked for one group of layers."""

    head_size: int
    dtype: str = "bfloat16"
    kv_cache_dtype: str = "auto"
    non_causal: bool = False
    sliding: bool = False
    sink: bool = False


@attrs.frozen
class Selection:
    """The backends vLLM finds valid, in its priority order, and every other's reasons."""

    version: str
    capability: tuple[int, int]
    case: Case
    valid: tuple[str, ...]
    refused: dict[str, tuple[str, ...]]
    cubins: bool = False  # whether FlashInfer's TRTLLM cubins were taken as found

    @property
    def chosen(self) -> str | None:
        return self.valid[0] if self.valid else None


def _in(head: int, ranges: list[list[int]]) -> bool:
    return any(lo <= head <= hi for lo, hi in ranges)


def version_key(version: str) -> str:
    major_minor = ".".join(str(version).split(".")[:2])
    if major_minor not in _facts():
        raise AttentionError(f"no attention-backend facts for vLLM {version}: computed for {', '.join(versions())}")
    return major_minor


def reasons(
    version: str, cap: tuple[int, int], backend: str, case: Case, cubins: bool | None = None
) -> tuple[str, ...] | None:
    """`validate_configuration`'s reasons for one backend (empty: valid); None: not in the version.
    cubins: whether FlashInfer's TRTLLM cubins are found (None: `cubins_by_default`)."""
    key = version_key(version)
    every = _merged(key, cubins_by_default(key) if cubins is None else cubins)
    facts = every.get(f"{cap[0]}.{cap[1]}")
    if facts is None:
        raise AttentionError(f"no facts for compute capability {cap[0]}.{cap[1]}")
    b = facts["backends"].get(backend)
    if b is None:
        return None
    if "unavailable" in b:
        return (b["unavailable"],)
    out = []
    if not _in(case.head_size, b["heads"]):
        out.append("head_size not supported")
    if case.dtype not in b["dtypes"]:
        out.append("dtype not supported")
    if case.kv_cache_dtype not in b["kv"]:
        out.append("kv_cache_dtype not supported")
    if not b["block_size_none"]:
        out.append("block_size not supported")
    if b["mla"]:
        out.append("non-MLA not supported")
    if case.sink and not b["sink"]:
        out.append("attention sinks not supported")
    if b["sparse"]:
        out.append("non-sparse not supported")
    if not b["capability"]:
        out.append("compute capability not supported")
    if not b["decoder"]:
        out.append("attention type decoder not supported")
    if case.sliding and not b["sliding"] and every["validates"]["sliding"]:
        out.append("sliding window not supported")
    if case.non_causal and not b["non_causal"]:
        out.append("non-causal attention not supported")
    key = f"{case.dtype}|{case.kv_cache_dtype}|{int(case.sink)}"
    for why, by in b["combination"].items():
        if key in by and _in(case.head_size, by[key]):
            out.append(why)
    return tuple(out)


def select(version: str, cap: tuple[int, int], case: Case, cubins: bool | None = None) -> Selection:
    """What `get_valid_backends` answers for `case` on a GPU of capability `cap` in vLLM `version`
    (cubins: as for `reasons`)."""
    if case.head_size % HEAD_STEP or not HEAD_STEP <= case.head_size <= HEAD_MAX:
        raise AttentionError(f"head size {case.head_size}: the facts cover multiples of {HEAD_STEP} up to {HEAD_MAX}")
    if case.dtype not in DTYPES:
        raise AttentionError(f"dtype {case.dtype!r}: one of {', '.join(DTYPES)}")
    if case.kv_cache_dtype not in KV_CACHE_DTYPES:
        raise AttentionError(f"kv_cache_dtype {case.kv_cache_dtype!r}: the facts cover {', '.join(KV_CACHE_DTYPES)}")
    key = version_key(version)
    cubins = cubins_by_default(key) if cubins is None else cubins
    facts = _merged(key, cubins).get(f"{cap[0]}.{cap[1]}")
    if facts is None:
        raise AttentionError(
            f"compute capability {cap[0]}.{cap[1]}: the facts cover "
            f"{', '.join(sorted(k for k in _facts()[key] if k[0].isdigit()))}"
        )
    order = facts["priorities"][f"{'non-causal' if case.non_causal else 'causal'}|{case.kv_cache_dtype}"]
    valid, refused = [], {}
    for backend in order:
        why = reasons(key, cap, backend, case, cubins)
        if why is None:
            continue
        if why:
            refused[backend] = why
        else:
            valid.append(backend)
    return Selection(key, cap, case, tuple(valid), refused, cubins)


def cubins_words(found: bool) -> str:
    return (
        "where FlashInfer's TRTLLM cubins are found (flashinfer-cubin installed, or NVIDIA's artifactory "
        "reachable at startup)"
        if found
        else "where FlashInfer's TRTLLM cubins are not found"
    )


def covers(version: str, cap: tuple[int, int]) -> bool:
    """Whether the facts of `version` (a known X.Y) hold compute capability `cap`."""
    return f"{cap[0]}.{cap[1]}" in _facts()[version]
