"""Replacing one file so that no reader ever sees half of it, and nothing is followed through a link.

For a set of files that must change together (a draft directory), see specreg/dirwrite.py; this is
the one-file case (report pages, the history, a catalog entry, a pin). Every step goes through the
parent directory's open descriptor. The temporary file's name carries a MAC over the parent's identity
(dirwrite.mac), so a temporary file left by a killed write is proven specreg's and removed by the next
write of the same file; anything else is never touched.
"""

from __future__ import annotations

import contextlib
import os
import re
import uuid
from pathlib import Path
from typing import Callable

from specreg.errors import SpecregError

_TEMP = re.compile(r"\.(?P<name>.+)\.specreg-tmp-(?P<tag>[0-9a-f]{16})-(?P<mac>[0-9a-f]{32})\Z", re.S)


def _proof(parent_fd: int, name: str, tag: str) -> str:
    from specreg.dirwrite import mac

    st = os.fstat(parent_fd)
    return mac(f"specreg tmp {name} {tag} {st.st_dev}:{st.st_ino}".encode())[:32]


def replace(target: Path, make: Callable[[Path], None]) -> None:
    """Create `target` by building a temporary file beside it with `make` (its name unique to this
    write), then renaming it over the old entry (a symlink there is replaced itself, never the file it
    points to). A failure leaves the old entry as it was and no temporary file; a kill leaves the old
    entry or the new one whole, and at most a proven temporary file that the next write removes."""
    parent = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        name = target.name
        try:
            mode = os.stat(name, dir_fd=parent, follow_symlinks=False).st_mode
        except FileNotFoundError:
            mode = 0
        import stat

        if stat.S_ISDIR(mode):
            raise SpecregError(f"{target} is a directory; refusing to replace it")
        for entry in os.listdir(parent):  # a killed earlier write of this file: proven, removed
            m = _TEMP.match(entry)
            if m and m["name"] == name and m["mac"] == _proof(parent, name, m["tag"]):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry, dir_fd=parent)
        tag = uuid.uuid4().hex[:16]
        tmp = f".{name}.specreg-tmp-{tag}-{_proof(parent, name, tag)}"
        try:
            make(target.parent / tmp)
            os.rename(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except BaseException:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp, dir_fd=parent)
            raise
    finally:
        os.close(parent)


def write_bytes(target: Path, data: bytes) -> None:
    replace(target, lambda tmp: tmp.write_bytes(data))
