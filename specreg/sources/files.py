"""Reading a draft's files and naming its source: a config.json with a size cap, a Hub repo id or
a local path, the manifest beside a directory specreg wrote, and the `Origin` value that records
where a config came from."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs

from specreg.errors import ConfigError, HubError, OfflineError, RepoNotFoundError
from specreg.sources import hub

#: config.json files are a few KiB; anything this large is not one (and is not read whole).
MAX_CONFIG_BYTES = hub.MAX_CONFIG_BYTES
#: the manifest a directory specreg wrote carries beside its config.json
MANIFEST = "specreg.json"

_REPO_ID = re.compile(r"^(?:[A-Za-z0-9][A-Za-z0-9._-]{0,95}/)?[A-Za-z0-9][A-Za-z0-9._-]{0,95}\Z")


def is_repo_id(text: str) -> bool:
    return bool(_REPO_ID.match(text)) and ".." not in text and "--" not in text and not text.endswith(".")


@attrs.frozen
class Origin:
    """Where the config file was read from."""

    source: str
    path: str | None = None
    repo_id: str | None = None
    revision: str | None = None
    commit: str | None = None
    sha256: str | None = None
    #: the file begins with a UTF-8 byte-order mark (specreg reads it; transformers' reader does not)
    bom: bool = False

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)

    def file_label(self) -> str:
        """What an error about the file's content names: the local file itself (a directory given as
        the source holds it), else the source as given (a Hub id)."""
        return self.path if self.path and not self.repo_id else self.source


# -- the one rule for a file a user or a remote supplied -------------------------------------------


class FileTooLarge(ValueError):
    """The file is larger than its reader reads (read_regular)."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, for an error: "a FIFO", "a device", "a directory"."""
    import stat

    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a directory" if stat.S_ISDIR(mode) else "not a regular file"


def link_outside(path: Path, root: Path) -> Path | None:
    """Where `path` really is, if that is outside `root` (a link out of it); None if it stays inside."""
    real, top = Path(os.path.realpath(path)), Path(os.path.realpath(root))
    return None if top in real.parents else real


