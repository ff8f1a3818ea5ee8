"""`specreg catalog check`: every problem of every entry, and of the config snapshots beside them."""

from __future__ import annotations

import os
from typing import Any

import attrs

from specreg.entries.lookup import read_catalog
from specreg.entries.rules import warnings
from specreg.errors import Problem


@attrs.frozen
class CheckReport:
    entries: int
    problems: tuple[tuple[str, Problem], ...]
    warnings: tuple[tuple[str, Problem], ...]

    def to_dict(self) -> dict[str, Any]:
        # a Problem is a slotted class, not attrs: each (file, problem) pair written out by hand
        def rows(found: tuple[tuple[str, Problem], ...]) -> list[dict[str, str]]:
            return [{"file": str(file), "path": p.path, "message": p.message} for file, p in found]

        return {"entries": self.entries, "problems": rows(self.problems), "warnings": rows(self.warnings)}


def check(directory: str | os.PathLike[str] | None = None) -> CheckReport:
    """Every problem of every entry: schema, ids, algorithms, pins, and stored config snapshots
    (which must match their pinned sha256 and, in the speculators format, normalize without error
    findings). Offline: nothing is fetched."""
    from pathlib import Path

    from specreg.entries.lookup import default_registry
    from specreg.errors import ConfigError
    from specreg.sources.files import link_outside, read_config
    from specreg.normalization.core import normalize

    entries, found = read_catalog(directory)
    root = Path(directory).expanduser() if directory is not None else default_registry()
    warned: list[tuple[str, Problem]] = []
    for entry in entries:
        warned += [(entry.path, w) for w in warnings(entry)]
        snap = entry.snapshot_path
        if snap is None or not snap.is_file():
            continue
        where = str(snap)
        if (real := link_outside(snap, root)) is not None:  # as an entry file linked out: never read
            found.append((where, Problem("$", f"leads to {real}, outside the catalog directory {root}: not read")))
            continue
        try:
            config, digest = read_config(snap, source=where)
        except ConfigError as exc:
            found += [(where, p) for p in exc.problems]
            continue
        if entry.config_sha256 and digest != entry.config_sha256:
            found.append(
                (where, Problem("$", f"sha256 {digest} is not the pinned config_sha256 {entry.config_sha256}"))
            )
        if entry.format != "speculators":
            continue
        try:
            spec = normalize(config, source=where)
        except ConfigError as exc:
            found += [(where, p) for p in exc.problems]
            continue
        found += [(where, Problem(f.path or "$", f"{f.code}: {f.message}")) for f in spec.errors]
    return CheckReport(entries=len(entries), problems=tuple(found), warnings=tuple(warned))
