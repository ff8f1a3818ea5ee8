"""Pinning an entry to a Hub commit: the revision, the config's sha256 and a snapshot beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from specreg.entries.lookup import entry_lock, entry_path, read_entry_text, writable_root
from specreg.entries.rules import parse_entry
from specreg.entries.schema import SNAPSHOT_SUFFIX, CatalogError
from specreg.errors import SpecregError


@attrs.frozen
class Pinned:
    entry_id: str
    path: Path
    revision: str
    config_sha256: str
    previous_revision: str | None
    changed: bool

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, value_serializer=lambda _i, _f, v: str(v) if isinstance(v, Path) else v)


def pin(entry_id: str, *, revision: str | None = None, directory: str | os.PathLike[str] | None = None) -> Pinned:
    """Fetch the entry's config.json (at `revision`, else its pinned revision, else the default
    branch) through huggingface_hub and write the commit and sha256 into its TOML file, keeping
    the rest of the file as it was, plus the config snapshot beside it.

    Refuses, writing nothing, when the entry is already pinned and the content at its pinned
    revision no longer matches the pinned sha256 (re-pin explicitly with `revision=`)."""
    import tomlkit

    from specreg import atomic
    from specreg.sources import hub
    from specreg.sources.files import read_config

    root = writable_root(directory)
    path = entry_path(root, entry_id)
    snapshot = path.with_name(path.name[: -len(".toml")] + SNAPSHOT_SUFFIX)
    if not os.path.lexists(path):
        raise SpecregError(f"no catalog entry {entry_id} (looked for {path})")
    for where in (path, snapshot):  # what loading refuses to read, pinning neither reads nor writes
        _inside_catalog(root, where, entry_id)
    try:
        text = read_entry_text(path, root)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise SpecregError(f"{path}: cannot read the entry: {exc}", source=entry_id) from None
    entry, found = parse_entry(text, file=str(path))
    if found or entry is None:
        raise CatalogError([(str(path), p) for p in found])
    if revision is not None:
        hub.check_revision(revision, source=entry_id)
    asked = revision or entry.revision
    fetched = hub.fetch_config(entry_id, asked, source=entry_id)
    if fetched.commit is None:
        raise SpecregError(f"the Hub did not say which commit {asked or 'the default branch'} is", source=entry_id)
    _config, digest = read_config(fetched.path, source=f"{entry_id}/config.json")
    if revision is None and entry.config_sha256 and digest != entry.config_sha256:
        raise SpecregError(
            f"config.json at the pinned revision {entry.revision} has sha256 {digest}, not the pinned "
            f"{entry.config_sha256}: the content changed under the pin; nothing was written. Check the "
            "change, then re-pin with --revision",
            source=entry_id,
        )
    changed = (entry.revision, entry.config_sha256) != (fetched.commit, digest)
    new_text = None
    if changed:
        doc = tomlkit.parse(text)
        doc["revision"] = fetched.commit
        doc["config_sha256"] = digest
        if entry.status == "unpinned" or (entry.status == "verified" and entry.revision != fetched.commit):
            doc["status"] = "pinned"  # a verification was of the old pin
        new_text = tomlkit.dumps(doc)
        parsed, problems_ = parse_entry(new_text, file=str(path))
        if problems_ or parsed is None:  # never write a file that `catalog check` would refuse
            raise CatalogError([(str(path), p) for p in problems_])
    # The snapshot first, then the pin that names its sha256, each replaced whole, under the entry
    # folder's lock: a load that reads the pin and finds the snapshot differing takes the lock and
    # reads both again (lookup.pinned_copy), so a load racing a pin sees the old pair or the new one.
    content = fetched.path.read_bytes()
    with entry_lock(path.parent, exclusive=True):
        atomic.write_bytes(snapshot, content)
        if new_text is not None:
            atomic.write_bytes(path, new_text.encode("utf-8"))
    return Pinned(entry_id, path, fetched.commit, digest, entry.revision, changed)


def _inside_catalog(root: Path, path: Path, entry_id: str) -> None:
    """Refuse an entry file or snapshot that is, or lies under, a link out of the catalog directory."""
    real, real_root = path.resolve(), root.resolve()
    if not real.is_relative_to(real_root):
        raise SpecregError(
            f"{path} leads to {real}, outside the catalog directory {root}: refusing to read or write "
            "through a link (loading refuses it too); replace the link with the file itself",
            source=entry_id,
        )
