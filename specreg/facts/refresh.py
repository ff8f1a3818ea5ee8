"""`python -m specreg.facts refresh VERSION [--out DIR]`: compute every fact of one vLLM release from
its wheel and write them, reporting each file as unchanged or changed.

The extractors are the conformance tier's (tests/conformance/refresh_facts.py drives them): they need
the wheel, torch and flashinfer in the engine venv, and they are the code that holds the committed
facts, so there is one copy of each. They run in a subprocess from a specreg checkout: the package
never imports tests/, and `import specreg` stays light.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

from packaging.version import Version

from specreg import atomic, facts
from specreg.errors import printable
from specreg.facts.diff import changes
from specreg.vllm.fact_files import facts_text, write_facts

#: the extractors' driver, in the checkout the committed facts belong to
DRIVER = Path("tests") / "conformance" / "refresh_facts.py"
Extract = Callable[[str, str, Path], list[str] | None]


class RefreshError(Exception):
    """A refresh that cannot go on, or that wrote its facts with something missing: one line (or one per
    failure) for the command's exit code (`code`: 2 nothing written, 1 written with rules not computed),
    after `report`, the lines of the files written."""

    def __init__(
        self, message: str, report: list[str] | None = None, *, failures: list[str] | None = None, code: int = 2
    ):
        super().__init__(message)
        self.report = report or []
        self.failures = failures or []
        self.code = code


def parse(version: str) -> tuple[str, str]:
    """VERSION ("X.Y" or its wheel "X.Y.0") -> (release, wheel). The facts of a release are its
    X.Y.0 wheel's, as every conformance test reads them."""
    found = re.fullmatch(r"(\d+)\.(\d+)(?:\.0)?", version.strip())
    if not found:
        raise RefreshError(f"{printable(version)!r} is no vLLM release: give X.Y or its wheel X.Y.0")
    release = f"{int(found.group(1))}.{int(found.group(2))}"
    return release, f"{release}.0"


#: a driver's line saying one extractor failed (the others still ran), or that nothing could run
FAILED, FATAL = "refresh: failed: ", "refresh: fatal: "


