"""Replacing a file so that no reader ever sees half of it, and nothing is followed through a link."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

from specreg.errors import SpecregError


def replace(target: Path, make: Callable[[Path], None]) -> None:
    """Create `target` by building `.name.specreg-tmp-PID` beside it with `make`, then renaming it over
    the old entry (a symlink there is replaced itself, never the file it points to). A failure leaves
    the old entry as it was and no temporary file."""
    if target.is_dir() and not target.is_symlink():
        raise SpecregError(f"{target} is a directory; refusing to replace it")
    tmp = target.with_name(f".{target.name}.specreg-tmp-{os.getpid()}")
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
