"""specreg.verify.report: the pages are rendered from the packaged jinja2 templates, every value
escaped, and a missing jinja2 is one line saying what to install."""

import json
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from specreg.errors import SpecregError
from specreg.verify import report

ROOT = Path(__file__).resolve().parent.parent


def one_result(tmp_path, **fields) -> Path:
    results = tmp_path / "results" / "x"
    results.mkdir(parents=True)
    doc = {"model": "org/x", "started": "2026-01-02T00:00:00+00:00", "engine": "e", "verdict": "pass",
           "statistics": None, "judgement": None, "baseline": None, "harness": {}, "environment": {}, "notes": []}
    (results / "result.json").write_text(json.dumps({**doc, **fields}))
    (tmp_path / "registry").mkdir()
    return tmp_path / "results"


def test_a_value_that_looks_like_template_code_is_shown_as_text(tmp_path):
    results = one_result(tmp_path, model="org/{{ 7 * 7 }}<b>", started="{% if 1 %}x{% endif %}")
    report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"))
    index = (tmp_path / "site" / "index.html").read_text()
    assert "data-model='org/{{ 7 * 7 }}&lt;b&gt;'" in index and "org/49" not in index
    assert "<td>{% if 1 %}x{% endif %}</td>" in index


def test_without_jinja2_report_says_what_to_install(tmp_path, monkeypatch):
    results = one_result(tmp_path)
    monkeypatch.setitem(sys.modules, "jinja2", None)  # `import jinja2` raises ImportError
    report.templates.cache_clear()
    try:
        with pytest.raises(SpecregError, match=r"^report needs jinja2: pip install 'specreg\[verify\]'$"):
            report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"))
    finally:
        report.templates.cache_clear()


def test_every_template_is_package_data_the_wheel_carries():
    """pyproject's package-data globs for specreg.verify match every file of templates/ (the wheel
    itself: tests/test_packaging.py)."""
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]["specreg.verify"]
    folder = files("specreg.verify") / "templates"
    names = sorted(entry.name for entry in folder.iterdir())
    assert names == ["index.html", "model.html", "page.html", "run.html"]
    assert all(any(Path("templates", name).match(glob) for glob in globs) for name in names)
