"""A draft's weight files: where they are (beside a local config, or in the Hub repo it came from, fetched
into the Hugging Face cache on demand), and the rules every name and file must meet before specreg
reads, links or copies it (plain names, weight suffixes only, regular files or links that stay inside
the draft's directory)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from specreg.errors import ConfigError, FileNotFoundOnHubError, SpecregError, show_value
from specreg.sources import hub
from specreg.sources.files import file_kind, link_outside

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: Where a draft's weights may live, in the order they are looked for.
SAFETENSORS_INDEX = "model.safetensors.index.json"


WEIGHT_CANDIDATES = (SAFETENSORS_INDEX, "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin")


PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")


MAX_INDEX_BYTES = 16 * 1024 * 1024


#: what a weight index may name: weight files only. Anything else (config.json, which would replace
#: the normalized config with the source's; a .py file; a tokenizer) is refused, never fetched or linked.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _plain_name(name: Any, *, where: str, path: str) -> str:
    if not isinstance(name, str) or not PLAIN_NAME.match(name) or ".." in name:
        raise ConfigError(
            f"{json.dumps(name)} is not a plain file name in the draft directory "
            "(no directories, '..' or absolute paths)",
            path,
            source=where,
        )
    return name


def _weight_name(name: Any, *, where: str, path: str) -> str:
    name = _plain_name(name, where=where, path=path)
    stem = name.rsplit(".", 1)[0]
    if not name.endswith(WEIGHT_SUFFIXES) and stem != "mask_embedding":
        raise ConfigError(
            f"{json.dumps(name)} is not a weight file ({', '.join(WEIGHT_SUFFIXES)}): a weight index "
            "names weight files only, and specreg fetches or links nothing else",
            path,
            source=where,
        )
    return name


def shards_of(index_path: Path, *, where: str) -> list[str]:
    """The weight file names a safetensors/bin index refers to, each checked to be a plain name."""
    with open(index_path, "rb") as f:
        data = f.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:
        raise ConfigError(f"larger than {MAX_INDEX_BYTES} bytes: not a weight index", "$", source=where)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid JSON: {exc}", "$", source=where) from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConfigError("a weight index needs a non-empty object 'weight_map'", "$.weight_map", source=where)
    names: list[str] = []
    for tensor, name in weight_map.items():
        _weight_name(name, where=where, path=f"$.weight_map[{json.dumps(tensor)}]")
        if name not in names:
            names.append(name)
    return names


def local_weight_files(directory: Path) -> dict[str, Path]:
    """Weight files beside a local config.json (name -> path): regular files, or links that stay
    inside the draft directory (anything else is refused by name, never read or linked)."""
    for candidate in WEIGHT_CANDIDATES:
        path = weight_file(directory, candidate)
        if path is None:
            continue
        if candidate.endswith(".index.json"):
            return {candidate: path, **index_shards(directory, path)}
        if candidate == "model.safetensors":
            return safetensors_files(directory)  # sharded files without an index are served too
        return {candidate: path}
    return {}


def weight_file(directory: Path, name: str) -> Path | None:
    """directory/name if it is a regular file there, or a link resolving to a regular file inside
    `directory`; None if there is nothing by that name; a SpecregError for anything else (a link out
    of the draft directory, a FIFO, a device, a directory)."""
    import stat

    path = directory / name
    if not os.path.lexists(path):
        return None
    real = link_outside(path, directory)
    if real is not None:
        raise SpecregError(
            f"{path} is a link to {real}, outside the draft directory {os.path.realpath(directory)}: "
            "refusing to read it (copy the file into the directory)",
            source=str(path),
        )
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise SpecregError(f"{path}: {exc.strerror}", source=str(path)) from None
    if not stat.S_ISREG(mode):
        raise SpecregError(f"{path} is {file_kind(mode)}, not a weight file: refusing to read it", source=str(path))
    return path


def index_shards(directory: Path, index: Path) -> dict[str, Path]:
    """The weight files a weight index names, each by the rule of weight_file (all must be there)."""
    found = {}
    for name in shards_of(index, where=str(index)):
        shard = weight_file(directory, name)
        if shard is None:
            raise ConfigError(f"names {name}, which is not in {directory}", "$.weight_map", source=str(index))
        found[name] = shard
    return found


def safetensors_files(directory: Path) -> dict[str, Path]:
    """Every *.safetensors with a plain name beside a config, by the rule of weight_file (vLLM globs
    them when there is no index)."""
    names = sorted(p.name for p in directory.glob("*.safetensors") if PLAIN_NAME.match(p.name))
    return {name: shard for name in names if (shard := weight_file(directory, name)) is not None}


def _hub_weights(spec: "Speculator", progress: Callable[[str], None]) -> dict[str, Path]:
    """Weight files of the Hub repo the config came from, fetched into the HF cache on demand."""
    origin = spec.origin
    revision = origin.commit or origin.revision
    for candidate in WEIGHT_CANDIDATES:
        try:
            path = hub.fetch_file(origin.repo_id, candidate, revision, source=origin.source, quiet_missing=True)
        except FileNotFoundOnHubError:
            continue
        if candidate.endswith(".index.json"):
            found = {candidate: path}
            names = shards_of(path, where=f"{origin.repo_id}/{candidate}")
            for i, name in enumerate(names, 1):
                progress(f"fetching {name} ({i}/{len(names)}) from {origin.repo_id}")
                found[name] = hub.fetch_file(origin.repo_id, name, revision, source=origin.source)
            return found
        progress(f"fetched {candidate} from {origin.repo_id}")
        return {candidate: path}
    return {}


def check_weight_mode(weights: str) -> None:
    if not isinstance(weights, str) or weights not in ("link", "copy", "none"):
        raise SpecregError(f"weights must be 'link', 'copy' or 'none', got {show_value(weights, 40)}")


def weight_sources(
    spec: "Speculator", weights: str, say: Callable[[str], None], *, required: bool = True
) -> dict[str, Path]:
    """The draft's weight files (name -> path; fetched into the HF cache for a Hub draft), or {} for
    weights="none", or when there are none and they are not `required`. (Writing into the draft's own
    directory is refused before this, by `refuse_source_as_target`.)"""
    if weights == "none":
        return {}
    origin = spec.origin
    if origin is None or (origin.repo_id is None and origin.path is None):
        raise SpecregError(
            "the draft was normalized from a dict, so there are no weights to link; use weights='none' (--config-only)"
        )
    if origin.repo_id:
        sources = _hub_weights(spec, say)
    else:
        sources = local_weight_files(Path(origin.path).parent)
    if not sources and not required:
        return {}
    if not sources:
        where = origin.repo_id or str(Path(origin.path).parent)
        error = FileNotFoundOnHubError if origin.repo_id else SpecregError
        raise error(
            f"no weight files in {where} (looked for {', '.join(WEIGHT_CANDIDATES)}); "
            "weights='none' (--config-only) writes the config alone",
            source=origin.source,
        )
    for name in sources:
        _plain_name(name, where=origin.source, path="$")
    return sources
