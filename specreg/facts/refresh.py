"""`python -m specreg.facts refresh VERSION [--out DIR]`: compute every fact of one vLLM release from
its wheel and write them, reporting each file as unchanged or changed.

The extractors are the conformance tier's (tests/conformance/refresh_facts.py drives them): they need
the wheel, torch and flashinfer in the engine venv, and they are the code that holds the committed
facts, so there is one copy of each. They run in a subprocess from a specreg checkout: the package
never imports tests/, and `import specreg` stays light.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Callable
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
    version: str, out: Path | None = None, *, extract: Extract = run_extractors, root: Path = facts.FOLDER
) -> list[str]:
    """Compute `version`'s facts with `extract` and write them into `out` (default: the release's
    folder under `root`, a new release being added to `root`/releases.json); one line per file.

    Nothing is written unless every kind of facts was computed: the release's folder is replaced whole
    and releases.json after it, each atomically, so an interrupted or failed refresh leaves the facts as
    they were. Facts computed before another extractor failed are kept in a folder the error names. Rules
    whose extractor failed are written as not computed, and the refresh then fails with exit 1."""
    release, wheel = parse(version)
    target = out if out is not None else root / release
    if out is not None:
        check_out(out)
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
            dest = target / path.name
            old = read_old(dest)
            if old is not None and dest.read_text(encoding="utf-8") == facts_text(new):
                report.append(f"{path.name}: unchanged")
                continue
            count = len(changes(old or {}, new))
            report.append(f"{path.name}: changed ({count} record{'s' if count != 1 else ''})")
        problems = rule_problems(release, computed["rules"], root)
        if out is not None:
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as e:
                raise RefreshError(f"--out {printable(str(out))} cannot be made: {e.strerror}") from None
            for path in computed.values():
                write_facts(out / path.name, json.loads(path.read_text(encoding="utf-8")))
        else:
            replace_folder(target, computed)
            add_release(root / "releases.json", release, wheel)
    if failures or problems:
        # written whole: the rules whose extractor failed are recorded as not computed, each listed here
        raise RefreshError(
            "the facts are written, but " + "; ".join([*failures, *problems]), report, failures=failures, code=1
        )
    return report


def check_out(out: Path) -> None:
    """--out must be a directory or not exist yet (a dangling link, a file or a missing parent is refused)."""
    if out.is_symlink() and not out.exists():
        raise RefreshError(f"--out {printable(str(out))} is a link to nothing")
    if out.exists() and not out.is_dir():
        raise RefreshError(f"--out {printable(str(out))} is not a directory")
    parent = next((p for p in out.absolute().parents if p.exists()), None)
    if not out.exists() and (parent is None or not parent.is_dir()):
        raise RefreshError(f"--out {printable(str(out))} cannot be made: {parent} is not a directory")


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


def replace_folder(target: Path, computed: dict[str, Path]) -> None:
    """Make `target` hold exactly the computed files: built beside it, then swapped in by two renames."""
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:8]}"
    staging = target.parent / f".{target.name}.new-{tag}"
    staging.mkdir(parents=True)
    try:
        for path in computed.values():
            write_facts(staging / path.name, json.loads(path.read_text(encoding="utf-8")))
        if target.exists():
            old = target.parent / f".{target.name}.old-{tag}"
            os.rename(target, old)
            os.rename(staging, target)
            shutil.rmtree(old)
        else:
            os.rename(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging)
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


def add_release(path: Path, release: str, wheel: str) -> bool:
    """Add `release` to the list in `path` (False: it was there). A new release is tested by the
    conformance groups that test the newest known one, and is not plugin-tested: `mark-tested` says so
    once its conformance tier passed."""
    records = facts.read_releases(path)
    if any(r["release"] == release for r in records):
        return False
    newest = max(records, key=lambda r: Version(r["release"]))
    records.append({"plugin_tested": False, "release": release, "tested_by": list(newest["tested_by"]), "wheel": wheel})
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
