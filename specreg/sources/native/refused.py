"""Layouts specreg recognizes and refuses, each with the reason.

- SpecForge Domino (``DominoDraftModel``): no vLLM release has a Domino class.
- SpecForge P-EAGLE (``PEagleDraftModel``): its config holds no mask token.
- AngelSlim DFlare (``QwenDFlareDraftModel``): z-lab DFlash's fields over layers with their own
  target k/v projections, which no vLLM class builds.
- Drafts vllm/model_executor/models/registry.py (0.33) serves with classes specreg has no rules for
  (MLA DSpark for Kimi K3, DeepSeek-V4 DSpark, Gemma 4 DSpark, Laguna DFlash, ...): specreg cannot say they are served as
  trained, so it says which class vLLM would use and does not write a directory for them.
"""

from __future__ import annotations

from typing import Any, Mapping

from specreg import facts
from specreg.sources.native.layout import Layout, Serves

_DOMINO = (
    "a SpecForge Domino draft (a GRU projector over the DFlash block, dflash_config.projector_type "
    f"'domino'); no vLLM release has a Domino class (vLLM {facts.known()[-1]}'s model registry has none), "
    "and serving it as DFlash would be a different model"
)
_DFLARE = (
    "Tencent AngelSlim's DFlare draft: z-lab DFlash's config fields, but its layers project the target "
    "context with their own k_proj_target/v_proj_target (angelslim/compressor/speculative/train/models/"
    f"draft/qwen_dflare.py at 67394ce); vLLM {facts.known()[-1]}'s DFlash class builds one k/v projection "
    "for context and block, so no vLLM class serves it"
)
_PEAGLE = (
    "a SpecForge P-EAGLE draft; its config holds no mask_token_id (SpecForge keeps the parallel-drafting "
    "token in its training arguments), which vLLM needs as pard_token, and vLLM's registry maps "
    "PEagleDraftModel to its plain Eagle-3 class, so the unmodified file is served without parallel "
    "drafting. Convert it with the speculators library's P-EAGLE converter, naming the mask token"
)

#: vLLM 0.33 registry names (vllm/model_executor/models/registry.py) specreg has no layout for:
#: name -> the module and class vLLM serves it with
VLLM_ONLY: dict[str, tuple[str, str]] = {
    "K3DSparkModel": ("vllm.models.kimi_k3.nvidia.dspark_mla", "K3DSparkForCausalLM"),
    "DSparkV41DraftModel": ("vllm.models.deepseek_v41", "DSparkDeepseekV4ForCausalLM"),
    "MuseSparkDSparkModel": ("vllm.models.muse_spark.common.dspark", "MuseSparkDSparkForCausalLM"),
    "Gemma4DSparkModel": ("gemma4_dspark", "Gemma4DSparkForCausalLM"),
    "DFlashLagunaForCausalLM": ("laguna_dflash", "DFlashLagunaForCausalLM"),
    "DFlash2BeamDraftModel": ("vllm.models.beam", "DFlash2BeamForCausalLM"),
    "LiLiCorrDraftModel": ("lilicorr", "LiLiCorrForCausalLM"),
    "Qwen3XPressModel": ("qwen3_xpress", "Qwen3XPressForCausalLM"),
    "DFlashQwen3XPressModel": ("qwen3_xpress", "Qwen3XPressForCausalLM"),
    "PeagleLlamaForCausalLM": ("llama_eagle3", "Eagle3LlamaForCausalLM"),
    "PeagleQwen3ForCausalLM": ("qwen3_eagle3", "Eagle3Qwen3ForCausalLM"),
}


def _vllm_only(name: str) -> str:
    module, cls = VLLM_ONLY[name]
    return (
        f"vLLM {facts.known()[-1]}'s registry serves {name} with {module}.{cls}, a class specreg has no "
        "rules for: specreg cannot check that it is served as trained, so it writes nothing for it (serve "
        "the file with vLLM directly, or convert it to the speculators format)"
    )


def _is_domino(config: Mapping[str, Any]) -> bool:
    dflash = config.get("dflash_config")
    return isinstance(dflash, Mapping) and dflash.get("projector_type") == "domino"


_NONE = Serves("")
LAYOUTS = (
    Layout(
        format="domino",
        label="SpecForge Domino",
        names={"DominoDraftModel": _NONE},
        refusal=lambda name: _DOMINO,
        unnamed=_is_domino,
    ),
    Layout(
        format="dflare", label="AngelSlim DFlare", names={"QwenDFlareDraftModel": _NONE}, refusal=lambda name: _DFLARE
    ),
    Layout(
        format="peagle-native",
        label="SpecForge P-EAGLE",
        names={"PEagleDraftModel": _NONE},
        refusal=lambda name: _PEAGLE,
    ),
    Layout(
        format="vllm-only",
        label="a draft class specreg has no rules for",
        names={name: _NONE for name in VLLM_ONLY},
        refusal=_vllm_only,
    ),
)
