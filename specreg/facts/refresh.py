"""`python -m specreg.facts refresh VERSION [--out DIR]`: compute every fact of one vLLM release from
its wheel and write them, reporting each file as unchanged or changed.

The extractors are the conformance tier's (tests/conformance/refresh_facts.py drives them): they need
the wheel, torch and flashinfer in the engine venv, and they are the code that holds the committed
facts, so there is one copy of each. They run in a subprocess from a specreg checkout: the package
never imports tests/, and `import specreg` stays light.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from packaging.version import Version

from specreg import facts
from specreg.facts.diff import changes
from specreg.vllm.fact_files import facts_text, write_facts

#: the extractors' driver, in the checkout the committed facts belong to
DRIVER = Path("tests") / "conformance" / "refresh_facts.py"
Extract = Callable[[str, str, Path], None]


class RefreshError(Exception):
    """A refresh that cannot go on: one line, for the command's exit 2 (after `report`, the lines of the
    files written before it stopped)."""

    def __init__(self, message: str, report: list[str] | None = None):
        super().__init__(message)
        self.report = report or []


def parse(version: str) -> tuple[str, str]:
    """VERSION ("X.Y" or its wheel "X.Y.0") -> (release, wheel). The facts of a release are its
    X.Y.0 wheel's, as every conformance test reads them."""
    found = re.fullmatch(r"(\d+)\.(\d+)(?:\.0)?", version.strip())
    if not found:
        raise RefreshError(f"{version!r} is no vLLM release: give X.Y or its wheel X.Y.0")
    release = f"{int(found.group(1))}.{int(found.group(2))}"
    return release, f"{release}.0"


def run_extractors(release: str, wheel: str, out: Path) -> None:
    """Run the conformance tier's extractors on `wheel`; they write `out/<release>/<kind>.json`.
    Their progress lines go to stderr as they come; a failure is their last line."""
    root = facts.FOLDER.parents[2]
    driver = root / DRIVER
    if not driver.is_file():
        raise RefreshError(
            f"{driver} not found: refresh runs the conformance tier's extractors, "
            "which are in a specreg checkout, not in the installed package"
        )
    with subprocess.Popen(
        [sys.executable, str(driver), release, wheel, str(out)],
        cwd=str(root),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        last = ""
        for line in proc.stderr:  # type: ignore[union-attr]
            if last:
                print(last, file=sys.stderr, flush=True)
            last = line.rstrip("\n")
    if proc.returncode != 0:
        raise RefreshError(last.removeprefix("refresh: ") or f"{driver} exited {proc.returncode}")
    if last:
        print(last, file=sys.stderr, flush=True)


def refresh(
    version: str, out: Path | None = None, *, extract: Extract = run_extractors, root: Path = facts.FOLDER
) -> list[str]:
    """Compute `version`'s facts with `extract` and write them into `out` (default: the release's
    folder under `root`, a new release being added to `root`/releases.json); one line per file."""
    release, wheel = parse(version)
    target = out if out is not None else root / release
    with tempfile.TemporaryDirectory(prefix="specreg-refresh-") as tmp:
        extract(release, wheel, Path(tmp))
        computed = sorted((Path(tmp) / release).glob("*.json"))
        if not computed:
            raise RefreshError(f"the extractors wrote no facts for vLLM {wheel}")
        report = []
        for path in computed:
            new = json.loads(path.read_text(encoding="utf-8"))
            dest = target / path.name
            old = json.loads(dest.read_text(encoding="utf-8")) if dest.is_file() else {}
            if dest.is_file() and dest.read_text(encoding="utf-8") == facts_text(new):
                report.append(f"{path.name}: unchanged")
                continue
            count = len(changes(old, new))
            report.append(f"{path.name}: changed ({count} record{'s' if count != 1 else ''})")
            write_facts(dest, new)
    if out is None:
        add_release(root / "releases.json", release, wheel)
    problems = rule_problems(release, target / "rules.json", root)
    if problems:
        raise RefreshError("the facts are written, but the rules cannot all be dated: " + "; ".join(problems), report)
    return report


def rule_problems(release: str, computed: Path, root: Path) -> list[str]:
    """What keeps the releases' rules, with `computed` as `release`'s, from dating every rule (nothing
    to check when the extractors wrote no rules.json)."""
    if not computed.is_file():
        return []
    per_release = {
        r: json.loads(p.read_text(encoding="utf-8"))["rules"]
        for r in facts.known()
        if r != release and (p := root / r / "rules.json").is_file()
    }
    per_release[release] = json.loads(computed.read_text(encoding="utf-8"))["rules"]
    return facts.check(dict(sorted(per_release.items(), key=lambda item: Version(item[0]))))


def add_release(path: Path, release: str, wheel: str) -> bool:
    """Add `release` to the list in `path` (False: it was there). A new release is tested by the
    conformance groups that test the newest known one, and is plugin-tested as it is: the release
    watch runs that tier on it before its pull request is merged."""
    records = json.loads(path.read_text(encoding="utf-8"))["releases"]
    if any(r["release"] == release for r in records):
        return False
    newest = max(records, key=lambda r: Version(r["release"]))
    records.append(
        {
            "plugin_tested": newest["plugin_tested"],
            "release": release,
            "tested_by": list(newest["tested_by"]),
            "wheel": wheel,
        }
    )
    records.sort(key=lambda r: Version(r["release"]))
    lines = ",\n".join("    " + json.dumps(r, sort_keys=True) for r in records)
    path.write_text('{\n  "releases": [\n' + lines + "\n  ]\n}\n", encoding="utf-8")
    facts.reread()
    return True
