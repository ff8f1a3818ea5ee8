"""`specreg report` on the CLI with hostile files: nothing of the user's is deleted by `--out`, and a
malformed, oversized or linked result or history is skipped or given up, never an internal error."""

import json

import pytest

from conftest import run_in_process, run_specreg

run = run_specreg


def test_report_on_a_missing_directory_exits_2(tmp_path):
    out = run("report", str(tmp_path / "nope"), "--out", str(tmp_path / "site"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: {tmp_path / 'nope'}: no such results directory")
    assert not (tmp_path / "site").exists()


# -- report --out --------------------------------------------------------------------------------


@pytest.fixture
def results(tmp_path):
    folder = tmp_path / "results"
    folder.mkdir()
    return folder


def test_report_refuses_an_out_that_is_a_regular_file_and_keeps_it(results, tmp_path):
    mine = tmp_path / "notes.txt"
    mine.write_text("mine")
    r = run("report", str(results), "--out", str(mine))
    assert r.returncode == 2 and "is not a directory" in r.stderr and "Traceback" not in r.stderr
    assert mine.read_text() == "mine"


def test_report_refuses_an_out_that_is_a_link_and_touches_neither_end(results, tmp_path):
    target = tmp_path / "somewhere"
    target.mkdir()
    link = tmp_path / "site"
    link.symlink_to(target, target_is_directory=True)
    r = run("report", str(results), "--out", str(link))
    assert r.returncode == 2 and "is a link" in r.stderr
    assert link.is_symlink() and list(target.iterdir()) == []


def test_report_refuses_a_file_where_it_writes_its_model_pages(results, tmp_path):
    site = tmp_path / "site"
    site.mkdir()
    (site / "models").write_text("mine")
    r = run("report", str(results), "--out", str(site))
    assert r.returncode == 2 and (site / "models").read_text() == "mine"


# -- what report reads -------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_run(tmp_path_factory):
    """A real result directory (verify --server against the loopback server)."""
    from openai_server import OpenAIServer
    from verify_helpers import ENTRY, verify_args, write_rows

    root = tmp_path_factory.mktemp("one-run")
    reg = root / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(root / "gsm8k.jsonl")
    out = root / "results" / "org--draft"
    with OpenAIServer() as server:  # in-process; set up before the per-test environment, so it is given here
        done = run_in_process(
            *verify_args(server, reg, rows, out),
            env={"SPECREG_CACHE": str(root / "specreg-cache"), "SPECREG_VERIFY_IDLE_WAIT": "0"},
        )
    assert done.returncode == 0, done.stderr
    return reg, out


def results_copy(one_run, tmp_path):
    import shutil

    reg, out = one_run
    results = tmp_path / "results"
    shutil.copytree(out.parent, results)
    return reg, results


RETYPES = {
    "started": 5,
    "model": "o/" + "x" * 300,
    "verdict": 7,
    "harness": [1],
    "statistics": "none",
    "statistics.acceptance_length": "2.8",
    "statistics.acceptance_length ": True,
    "statistics.al_interval": [2.5],
    "statistics.per_position": ["a"],
    "judgement": "x",
    "judgement.checks": [1],
    "baseline": 3,
    "environment": "x",
}


#: values of a result.json that once ended `report` in an internal error (exit 3)
RESULT_HOLES = {
    "a NUL byte in model": ("model", "org/\x00bad"),
    "a null AL": ("statistics.acceptance_length", None),
    "an error that is an object": ("error", {"why": "x"}),
    "a baseline AL that is a list": ("baseline.acceptance_length", [2.8]),
}


MALFORMED = [(field.strip(), value) for field, value in RETYPES.items()] + list(RESULT_HOLES.values())


@pytest.mark.parametrize("field, value", MALFORMED, ids=[*RETYPES, *RESULT_HOLES])
def test_a_malformed_result_is_skipped_with_a_warning_and_the_report_goes_on(one_run, tmp_path, field, value):
    reg, results = results_copy(one_run, tmp_path)
    bad = results / "org--bad"
    bad.mkdir()
    doc = json.loads((results / "org--draft" / "result.json").read_text())
    doc["model"] = "org/bad"
    node, *rest = field.split(".")
    if rest:
        doc.setdefault(node, {})[rest[0]] = value
    else:
        doc[node] = value
    (bad / "result.json").write_text(json.dumps(doc))
    r = run_in_process("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "skipped org--bad/result.json" in r.stderr
    assert "<td class='verdict'>pass</td>" in (tmp_path / "site" / "index.html").read_text()


def test_history_rows_with_a_text_or_blob_al_are_skipped(one_run, tmp_path):
    import sqlite3

    reg, results = results_copy(one_run, tmp_path)
    from specreg.verify.outputs import HISTORY_COLUMNS, HISTORY_INSERT

    with sqlite3.connect(results / "history.sqlite") as db:
        row = list(db.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM runs"))[0]
        db.execute(HISTORY_INSERT, (*row[:2], "2030-01-01", row[3], "high", *row[5:]))
        db.execute(HISTORY_INSERT, (*row[:2], "2030-01-02", row[3], b"\x00", *row[5:]))
    r = run("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "2 malformed row(s) skipped" in r.stderr


def test_a_history_whose_runs_is_a_recursive_view_is_given_up(one_run, tmp_path, monkeypatch):
    """A view that never ends is interrupted by report's step budget (MAX_HISTORY_STEPS, 50 million
    SQLite steps: about 4 CPU-s); here, in-process, a budget of one million gives it up just the same."""
    import sqlite3

    from specreg.verify import report

    reg, results = results_copy(one_run, tmp_path)
    (results / "history.sqlite").unlink()
    with sqlite3.connect(results / "history.sqlite") as db:
        db.execute(
            "CREATE VIEW runs AS WITH RECURSIVE n(model, dataset, started, verdict, acceptance_length, "
            "draft_acceptance_rate, vllm_version, gpu, result) AS (SELECT 'a', 'b', 'c', 'd', 1, 1, 'v', 'g', 'r' "
            "UNION ALL SELECT * FROM n) SELECT * FROM n"
        )
    monkeypatch.setattr(report, "MAX_HISTORY_STEPS", 1_000_000)
    r = run_in_process("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    assert "history history.sqlite not read: OperationalError: interrupted" in r.stderr


@pytest.mark.parametrize("name, limit", [("result.json", 8), ("per_position.png", 16)])
def test_an_oversized_result_file_is_not_read_whole(one_run, tmp_path, name, limit):
    reg, results = results_copy(one_run, tmp_path)
    with open(results / "org--draft" / name, "r+b") as fh:
        fh.truncate(limit * 2**20 + 1)  # sparse: no disk, but too large to read
    r = run("report", str(results), "--out", str(tmp_path / "site"), "--registry", str(reg))
    assert r.returncode == 0, r.stderr
    if name == "result.json":
        assert "larger than 8 MiB" in r.stderr
    else:
        assert not (tmp_path / "site" / "models" / "org--draft-per-position.png").exists()


def test_a_history_that_is_a_link_is_not_followed(tmp_path):
    """sqlite followed a history.sqlite link and created the file it pointed to, outside the run."""
    from openai_server import OpenAIServer
    from verify_helpers import ENTRY, verify_args, write_rows

    reg = tmp_path / "registry"
    (reg / "org").mkdir(parents=True)
    (reg / "org" / "draft.toml").write_text(ENTRY)
    rows = write_rows(tmp_path / "gsm8k.jsonl")
    out = tmp_path / "results" / "org--draft"
    out.parent.mkdir(parents=True)
    (out.parent / "history.sqlite").symlink_to(tmp_path / "elsewhere.sqlite")
    with OpenAIServer() as server:
        r = run_specreg(*verify_args(server, reg, rows, out), timeout=120)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "elsewhere.sqlite").exists()
    assert "not added to the history" in r.stderr and (out / "result.json").is_file()


# -- every reader, every file-system shape ---------------------------------------------------------------------


def _result_paths(value, path=()):
    """Every key path of a result, with the first item of each list standing for the others."""
    if path:
        yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _result_paths(v, (*path, k))
    elif isinstance(value, list) and value:
        yield from _result_paths(value[0], (*path, 0))


def test_every_field_of_a_result_retyped_is_shown_or_skipped_never_an_internal_error(one_run, tmp_path):
    """Each field of a real result.json set to an object, a list, a string, a bool or null: report
    builds the page (the result shown or skipped with a warning), with no other exception."""
    import shutil

    from specreg.verify import report

    reg, results = results_copy(one_run, tmp_path)
    for db in results.rglob("history.sqlite"):  # the result file alone is read
        db.unlink()
    target = results / "org--draft" / "result.json"
    doc = json.loads(target.read_text())
    wrong = []
    for path in _result_paths(doc):
        for value in ({"x": 1}, [1], "1", True, None):
            changed = json.loads(json.dumps(doc))
            node = changed
            for key in path[:-1]:
                node = node[key]
            node[path[-1]] = value
            target.write_text(json.dumps(changed))
            shutil.rmtree(tmp_path / "site", ignore_errors=True)
            try:
                report.build(results, tmp_path / "site", registry=str(reg), warnings=[])
            except Exception as exc:  # noqa: BLE001 - the point: any exception is a bug
                wrong.append((path, value, f"{type(exc).__name__}: {exc}"))
    assert wrong == []
