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
#: the folder the manifest was written into ({"inode": N}, signed with the rest): a copy (`cp -a`) of the
#: folder has another inode, so its specreg.json proves nothing there; a rename keeps it
FOLDER = "folder"
#: what each file the write made is ({"size", "sha256"}, or {"link": target}), so that a rewrite without
#: --force and `cache clean` tell specreg's files from the user's by content, not by name
WRITTEN = "written"
#: the fields the write adds to a manifest (the rest is what the caller says the write is)
STAMPS = (SIGNATURE, FOLDER, WRITTEN)


def signature(doc: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in doc.items() if k != SIGNATURE}, sort_keys=True).encode()
    return dirwrite.mac(body)


def trusted_manifest(directory: Path, *, dir_fd: int | None = None) -> dict[str, Any] | None:
    """The specreg.json in `directory` (or in the open directory `dir_fd`) if specreg wrote it into this
    very folder with this machine's key, else None (`judged_manifest` says why)."""
    doc, why = judged_manifest(directory, dir_fd=dir_fd)
    return doc if why is None else None


def judged_manifest(directory: Path, *, dir_fd: int | None = None) -> tuple[dict[str, Any] | None, str | None]:
    """The folder's specreg.json and, unless specreg wrote it into this folder with this machine's key,
    why not (one phrase, for `cache list` and a refusal)."""
    import hmac

    doc = _read_manifest(directory, dir_fd=dir_fd)
    if doc is None:
        return None, f"no readable {MANIFEST}"
    if not isinstance(doc.get(SIGNATURE), str):
        return doc, f"its {MANIFEST} is not signed"
    try:
        expected = signature(doc)
    except dirwrite.KeyUnusable:
        return doc, "specreg's key is unusable"  # fails closed: nothing is trusted with a key not specreg's own
    if not hmac.compare_digest(doc[SIGNATURE], expected):
        return doc, f"its {MANIFEST} is not signed with this machine's key (edited, or written elsewhere)"
    folder = doc.get(FOLDER)
    if not isinstance(folder, dict):
        return doc, (
            f"its {MANIFEST} is an earlier specreg's, bound to no folder and recording no content (a copy or an "
            "edit could not be told apart): remove it by hand once nothing serves from it"
        )
    try:
        inode = os.fstat(dir_fd).st_ino if dir_fd is not None else os.stat(directory, follow_symlinks=False).st_ino
    except OSError:
        return doc, "the folder cannot be read"
    if folder.get("inode") != inode:
        return doc, f"its {MANIFEST} was written into another folder (a copy)"
    return doc, None


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


def user_changes(
    doc: dict[str, Any], directory: dirwrite.Directory, only: list[str] | None = None
) -> list[tuple[str, str]]:
    """What the user did to a folder specreg wrote (`doc`, trusted): each name (of `only`, if given) the
    user changed, replaced or added since, with that phrase. Names like a write's leftovers are named elsewhere
    (`foreign_leftovers`)."""
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    records = doc.get(WRITTEN) if isinstance(doc.get(WRITTEN), dict) else {}
    found = []
    for name in directory.entries():
        if name == MANIFEST or dirwrite.looks_like_leftover(name) or (only is not None and name not in only):
            continue
        how = dirwrite.differs(directory.fd, name, records.get(name)) if name in files else "added"
        if how == "replaced":
            was = "a link" if "link" in (records.get(name) or {}) else "a file"
            how = f"replaced: specreg wrote {was}"
        if how:
            found.append((name, how))
    return found


cache_root = dirwrite.cache_root

#: the form of specreg.json: 2 records each file written (size and sha256, or a link's target) and the
#: folder it was written into; an earlier form recorded neither
MANIFEST_FORM = 2


def draft_identity(spec: "Speculator") -> dict[str, Any] | None:
    """What makes a draft this draft: its config's sha256 and where it lives (a Hub repo at a commit,
    whose files the commit fixes; or the resolved local directory) with its weight files, each by
    name, size, inode and mtime (a new checkpoint written over the old one changes them; hashing
    gigabytes on every `serve` would not pay). None for a draft normalized from a dict."""
    origin = spec.origin
    if origin is None or (origin.repo_id is None and origin.path is None):
        return None
    if origin.repo_id:
        return {"repo_id": origin.repo_id, "commit": origin.commit or origin.revision, "config_sha256": origin.sha256}
    from specreg.errors import SpecregError
    from specreg.vllm.draft_weights import local_weight_files

    folder = Path(origin.path).parent
    stamps = []
    try:
        found = local_weight_files(folder)
    except SpecregError:
        found = {}  # refused by name when it is read; it identifies nothing
    for name, path in sorted(found.items()):
        st = os.stat(path)
        stamps.append([name, st.st_size, st.st_ino, st.st_mtime_ns])
    return {"path": os.path.realpath(folder), "config_sha256": origin.sha256, "weights": stamps}


def identity_digest(spec: "Speculator") -> str:
    """16 hex digits of the draft's identity (`draft_identity`): the serve cache folder's key. A draft
    normalized from a dict has none: what the folder is written from (its draft config and speculative
    config) is the key, so two such drafts never share a folder."""
    import hashlib

    identity = draft_identity(spec)
    if identity is None:
        identity = {"draft_config": spec.draft_config_dict(), "speculative_config": spec.speculative_config_dict()}
    # the manifest's form is part of the key: a folder an earlier specreg wrote (no content record, bound to
    # no folder) is never specreg's to rewrite, so after an upgrade `serve` writes a new folder beside it
    # instead of refusing the draft it served before
    body = json.dumps({"manifest": MANIFEST_FORM, **identity}, sort_keys=True, default=str).encode()
    return hashlib.sha256(body).hexdigest()[:16]


def serve_folder(spec: "Speculator", engine: str) -> Path:
    """Where `specreg serve` writes a draft for `engine` (e.g. "vllm0.33.0"): one folder per source and
    weights (`draft_identity`) and engine release, named for the source to be found by eye."""
    origin = spec.origin
    name = (origin.repo_id or Path(origin.path).parent.name or "draft") if origin else "draft"
    safe = re.sub(r"[^A-Za-z0-9._-]", "--", name)
    return cache_root() / "drafts" / f"{safe}-{identity_digest(spec)}-{engine}"


def default_directory(spec: "Speculator") -> Path:
    """Where `specreg serve` materializes a draft: one directory per source, weights and vLLM version."""
    return serve_folder(spec, f"vllm{spec.vllm_version}")


def holds_this_draft(manifest: dict[str, Any], spec: "Speculator", weights: str) -> bool:
    """Whether a trusted manifest is specreg's write of this same draft (`draft_identity`), which
    writing it again with `weights` ("link" or "none") replaces nothing of the user's: copied weights
    are never replaced by links without --force."""
    identity = draft_identity(spec)
    return (
        manifest.get("written_by") == "specreg"
        and identity is not None
        and manifest.get("identity") == identity
        and (manifest.get("weights") != "copy" or weights == "copy")
    )


def same_draft(directory: str | os.PathLike[str], spec: "Speculator", weights: str = "link") -> bool:
    """Whether `directory` holds what specreg materialized from this same draft (source and weights)
    for this same vLLM version, so that writing it again with `weights` loses nothing (re-running
    `serve --dir` then refreshes specreg's own files)."""
    manifest = trusted_manifest(Path(directory).expanduser()) or {}
    return manifest.get("vllm_version") == spec.vllm_version and holds_this_draft(manifest, spec, weights)
