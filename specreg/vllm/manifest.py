"""The signed specreg.json that specreg writes into a draft directory, and what it answers: whether
specreg wrote the directory (HMAC under this machine's key: a planted file proves nothing), whether it
holds this same draft, and where `specreg serve` materializes a draft by default."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from specreg import dirwrite
from specreg.errors import ConfigError
from specreg.sources.files import MANIFEST, read_config

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: the manifest field that proves specreg wrote it here: HMAC-SHA256 of the rest under specreg's key
#: (dirwrite.key), so a planted specreg.json cannot make --force delete files specreg did not write
SIGNATURE = "signature"


def signature(doc: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in doc.items() if k != SIGNATURE}, sort_keys=True).encode()
    return dirwrite.mac(body)


def trusted_manifest(directory: Path, *, dir_fd: int | None = None) -> dict[str, Any] | None:
    """The specreg.json in `directory` (or in the open directory `dir_fd`) if specreg wrote it with this
    machine's key, else None."""
    return _trusted(_read_manifest(directory, dir_fd=dir_fd))


def _trusted(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    import hmac

    if doc is None or not isinstance(doc.get(SIGNATURE), str):
        return None
    try:
        expected = signature(doc)
    except dirwrite.KeyUnusable:
        return None  # fails closed: nothing is trusted with a key that is not specreg's own
    return doc if hmac.compare_digest(doc[SIGNATURE], expected) else None


def _read_manifest(directory: Path, *, dir_fd: int | None = None) -> dict[str, Any] | None:
    """The specreg.json in `directory` (or in the open directory `dir_fd`) as a JSON object, or None
    (missing, a link, unreadable, not an object)."""
    manifest = directory / MANIFEST
    if dir_fd is None and (not manifest.is_file() or manifest.is_symlink()):
        return None
    try:
        return read_config(Path(MANIFEST) if dir_fd is not None else manifest, source=str(manifest), dir_fd=dir_fd)[
            0
        ]  # capped, strict JSON, an object
    except ConfigError:
        return None


cache_root = dirwrite.cache_root


def default_directory(spec: "Speculator") -> Path:
    """Where `specreg serve` materializes a draft: one directory per source, content and vLLM version."""
    origin = spec.origin
    name = (origin.repo_id or Path(origin.path).parent.name or "draft") if origin else "draft"
    digest = (origin.sha256 or "")[:16] if origin else ""
    safe = re.sub(r"[^A-Za-z0-9._-]", "--", name)
    return cache_root() / "drafts" / f"{safe}-{digest}-vllm{spec.vllm_version}"


def same_draft(directory: str | os.PathLike[str], spec: "Speculator") -> bool:
    """Whether `directory` holds what specreg materialized from this same source content for this
    same vLLM version (re-running `serve --dir` then refreshes specreg's own files)."""
    manifest = trusted_manifest(Path(directory).expanduser()) or {}
    source = manifest.get("source")
    return (
        isinstance(source, dict)
        and spec.origin is not None
        and bool(spec.origin.sha256)
        and source.get("sha256") == spec.origin.sha256
        and manifest.get("vllm_version") == spec.vllm_version
        and manifest.get("written_by") == "specreg"
    )
