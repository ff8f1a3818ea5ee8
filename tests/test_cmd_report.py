"""`specreg report` on the CLI: what it refuses before writing anything."""

from conftest import run_specreg

run = run_specreg


def test_report_on_a_missing_directory_exits_2(tmp_path):
    out = run("report", str(tmp_path / "nope"), "--out", str(tmp_path / "site"))
    assert out.returncode == 2 and out.stderr.startswith(f"error: {tmp_path / 'nope'}: no such results directory")
    assert not (tmp_path / "site").exists()
