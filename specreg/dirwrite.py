"""Writing a set of files into a user's directory so that nothing the user had is lost, even when the
writer is killed at any step.

The rule: specreg deletes, renames or overwrites only what it can prove it wrote. The proof is a MAC
(HMAC-SHA256) under a key that only this user's specreg holds (`key()`, 0600 in specreg's cache): it
signs the draft's manifest (specreg.json) and it names the folder a write works in.

A write, every step relative to DIR's open descriptor (never by path, never through a link):

1. `mkdir DIR/.specreg-stage-<tag>-<mac>`: the MAC covers the kind of folder, the tag and DIR's device
   and inode, so a planted folder, or one copied from another directory, proves nothing;
2. every new file is built inside it (bytes, a link, a copy) and synced; DIR is not touched yet;
3. commit: for each name, the entry DIR holds is set aside into the stage's `old/` (a name with no
   entry gets an empty marker in `new/` instead), then the new file is renamed into DIR; a previous
   draft's files the new one does not have are set aside too. Each record is made as the entry moves,
   never ahead of the work. config.json is set aside first and moved in last, so while names of two
   drafts stand side by side DIR has no config.json: no engine loads it as a mix;
4. the stage is renamed `.specreg-done-<tag>-<mac>`: from here on the write is whole;
5. the done folder (the set-aside originals) is removed.

A kill before step 4 is rolled back by the next write into DIR: every new file is removed and every
set-aside entry put back, so DIR holds the whole previous draft (until then it holds it already, or,
killed inside the commit, holds no config.json and keeps the rest of the previous draft in the stage). A kill after it is finished: the done
folder goes, and DIR holds the whole new draft. An exception rolls back at once. Names that look like
specreg's leftovers but carry no valid MAC (`foreign_leftovers`) are never acted on: they are named.

The lock is an flock on DIR's own descriptor, not `filelock`: filelock needs a lock file, which would
put a file of specreg's into the user's directory and lock a path rather than the directory every step
goes through.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
import re
import shutil
import stat
import uuid
from pathlib import Path
from typing import Any, Callable, Iterator

import attrs

from specreg.errors import SpecregError

KEY_BYTES = 32
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
#: the file that makes a directory loadable as a draft: out of DIR while a commit or a rollback runs
KEYSTONE = "config.json"
#: inside a stage: the new files, the entries set aside from DIR, and the names that had none
_PARTS = ("files", "old", "new")
_WORK = re.compile(r"\.specreg-(?P<kind>stage|done)-(?P<tag>[0-9a-f]{16})-(?P<mac>[0-9a-f]{32})\Z")
#: what earlier specreg versions (a journal and set-aside files beside the draft) or a foreign hand left:
#: never trusted, only named
_LOOKS_OURS = re.compile(r"(\.specreg-write\.json|.*\.specreg-(old|tmp)-.*|\.specreg-(stage|done)-.*)\Z", re.S)


def cache_root() -> Path:
    """specreg's own cache: $SPECREG_CACHE, else ~/.cache/specreg."""
    return Path(os.environ.get("SPECREG_CACHE") or Path.home() / ".cache" / "specreg").expanduser()


class KeyUnusable(SpecregError):
    """specreg's key cannot be trusted (not a regular file of the user's, readable by others, or the
    wrong length): nothing is trusted, and nothing is signed, until it is removed."""


