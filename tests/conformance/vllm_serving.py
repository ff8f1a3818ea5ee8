"""How one vLLM version serves a DFlash-family draft config: its own mask code, run from its wheel.

The mask a layer gets is decided in three places that changed over the releases:

- the model (`vllm/model_executor/models/qwen3_dflash.py`): from 0.26 `_resolve_layer_attention`
  gives each layer its `causal` (through `_dflash_layer_causal`), and the V2 speculator builds one
  attention group per layer group from it (`get_draft_attn_causal`);
- the V1 proposer (`vllm/v1/spec_decode/dflash.py`, `DFlashProposer.__init__`): one
  `self.dflash_causal` for every layer (0.23-0.25: the global `dflash_config.causal`; before 0.23
  the metadata is built with `causal=False`); 0.34 deleted Model Runner V1, and the V2 groups alone
  decide;
- the DSpark speculator (`vllm/v1/worker/gpu/spec_decode/dspark/speculator.py`), which in 0.25 sets
  `self.dflash_causal = False` after its DFlash base class.

Those functions and statements are taken out of the wheel's source with `ast` and executed here
(they are plain Python over the config; the modules around them import torch and CUDA code, so the
modules themselves are not imported). Nothing in this file states a served value.
"""

from __future__ import annotations

import ast
import types
import zipfile
from functools import lru_cache
from typing import Any

from conformance.vllm_mapping import wheel

MODEL = "vllm/model_executor/models/qwen3_dflash.py"
PROPOSER = "vllm/v1/spec_decode/dflash.py"
V2_DFLASH = "vllm/v1/worker/gpu/spec_decode/dflash/speculator.py"
V2_DSPARK = "vllm/v1/worker/gpu/spec_decode/dspark/speculator.py"
MODEL_FUNCTIONS = ("_dflash_layer_causal", "dflash_has_any_non_causal", "_resolve_layer_attention")


class Config:
    """An HF config as vLLM's code sees it: attributes for the JSON keys, nothing else."""

    def __init__(self, data: dict[str, Any]):
        self.__dict__.update(data)


def _read(version: str, path: str) -> str | None:
    with zipfile.ZipFile(wheel(version)) as z:
        return z.read(path).decode() if path in z.namelist() else None


def _class(tree: ast.Module, name: str) -> ast.ClassDef | None:
    return next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)


def _method(cls: ast.ClassDef | None, name: str) -> ast.FunctionDef | None:
    if cls is None:
        return None
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _self_assignment(fn: ast.FunctionDef | None, attr: str) -> ast.expr | None:
    """The value expression of `self.<attr> = ...` in a method (the last one), or None."""
    found = None
    for node in ast.walk(fn) if fn is not None else ():
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) and t.value.id == "self"
            for t in node.targets
        ):
            found = node.value
    return found


