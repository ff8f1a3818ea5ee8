"""`python -m specreg.transformers refresh`: one transformers release's facts, computed by running that
release's own code, written to specreg/transformers/facts/<version>.json (see the package docstring).

    python -m specreg.transformers refresh 5.25.0 --python ENV/bin/python   # downloads the wheel (pip)
    python -m specreg.transformers refresh --wheel transformers-5.25.0-py3-none-any.whl --python ...
    python -m specreg.transformers refresh --python ENV/bin/python          # the transformers installed there

transformers is imported only in a child interpreter (`--python`, default this one), which must have
transformers' own dependencies (the engine tier's venv has them); the wheel's transformers is put
first on its path, so it wins over an installed one."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from specreg.facts import upstream
from specreg.facts.upstream import RefreshError, text  # noqa: F401 (the command's own names)

#: run in the child interpreter: argv = [out file, the decoder model types whose default keys count]
EXTRACT = """
import json, sys
import transformers
from transformers import CONFIG_MAPPING, PretrainedConfig

out, decoders = sys.argv[1], json.loads(sys.argv[2])
types = sorted(CONFIG_MAPPING.keys())
composite = []
for model_type in types:
    try:
        cls = CONFIG_MAPPING[model_type]
        instance = cls()
    except Exception:  # a config class that needs arguments has no default instance to judge
        continue
    if "text_config" in (getattr(cls, "sub_configs", None) or {}) and not hasattr(instance, "vocab_size"):
        composite.append(model_type)
keys = set(PretrainedConfig().to_dict())
for model_type in decoders:
    keys |= set(CONFIG_MAPPING[model_type]().to_dict())
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"transformers": transformers.__version__, "model_types": types,
               "composite_model_types": sorted(composite), "config_keys": sorted(keys)}, fh)
"""


def extract(python: str, wheel: Path | None = None) -> dict:
    """The facts of the transformers in `wheel` (else the one `python` has installed), as computed by
    its own code in a child `python`; each list it reports must hold names."""
    from specreg.errors import printable
    from specreg.normalization.fields import HF_CONFIG_MODEL_TYPES

    data = upstream.run_child("transformers", EXTRACT, python, wheel, json.dumps(list(HF_CONFIG_MODEL_TYPES)))
    for key in LISTS:
        names = data.get(key)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RefreshError(f"reported $.{key} = {printable(repr(names))[:80]}: not a list of names", source=python)
    return data


#: the lists of names the child reports
LISTS = ("model_types", "composite_model_types", "config_keys")


def refresh(version: str | None, wheel: Path | None, python: str, out: Path) -> Path:
    """Compute and write one release's facts; returns the file written."""
    found = upstream.acquire("transformers", version, wheel, out, lambda w: extract(python, w))
    return upstream.write(out, found["transformers"], found)


def main(argv: list[str] | None = None) -> int:
    from specreg.transformers import FOLDER

    p = argparse.ArgumentParser(prog="python -m specreg.transformers", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    upstream.add_refresh_parser(commands, "transformers", FOLDER, "5.25.0", "transformers' dependencies")
    return upstream.run_refresh(refresh, p.parse_args(argv))
