"""specreg.verify.report and `specreg report`: the pages are rendered from the packaged jinja2
templates, every value escaped, and a missing jinja2 is one line saying what to install."""

import json
import re
import sys
import tomllib
from importlib.resources import files
from pathlib import Path

import pytest

from openai_server import OpenAIServer
from specreg.errors import SpecregError
from specreg.verify import report
from history_helpers import history_results, stored_run
from verify_helpers import run, two_baseline_report, verify_args

ROOT = Path(__file__).resolve().parent.parent


def one_result(tmp_path, **fields) -> Path:
    results = tmp_path / "results" / "x"
    results.mkdir(parents=True)
    doc = {
        "model": "org/x",
        "started": "2026-01-02T00:00:00+00:00",
        "engine": "e",
        "verdict": "pass",
        "statistics": None,
        "judgement": None,
        "baseline": None,
        "harness": {},
        "environment": {},
        "notes": [],
    }
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


def test_the_report_escapes_what_result_files_say(tmp_path):
    from html.parser import HTMLParser

    from specreg.verify.report import build

    results = tmp_path / "results" / "x"
    results.mkdir(parents=True)
    hostile = "org/x' onmouseover='alert(1)"
    (results / "result.json").write_text(
        json.dumps(
            {
                "model": hostile,
                "started": "<script>alert(2)</script>",
                "engine": "e",
                "verdict": "pass' onclick='x",
                "statistics": None,
                "judgement": None,
                "baseline": None,
                "harness": {},
                "environment": {},
                "notes": [],
            }
        )
    )
    index = build(tmp_path / "results", tmp_path / "site")
    attrs_seen, scripts = [], []

    class Parser(HTMLParser):
        in_script = False

        def handle_starttag(self, tag, attributes):
            self.in_script = tag == "script"
            attrs_seen.extend(name for name, _ in attributes)

        def handle_data(self, data):
            if self.in_script:
                scripts.append(data)

    for page in (tmp_path / "site").rglob("*.html"):
        Parser().feed(page.read_text())
    assert "onmouseover" not in attrs_seen and "onclick" not in attrs_seen
    assert not any("alert" in s for s in scripts)  # only the page's own image check runs
    assert index.exists()


def test_a_regression_on_one_baseline_is_not_hidden_by_later_runs_of_another(tmp_path):
    """After an MT-Bench regression and two later gsm8k runs of the same entry, the index still shows
    the entry as regressed (the worst of its baselines' latest verdicts), first, with the counts, and
    its page shows the two baselines' trends apart, saying which check failed."""
    reg, site = two_baseline_report(tmp_path)
    index = (site / "index.html").read_text()
    rows = re.findall(r"<tr class='([\w-]+)' data-model='([^']+)'>", index)
    assert rows == [("regressed", "org/draft")]  # org/other, in the catalog but never run, is no row
    assert "regressed 1</span>" in index and "none 1</span>" not in index
    assert "1 models measured (2 in the catalog; those not measured are not listed)" in index
    assert "vLLM of the newest runs: 0.33.0" in index
    page = (site / "models" / "org--draft.html").read_text()
    sections = re.findall(r"<section class='series' data-series='([^']+)'><h2>[^<]*<span class='([\w-]+)'>", page)
    assert sections == [("mt-bench, baseline 0", "regressed"), ("gsm8k, baseline 1", "pass")]
    assert "failed: acceptance length 1.450 (band 2.660-2.940)" in page
    assert page.count("<tr class='regressed'>") == 1 and page.count("<tr class='pass'>") == 3
    for image in ("org--draft-trend.png", "org--draft-trend-2.png"):
        assert (site / "models" / image).read_bytes()[:4] == b"\x89PNG" and image in page


def test_the_change_since_the_previous_night_is_the_verdict_of_the_earlier_runs():
    from specreg.verify.report import _verdict_before

    def run_(day, verdict, index=0):
        return {
            "model": "m",
            "started": f"{day}T01:00:00+00:00",
            "verdict": verdict,
            "harness": {"dataset": "gsm8k"},
            "judgement": {"baseline_index": index},
        }

    runs = [
        run_("2026-11-29", "pass"),
        run_("2026-11-30", "pass"),
        run_("2026-11-30", "pass", 1),
        run_("2026-12-01", "regressed"),
    ]
    assert _verdict_before(runs, "2026-12-01") == "pass"
    assert _verdict_before(runs, "2026-11-29") is None
    assert _verdict_before(runs + [run_("2026-11-30", "regressed", 1)], "2026-12-01") == "regressed"