def run_extractors(release: str, wheel: str, out: Path) -> list[str]:
    """Run the conformance tier's extractors on `wheel`; they write `out/<release>/<kind>.json`. Their
    progress lines go to stderr as they come (terminal controls escaped); returns the failures they
    listed (each extractor runs isolated: one that fails does not stop the others)."""
    root = facts.FOLDER.parents[2]
    driver = root / DRIVER
    if not driver.is_file():
        raise RefreshError(
            f"{driver} not found: refresh runs the conformance tier's extractors, "
            "which are in a specreg checkout, not in the installed package"
        )
    failures, fatal = [], None
    with subprocess.Popen(
        [sys.executable, str(driver), release, wheel, str(out)],
        cwd=str(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
    ) as proc:
        for line in proc.stderr:  # type: ignore[union-attr]
            line = line.rstrip("\n")
            print(printable(line), file=sys.stderr, flush=True)
            if line.startswith(FAILED):
                failures.append(line.removeprefix(FAILED))
            elif line.startswith(FATAL):
                fatal = line.removeprefix(FATAL)
    if proc.returncode not in (0, 1) or fatal:
        raise RefreshError(fatal or f"{driver} exited {proc.returncode}", failures=failures)
    return failures


def rules_only(release: str) -> bool:
    """Whether `release` is older than the attention selector's range (0.20-0.23): its folder holds its
    rules only, and the kv_cache survey cannot run on its wheel."""
    return Version(release) < min(map(Version, facts.tested_by("selector")))


def expected_kinds(release: str) -> tuple[str, ...]:
    """The kinds of facts a release's folder holds: rules only for a release older than the selector's range."""
    if rules_only(release):
        return ("rules",)
    return ("attention_backends", "kv_cache", "quantization_methods", "rules")


def refresh(
    version: str,
    out: Path | None = None,
    *,
    extract: Extract = run_extractors,
    root: Path = facts.FOLDER,
    force: bool = False,
) -> list[str]:
    """Compute `version`'s facts with `extract` and write them into `out` (default: the release's
    folder under `root`, a new release being added to `root`/releases.json); one line per file.

    Nothing is written unless every kind of facts was computed: the release's folder is replaced whole
    and releases.json after it, each atomically, so an interrupted or failed refresh leaves the facts as
    they were (an interruption after the folder was swapped in is an `Interrupted` saying what is new).
    Facts computed before another extractor failed are kept in a folder the error names. Rules whose
    extractor failed are written as not computed, and the refresh then fails with exit 1. In `out`, a
    file that is not a facts file as refresh writes it is replaced only with `force`; a special file
    there is never opened."""
    release, wheel = parse(version)
    target = out if out is not None else root / release
    if out is not None:
        check_out(out, root)
        for kind in expected_kinds(release):  # before the extractors' minutes, what would be refused after
            existing(out / f"{kind}.json", force)
    done = None  # once something is written: what is new, for a Ctrl-C after it
    try:
        with tempfile.TemporaryDirectory(prefix="specreg-refresh-") as tmp:
            failures = extract(release, wheel, Path(tmp)) or []
            computed = {p.stem: p for p in sorted((Path(tmp) / release).glob("*.json"))}
            missing = [k for k in expected_kinds(release) if k not in computed]
            if missing:
                kept = keep(Path(tmp) / release, release) if computed else None
                where = f"; what was computed is kept in {kept}" if kept else ""
                raise RefreshError(
                    f"nothing written: {', '.join(missing)} not computed for vLLM {wheel}{where}", failures=failures
                )
            report = []
            for path in computed.values():
                new = json.loads(path.read_text(encoding="utf-8"))
                text = existing(target / path.name, force if out is not None else True)
                if text == facts_text(new):
                    report.append(f"{path.name}: unchanged")
                    continue
                old = parse_old(target / path.name, text) if text is not None else None
                count = len(changes(old or {}, new))
                report.append(f"{path.name}: changed ({count} record{'s' if count != 1 else ''})")
            problems = rule_problems(release, computed["rules"], root)
            if out is not None:
                try:
                    out.mkdir(parents=True, exist_ok=True)
                except OSError as e:
                    raise RefreshError(f"--out {printable(str(out))} cannot be made: {e.strerror}") from None
                write_out(out, computed)
                done = f"the committed facts are as they were; the new facts are in {out}"
            else:
                replace_folder(target, computed)
                releases = root / "releases.json"
                done = (
                    f"the new facts are in {target}, but {releases} may not list {release} yet: refresh {release} again"
                )
                add_release(releases, release, wheel, tuple(computed))
                done = f"the new facts are in {target}, and {releases} lists {release}"
    except KeyboardInterrupt as e:
        if done is None or isinstance(e, Interrupted):
            raise
        raise Interrupted(done) from None
    if failures or problems:
        # written whole: the rules whose extractor failed are recorded as not computed, each listed here
        raise RefreshError(
            "the facts are written, but " + "; ".join([*failures, *problems]), report, failures=failures, code=1
        )
    return report


def check_out(out: Path, root: Path) -> None:
    """--out must be a directory or not exist yet, outside the committed facts: a link (to a directory
    or to nothing: refresh writes through no link, as every writer of specreg), a file, a missing parent
    or a folder in `root` (whose top rules.json a release's would replace) is refused."""
    shown = printable(str(out))
    if out.is_symlink():
        if not out.exists():
            raise RefreshError(f"--out {shown} is a link to nothing")
        raise RefreshError(
            f"--out {shown} is a link to {printable(os.path.realpath(out))}: refresh writes through no link; "
            "give the directory itself"
        )
    if out.exists() and not out.is_dir():
        raise RefreshError(f"--out {shown} is not a directory")
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if not out.exists() and (parent is None or not parent.is_dir()):
        raise RefreshError(f"--out {shown} cannot be made: {parent} is not a directory")
    real, top = Path(os.path.realpath(out)), Path(os.path.realpath(root))
    if real == top or top in real.parents:
        raise RefreshError(
            f"--out {shown} is in the committed facts ({root}): without --out, refresh replaces the "
            "release's folder there whole and lists it in releases.json"
        )


#: the most a facts file may hold (the largest committed one is about 0.3 MiB)
MAX_FACTS_BYTES = 64 * 1024 * 1024


def existing(path: Path, force: bool) -> str | None:
    """The text of the facts file refresh would replace at `path` (None: there is none, or with `force` a
    link, replaced itself, never read). A directory or special file (a FIFO is never opened) is refused;
    without `force`, so is a link or a file that is not a facts file as refresh writes it: a user's own."""
    import stat

    from specreg.sources.files import FileTooLarge, file_kind, read_regular

    shown = printable(str(path))
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return None
    except OSError as e:
        raise RefreshError(f"{shown} cannot be read: {e.strerror}") from None
    if stat.S_ISLNK(mode):
        if force:
            return None
        raise RefreshError(
            f"{shown} is a link to {printable(os.path.realpath(path))}, not a facts file refresh wrote: "
            "refusing to replace it (--force replaces the link itself, never what it points to)"
        )
    if not stat.S_ISREG(mode):
        raise RefreshError(f"{shown} is not a facts file ({file_kind(mode)}): move it away and refresh again")
    try:
        text = read_regular(path, MAX_FACTS_BYTES).decode("utf-8")
    except (OSError, ValueError) as e:  # FileTooLarge and UnicodeDecodeError are ValueErrors
        if force:
            return None
        why = "too large" if isinstance(e, FileTooLarge) else getattr(e, "strerror", None) or str(e)
        raise RefreshError(f"{shown} is not a facts file ({why}): refusing to replace it without --force") from None
    if not force and not written_by_refresh(text):
        raise RefreshError(
            f"{shown} is not a facts file as refresh writes it (a file of your own?): refusing to replace it; "
            "move it away, or pass --force"
        )
    return text


def written_by_refresh(text: str) -> bool:
    """Whether `text` is a facts file exactly as `write_facts` writes one, its `_about` naming the
    generator that computed it: what refresh may replace without --force."""
    try:
        data = json.loads(text)
    except ValueError:
        return False
    about = data.get("_about") if isinstance(data, dict) else None
    generated = isinstance(about, str) and "tests/conformance/" in about and about.endswith("do not edit")
    return generated and text == facts_text(data)


def parse_old(path: Path, text: str) -> dict[str, Any]:
    """The facts file being replaced, parsed (its text read by `existing`): one error line if it is none."""
    try:
        data = json.loads(text)
    except ValueError as e:
        raise RefreshError(f"{path} is not a facts file ({e}): move it away and refresh again") from None
    if not isinstance(data, dict):
        raise RefreshError(f"{path} is not a facts file (a JSON object): move it away and refresh again")
    return data


def write_out(out: Path, computed: dict[str, Path]) -> None:
    """Write the computed files into --out, each whole; an interruption says which are new."""
    written: list[str] = []
    try:
        for path in computed.values():
            write_facts(out / path.name, json.loads(path.read_text(encoding="utf-8")))
            written.append(path.name)
    except KeyboardInterrupt:
        if not written:
            raise
        raise Interrupted(
            f"the committed facts are as they were; in {out}, {', '.join(written)} "
            f"{'is' if len(written) == 1 else 'are'} new, the others as they were"
        ) from None


def read_old(path: Path) -> dict[str, Any] | None:
    """The committed facts file being replaced (None: there is none); a directory or unreadable JSON
    there is one error line naming it."""
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise RefreshError(
            f"{path} is not a facts file ({type(e).__name__}: {e}): move it away and refresh again"
        ) from None
    if not isinstance(data, dict):
        raise RefreshError(f"{path} is not a facts file (a JSON object): move it away and refresh again")
    return data


def keep(folder: Path, release: str) -> Path:
    """Copy what a failed refresh computed out of its temporary folder, so no work is thrown away."""
    kept = Path(tempfile.mkdtemp(prefix=f"specreg-refresh-{release}-kept-"))
    for path in folder.glob("*.json"):
        shutil.copy2(path, kept / path.name)
    return kept


class Interrupted(KeyboardInterrupt):
    """Ctrl-C after something was written: `state` says what is new and what is as it was."""

    def __init__(self, state: str):
        super().__init__(state)
        self.state = state


@contextlib.contextmanager
def sigint_held() -> Iterator[None]:
    """Ctrl-C held back until the block is done (it is delivered after): the two renames of a swap
    are one step to it, so no Ctrl-C leaves the release's folder under neither name. Python runs signal
    handlers in the main thread whichever thread the kernel picked, so the handler is swapped for one that
    only notes the signal (a thread's signal mask would not hold where other threads run: pytest-xdist's)."""
    noted = []
    try:
        previous = signal.signal(signal.SIGINT, lambda *_: noted.append(True))
    except ValueError:  # not the main thread: no handler to swap; the rollback below still holds
        previous = None
    try:
        yield
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)
            if noted:
                signal.raise_signal(signal.SIGINT)  # delivered now, to the handler that was there


