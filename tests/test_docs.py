"""Docs that list code are generated from it; they fail here when they drift."""

import re
from pathlib import Path

from specreg import docs
from specreg.findings import CODES

ROOT = Path(__file__).resolve().parent.parent


def test_generated_pages_are_up_to_date():
    for name, make in docs.PAGES.items():
        assert (ROOT / "docs" / name).read_text() == make(), f"docs/{name} is stale: run python -m specreg.docs"


def test_every_finding_code_used_in_the_code_is_documented():
    used = set()
    for path in list((ROOT / "specreg").glob("*.py")) + list((ROOT / "algos").glob("*.py")):
        used |= set(re.findall(r'(?:find|Finding\.of|_note)\(\s*"([a-z0-9-]+)"', path.read_text()))
    assert used, "the probe found no finding codes at all"
    assert used <= set(CODES)
    assert set(CODES) - used == set(), f"documented but never raised: {set(CODES) - used}"


def test_readme_commands_name_files_that_exist():
    readme = (ROOT / "README.md").read_text()
    assert "specreg show examples/qwen3-8b-dflash" in readme
    assert (ROOT / "examples" / "qwen3-8b-dflash" / "config.json").exists()


def test_ci_runs_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    ci = (ROOT / ".ci" / "run").read_text()
    test_line = [l.strip() for l in readme.splitlines() if "pytest" in l and l.startswith("    ")][0]
    assert test_line in ci