def test_report_json_says_what_it_wrote(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
    (out.parent / "broken").mkdir()
    (out.parent / "broken" / "result.json").write_text("{not json")
    site, merged = tmp_path / "site", tmp_path / "merged.sqlite"
    r = run(
        "report", str(out.parent), "--out", str(site), "--registry", str(reg), "--history-out", str(merged), "--json"
    )
    assert r.returncode == 0, r.stderr
    printed = json.loads(r.stdout)
    assert printed["index"] == str(site / "index.html") and printed["history_out"] == str(merged)
    assert len(printed["warnings"]) == 1 and "broken" in printed["warnings"][0]
    assert r.stderr == ""


def test_report_page_lists_the_catalog_and_links_plots(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
        run(*verify_args(server, reg, rows, out))  # a second run: a trend
    site = tmp_path / "site"
    r = run("report", str(out.parent), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    index = (site / "index.html").read_text()
    assert "data-model='org/draft'" in index and "<td class='verdict'>pass</td>" in index
    page = (site / "models" / "org--draft.html").read_text()
    assert "org--draft-per-position.png" in page and "org--draft-trend.png" in page
    assert (site / "models" / "org--draft-trend.png").read_bytes()[:4] == b"\x89PNG"


def test_report_replaces_links_planted_in_the_site_and_skips_bad_results(setup, tmp_path):
    reg, rows, out = setup
    with OpenAIServer() as server:
        run(*verify_args(server, reg, rows, out))
    bad = out.parent / "org--broken"
    bad.mkdir()
    (bad / "result.json").write_text("[1, 2")  # malformed
    (out.parent / "history.sqlite").write_bytes(b"not a database at all" * 100)  # corrupt
    site, victim, elsewhere = tmp_path / "site", tmp_path / "victim.html", tmp_path / "elsewhere"
    victim.write_text("theirs")
    elsewhere.mkdir()
    site.mkdir()
    (site / "index.html").symlink_to(victim)
    (site / "models").symlink_to(elsewhere, target_is_directory=True)
    r = run("report", str(out.parent), "--out", str(site), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "theirs" and list(elsewhere.iterdir()) == []
    assert not (site / "index.html").is_symlink() and not (site / "models").is_symlink()
    index = (site / "index.html").read_text()
    assert "skipped org--broken/result.json" in index and "history history.sqlite not read" in index
    assert "warning: skipped org--broken/result.json" in r.stderr and "<td class='verdict'>pass</td>" in index


@pytest.mark.parametrize(
    ("model", "where"),
    [
        ("org/x", {"environment": {"vllm_version": "$\\frac{$", "gpu": "H100"}}),  # a server's /version, stored raw
        ("org/x", {"harness": {"dataset": "$\\frac{$"}}),
        ("org/$\\frac{$", {}),
    ],
    ids=["vllm-version", "dataset", "model"],
)
def test_text_that_matplotlib_would_read_as_mathematics_is_drawn_as_it_is(tmp_path, model, where):
    runs = [stored_run(model, day, **where) for day in (1, 2)]
    results = history_results(tmp_path, runs)
    index = report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"))
    name = report.directory_name(runs[0]["model"])
    assert index.exists()
    assert (tmp_path / "site" / "models" / f"{name}-trend.png").read_bytes()[:4] == b"\x89PNG"


def test_a_check_without_tolerance_from_skips_that_run_with_a_warning(tmp_path):
    check = {"metric": "acceptance_length", "verdict": "pass", "bounds": [2.7, None], "baseline": 3.0}
    odd = stored_run("org/x", 2, judgement={"reason": "r", "checks": [check]})
    results = history_results(tmp_path, [stored_run("org/x", 1)])
    (results / "x").mkdir()
    (results / "x" / "result.json").write_text(json.dumps(odd))
    warnings: list[str] = []
    index = report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"), warnings=warnings)
    assert warnings == ["skipped x/result.json: judgement.checks is not a list of checks"]
    assert "data-model='org/x'" in index.read_text()


def test_a_long_history_labels_at_most_a_dozen_dates_and_versions():
    from specreg.verify.report import MAX_TREND_LABELS, _spread

    assert MAX_TREND_LABELS == 12
    assert _spread(list(range(5)), 12) == [0, 1, 2, 3, 4]
    picked = _spread(list(range(10_000)), 12)
    assert len(picked) == 12 and picked[0] == 0 and picked[-1] == 9_999


def test_a_trend_matplotlib_cannot_draw_is_a_warning_and_the_pages_are_still_written(tmp_path, monkeypatch):
    def refuse(*_args):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(report, "_draw_trend", refuse)
    results = history_results(tmp_path, [stored_run("org/x", day) for day in (1, 2)])
    warnings: list[str] = []
    index = report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"), warnings=warnings)
    assert warnings == ["trend of org/x (mt-bench, baseline 0) not drawn: ValueError: cannot draw this"]
    assert "data-model='org/x'" in index.read_text() and (tmp_path / "site" / "models" / "org--x.html").exists()
    assert not (tmp_path / "site" / "models" / "org--x-trend.png").exists()


def test_each_run_says_how_many_of_its_planned_prompts_it_used(tmp_path):
    """A run the sequential test stopped early shows "24 of 80 (the verdict was decided ...)" on its page
    and "24/80 early" in its trend row; a full run "80/80"; a result from before the test says nothing."""
    early = {"prompts_used": 24, "prompts_planned": 80, "sequential": {"stopped_early": True}}
    full = {"prompts_used": 80, "prompts_planned": 80, "sequential": {"stopped_early": False}}
    runs = [stored_run("org/draft", 1), stored_run("org/draft", 2, **full), stored_run("org/draft", 3, **early)]
    (tmp_path / "history").mkdir()
    results = history_results(tmp_path / "history", runs)
    report.build(results, tmp_path / "site", registry=str(tmp_path / "history" / "registry"))
    page = (tmp_path / "site" / "models" / "org--draft.html").read_text()
    cells = re.findall(r"<td>(\d*/?\d*(?: early)?)</td><td>pass</td></tr>", page)
    assert cells == ["", "80/80", "24/80 early"]
    (tmp_path / "latest").mkdir()
    latest = one_result(tmp_path / "latest", **early)  # the latest run's own section
    report.build(latest, tmp_path / "site2", registry=str(tmp_path / "latest" / "registry"))
    page = (tmp_path / "site2" / "models" / "org--x.html").read_text()
    assert "<p class='prompts'>Prompts: 24 of 80 (the verdict was decided: the rest was not run)</p>" in page


def test_summary_md_says_the_prompts_used():
    from specreg.verify.outputs import summary_markdown

    r = stored_run("org/draft", 1, prompts_used=8, prompts_planned=80, sequential={"stopped_early": True})
    r["statistics"]["chunks"] = 10
    assert "Prompts: 8 of 80 (the verdict was decided: the rest was not run)" in summary_markdown(r)
    assert "Prompts:" not in summary_markdown({**r, "prompts_used": None})


def test_a_site_of_one_draft_outside_the_catalog_is_one_row_with_its_algorithm_and_verifier(tmp_path):
    """It was the catalog's 200 `none` rows and the draft's own row with `-` for both."""
    results = tmp_path / "results"
    draft = str(ROOT / "examples" / "qwen3-8b-dflash")
    rows = tmp_path / "gsm8k.jsonl"
    rows.write_text("".join(json.dumps({"question": f"q{i}"}) + "\n" for i in range(4)))
    with OpenAIServer(model="Qwen/Qwen3-8B") as server:
        r = run("verify", draft, "--server", server.url, "--dataset-file", str(rows), "--out", str(results / "mine"))
    assert r.returncode == 0, r.stdout + r.stderr
    r = run("report", str(results), "--out", str(tmp_path / "site"))
    assert r.returncode == 0, r.stdout + r.stderr
    index = (tmp_path / "site" / "index.html").read_text()
    cells = re.findall(
        r"<tr class='([\w-]+)' data-model='[^']+'><td><a [^>]+>[^<]+</a></td><td>([^<]*)</td><td>([^<]*)</td>", index
    )
    assert cells == [("no-baseline", "dflash", "Qwen/Qwen3-8B")]