def key() -> bytes:
    """The per-user HMAC key (created once, atomically, 0600); checked before every use."""
    path = cache_root() / "manifest.key"
    for _ in range(2):
        try:
            # no final link followed; a FIFO does not block the open
            fd = os.open(path, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            _create_key(path)
            continue
        except OSError as exc:
            raise KeyUnusable(
                f"{path}: cannot open the manifest key ({exc.strerror}: a link or not a file); "
                "remove it and specreg makes a new one (directories it wrote before then need --force "
                "into an empty directory)"
            ) from None
        try:
            st = os.fstat(fd)
            why = None
            if not stat.S_ISREG(st.st_mode):
                why = "not a regular file"
            elif hasattr(os, "getuid") and st.st_uid != os.getuid():
                why = "owned by another user"
            elif st.st_mode & 0o077:
                why = f"readable or writable by others (mode {stat.S_IMODE(st.st_mode):o})"
            else:
                data = os.read(fd, KEY_BYTES + 1)
                if len(data) == KEY_BYTES:
                    return data
                why = f"{len(data)} bytes, not {KEY_BYTES} (an interrupted write?)"
        finally:
            os.close(fd)
        raise KeyUnusable(f"{path}: the manifest key is unusable ({why}); remove it and specreg makes a new one")
    raise KeyUnusable(f"{path}: the manifest key could not be created")


def _create_key(path: Path) -> None:
    """Write a new key to a temporary file and link it into place: the key file, when it exists, is
    always whole (a crash or a full disk leaves no empty key behind)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".manifest.key.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another writer made it first: theirs is used
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def mac(body: bytes) -> str:
    """HMAC-SHA256 of `body` under specreg's key, as hex."""
    return hmac.new(key(), body, hashlib.sha256).hexdigest()


# -- the test seam: every change to the file system goes through one call --------------------------------------


def _step(what: str) -> None:
    """Called before each change to DIR or the stage; tests replace it to kill the writer there."""


@attrs.frozen
class Link:
    """A symbolic link to `target` (an absolute path)."""

    target: str


@attrs.frozen
class Copy:
    """A copy of the regular file at `source`."""

    source: str


@attrs.frozen
class Later:
    """Bytes made once every other file is built, from their records (`record`): the signed manifest
    that lists what the write wrote, hashed as it was built (a copied weight is read once)."""

    make: Callable[[dict[str, dict[str, Any]]], bytes]


Content = bytes | Link | Copy | Later


def record(content: bytes | Link, digest: Any = None, size: int | None = None) -> dict[str, Any]:
    """What a written entry is, to be recognised again: a link by its target; a file by its size and
    sha256 (`digest`, a hashlib object fed while copying, or the bytes themselves)."""
    if isinstance(content, Link):
        return {"link": content.target}
    if digest is None:
        digest, size = hashlib.sha256(content), len(content)
    return {"size": size, "sha256": digest.hexdigest()}


def differs(dir_fd: int, name: str, recorded: Any) -> str | None:
    """How the entry `name` of the open directory differs from its record: None when it is what was
    written (or absent: nothing of the user's is lost by writing it again), "replaced" when its kind
    changed (a link now a file, a file now a link or a folder), "changed" when its target or bytes did.
    A file is hashed only when its size matches (the cost: one read of each copied weight)."""
    try:
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return None
    if not isinstance(recorded, dict):
        return "changed"  # listed, never recorded: nothing shows it is what specreg wrote
    if "link" in recorded:
        if not stat.S_ISLNK(st.st_mode):
            return "replaced"
        return None if os.readlink(name, dir_fd=dir_fd) == recorded["link"] else "changed"
    if not stat.S_ISREG(st.st_mode):
        return "replaced"
    if st.st_size != recorded.get("size"):
        return "changed"
    digest = hashlib.sha256()
    fd = os.open(name, os.O_RDONLY | _NOFOLLOW | os.O_NONBLOCK, dir_fd=dir_fd)
    with os.fdopen(fd, "rb") as fh:
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    return None if digest.hexdigest() == recorded.get("sha256") else "changed"


@attrs.frozen
class Directory:
    """A directory opened for writing: its descriptor (locked) and its identity."""

    path: Path
    fd: int
    created: bool

    def identity(self) -> str:
        st = os.fstat(self.fd)
        return f"{st.st_dev}:{st.st_ino}"

    def inode(self) -> int:
        """DIR's inode: what a signed manifest is bound to (a copy of the folder has another one)."""
        return os.fstat(self.fd).st_ino

    def work_name(self, kind: str, tag: str) -> str:
        proof = mac(f"specreg {kind} {tag} {self.identity()}".encode())[:32]
        return f".specreg-{kind}-{tag}-{proof}"

    def entries(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def kind(self, name: str) -> int | None:
        """The entry's st_mode (the entry itself, never what a link points to), or None if absent."""
        try:
            return os.stat(name, dir_fd=self.fd, follow_symlinks=False).st_mode
        except FileNotFoundError:
            return None


@contextlib.contextmanager
def opened(path: Path) -> Iterator[Directory]:
    """Create `path` if absent, open it without following a link and hold its write lock (processes and
    threads take turns: each call opens its own descriptor). A DIR created here and left empty by a
    failure or a refusal is removed again."""
    import fcntl

    created = False
    try:
        path.mkdir(parents=True)
        created = True
    except FileExistsError:
        pass
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except OSError as exc:
        raise SpecregError(
            f"{path}: cannot open the directory ({exc.strerror}); name a real directory", source=str(path)
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        directory = Directory(path=path, fd=fd, created=created)
        try:
            yield directory
        except BaseException:
            if created and not directory.entries():
                with contextlib.suppress(OSError):
                    os.rmdir(path)  # by path: if the path was swapped for something else, rmdir refuses it
            raise
    finally:
        os.close(fd)  # closing releases the lock


def recover(directory: Directory) -> list[str]:
    """Roll back (or finish) every write into `directory` that was killed, from the folders whose names
    prove they are this specreg's; returns a line for each."""
    done = []
    for name in directory.entries():
        m = _WORK.match(name)
        if not m or not stat.S_ISDIR(directory.kind(name) or 0) or name != directory.work_name(m["kind"], m["tag"]):
            continue
        if m["kind"] == "stage":
            _roll_back(directory, name)
            done.append("rolled back an interrupted write")
        else:
            _remove_tree(directory, name)
            done.append("finished a write that was interrupted once it was whole")
    return done


def looks_like_leftover(name: str) -> bool:
    """Whether an entry is named like a specreg write's work folder or an older specreg's leftover (proof
    or not: `recover` and `foreign_leftovers` tell which)."""
    return _LOOKS_OURS.match(name) is not None


def foreign_leftovers(directory: Directory) -> list[str]:
    """Entries named like a specreg write's leftovers that carry no proof this specreg made them (after
    `recover`, every one that does is gone): they are never acted on."""
    return [n for n in directory.entries() if looks_like_leftover(n)]


def write(
    directory: Directory,
    files: dict[str, Content],
    *,
    set_aside: list[str] | tuple[str, ...] = (),
    say: Callable[[str], None] = lambda _m: None,
) -> dict[str, dict[str, Any]]:
    """Replace the entries `files` names in `directory` with the new contents, and set aside the names in
    `set_aside` (a previous draft's files the new one has not), as one write: see the module docstring.
    Entries not named are never touched. A name whose entry is a directory is refused before anything
    is written. KEYSTONE (the file that makes DIR loadable) is out of DIR for the whole commit. A `Later`
    content is built last, from the records of the others; returns every record but a Later's."""
    for name in files:
        mode = directory.kind(name)
        if mode is not None and stat.S_ISDIR(mode):
            raise SpecregError(f"{directory.path / name} is a directory; refusing to replace it")
    # a previous file that is a directory now is not the file specreg wrote: left alone
    set_aside = [n for n in set_aside if n not in files and not stat.S_ISDIR(directory.kind(n) or 0)]
    tag = uuid.uuid4().hex[:16]
    stage = directory.work_name("stage", tag)
    _step("mkdir stage")
    os.mkdir(stage, 0o700, dir_fd=directory.fd)
    try:
        sfd = _open_dir(stage, directory.fd)
        try:
            for sub in _PARTS:
                _step(f"mkdir {sub}")
                os.mkdir(sub, 0o700, dir_fd=sfd)
            built, old, new = (_open_dir(sub, sfd) for sub in _PARTS)
            try:
                copies = [n for n, c in files.items() if isinstance(c, Copy)]
                records: dict[str, dict[str, Any]] = {}
                for name, content in files.items():
                    if isinstance(content, Copy):
                        say(f"copying {name} ({copies.index(name) + 1}/{len(copies)})")
                    if not isinstance(content, Later):
                        records[name] = _build(built, name, content)
                for name, content in files.items():
                    if isinstance(content, Later):
                        _build(built, name, content.make(dict(records)))
                os.fsync(built)
                # the KEYSTONE leaves DIR first and comes back last: a kill in between leaves a DIR that
                # no engine loads (no config.json), never one that loads as a mix of two drafts
                order = [n for n in files if n != KEYSTONE]
                if KEYSTONE in files:
                    _set_aside(directory, KEYSTONE, old, new)
                for name in order:
                    _set_aside(directory, name, old, new)
                    _step(f"move {name} in")
                    os.rename(name, name, src_dir_fd=built, dst_dir_fd=directory.fd)
                for name in set_aside:
                    _set_aside(directory, name, old, None)
                if KEYSTONE in files:
                    _step(f"move {KEYSTONE} in")
                    os.rename(KEYSTONE, KEYSTONE, src_dir_fd=built, dst_dir_fd=directory.fd)
            finally:
                for fd in (built, old, new):
                    os.close(fd)
        finally:
            os.close(sfd)
        finished = directory.work_name("done", tag)
        _step("commit")
        os.rename(stage, finished, src_dir_fd=directory.fd, dst_dir_fd=directory.fd)
    except BaseException:
        if directory.kind(stage) is not None:
            _roll_back(directory, stage)
        raise
    os.fsync(directory.fd)
    _remove_tree(directory, finished)
    return records


def _open_dir(name: str, dir_fd: int) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW, dir_fd=dir_fd)


def _build(sfd: int, name: str, content: bytes | Link | Copy) -> dict[str, Any]:
    """Make `name` inside the stage (its descriptor `sfd`) from `content`, synced to disk; its record
    (a copy is hashed as it is copied, never read a second time)."""
    _step(f"build {name}")
    if isinstance(content, Link):
        os.symlink(content.target, name, dir_fd=sfd)
        return record(content)
    fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o644, dir_fd=sfd)
    with os.fdopen(fd, "wb") as out:
        hashed = _Hashing(out)
        if isinstance(content, Copy):
            with open(content.source, "rb") as src:
                shutil.copyfileobj(src, hashed, 1 << 20)
        else:
            hashed.write(content)
        out.flush()
        os.fsync(out.fileno())
    return record(b"", hashed.digest, hashed.size)


class _Hashing:
    """A file that hashes what is written through it: a copied weight is hashed as it is copied."""

    def __init__(self, out: Any) -> None:
        self.out, self.digest, self.size = out, hashlib.sha256(), 0

    def write(self, chunk: bytes) -> int:
        self.digest.update(chunk)
        self.size += len(chunk)
        return self.out.write(chunk)


def _set_aside(directory: Directory, name: str, old: int, new: int | None) -> None:
    """Move DIR's entry `name` into the stage's old/ (the record of it is the entry itself there); with
    no entry, mark the name in new/ (a file the rollback removes from DIR)."""
    if directory.kind(name) is not None:
        _step(f"set {name} aside")
        os.rename(name, name, src_dir_fd=directory.fd, dst_dir_fd=old)
    elif new is not None:
        _step(f"mark {name} new")
        os.close(os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600, dir_fd=new))


