"""Replacing a file so that no reader ever sees half of it, and nothing is followed through a link."""

from __future__ import annotations

import contextlib
import os
import threading
import uuid
from pathlib import Path
from typing import Callable, Iterator

from specreg.errors import SpecregError


def replace(target: Path, make: Callable[[Path], None]) -> None:
    """Create `target` by building a temporary file beside it with `make` (its name unique to this
    write: process, thread and a random part), then renaming it over the old entry (a symlink there is
    replaced itself, never the file it points to). A failure leaves the old entry as it was and no
    temporary file."""
    if target.is_dir() and not target.is_symlink():
        raise SpecregError(f"{target} is a directory; refusing to replace it")
    tmp = target.with_name(f".{target.name}.specreg-tmp-{os.getpid()}-{threading.get_ident()}-{uuid.uuid4().hex[:8]}")
    if tmp.exists() or tmp.is_symlink():
        tmp.unlink()
    try:
        make(tmp)
        os.replace(tmp, target)
    except BaseException:
        if tmp.exists() or tmp.is_symlink():
            tmp.unlink()
        raise


def write_bytes(target: Path, data: bytes) -> None:
    replace(target, lambda tmp: tmp.write_bytes(data))


@contextlib.contextmanager
def locked(directory: Path) -> Iterator[bool]:
    """Hold `directory`'s write lock across processes and threads: an flock on the directory itself
    (each call opens its own descriptor, so threads of one process exclude each other too); no file
    is added. Yields whether the directory was created here, so a failed first write can remove it."""
    import fcntl

    created = False
    try:
        directory.mkdir(parents=True)
        created = True
    except FileExistsError:
        pass
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield created
    finally:
        os.close(fd)  # closing releases the lock
