"""z-lab DFlash and DFlash2 drafts (and z-lab's MuseGlimmer assistants, which are z-lab DFlash).

- ``DFlashDraftModel``: the layout `dflash_common` reads; the anchor is the bonus token, so the
  draft length is ``block_size - 1``. Files with no ``architectures`` (z-lab's first releases) are
  this layout when their ``dflash_config`` holds ``target_layer_ids`` or ``mask_token_id`` (or the
  top level holds both and ``block_size``), and no other layout's fields.
- ``DFlash2DraftModel``: the same plus the convolution and candidate-selector knobs and the logit
  scales (`keys.CARRIED["dflash2"]`), normalized as dflash2.

vllm/model_executor/models/registry.py (0.33) serves these names with
``qwen3_dflash.DFlashQwen3ForCausalLM`` and ``qwen3_dflash2.DFlash2Qwen3ForCausalLM``: Qwen3 decoder
layers, GQA attention, a dense MLP.
"""

from __future__ import annotations

from typing import Any, Mapping

from specreg.sources.native import dflash_common
from specreg.sources.native.layout import Layout, Serves

_DFLASH = Serves("DFlashDraftModel", module="qwen3_dflash")


def _legacy(config: Mapping[str, Any]) -> bool:
    """z-lab's first releases name no architecture: the DFlash fields are what they are."""
    dflash = config.get("dflash_config") if isinstance(config.get("dflash_config"), Mapping) else {}
    has = lambda k: k in dflash or k in config  # noqa: E731
    fields = ("target_layer_ids", "mask_token_id")
    flat = all(k in config for k in (*fields, "block_size"))
    return (any(k in dflash for k in fields) or flat) and not any(has(k) for k in (
        "markov_rank", "conv_kernel_size", "projector_type"))


def _convert(fmt: str):
    def convert(config, verifier, source):
        return dflash_common.convert(config, fmt, verifier, source)

    return convert


LAYOUTS = (
    Layout(
        format="zlab",
        label="z-lab DFlash",
        names={"DFlashDraftModel": _DFLASH, "MuseGlimmerAssistantModel": _DFLASH,
               "DFlashMuseGlimmerAssistantModel": _DFLASH},
        convert=_convert("zlab"),
        unnamed=_legacy,
    ),
    Layout(
        format="zlab-dflash2",
        label="z-lab DFlash2",
        names={"DFlash2DraftModel": Serves("DFlash2DraftModel", module="qwen3_dflash2")},
        convert=_convert("zlab-dflash2"),
    ),
)
