"""`convert`: a native draft (z-lab DFlash, DeepSpec DSpark, native EAGLE-3) as a speculators-format
directory: its config.json in the speculators format, the weight files linked beside it (or
copied, or left out), and specreg.json saying where it came from.

The converted file states what the native one implied (the layer-id convention, the anchor
rule, the mask) explicitly, so specreg, vLLM's speculators mapping and the speculators library all
read the draft as it was trained. Weight files are linked as they are (names are not rewritten).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Mapping

import attrs

from specreg.sources import native
from specreg.errors import SpecregError
from specreg.sources.files import MANIFEST
from specreg.vllm.draft_weights import check_weight_mode, weight_sources
from specreg.vllm.materialize import refuse_before_download, refuse_source_as_target, write_locked
from specreg.normalization.speculator import Speculator, thaw


@attrs.frozen
class ConvertedDirectory:
    directory: Path
    format: str
    files: tuple[str, ...]
    #: the verifier the twin names (None: none was given, and the twin says so in specreg.json)
    verifier: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, value_serializer=lambda _i, _f, v: str(v) if isinstance(v, Path) else v)


def write_twin(
    spec: Speculator,
    directory: str | os.PathLike[str],
    *,
    source: str,
    verifier: str | None = None,
    weights: str = "link",
    force: bool = False,
    progress: Callable[[str], None] | None = None,
    served_beside: Mapping[str, Any] | None = None,
) -> ConvertedDirectory:
    """Write the speculators-format twin of a loaded native draft into `directory` (empty unless
    force). `specreg.convert(SOURCE, DIR)` loads the draft, checks it against a given verifier and
    calls this; `served_beside` (that check, as materialize records it) goes into specreg.json."""
    check_weight_mode(weights)
    say = progress or (lambda _msg: None)
    if spec.format == "speculators":
        raise SpecregError(
            "already in the speculators format: nothing to convert (materialize writes a vLLM-ready directory)",
            source=str(source),
        )
    converted = native.to_speculators(
        thaw(spec.source_config), spec.format, verifier=verifier or spec.verifier, source=str(source)
    )
    if converted.causal_everywhere:
        raise SpecregError(
            f"{converted.causal_everywhere} says every layer is causal, full attention included: the "
            "speculators format trains full-attention layers bidirectional, so this draft has no "
            "speculators-format twin (materialize serves it where vLLM can)",
            source=str(source),
        )
    layer_type = converted.config["transformer_layer_config"].get("model_type")
    if converted.format == "eagle3-native" and layer_type not in (None, "llama", "qwen3"):
        raise SpecregError(
            f"$.model_type is {layer_type!r}: vLLM's speculators mapping serves Eagle-3 twins with "
            "llama or qwen3 layers only, so the twin would be refused; vLLM serves the native file "
            "itself through LlamaForCausalLMEagle3 (specreg materialize writes that)",
            source=str(source),
        )
    name = converted.config["speculators_config"]["verifier"]["name_or_path"]
    if name and Path(name).expanduser().is_dir():  # a local verifier: its architectures are known
        from specreg.sources.verifier import read_verifier

        converted.config["speculators_config"]["verifier"]["architectures"] = list(
            read_verifier(name, source=name).architectures
        )
    target = Path(directory).expanduser().absolute()
    refuse_source_as_target(spec, target)
    refuse_before_download(target, force)
    sources = weight_sources(spec, weights, say, required=False)  # a config alone converts too
    if weights != "none" and not sources:
        say("no weight files found beside the config: wrote the config alone")
    manifest = {
        "written_by": "specreg convert",
        "source": spec.origin.to_dict() if spec.origin else None,
        "format": spec.format,
        "verifier": converted.config["speculators_config"]["verifier"]["name_or_path"],
        "weights": weights if sources else "none",
        "files": ["config.json", *sources, MANIFEST],
    }
    if served_beside is not None:
        manifest["served_beside"] = dict(served_beside)
    if not manifest["verifier"]:
        # vLLM's speculators path refuses a twin whose verifier.name_or_path is null: never write one
        raise SpecregError(
            "the draft names no verifier, and vLLM's speculators path refuses a twin without one "
            "(speculators_config.verifier.name_or_path); pass --verifier ORG/NAME (verifier= in "
            "Python), the verifier the draft was trained for: nothing written",
            source=str(source),
        )
    write_locked(target, force, converted.config, sources, weights, manifest, say)
    return ConvertedDirectory(
        directory=target, format=spec.format, files=tuple(manifest["files"]), verifier=manifest["verifier"] or None
    )
