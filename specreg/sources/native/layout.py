"""One native layout: the architecture names it answers to, what vLLM builds for each, its converter.

Each module of this package defines ``LAYOUT`` (or ``LAYOUTS``); `specreg.sources.native` collects
them, so adding a trainer's layout is one new file. A name is matched exactly, as vLLM's model
registry matches ``architectures`` entries; then the file's structure (`structure`) is checked
against what the vLLM class serving that name builds, and a mismatch is refused naming the field.
"""

from __future__ import annotations

from typing import Any, Callable, Mapping

import attrs

from specreg.errors import ConfigError, Problem, show_value
from specreg.sources.native import structure


@attrs.frozen
class Serves:
    """The vLLM class an architecture name is served with, and what that class builds."""

    vllm_class: str
    attention: str = "gqa"
    mlp: str = "dense"
    #: the vLLM module of the class (vllm/model_executor/models/<module>.py, 0.33 registry)
    module: str = ""


@attrs.frozen
class Layout:
    format: str
    label: str
    #: architecture name -> the class vLLM's registry serves it with
    names: Mapping[str, Serves]
    #: (config, verifier, source) -> Converted; None for a layout that is refused
    convert: Callable[..., Any] | None = None
    #: why the layout is refused (no vLLM class serves it as trained)
    refusal: Callable[[str], str] | None = None
    #: a structural rule for files that name no architecture (z-lab's first releases)
    unnamed: Callable[[Mapping[str, Any]], bool] | None = None
    #: (name, config) -> True when the name stands for this layout only with this structure
    #: (ModelOpt's LlamaForCausalLM is EAGLE-3 only with an eagle_config)
    accepts: Callable[[str, Mapping[str, Any]], bool] | None = None
    #: (attention, mlp) -> a vLLM class that builds that structure, where the name's class does not
    alternatives: Mapping[tuple[str, str], str] = attrs.field(factory=dict)

    def serves(self, name: str | None) -> Serves:
        """What `name` is served with; a file that names no architecture takes the layout's first name."""
        return self.names[name if name is not None else next(iter(self.names))]


def check_structure(layout: Layout, name: str | None, config: Mapping[str, Any], source: str | None) -> Serves:
    """The Serves of `name`, or ConfigError naming every field whose structure its class does not build."""
    serves = layout.serves(name)
    att, mlp = structure.attention(config), structure.mlp(config)
    problems = []
    for got, want in ((att, serves.attention), (mlp, serves.mlp)):
        if got.kind != want:
            instead = layout.alternatives.get((att.kind, mlp.kind))
            hint = (
                f"; vLLM's {instead} builds {structure.NAMES[att.kind]} with {structure.NAMES[mlp.kind]}: "
                f"if the draft was trained as that, name it in architectures"
                if instead
                else "; no vLLM draft class builds it"
            )
            problems.append(
                Problem(
                    got.path or "$.architectures",
                    (
                        f"{got.path[2:] if got.path else 'the config'} = {_show(got.value)} says the draft's layers have "
                        f"{structure.NAMES[got.kind]}, but {name or layout.label} is served by vLLM's {serves.vllm_class}, which builds "
                        f"{structure.NAMES[want]} and would load none of the trained weights' structure{hint}"
                    ),
                )
            )
    if problems:
        raise ConfigError(problems, source=source)
    return serves


def _show(value: Any) -> str:
    return show_value(value, 40)
