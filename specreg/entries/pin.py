"""Pinning an entry to a Hub commit: the revision, the config's sha256 and a snapshot beside it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import attrs

from specreg.entries.lookup import entry_path, writable_root
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
    if not path.is_file():
        raise SpecregError(f"no catalog entry {entry_id} (looked for {path})")
    text = path.read_text(encoding="utf-8")
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
        atomic.write_bytes(path, new_text.encode("utf-8"))
    snapshot = entry_path(root, entry_id).with_name(path.name[: -len(".toml")] + SNAPSHOT_SUFFIX)
    atomic.write_bytes(snapshot, fetched.path.read_bytes())
    return Pinned(entry_id, path, fetched.commit, digest, entry.revision, changed)
