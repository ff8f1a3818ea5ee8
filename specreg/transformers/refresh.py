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
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from specreg.errors import SpecregError

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


class RefreshError(SpecregError):
    """The facts could not be computed: the wheel, the download or the child interpreter failed."""


def extract(python: str, wheel: Path | None = None) -> dict:
    """The facts of the transformers in `wheel` (else the one `python` has installed), as computed by
    its own code in a child `python`."""
    from specreg.normalization.fields import HF_CONFIG_MODEL_TYPES

    with tempfile.TemporaryDirectory(prefix="specreg-transformers-") as tmp:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        env["TRANSFORMERS_VERBOSITY"] = "error"
        if wheel is not None:
            try:
                with zipfile.ZipFile(wheel) as zf:
                    zf.extractall(Path(tmp) / "wheel")
            except (OSError, zipfile.BadZipFile) as exc:
                raise RefreshError(f"not a readable wheel ({exc})", source=str(wheel)) from None
            env["PYTHONPATH"] = str(Path(tmp) / "wheel")
        out = Path(tmp) / "facts.json"
        argv = [python, "-c", EXTRACT, str(out), json.dumps(list(HF_CONFIG_MODEL_TYPES))]
        try:
            run = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=900)
        except OSError as exc:
            raise RefreshError(f"cannot run it ({exc.strerror or exc})", source=python) from None
        if run.returncode != 0:
            last = (run.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise RefreshError(f"could not read transformers' facts: {last}", source=python)
        found = read_found(out, python)
    if wheel is not None and not Path(wheel).name.startswith(f"transformers-{found['transformers']}-"):
        raise RefreshError(
            f"gave transformers {found['transformers']}: is a transformers package installed in a way "
            "that wins over the wheel's?",
            source=str(wheel),
        )
    return found


#: the most the child's answer may hold (the committed 5.25.0.json is 20 KiB)
MAX_FOUND_BYTES = 16 * 1024 * 1024
#: the lists of names the child reports
LISTS = ("model_types", "composite_model_types", "config_keys")


def read_found(out: Path, python: str) -> dict:
    """What the child wrote, checked: an object whose `transformers` is a version in its canonical
    spelling (it names the file written: "../x" would place it elsewhere) and whose lists hold names;
    anything else is one error naming the interpreter, the JSON path and the value."""
    from packaging.version import InvalidVersion, Version

    from specreg.errors import printable
    from specreg.sources.files import read_regular

    try:
        data = json.loads(read_regular(out, MAX_FOUND_BYTES).decode("utf-8"))
    except FileNotFoundError:
        raise RefreshError("exited 0 but wrote no facts (is it a Python with transformers?)", source=python) from None
    except (OSError, ValueError) as exc:  # invalid JSON, not UTF-8, too large, not a file
        raise RefreshError(f"wrote no facts file that reads as JSON ({exc})", source=python) from None
    if not isinstance(data, dict):
        raise RefreshError(f"reported $ = {printable(repr(data))[:80]}: not an object", source=python)
    version = data.get("transformers")
    try:
        canonical = isinstance(version, str) and str(Version(version)) == version
    except InvalidVersion:
        canonical = False
    if not canonical:
        raise RefreshError(
            f"reported $.transformers = {printable(repr(version))[:80]}: not a transformers version", source=python
        )
    for key in LISTS:
        names = data.get(key)
        if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
            raise RefreshError(f"reported $.{key} = {printable(repr(names))[:80]}: not a list of names", source=python)
    return data


def download(version: str, into: Path) -> Path:
    """transformers==version's wheel, downloaded by pip (no dependencies)."""
    run = subprocess.run(
        [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:", f"transformers=={version}",
         "-d", str(into)],
        capture_output=True,
        text=True,
        timeout=900,
    )  # fmt: skip
    wheels = sorted(into.glob(f"transformers-{version}-*.whl"))
    if run.returncode != 0 or not wheels:
        last = (run.stderr.strip().splitlines() or ["no wheel"])[-1]
        raise RefreshError(f"pip could not download transformers {version}: {last}", source=version)
    return wheels[0]


def text(found: dict) -> str:
    """The committed file's text: one string per line, so that two releases diff line by line."""
    return json.dumps(found, indent=1, sort_keys=True) + "\n"


def refresh(version: str | None, wheel: Path | None, python: str, out: Path) -> Path:
    """Compute and write one release's facts; returns the file written."""
    from specreg import atomic

    check_out(out)
    with tempfile.TemporaryDirectory(prefix="specreg-transformers-wheel-") as tmp:
        if version is not None and wheel is None:
            wheel = download(version, Path(tmp))
        found = extract(python, wheel)
    if version is not None and found["transformers"] != version:
        raise RefreshError(f"asked for transformers {version}, read {found['transformers']}", source=version)
    target = out / f"{found['transformers']}.json"
    try:
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(target, text(found).encode("utf-8"))
    except OSError as exc:
        raise RefreshError(f"cannot write {target}: {exc.strerror or exc}", source=str(out)) from None
    return target


def check_out(out: Path) -> None:
    """--out must be a directory or not exist yet (a link, even to a directory, or a file is refused,
    as every writer of specreg refuses them); checked before the wheel is downloaded."""
    from specreg.errors import printable

    if out.is_symlink():
        raise RefreshError(
            f"is a link to {printable(os.path.realpath(out))}: give the directory itself", source=str(out)
        )
    if out.exists() and not out.is_dir():
        raise RefreshError("is not a directory: --out names the folder <version>.json is written into", source=str(out))


def main(argv: list[str] | None = None) -> int:
    from specreg.transformers import FOLDER

    p = argparse.ArgumentParser(prog="python -m specreg.transformers", description=__doc__.split("\n\n")[0])
    commands = p.add_subparsers(dest="command", required=True)
    r = commands.add_parser("refresh", help="compute one transformers release's facts from its wheel and write them")
    r.add_argument("version", nargs="?", help="the release to download (pip) and read, e.g. 5.25.0")
    r.add_argument("--wheel", type=Path, help="a downloaded transformers wheel to read instead")
    r.add_argument(
        "--python",
        default=sys.executable,
        help="the interpreter that runs transformers (it needs transformers' dependencies; default: this one)",
    )
    r.add_argument("--out", type=Path, default=FOLDER, help=f"where to write <version>.json (default {FOLDER})")
    args = p.parse_args(argv)
    try:
        written = refresh(args.version, args.wheel, args.python, args.out)
    except SpecregError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return 2
    except OSError as exc:  # the machine said no (a temporary folder, a full disk): one line, not a traceback
        print(f"error: {exc.filename or ''}: {exc.strerror or exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted: nothing was written", file=sys.stderr)
        return 130
    print(written)
    return 0
