"""`specreg cache list | clean`: the drafts `specreg serve` materialized into specreg's own cache
(~/.cache/specreg/drafts, or $SPECREG_CACHE/drafts), as `hf cache` and `pip cache` show theirs.

Only what specreg wrote, where it wrote it, is ever removed: a folder whose specreg.json is signed with
this machine's key for that very folder (a `cp -a` copy is not specreg's), and in it only the files the
manifest lists, each still as specreg wrote it; anything else is left and named. SPECREG_CACHE may name a
folder of the user's, and a draft folder there that specreg did not write is listed, with the reason, and
left alone. Every removal goes through the folder's descriptor that was checked, under its write lock
(waited for with a bound), specreg.json last: a removal interrupted at any point leaves a folder the next
`cache clean` finishes. The Hugging Face cache, where the linked weights live, is huggingface_hub's
(`hf cache`); the key that signs the drafts is kept."""

from __future__ import annotations

import argparse
import json
import os
import stat
import sys
import time
from pathlib import Path
from typing import Any, Callable

import attrs

from specreg.cli.common import EXIT_FINDINGS, EXIT_OK, SpecregErrorLine, print_lines


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
    #: whether specreg wrote it (its specreg.json is signed with this machine's key for this folder)
    ours: bool
    #: why it is not specreg's (None when it is), as `cache list` says it
    why: str | None
    #: entries in it; an empty folder (what an interrupted `cache clean` can leave) is removed too
    entries: int
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
    from specreg.vllm.manifest import judged_manifest

    try:
        fd = _open_dir(name, parent)
    except OSError:
        return None  # a file, a link, or gone
    try:
        doc, why = judged_manifest(Path(name), dir_fd=fd)
        manifest = doc if why is None else None
        entries = len(os.listdir(fd))
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
        why=None if manifest is not None else "empty" if not entries else why,
        entries=entries,
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


@attrs.frozen
class LockWait:
    """How long `cache clean` waits for a folder another specreg process is writing (it holds the folder's
    lock): `seconds`, then the folder is left and named. Tests give a clock and a sleep of their own."""

    seconds: float = 30.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep


@attrs.frozen
class Cleaned:
    """What `remove` did: the folders removed, and a line for each folder (or part of one) it left."""

    removed: tuple[str, ...]
    left: tuple[str, ...]


def remove(names: list[str], *, wait: LockWait = LockWait(), say: Callable[[str], None] = lambda _m: None) -> Cleaned:
    """Remove the named drafts: in each folder specreg wrote (checked under its write lock, so a write in
    progress finishes first; an interrupted write inside is rolled back first), the files its manifest
    lists that are still as specreg wrote them, specreg.json last, then the folder once it is empty.
    Every step goes through the folder's descriptor that was checked; nothing is followed out of the
    drafts folder, and nothing is removed by name but the emptied folder itself, after checking the name
    still is that folder (an empty folder lost to a race loses nothing). A folder that is a running
    process's working directory is left."""
    removed, left = [], []
    parent = _open_dir(drafts_folder())
    try:
        for name in names:
            try:
                fd = _open_dir(name, parent)
            except OSError as exc:
                left.append(f"{name}: left ({exc.strerror}: no longer a folder here)")
                continue
            try:
                why = _remove_one(name, fd, parent, wait, say)
            finally:
                os.close(fd)  # closing releases the lock
            if why is None:
                removed.append(name)
            else:
                left.append(f"{name}: left {why}")
    finally:
        os.close(parent)
    return Cleaned(removed=tuple(removed), left=tuple(left))


