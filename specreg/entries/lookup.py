"""Finding entries: the catalog's folder (`registry/`, installed as `specreg.catalog_data`, or
SPECREG_REGISTRY / `--registry DIR`), one entry by id, every entry, and `Catalog`'s filters.

    import specreg
    cat = specreg.catalog()
    cat["RedHatAI/Qwen3-8B-speculator.eagle3"].baselines
    cat.filter(algorithm="dflash", verifier="Qwen/Qwen3-8B")
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path
from typing import Any, Iterator

from collections.abc import Mapping

import attrs

from specreg.entries.rules import parse_entry
from specreg.entries.schema import CatalogError, Entry
from specreg.errors import Problem, SpecregError
from specreg.sources.files import FileTooLarge, link_outside, read_regular

#: an entry is a page of TOML; anything larger is not read whole
MAX_ENTRY_BYTES = 1024 * 1024


def read_entry_text(path: Path, root: Path | None = None) -> str:
    """An entry file's text: a regular file (or a link to one inside `root`), at most 1 MiB, UTF-8.
    Anything else is a ValueError saying what it is (a FIFO is not opened for reading)."""
    try:
        data = read_regular(path, MAX_ENTRY_BYTES, root=root, root_name="the catalog directory")
    except FileTooLarge:
        raise ValueError(f"larger than {MAX_ENTRY_BYTES} bytes: not a catalog entry") from None
    return data.decode("utf-8")


def _natural_key(text: str) -> list[Any]:
    return [(0, int(part), "") if part.isdigit() else (1, 0, part.lower()) for part in re.split(r"(\d+)", text)]


def default_registry() -> Path:
    """The catalog shipped with specreg (installed as the `specreg.catalog_data` package data)."""
    env = os.environ.get("SPECREG_REGISTRY")
    if env:
        return Path(env).expanduser()
    from importlib.resources import files

    return Path(str(files("specreg.catalog_data")))


def _root(directory: str | os.PathLike[str] | None) -> Path:
    """A catalog directory given by the caller, else the shipped one."""
    return Path(directory).expanduser() if directory is not None else default_registry()


def writable_root(directory: str | os.PathLike[str] | None) -> Path:
    """The catalog directory a writing command (pin, --update-baseline) may change.

    The shipped catalog of an installed specreg lives in site-packages, which a reinstall replaces and
    other users share: writing there is refused (nothing is written) unless the caller names a
    directory (`--registry DIR` / SPECREG_REGISTRY). An editable install's catalog is the checkout's."""
    root = _root(directory)
    if directory is None and not os.environ.get("SPECREG_REGISTRY") and _installed(root):
        raise SpecregError(
            f"refusing to write into the catalog of the installed specreg package ({root}): copy it "
            f"(cp -r {root} DIR) and pass --registry DIR, or set SPECREG_REGISTRY=DIR"
        )
    return root


def _installed(path: Path) -> bool:
    return any(part in ("site-packages", "dist-packages") for part in path.resolve().parts)


def entry_path(registry_dir: Path, entry_id: str) -> Path:
    org, _, name = entry_id.partition("/")
    return registry_dir / org / f"{name}.toml"


@attrs.frozen
class Catalog(Mapping[str, Entry]):
    """The entries of one registry directory, natural-sorted by id: a Mapping of id -> Entry
    (`catalog()["RedHatAI/..."]`, `list(catalog())` gives the ids, `.values()` the entries). Ids match
    as the Hub's do, whatever their case; a missing id raises `UnknownEntry` (a KeyError) naming the
    closest id."""

    directory: Path
    entries: tuple[Entry, ...]

    def __iter__(self) -> Iterator[str]:
        return iter(e.id for e in self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def __contains__(self, entry_id: object) -> bool:
        return isinstance(entry_id, str) and self.get(entry_id) is not None

    def __getitem__(self, entry_id: str) -> Entry:
        entry = self.get(entry_id)
        if entry is None:
            raise UnknownEntry(entry_id, self.closest(entry_id))
        return entry

    def get(self, entry_id: str, default: Entry | None = None) -> Entry | None:  # type: ignore[override]
        if not isinstance(entry_id, str):
            return default
        key = entry_id.lower()
        return next((e for e in self.entries if e.id.lower() == key), default)

    def closest(self, entry_id: str) -> str | None:
        """The id most like `entry_id` (for "did you mean"), or None."""
        return _closest(entry_id, [e.id for e in self.entries])

    def match(self, pattern: str) -> list[Entry]:
        """The entries whose id matches a shell-style pattern, case-insensitively: `*dflash*`,
        `RedHatAI/*eagle3`."""
        import fnmatch

        return [e for e in self.entries if fnmatch.fnmatchcase(e.id.lower(), pattern.lower())]

    def filter(
        self,
        *,
        algorithm: str | None = None,
        verifier: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        pattern: str | None = None,
    ) -> list[Entry]:
        chosen = self.match(pattern) if pattern is not None else self.entries
        return [
            e
            for e in chosen
            if (algorithm is None or e.algorithm == algorithm)
            and (verifier is None or e.verifier.id == verifier)
            and (tag is None or tag in e.tags)
            and (status is None or e.status == status)
        ]


class UnknownEntry(KeyError):
    """No catalog entry has this id (a KeyError, so `catalog()[id]` keeps Mapping's contract)."""

    def __init__(self, entry_id: str, closest: str | None) -> None:
        super().__init__(entry_id)
        self.entry_id, self.closest_id = entry_id, closest

    def __str__(self) -> str:
        return f"no catalog entry {self.entry_id}" + (f" (did you mean {self.closest_id}?)" if self.closest_id else "")


def _files(directory: Path) -> list[Path]:
    """Every registry/<org>/<name>.toml, whatever it is: one that cannot be an entry (a FIFO, a
    directory, a link out of the catalog) is reported by read_catalog, never dropped silently."""
    return sorted(directory.glob("*/*.toml"))


def read_catalog(directory: str | os.PathLike[str] | None = None) -> tuple[list[Entry], list[tuple[str, Problem]]]:
    """Every entry that could be built, and every problem in every file (file, problem)."""
    root = _root(directory)
    if not root.is_dir():
        raise SpecregError(f"{root}: not a directory (a catalog is registry/<org>/<name>.toml)")
    entries: list[Entry] = []
    found: list[tuple[str, Problem]] = []
    seen: dict[str, str] = {}
    for path in _files(root):
        file = str(path)
        try:
            text = read_entry_text(path, root)
        except (OSError, UnicodeDecodeError, ValueError) as exc:
            found.append((file, Problem("$", f"cannot read: {exc}")))
            continue
        entry, problems_ = parse_entry(text, file=file)
        found += [(file, p) for p in problems_]
        if entry is not None:
            key = entry.id.lower()  # the Hub's repo ids are case-insensitive: Org/Dup is org/dup
            if key in seen:
                found.append(
                    (file, Problem("$.id", f"{entry.id} is also the id of {seen[key]} (repo ids are case-insensitive)"))
                )
            seen[key] = file
            entries.append(entry)
    entries.sort(key=lambda e: _natural_key(e.id))
    return entries, found


def catalog(directory: str | os.PathLike[str] | None = None) -> Catalog:
    """The catalog (the shipped one by default). Raises CatalogError listing every problem."""
    entries, found = read_catalog(directory)
    if found:
        raise CatalogError(found)
    root = _root(directory)
    return Catalog(directory=root, entries=tuple(entries))


def _closest(entry_id: str, ids: list[str]) -> str | None:
    """The id most like `entry_id`, compared as the Hub compares ids (whatever their case), or None."""
    import difflib

    by_lower = {i.lower(): i for i in ids}
    found = difflib.get_close_matches(entry_id.lower(), list(by_lower), n=1, cutoff=0.6)
    return by_lower[found[0]] if found else None


def closest_id(entry_id: str, directory: str | os.PathLike[str] | None = None) -> str | None:
    """The catalog id a mistyped `entry_id` most likely meant (None when it is one exactly, or none is
    close): for the "did you mean" of every command that takes a catalog id. The entries that parse are
    compared; a malformed one elsewhere in the catalog does not hide the others."""
    ids = [e.id for e in read_catalog(directory)[0]]
    if entry_id in ids:
        return None
    return _closest(entry_id, ids)


def lookup(entry_id: str, directory: Path | None = None) -> Entry | None:
    """One entry by id, reading only its own file (what `load` uses: no scan of the catalog).
    A malformed entry file raises CatalogError."""
    root = _root(directory)
    path = entry_path(root, entry_id)
    if not os.path.lexists(path):
        return None
    try:
        text = read_entry_text(path, root)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise CatalogError([(str(path), Problem("$", f"cannot read: {exc}"))]) from None
    entry, found = parse_entry(text, file=str(path))
    if found or entry is None:
        raise CatalogError([(str(path), p) for p in found])
    return entry


@contextlib.contextmanager
def entry_lock(folder: Path, *, exclusive: bool) -> Iterator[None]:
    """An flock on the entry folder's own descriptor (no lock file in the catalog): `catalog pin`
    holds it exclusively while it replaces a snapshot and its pin, a load shared while it reads them
    again after finding them differ."""
    import fcntl

    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        yield
    finally:
        os.close(fd)  # closing the last descriptor releases the lock


def pinned_copy(failure: SpecregError, text: str, revision: str | None):
    """The offline fallback of a pinned entry: when the Hub could not be reached (or kept failing) for
    `text`, the entry's config.json at its pinned revision, from huggingface_hub's cache, else the
    snapshot `catalog pin` wrote beside the entry; either only when its sha256 is the pinned one. A
    `sources.files.Read` whose `pinned` says which copy was used, or None: not a catalog id, not pinned,
    another revision asked for, no such copy, or a failure that is the Hub's answer (no repository...)."""
    from specreg.errors import ConfigError, HubError, OfflineError
    from specreg.sources import hub
    from specreg.sources.files import Origin, Read, has_bom, read_config, split_source

    if not isinstance(failure, HubError) or not (isinstance(failure, OfflineError) or failure.cache_fallback):
        return None
    try:
        repo_id, asked = split_source(text, revision)
        entry = lookup(repo_id)
    except SpecregError:  # CatalogError too: a malformed entry pins nothing
        return None
    if entry is None or not entry.revision or not entry.config_sha256 or asked not in (None, entry.revision):
        return None
    why = (
        "offline mode is on (HF_HUB_OFFLINE)"
        if hub.offline()
        else "the Hub could not be reached"
        if isinstance(failure, OfflineError)
        else "the Hub kept failing"
    )
    differing: list[str] = []  # the copies found that are not the pinned content
    catalog_root = _root(None)
    for path, where in (
        (hub.cached(repo_id, hub.CONFIG_NAME, entry.revision), "huggingface_hub's cache"),
        (entry.snapshot_path, "the snapshot beside the catalog entry"),
    ):
        if path is None or not path.is_file():
            continue
        if path == entry.snapshot_path and (real := link_outside(path, catalog_root)) is not None:
            # as an entry file linked out of the catalog is refused (read_entry_text): never read
            differing.append(
                f"{where} ({path}) leads to {real}, outside the catalog directory {catalog_root}: not read"
            )
            continue
        try:
            config, digest = read_config(path, source=text)
        except ConfigError as exc:
            differing.append(f"{where} ({path}) is not readable ({exc.message})")
            continue
        if digest != entry.config_sha256 and path == entry.snapshot_path:
            # a pin in progress replaces the snapshot, then the pin: read both again under its lock
            with entry_lock(path.parent, exclusive=False):
                again = lookup(repo_id)
                if again is not None and again.revision and again.config_sha256:
                    entry = again
                    try:
                        config, digest = read_config(path, source=text)
                    except ConfigError:
                        pass
        if digest != entry.config_sha256:
            differing.append(
                f"{where} ({path}) holds a config.json with sha256 {digest[:12]}..., not the pinned {entry.config_sha256[:12]}..."
            )
            continue
        origin = Origin(
            source=text,
            path=str(path),
            repo_id=repo_id,
            revision=asked,
            commit=entry.revision,
            sha256=digest,
            bom=has_bom(path),
        )
        return Read(
            config,
            origin,
            pinned=f"{why}: config.json of {entry.id} at the catalog's pinned revision "
            f"{entry.revision} was used, from {where} ({path})",
        )
    if differing:
        linked_out = any("outside the catalog directory" in d for d in differing)
        unused = "a copy outside the catalog, or one" if linked_out else "a copy"
        raise type(failure)(
            f"{failure.message}; {why}, and the catalog pins {entry.id} at revision {entry.revision}, but "
            + "; ".join(differing)
            + f": {unused} that no longer matches its pin is not used. Restore it, or re-pin where the Hub "
            f"is reachable (`specreg catalog pin {entry.id}`)",
            source=failure.source,
            transient=failure.transient,
            cache_fallback=failure.cache_fallback,
        )
    return None


# -- checking a whole catalog -------------------------------------------------------------------
