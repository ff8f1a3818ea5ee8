"""Drafts published outside the speculators format, and their conversion to it.

Each module here is one trainer's layout (`layout.Layout`): the architecture names it answers to
(matched exactly, as vLLM's model registry matches them), the vLLM class each name is served with
and what that class builds, and the converter to the speculators format. Recognition never matches
a substring, and a known name whose fields describe layers its vLLM class does not build (MLA, MoE,
linear attention) is refused naming the field. A file whose names no layout lists is recognized by
its structure when its fields are one layout's own (`Layout.unnamed`: z-lab DFlash, as AngelSlim and
NeMo Automodel save it under their own class names), with a `recognized-by-structure` warning;
otherwise it is not a native draft.

Layouts: z-lab DFlash / DFlash2 (`zlab`), DeepSpec DSpark (`deepspec`), EAGLE-3 as SpecForge,
SGLang, TorchSpec, the EAGLE-3 release and ModelOpt write it (`eagle3`); refused with the reason:
SpecForge Domino and P-EAGLE, and the names vLLM serves with classes specreg has no rules for
(`refused`). A native file names no verifier: the caller supplies it (or the catalog entry does).
`to_speculators` writes the speculators-format config that `normalize` reads, and a map from its
JSON paths back to the native file's, so errors and provenance name the native fields.
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any, Mapping

from specreg import facts
from specreg.errors import ConfigError
from specreg.sources.native.common import Converted, architecture_of, speculators_envelope
from specreg.sources.native.layout import Layout, Serves, check_structure

__all__ = [
    "Converted",
    "Layout",
    "Serves",
    "detect",
    "layouts",
    "not_a_draft",
    "recognize",
    "speculators_envelope",
    "to_speculators",
    "architecture_of",
]

_SUPPORT = {"common", "layout", "structure", "keys", "dflash_common", "trainers"}


def layouts() -> tuple[Layout, ...]:
    """Every layout defined by a module of this package (LAYOUT or LAYOUTS), servable ones first."""
    found: list[Layout] = []
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name in _SUPPORT:
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [module.LAYOUT] if hasattr(module, "LAYOUT") else list(getattr(module, "LAYOUTS", ()))
    return tuple(sorted(found, key=lambda layout: layout.convert is None))


_LAYOUTS: tuple[Layout, ...] | None = None


def _all() -> tuple[Layout, ...]:
    global _LAYOUTS
    if _LAYOUTS is None:
        _LAYOUTS = layouts()
    return _LAYOUTS


def _names(config: Mapping[str, Any]) -> list[str]:
    archs = config.get("architectures")
    return [a for a in archs if isinstance(a, str)] if isinstance(archs, list) else []


def recognize(config: Mapping[str, Any], *, source: str | None = None) -> tuple[Layout, str | None] | None:
    """The layout of a parsed config and the architecture name it was recognized by, or None.

    Raises ConfigError for a recognized layout specreg refuses, and for a known name whose
    structure its vLLM class does not build."""
    if not isinstance(config, Mapping) or "speculators_model_type" in config or "speculators_config" in config:
        return None
    archs = _names(config)
    for layout in _all():
        if layout.refusal is not None and layout.unnamed is not None and layout.unnamed(config):
            name = next((a for a in archs if a in layout.names), next(iter(layout.names)))
            path = "$.architectures" if name in archs else "$.dflash_config.projector_type"
            raise ConfigError(f"{name}: {layout.refusal(name)}", path, source=source)
    for name in archs:  # vLLM's registry takes the first name it has
        for layout in _all():
            if name in layout.names and (layout.accepts is None or layout.accepts(name, config)):
                if layout.refusal is not None:
                    raise ConfigError(f"{name}: {layout.refusal(name)}", "$.architectures", source=source)
                check_structure(layout, name, config, source)
                return layout, name
    # No layout lists a name: a file whose fields are one layout's own (z-lab's first releases, which
    # name nothing, and trainers that save z-lab's layout under their own class name) is that layout.
    # A known look-alike with other modules is refused by name above (refused.py).
    if not isinstance(config.get("eagle_config"), Mapping):
        for layout in _all():
            if layout.convert is not None and layout.unnamed is not None and layout.unnamed(config):
                check_structure(layout, None, config, source)
                return layout, None
    draft_fields = [k for k in ("dflash_config", "eagle_config") if isinstance(config.get(k), Mapping) and config[k]]
    if archs and draft_fields:
        raise ConfigError(
            f"architectures {archs!r} name no layout specreg reads (nor a class of vLLM {facts.known()[-1]}'s "
            "registry for a "
            f"draft specreg has rules for), so its {draft_fields[0]} is not taken as any trainer's: "
            + not_a_draft(config, reason=False),
            "$.architectures",
            source=source,
        )
    return None


def detect(config: Mapping[str, Any], *, source: str | None = None) -> str | None:
    """The native format of a parsed config, or None (speculators format, or not a draft we know)."""
    found = recognize(config, source=source)
    return None if found is None else found[0].format


def layout_names() -> list[str]:
    """One line per servable layout: its label and the names it answers to."""
    return [f"{layout.label} ({', '.join(sorted(layout.names))})" for layout in _all() if layout.convert is not None]


def not_a_draft(config: Mapping[str, Any], *, reason: bool = True) -> str:
    """The one-line reason a config is none of the layouts specreg reads."""
    archs = config.get("architectures") if isinstance(config, Mapping) else None
    named = f"architectures {archs!r}" if archs else "no architectures"
    head = f"not a draft config specreg reads ({named}, no speculators_model_type); " if reason else ""
    return head + "specreg reads the speculators format (speculators_model_type); " + "; ".join(layout_names())


def to_speculators(
    config: Mapping[str, Any], fmt: str, *, verifier: str | None = None, source: str | None = None
) -> Converted:
    """The speculators-format equivalent of a native config (raises ConfigError naming native paths)."""
    layout = next(layout for layout in _all() if layout.format == fmt and layout.convert is not None)
    return layout.convert(config, verifier, source)