def read_regular(
    path: Path, limit: int, *, root: Path | None = None, root_name: str = "the directory", dir_fd: int | None = None
) -> bytes:
    """The bytes of a regular file, at most `limit` of them. With `root`, a link must resolve inside it.
    The file is opened without blocking (a FIFO is never read) and checked on the open descriptor, so
    what is read is what was checked. ValueError (FileTooLarge for the size) says why not; OSError
    (a dangling link, a loop, permissions) passes through."""
    import stat

    if root is not None and path.is_symlink() and (real := link_outside(path, root)) is not None:
        raise ValueError(f"a link to {real}, outside {root_name} {os.path.realpath(root)}")
    # with dir_fd, `path` is a name in that open directory, and a link there is not followed
    flags = os.O_RDONLY | os.O_NONBLOCK | (os.O_NOFOLLOW if dir_fd is not None else 0)
    fd = os.open(path, flags, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        mode = os.fstat(fh.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise ValueError(f"{file_kind(mode)}, not a regular file")
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise FileTooLarge(f"larger than {limit} bytes")
    return data


def read_config(path: Path, *, source: str, dir_fd: int | None = None) -> tuple[dict[str, Any], str]:
    """Parse a config.json with a size cap; returns the object and the file's sha256. With `dir_fd`,
    `path` is a name in that open directory (see read_regular)."""
    try:
        data = read_regular(path, MAX_CONFIG_BYTES, dir_fd=dir_fd)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "$", source=source) from None
    except FileTooLarge:
        raise ConfigError(
            f"{path} is larger than {MAX_CONFIG_BYTES} bytes: not a config.json", "$", source=source
        ) from None
    except ValueError as exc:
        raise ConfigError(f"{path} is {exc}", "$", source=source) from None
    import hashlib

    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", "$", source=source) from None
    if not text.strip():  # json's own words for it, "Expecting value", say nothing about the file
        what = "empty (0 bytes)" if not data else f"blank ({len(data)} bytes of whitespace)"
        raise ConfigError(f"{path.name} is {what}: a config.json holds one JSON object", "$", source=source)

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def finite(literal: str) -> float:
        number = float(literal)
        if number in (float("inf"), float("-inf")):  # 1e400: valid JSON syntax, no real number
            raise ValueError(f"the number {literal[:40]} is out of range (it would be read as infinity)")
        return number

    try:
        value = json.loads(text, parse_constant=no_constants, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "$", source=source
        ) from None
    except ValueError as exc:
        raise ConfigError(f"invalid JSON: {exc}", "$", source=source) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", "$", source=source) from None
    if not isinstance(value, dict):
        raise ConfigError(f"the top level must be a JSON object, got a {type(value).__name__}", "$", source=source)
    return value, digest


def split_source(source: str, revision: str | None) -> tuple[str, str | None]:
    repo_id, rev = source, revision
    if "@" in source:
        repo_id, _, at_rev = source.rpartition("@")
        if revision is not None and revision != at_rev:
            raise ConfigError(
                f"two revisions given: {at_rev!r} in the source and {revision!r} as revision=",
                "revision",
                source=source,
            )
        rev = at_rev
    if not is_repo_id(repo_id):
        raise ConfigError(
            "neither an existing local path nor a Hub repo id (org/name or org/name@revision)", "source", source=source
        )
    if rev is not None:
        hub.check_revision(rev, source=source)
    return repo_id, rev


def manifest_beside(config_path: Path, source: str) -> dict[str, Any] | None:
    """The specreg.json of a directory specreg materialized, when there is one beside config.json."""
    path = config_path.parent / MANIFEST
    if config_path.name != hub.CONFIG_NAME or not path.is_file():
        return None
    try:
        manifest, _ = read_config(path, source=f"{source} ({MANIFEST})")
    except ConfigError:
        return None  # not a manifest specreg can read: the config is read on its own
    return manifest


@attrs.frozen
class Read:
    """A config read from its source: the object, where it came from, the manifest beside it (a
    directory specreg wrote) and, when the Hub failed and the cache answered, why; or, when the Hub
    failed and a pinned catalog entry's copy answered (specreg.entries.lookup.pinned_copy), which."""

    config: dict[str, Any]
    origin: Origin
    manifest: dict[str, Any] | None = None
    stale: str | None = None
    pinned: str | None = None


def has_bom(path: Path) -> bool:
    try:
        with open(path, "rb") as fh:
            return fh.read(3) == b"\xef\xbb\xbf"
    except OSError:
        return False


def _nowhere(text: str, exc: HubError) -> HubError:
    """A name that is no local path and that the Hub did not find (or could not be asked about): a
    mistyped local directory (`drafts/q9`) is also a valid repo id, so both answers are given."""
    said = exc.message if isinstance(exc, RepoNotFoundError) else f"as a Hub repository: {exc.message}"
    joint = ", and " if isinstance(exc, RepoNotFoundError) else "; "
    return type(exc)(
        f"no local directory {text}{joint}{said}",
        source=exc.source,
        transient=exc.transient,
        cache_fallback=exc.cache_fallback,
    )


def near_local(text: str) -> str | None:
    """The local folder or file a mistyped path most likely meant: a name close to the last part of
    `text` in the directory its other parts name, where that directory exists here (`drafts/q9` for
    `drafts/q8`); None otherwise. One directory listing, no Hub request."""
    local = Path(text).expanduser()
    parent = local.parent
    if not parent.is_dir():
        return None
    try:
        names = sorted(entry.name for entry in os.scandir(parent) if not entry.name.startswith("."))
    except OSError:
        return None
    most = 1 if len(local.name) <= 5 else 2  # a typo or two, never another name
    scored = sorted((_edits(local.name, name), name) for name in names)
    return str(parent / scored[0][1]) if scored and scored[0][0] <= most else None


def _edits(a: str, b: str) -> int:
    """Levenshtein distance (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def read_source(text: str, revision: str | None = None) -> Read:
    """A local directory or config file, or a Hub "org/name[@revision]" (config.json only is fetched)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the source is empty", "source", source=str(text))
    local = Path(text).expanduser()
    if local.exists():
        if revision is not None:
            raise ConfigError("a revision applies to Hub sources, not to a local path", "revision", source=text)
        path = local / hub.CONFIG_NAME if local.is_dir() else local
        if not path.is_file():
            raise ConfigError(f"no {hub.CONFIG_NAME} in the directory {local}", "source", source=text)
        # a directory's errors name the file in it that says so
        config, digest = read_config(path, source=str(path) if local.is_dir() else text)
        return Read(
            config, Origin(source=text, path=str(path), sha256=digest, bom=has_bom(path)), manifest_beside(path, text)
        )
    if text.startswith((".", "/", "~")) or text.endswith(".json") or os.sep + os.sep in text:
        raise ConfigError("no such file or directory", "source", source=text)
    near = near_local(text)
    if near is not None and revision is None and "@" not in text:
        # before the Hub: a folder one letter away beside it is what was meant, not a Hub repo
        raise ConfigError(
            f"no such file or directory (did you mean {near}?); a folder so close to it is here, so the Hub "
            "was not asked",
            "source",
            source=text,
        )
    repo_id, rev = split_source(text, revision)
    try:
        fetched = hub.fetch_config(repo_id, rev, source=text, max_bytes=MAX_CONFIG_BYTES)
    except (RepoNotFoundError, OfflineError) as exc:
        if rev is not None:  # org/name@revision names a Hub repository, never a local path
            raise
        raise _nowhere(text, exc) from None
    config, digest = read_config(fetched.path, source=text)
    origin = Origin(
        source=text,
        path=str(fetched.path),
        repo_id=repo_id,
        revision=rev,
        commit=fetched.commit,
        sha256=digest,
        bom=has_bom(fetched.path),
    )
    return Read(config, origin, None, fetched.stale)
