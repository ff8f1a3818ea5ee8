"""`specreg cache list | clean`: the drafts `specreg serve` materialized into specreg's own cache
(~/.cache/specreg/drafts, or $SPECREG_CACHE/drafts), as `hf cache` and `pip cache` show theirs.

Only a directory that holds a specreg.json signed with this machine's key (what specreg wrote) is ever
removed: SPECREG_CACHE may name a folder of the user's, and a draft folder there that specreg did not write
is listed and left alone. The Hugging Face cache, where the linked weights live, is huggingface_hub's
(`hf cache`); the key that signs the drafts is kept."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any

import attrs

from specreg.cli.common import EXIT_OK, SpecregErrorLine, print_lines


def add_cache(sub: Any) -> None:
    cache = sub.add_parser(
        "cache",
        help="list and clean the drafts specreg keeps in its cache",
        description="The drafts `specreg serve` materialized into ~/.cache/specreg/drafts ($SPECREG_CACHE/drafts). "
        "Only what specreg wrote there is removed; the weights they link stay in the Hugging Face cache (`hf cache`).",
    )
    csub = cache.add_subparsers(dest="cache_command", required=True, metavar="ACTION")
    ls = csub.add_parser("list", help="each cached draft with its source, engine, size and date")
    ls.add_argument("--json", action="store_true", help="the drafts as a JSON object")
    clean = csub.add_parser("clean", help="remove cached drafts (all, or those named), after asking")
    clean.add_argument(
        "names", nargs="*", metavar="NAME", help="the drafts to remove, as `specreg cache list` names them"
    )
    clean.add_argument("-y", "--yes", action="store_true", help="remove without asking")
    clean.add_argument("--json", action="store_true", help="what was removed, as a JSON object")


@attrs.frozen
class Cached:
    """One folder under the drafts folder."""

    name: str
    #: whether specreg wrote it (its specreg.json is signed with this machine's key): only those are removed
    ours: bool
    source: str | None
    engine: str | None
    files: int
    bytes: int
    modified: float

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


def drafts_folder() -> Path:
    from specreg.dirwrite import cache_root

    return cache_root() / "drafts"


def _open_dir(name: str | Path, dir_fd: int | None = None) -> int:
    return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dir_fd)


def _size(fd: int) -> tuple[int, int, float]:
    """(files, bytes, newest mtime) of the open directory's tree; links are counted as links, never followed."""
    files = total = 0
    newest = os.fstat(fd).st_mtime
    for _root, dirs, names, rootfd in os.fwalk(dir_fd=fd):
        for name in names + dirs:
            st = os.stat(name, dir_fd=rootfd, follow_symlinks=False)
            newest = max(newest, st.st_mtime)
            if not stat.S_ISDIR(st.st_mode):
                files, total = files + 1, total + st.st_size
    return files, total, newest


def _describe(name: str, parent: int) -> Cached | None:
    """The folder `name` of the open drafts folder; None for anything but a real directory."""
    from specreg.vllm.manifest import trusted_manifest

    try:
        fd = _open_dir(name, parent)
    except OSError:
        return None  # a file, a link, or gone
    try:
        manifest = trusted_manifest(Path(name), dir_fd=fd)
        files, size, modified = _size(fd)
    finally:
        os.close(fd)
    source = (manifest or {}).get("source")
    source = source if isinstance(source, dict) else {}
    engine = None
    if manifest is not None:
        engine = (
            f"SGLang {manifest.get('sglang_version')}"
            if manifest.get("engine") == "sglang"
            else f"vLLM {manifest.get('vllm_version')}"
        )
    shown = source.get("repo_id") or source.get("path") or source.get("source")
    return Cached(
        name=name,
        ours=manifest is not None,
        source=str(shown) if shown else None,
        engine=engine,
        files=files,
        bytes=size,
        modified=modified,
    )


def cached() -> list[Cached]:
    """Every folder under the drafts folder, by name (none when it does not exist)."""
    try:
        parent = _open_dir(drafts_folder())
    except FileNotFoundError:
        return []
    try:
        found = (_describe(name, parent) for name in sorted(os.listdir(parent)))
        return [c for c in found if c is not None]
    finally:
        os.close(parent)