class Serving:
    """One vLLM version's mask code for DFlash-family drafts."""

    def __init__(self, version: str):
        self.version = version
        self.functions: dict[str, Any] = {}
        model = _read(version, MODEL)
        if model is not None:
            tree = ast.parse(model)
            wanted = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name in MODEL_FUNCTIONS]
            constants = [
                n
                for n in tree.body
                if isinstance(n, ast.Assign)
                and all(
                    isinstance(t, ast.Name)
                    and t.id.isupper()
                    or isinstance(t, ast.Name)
                    and t.id.startswith("_")
                    and t.id[1:].isupper()
                    for t in n.targets
                )
                and isinstance(n.value, ast.Constant)
            ]
            namespace: dict[str, Any] = {
                "Qwen3Config": object,
                # the V2 runner, which mixed sliding/full drafts require (vLLM raises otherwise)
                "get_current_vllm_config": lambda: types.SimpleNamespace(use_v2_model_runner=True),
            }
            code = ast.Module(body=[*constants, *wanted], type_ignores=[])
            exec(compile(ast.fix_missing_locations(code), f"vllm-{version}/{MODEL}", "exec"), namespace)
            self.functions = {k: namespace[k] for k in MODEL_FUNCTIONS if k in namespace}

        # 0.34 deleted Model Runner V1 (vllm/v1/spec_decode/): the V2 speculator alone decides the masks
        self.has_v1 = _read(version, PROPOSER) is not None
        proposer = ast.parse(_read(version, PROPOSER) or "")
        cls = _class(proposer, "DFlashProposer")
        self.proposer_flag = _self_assignment(_method(cls, "__init__"), "dflash_causal")
        prop = _method(cls, "dflash_config")
        self.proposer_dflash_config = None
        if prop is not None:
            prop.decorator_list = []  # a @property there: called by hand below
            namespace = {}
            exec(
                compile(
                    ast.fix_missing_locations(ast.Module(body=[prop], type_ignores=[])),
                    f"vllm-{version}/{PROPOSER}",
                    "exec",
                ),
                namespace,
            )
            self.proposer_dflash_config = namespace["dflash_config"]

        v2 = _read(version, V2_DFLASH) or ""
        # 0.26+: one attention group per layer group, each with its layers' own causal flag
        self.per_layer = "get_draft_attn_causal" in v2 and "_resolve_layer_attention" in self.functions
        dspark = _read(version, V2_DSPARK)
        dspark_init = _method(_class(ast.parse(dspark), "DSparkSpeculator"), "__init__") if dspark else None
        forced = _self_assignment(dspark_init, "dflash_causal")
        self.dspark_forced = forced.value if isinstance(forced, ast.Constant) else None
        self.dspark_anchor = _self_assignment(dspark_init, "sample_from_anchor")
        # DFlash and the anchor: does any runner read sample_from_anchor for a DFlash draft?
        self.v1_reads_anchor = "sample_from_anchor" in (_read(version, PROPOSER) or "")
        v2_anchor = _self_assignment(
            _method(_class(ast.parse(v2), "DFlashSpeculator"), "__init__"), "sample_from_anchor"
        )
        self.v2_dflash_anchor = v2_anchor.value if isinstance(v2_anchor, ast.Constant) else v2_anchor
        self.v2_refuses_anchor = "sample_from_anchor=True is not supported for DFlash" in v2

    def dspark_samples_from_anchor(self, draft: dict[str, Any]) -> bool:
        """Whether the DSpark speculator drafts from the anchor (no bonus token), by its own statement."""
        proposer = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=Config(draft)))
        expr = ast.fix_missing_locations(ast.Expression(body=self.dspark_anchor))
        return bool(eval(compile(expr, f"vllm-{self.version}/{V2_DSPARK}", "eval"), {"self": proposer}))

    def _proposer_flag(self, hf: Config) -> bool:
        """The V1 proposer's one flag for every layer, by its own statement."""
        if self.proposer_flag is None:
            return False  # no flag: the attention metadata is built with causal=False
        proposer = types.SimpleNamespace(draft_model_config=types.SimpleNamespace(hf_config=hf))
        if self.proposer_dflash_config is not None:
            proposer.dflash_config = self.proposer_dflash_config(proposer)
        expr = ast.Expression(body=self.proposer_flag)
        scope = {"self": proposer, **self.functions}
        return bool(eval(compile(ast.fix_missing_locations(expr), f"vllm-{self.version}/{PROPOSER}", "eval"), scope))

    def layer_causal(self, draft: dict[str, Any], *, dspark: bool) -> list[bool]:
        """Per layer of `draft` (a draft config as vLLM loads it): causal when served."""
        hf = Config(draft)
        n = draft["num_hidden_layers"]
        if dspark and self.dspark_forced is not None:
            return [bool(self.dspark_forced)] * n
        if self.per_layer:
            served = [bool(self.functions["_resolve_layer_attention"](hf, i)[1]) for i in range(n)]
            if self.has_v1 and len(set(served)) == 1:  # the V1 runner (uniform drafts) must agree with V2
                assert self._proposer_flag(hf) == served[0], f"vLLM {self.version}: V1 and V2 disagree"
            return served
        return [self._proposer_flag(hf)] * n


@lru_cache(maxsize=None)
def serving(version: str) -> Serving:
    """One Serving per version for the whole test session."""
    return Serving(version)


def inherits_dflash_layers(version: str, module: str, cls: str, base: str) -> bool:
    """Whether `cls` in `module` subclasses `base` and no code in that file sets a layer's causality."""
    text = _read(version, f"vllm/model_executor/models/{module}.py")
    if text is None:
        return False
    tree = ast.parse(text)
    node = _class(tree, cls)
    bases = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", None) for b in (node.bases if node else [])}
    sets_causal = any(
        isinstance(n, (ast.Assign, ast.AnnAssign))
        and any(
            isinstance(t, ast.Attribute) and t.attr == "causal"
            for t in (n.targets if isinstance(n, ast.Assign) else [n.target])
        )
        for n in ast.walk(tree)
    )
    return base in bases and not sets_causal
