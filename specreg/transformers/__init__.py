"""transformers, as the config readers vLLM loads a draft with see it: the facts read from each
transformers release (specreg/transformers/facts/<version>.json), beside vLLM's (specreg/vllm/facts/)
and SGLang's (specreg/sglang/rules/). Each file is written by one command from that release's wheel
(`python -m specreg.transformers refresh VERSION`, specreg/transformers/refresh.py):

- `model_types`: the keys of its ``CONFIG_MAPPING`` (models/auto/configuration_auto.py), the types
  whose config class it builds;
- `composite_model_types`: those whose class has a ``text_config`` sub-config and whose default
  instance has no ``vocab_size`` (vision-language, audio, ...: the language fields sit under
  text_config, where vLLM's draft classes do not look);
- `config_keys`: the keys of ``PretrainedConfig().to_dict()`` and of each default decoder config
  `specreg.normalization.fields.HF_CONFIG_MODEL_TYPES` names.

The facts used are the installed transformers' where a file for it is committed, else the newest
committed (transformers is never imported: its version is read from its dist-info folder's name).
Reading them imports nothing heavy and happens on first use."""

from __future__ import annotations

import json
import os
import sys
from functools import cache
from pathlib import Path
from typing import Any

from packaging.version import InvalidVersion, Version

#: the committed facts, one file per transformers release
FOLDER = Path(__file__).resolve().parent / "facts"


def known() -> tuple[str, ...]:
    """The transformers releases with committed facts, oldest first."""
    return tuple(sorted((p.stem for p in FOLDER.glob("*.json")), key=Version))


def installed() -> str | None:
    """The version of the transformers found on sys.path (from its `transformers-X.dist-info` folder),
    or None."""
    for entry in sys.path:
        try:
            names = os.listdir(entry or ".")
        except OSError:
            continue
        if "transformers" not in names:
            continue
        for name in names:
            if name.startswith("transformers-") and name.endswith(".dist-info"):
                try:
                    return str(Version(name[len("transformers-") : -len(".dist-info")]))
                except InvalidVersion:
                    return None
        return None
    return None


@cache
def target() -> str:
    """The release whose facts are used: the installed one when its facts are committed, else the
    newest committed."""
    here = installed()
    return here if here in known() else known()[-1]


@cache
def facts(version: str | None = None) -> dict[str, Any]:
    """The committed facts of one transformers release (default: `target()`)."""
    version = version or target()
    return json.loads((FOLDER / f"{version}.json").read_text(encoding="utf-8"))