def _remove_one(name: str, fd: int, parent: int, wait: LockWait, say: Callable[[str], None]) -> str | None:
    """Remove specreg's files from the open folder `fd` (`remove`); None when the folder is gone, else
    what was left and why."""
    from specreg import dirwrite
    from specreg.sources.files import MANIFEST
    from specreg.vllm.manifest import WRITTEN, judged_manifest

    if not _lock(
        fd, wait, lambda: say(f"{name}: another specreg process is writing it; waiting up to {wait.seconds:g} s")
    ):
        return f"(another specreg process held it for {wait.seconds:g} s: run `specreg cache clean` again)"
    users = _working_in(fd)
    if users:
        return f"(the working directory of process {', '.join(users)}: leave it, then run `specreg cache clean` again)"
    directory = dirwrite.Directory(path=drafts_folder() / name, fd=fd, created=False)
    dirwrite.recover(directory)  # a killed write of specreg's inside: rolled back (proven by its MAC) first
    doc, why = judged_manifest(Path(name), dir_fd=fd)
    if why is None and doc is not None:
        listed = [n for n in doc.get("files", []) if isinstance(n, str) and n != MANIFEST]
        records = doc.get(WRITTEN) if isinstance(doc.get(WRITTEN), dict) else {}
        for entry in listed:
            if entry in os.listdir(fd) and dirwrite.differs(fd, entry, records.get(entry)) is None:
                dirwrite._step(f"remove {entry}")
                os.unlink(entry, dir_fd=fd)
        dirwrite._step(f"remove {MANIFEST}")
        os.unlink(MANIFEST, dir_fd=fd)  # last: until here, the next clean finishes what this one began
    elif os.listdir(fd):
        return f"(not written by specreg here: {why})"
    rest = sorted(os.listdir(fd))
    if rest:
        return f"{', '.join(rest)}: not specreg's (added, or changed since specreg wrote them); the rest is removed"
    st = os.fstat(fd)
    try:
        here = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return "(emptied; it was moved away from its name, and is left where it went)"
    if (st.st_dev, st.st_ino) != (here.st_dev, here.st_ino):
        return "(emptied; its name now holds another folder, left as it is)"
    dirwrite._step(f"remove the folder {name}")
    os.rmdir(name, dir_fd=parent)  # only an empty directory is ever removed by name
    return None


def _lock(fd: int, wait: LockWait, waiting: Callable[[], None]) -> bool:
    """Take the folder's write lock, waiting at most `wait.seconds` (saying so once); whether it was taken."""
    import fcntl

    deadline = None
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        now = wait.clock()
        if deadline is None:
            deadline = now + wait.seconds
            waiting()
        if now >= deadline:
            return False
        wait.sleep(min(0.2, deadline - now))


def _working_in(fd: int) -> list[str]:
    """The running processes (pid and command name, from /proc where there is one) whose working
    directory is the open folder: removing it would pull the floor from under them."""
    st = os.fstat(fd)
    found = []
    try:
        pids = [p for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return []
    for pid in pids:
        try:
            cwd = os.stat(f"/proc/{pid}/cwd")
        except OSError:
            continue  # gone, or another user's
        if (cwd.st_dev, cwd.st_ino) == (st.st_dev, st.st_ino):
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    found.append(f"{pid} ({fh.read().strip()})")
            except OSError:
                found.append(pid)
    return found


def human(size: int) -> str:
    value = float(size)
    for unit in ("B", "kB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    raise AssertionError("unreachable")


def _list(args: argparse.Namespace) -> int:
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
                c.source or _unowned(c),
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


def _unowned(c: Cached) -> str:
    if not c.entries:
        return "empty (an interrupted clean?): `specreg cache clean` removes it"
    return f"not written by specreg here ({c.why}): left alone"


def _removable(c: Cached) -> bool:
    return c.ours or not c.entries


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
        if not _removable(found[name]):
            raise SpecregErrorLine(
                f"{drafts_folder() / name}: not written by specreg here ({found[name].why}): specreg leaves "
                "it alone; remove it yourself if it is yours"
            )
    chosen = (
        [found[n] for n in dict.fromkeys(args.names)] if args.names else [c for c in found.values() if _removable(c)]
    )
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
    done = remove([c.name for c in chosen], say=lambda line: print(line, file=sys.stderr, flush=True))
    size = human(sum(found[n].bytes for n in done.removed))
    if args.json:
        print(
            json.dumps(
                {"folder": str(drafts_folder()), "removed": list(done.removed), "left": list(done.left)}, indent=2
            )
        )
    else:
        print_lines([f"{drafts_folder()}/{line}" for line in done.left], file=sys.stderr)
        n = len(done.removed)
        print(f"removed {n} cached draft{'s' * (n != 1)} ({size}) from {drafts_folder()}")
    return EXIT_FINDINGS if done.left else EXIT_OK


HANDLERS = {"cache": lambda args: {"list": _list, "clean": _clean}[args.cache_command](args)}