def remove(names: list[str]) -> list[str]:
    """Remove the named drafts (each a folder specreg wrote, under its write lock, so a write in
    progress finishes first); returns the names removed. Nothing is followed out of the drafts folder."""
    import fcntl
    import shutil

    from specreg.vllm.manifest import trusted_manifest

    parent = _open_dir(drafts_folder())
    removed = []
    try:
        for name in names:
            fd = _open_dir(name, parent)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)  # the lock a materialize holds while it writes
                if trusted_manifest(Path(name), dir_fd=fd) is None:
                    continue  # changed since it was listed: no longer provably specreg's
                shutil.rmtree(name, dir_fd=parent)  # fd-based: never follows a link out of the folder
                removed.append(name)
            finally:
                os.close(fd)
    finally:
        os.close(parent)
    return removed


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _list(args: argparse.Namespace) -> int:
    import time

    found = cached()
    folder = drafts_folder()
    if args.json:
        print(json.dumps({"folder": str(folder), "drafts": [c.to_dict() for c in found]}, indent=2))
        return EXIT_OK
    if not found:
        print(f"{folder}: no cached drafts")
        return EXIT_OK
    rows = [("name", "engine", "source", "size", "modified")]
    for c in found:
        rows.append(
            (
                c.name,
                c.engine or "-",
                c.source or "not written by specreg here: left alone",
                human(c.bytes),
                time.strftime("%Y-%m-%d %H:%M", time.localtime(c.modified)),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [f"{folder}"]
    lines += ["  " + "  ".join(cell.ljust(w) for cell, w in zip(r, widths)).rstrip() for r in rows]
    ours = [c for c in found if c.ours]
    lines.append(
        f"{len(ours)} draft{'s' * (len(ours) != 1)}, {human(sum(c.bytes for c in ours))} "
        "(linked weights count as links: the files stay in the Hugging Face cache, `hf cache` manages them)"
    )
    print_lines(lines)
    return EXIT_OK


def _clean(args: argparse.Namespace) -> int:
    found = {c.name: c for c in cached()}
    for name in args.names:
        if name not in found:
            import difflib

            close = difflib.get_close_matches(name, list(found), n=1)
            raise SpecregErrorLine(
                f"no cached draft {name} in {drafts_folder()}"
                + (f" (did you mean {close[0]}?)" if close else " (`specreg cache list` names them)")
            )
        if not found[name].ours:
            raise SpecregErrorLine(
                f"{drafts_folder() / name}: not written by specreg here (no specreg.json signed with this "
                "machine's key): specreg leaves it alone; remove it yourself if it is yours"
            )
    chosen = [found[n] for n in dict.fromkeys(args.names)] if args.names else [c for c in found.values() if c.ours]
    if not chosen:
        print(json.dumps({"removed": []}) if args.json else f"{drafts_folder()}: nothing to remove")
        return EXIT_OK
    size = human(sum(c.bytes for c in chosen))
    what = f"{len(chosen)} cached draft{'s' * (len(chosen) != 1)} ({size}) from {drafts_folder()}"
    if not args.yes:
        if not sys.stdin.isatty():
            raise SpecregErrorLine(f"would remove {what}; confirm with --yes (no terminal to ask on)")
        print_lines([f"  {c.name}" for c in chosen], file=sys.stderr)
        print(f"remove {what}? [y/N] ", end="", file=sys.stderr, flush=True)
        if sys.stdin.readline().strip().lower() not in ("y", "yes"):
            print("nothing removed", file=sys.stderr)
            return EXIT_OK
    removed = remove([c.name for c in chosen])
    size = human(sum(found[n].bytes for n in removed))
    if args.json:
        print(json.dumps({"folder": str(drafts_folder()), "removed": removed}, indent=2))
    else:
        print(f"removed {len(removed)} cached draft{'s' * (len(removed) != 1)} ({size}) from {drafts_folder()}")
    return EXIT_OK


HANDLERS = {"cache": lambda args: {"list": _list, "clean": _clean}[args.cache_command](args)}