def replace_folder(target: Path, computed: dict[str, Path]) -> None:
    """Make `target` hold exactly the computed files: built beside it, then swapped in by two renames
    (Ctrl-C held back between them, and the old folder renamed back if the second fails). Interrupted
    before the swap: the old folder as it was (KeyboardInterrupt); after it: `Interrupted`, naming the
    old folder's remains to remove."""
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging = target.parent / f".{target.name}.new-{tag}"
    old = target.parent / f".{target.name}.old-{tag}"
    staging.mkdir(parents=True)
    committed = had_old = False
    try:
        try:
            for path in computed.values():
                write_facts(staging / path.name, json.loads(path.read_text(encoding="utf-8")))
            with sigint_held():  # a Ctrl-C here is raised as the block ends, after the commit
                had_old = target.exists()
                if had_old:
                    os.rename(target, old)
                try:
                    os.rename(staging, target)
                except BaseException:
                    if had_old:
                        os.rename(old, target)
                    raise
                committed = True
        finally:
            if staging.exists():
                shutil.rmtree(staging)
        if had_old:
            shutil.rmtree(old)
    except KeyboardInterrupt:
        if not committed:
            raise
        left = f"; the old folder's remains are in {old}: remove it" if had_old and old.exists() else ""
        raise Interrupted(f"the new facts are in {target}{left}") from None
    finally:
        facts.reread()