def _roll_back(directory: Directory, stage: str) -> None:
    """Undo a write whose stage is `stage`: its files in DIR are removed, every set-aside entry goes back.
    The new KEYSTONE goes first and the old one comes back last, as in the commit."""
    sfd = _open_dir(stage, directory.fd)
    try:
        parts = set(os.listdir(sfd))
        listed = {}
        for sub in _PARTS:
            if sub in parts:
                fd = _open_dir(sub, sfd)
                listed[sub] = (fd, set(os.listdir(fd)))
        try:
            staged = listed["files"][1] if "files" in listed else set()
            old_fd, old = listed.get("old", (None, set()))
            # moved in (no longer staged), or set aside: DIR's entry of that name is this write's
            ours = {n for n in listed.get("new", (None, set()))[1] if n not in staged} | old
            for name in sorted(ours, key=lambda n: n != KEYSTONE):
                if name not in staged and directory.kind(name) is not None:
                    _step(f"remove new {name}")
                    os.unlink(name, dir_fd=directory.fd)
            for name in sorted(old, key=lambda n: n == KEYSTONE):
                _step(f"put {name} back")
                os.rename(name, name, src_dir_fd=old_fd, dst_dir_fd=directory.fd)
        finally:
            for fd, _names in listed.values():
                os.close(fd)
    finally:
        os.close(sfd)
    os.fsync(directory.fd)
    _remove_tree(directory, stage)


def _remove_tree(directory: Directory, name: str) -> None:
    _step(f"remove {name}")
    shutil.rmtree(name, dir_fd=directory.fd)
