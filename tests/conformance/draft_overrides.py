"""Each wheel's own `SpeculativeConfig.hf_config_override` (vllm/config/speculative.py), run on a
draft-shaped config for every model_type its code names.

vLLM applies that function to every draft's config (`compose_draft_hf_overrides`, whatever the
method), and for the model types of MTP-capable targets it replaces the architecture with the MTP
model's (deepseek_v3 becomes `DeepSeekMTPModel`), so an EAGLE-3 or DFlash draft with such a
model_type is never built as its own class. The function is taken out of the wheel with `ast` and run
as written, on a stand-in config object with the attributes it reads; a raise on the way (a branch
that needs more of vLLM than the stand-in has, or vLLM's own refusal) counts as "not served as the
draft class" too, which is what it means for the draft."""

from __future__ import annotations

import ast
import zipfile
from typing import Any

from tests.conformance.vllm_mapping import wheel, wheel_file

#: a class the draft would otherwise be built as; only the rewrite of it is looked for
DRAFT_ARCHITECTURE = "Eagle3LlamaForCausalLM"


class _Config:
    """The parts of a transformers config that hf_config_override touches."""

    def __init__(self, model_type: str) -> None:
        self.model_type = model_type
        self.architectures = [DRAFT_ARCHITECTURE]

    def update(self, values: dict[str, Any]) -> None:
        for key, value in values.items():
            setattr(self, key, value)


def _function(source: str):
    tree = ast.parse(source)
    fn = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "hf_config_override")
    fn.decorator_list = []
    names = {n.value for n in ast.walk(fn) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    namespace: dict[str, Any] = {"Any": Any, "PretrainedConfig": object, "PreTrainedConfig": object}
    exec(
        compile(ast.fix_missing_locations(ast.Module(body=[fn], type_ignores=[])), "hf_config_override", "exec"),
        namespace,
    )
    return namespace["hf_config_override"], names


def rewrites(version: str) -> dict[str, str]:
    """model_type -> the architecture the draft becomes (or "refused"), for every model_type the
    wheel's hf_config_override does not leave as the draft class."""
    with zipfile.ZipFile(wheel(version)) as z:
        source = wheel_file(z, "vllm/config/speculative.py")
    fn, names = _function(source)
    out = {}
    for model_type in sorted(names):
        config = _Config(model_type)
        try:
            fn(config) if fn.__code__.co_argcount == 1 else fn(config, None)
        except Exception:  # noqa: BLE001 - any raise means the draft class is not what gets built
            out[model_type] = "refused"
            continue
        if config.architectures != [DRAFT_ARCHITECTURE]:
            out[model_type] = config.architectures[0]
    return out