def rule_problems(release: str, computed: Path, root: Path) -> list[str]:
    """What keeps the releases' rules, with `computed` as `release`'s, from placing every rule in every
    release (nothing to check when the extractors wrote no rules.json)."""
    if not computed.is_file():
        return []
    per_release = {}
    for r in facts.known():
        path = root / r / "rules.json"
        if r != release and path.is_file():
            per_release[r] = (read_old(path) or {}).get("rules", {})
    per_release[release] = json.loads(computed.read_text(encoding="utf-8"))["rules"]
    return facts.check(dict(sorted(per_release.items(), key=lambda item: Version(item[0]))))


def write_releases_list(path: Path, records: list[dict[str, Any]]) -> None:
    records.sort(key=lambda r: Version(r["release"]))
    lines = ",\n".join("    " + json.dumps(r, sort_keys=True) for r in records)
    atomic.write_bytes(path, ('{\n  "releases": [\n' + lines + "\n  ]\n}\n").encode("utf-8"))
    facts.reread()


#: conformance group -> the kinds of committed facts it compares with its wheels (the selector's tests
#: read attention_backends.json and kv_cache.json, tests/conformance/test_attention_selector.py and
#: test_kv_cache_groups.py; deployment_rules_gpu quantization_methods.json, test_deployment_rules.py)
GROUP_FACTS = {"selector": ("attention_backends", "kv_cache"), "deployment_rules_gpu": ("quantization_methods",)}


def add_release(path: Path, release: str, wheel: str, kinds: tuple[str, ...] | None = None) -> bool:
    """Add `release` to the list in `path` (False: it was there). A new release is tested by the
    conformance groups that test the newest known one whose facts it has (`kinds`, default all), and is
    not plugin-tested: `mark-tested` says so once its conformance tier passed."""
    records = facts.read_releases(path)
    if any(r["release"] == release for r in records):
        return False
    newest = max(records, key=lambda r: Version(r["release"]))
    groups = [g for g in newest["tested_by"] if kinds is None or set(GROUP_FACTS.get(g, ())) <= set(kinds)]
    records.append({"plugin_tested": False, "release": release, "tested_by": groups, "wheel": wheel})
    write_releases_list(path, records)
    return True


def mark_tested(release: str, path: Path | None = None) -> None:
    """Mark the newest known release plugin-tested (after its conformance tier passed); an older release
    is refused (the plugin's range ends at the newest tested release)."""
    path = path or facts.FOLDER / "releases.json"
    records = facts.read_releases(path)
    newest = max(records, key=lambda r: Version(r["release"]))
    if newest["release"] != release:
        raise RefreshError(
            f"only the newest known release ({newest['release']}) can be marked plugin-tested, not {release}"
        )
    newest["plugin_tested"] = True
    write_releases_list(path, records)
