"""DeepSpec DSpark drafts: the DFlash layout with the Markov and confidence heads.

``markov_rank``, ``markov_head_type``, ``enable_confidence_head``, ``confidence_head_with_markov``
in ``dflash_config`` or at the top level; drafts ``block_size`` tokens (sample from the anchor).
specreg serves them with vLLM's ``qwen3_dspark.Qwen3DSparkForCausalLM`` (``Qwen3DSparkModel``):
Qwen3 decoder layers, GQA attention, a dense MLP. (vllm/model_executor/models/registry.py (0.33)
maps the bare name ``DSparkDraftModel`` to its DeepSeek-V4 DSpark class, so the unmodified file is not
served as a Qwen3 draft; the written draft config names ``Qwen3DSparkModel``.)
"""

from __future__ import annotations

from specreg.sources.native import dflash_common
from specreg.sources.native.layout import Layout, Serves

_DSPARK = Serves("Qwen3DSparkModel", module="qwen3_dspark")

LAYOUT = Layout(
    format="deepspec",
    label="DeepSpec DSpark",
    names={"DSparkDraftModel": _DSPARK, "Qwen3DSparkModel": _DSPARK, "Qwen3OmniDSparkModel": _DSPARK},
    convert=lambda config, verifier, source: dflash_common.convert(config, "deepspec", verifier, source),
)
