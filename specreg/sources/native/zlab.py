"""z-lab DFlash and DFlash2 drafts (and z-lab's MuseGlimmer assistants, which are z-lab DFlash).

- ``DFlashDraftModel``: the layout `dflash_common` reads; the anchor is the bonus token, so the
  draft length is ``block_size - 1``. Files with no ``architectures`` (z-lab's first releases), or
  whose names no layout lists, are this layout when their ``dflash_config`` holds
  ``target_layer_ids`` or ``mask_token_id`` (or the top level holds both and ``block_size``), and no
  other layout's fields. Two trainers save it under their own class names: Tencent AngelSlim's
  ``QwenDFlashDraftModel`` (angelslim/compressor/speculative/train/models/draft/qwen_dflash.py at
  67394ce: z-lab's fc over the target layers, hidden_norm, one k/v projection for context and
  block, ``hidden_states[layer_id + 1]``) and NeMo Automodel's ``Qwen3DFlashDraftModel``.
- ``DFlash2DraftModel``: the same plus the convolution and candidate-selector knobs and the logit
  scales (`keys.CARRIED["dflash2"]`), normalized as dflash2.

vllm/model_executor/models/registry.py (0.33) serves these names with
``qwen3_dflash.DFlashQwen3ForCausalLM`` and ``qwen3_dflash2.DFlash2Qwen3ForCausalLM``: Qwen3 decoder
layers, GQA attention, a dense MLP.
"""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from specreg.sources.native import dflash_common
from specreg.sources.native.common import note
from specreg.sources.native.layout import Layout, Serves

_DFLASH = Serves("DFlashDraftModel", module="qwen3_dflash")


def _legacy(config: Mapping[str, Any]) -> bool:
    """z-lab's first releases name no architecture: the DFlash fields are what they are."""
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), Mapping) else {}
    has = lambda k: k in dflash or k in config  # noqa: E731
    fields = ("target_layer_ids", "mask_token_id")
    flat = all(k in config for k in (*fields, "block_size"))
    return (any(k in dflash for k in fields) or flat) and not any(
        has(k) for k in ("markov_rank", "conv_kernel_size", "projector_type")
    )


def _convert(fmt: str, names: tuple[str, ...] = ()):
    def convert(config, verifier, source):
        converted = dflash_common.convert(config, fmt, verifier, source)
        archs = config.get("architectures")
        archs = [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []
        if archs and not set(archs) & set(names):
            why = (
                f"architectures {archs!r} name no class specreg knows; the fields are z-lab DFlash's own "
                "(dflash_config.target_layer_ids, mask_token_id, block_size), so the draft is read as z-lab "
                "DFlash and served with vLLM's DFlashDraftModel. A class that builds other modules under the "
                "same fields is another draft (AngelSlim's QwenDFlareDraftModel is refused by name), and "
                "vLLM's loader refuses its weights"
            )
            converted = attrs.evolve(
                converted, notes=(*converted.notes, note("recognized-by-structure", why, "$.architectures"))
            )
        return converted

    return convert


_ZLAB_NAMES = ("DFlashDraftModel", "MuseGlimmerAssistantModel", "DFlashMuseGlimmerAssistantModel")


LAYOUTS = (
    Layout(
        format="zlab",
        label="z-lab DFlash",
        names={name: _DFLASH for name in _ZLAB_NAMES},
        convert=_convert("zlab", _ZLAB_NAMES),
        unnamed=_legacy,
    ),
    Layout(
        format="zlab-dflash2",
        label="z-lab DFlash2",
        names={"DFlash2DraftModel": Serves("DFlash2DraftModel", module="qwen3_dflash2")},
        convert=_convert("zlab-dflash2", ("DFlash2DraftModel",)),
    ),
)
