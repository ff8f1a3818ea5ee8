"""`specreg report` over a long history (issue 47: 10,000 runs took 92 s for one model and 193 s for
100 models). Run: .venv/bin/python -m pytest benchmarks/test_report_speed.py -q -s"""

from __future__ import annotations

import time

import pytest

from conftest import record
from specreg.verify import report
from history_helpers import history_results, stored_run

RUNS = 10_000


def _run(model: str, i: int) -> dict:
    """Run i of a long history: dates spread over a year, a regression every 7th run, AL moving, the
    vLLM version changing every 2,500 runs."""
    started = f"2026-{1 + i // 2800 % 12:02d}-{1 + i // 100 % 28:02d}T{i % 24:02d}:{i // 24 % 60:02d}:00+00:00"
    run = stored_run(model, 1, started=started, verdict="pass" if i % 7 else "regressed")
    run["statistics"] = {**run["statistics"], "acceptance_length": 3.0 + (i % 10) / 10}
    run["environment"] = {"vllm_version": f"0.{30 + i // 2500}.0", "gpu": "H100"}
    return run


@pytest.mark.parametrize("models", [1, 100])
def test_report_over_a_long_history(tmp_path, models):
    results = history_results(tmp_path, [_run(f"org/m{i % models}", i) for i in range(RUNS)])
    wall, cpu = time.perf_counter(), time.process_time()
    report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    record(f"report over {RUNS:,} history runs, {models} model(s)", f"{wall:.1f} s wall, {cpu:.1f} s CPU", "seconds")
