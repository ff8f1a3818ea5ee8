"""`specreg report` over a long history (issue 47: 10,000 runs took 92 s for one model and 193 s for
100 models). Run: .venv/bin/python -m pytest benchmarks/test_report_speed.py -q -s"""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

import pytest

from conftest import record
from specreg.verify import report
from specreg.verify.outputs import HISTORY_INSERT, HISTORY_SCHEMA

RUNS = 10_000


def _run(model: str, i: int) -> dict:
    return {
        "model": model,
        "started": f"2026-{1 + i // 2800 % 12:02d}-{1 + i // 100 % 28:02d}T{i % 24:02d}:{i // 24 % 60:02d}:00+00:00",
        "engine": "e",
        "verdict": "pass" if i % 7 else "regressed",
        "statistics": {
            "acceptance_length": 3.0 + (i % 10) / 10,
            "draft_acceptance_rate": 0.5,
            "al_interval": [2.9, 3.1],
            "per_position": [0.9, 0.8, 0.7],
        },
        "judgement": {
            "reason": "r",
            "baseline_index": 0,
            "checks": [
                {
                    "metric": "acceptance_length",
                    "verdict": "pass",
                    "bounds": [2.7, None],
                    "baseline": 3.0,
                    "tolerance_from": "default",
                }
            ],
        },
        "baseline": {"acceptance_length": {"value": 3.0}},
        "harness": {"dataset": "mt-bench"},
        "environment": {"vllm_version": f"0.{30 + i // 2500}.0", "gpu": "H100"},
        "notes": [],
    }


def _history(root: Path, models: int) -> Path:
    results = root / "results"
    results.mkdir()
    with sqlite3.connect(results / "history.sqlite") as conn:
        conn.execute(HISTORY_SCHEMA)
        for i in range(RUNS):
            r = _run(f"org/m{i % models}", i)
            row = (r["model"], "mt-bench", r["started"], r["verdict"], r["statistics"]["acceptance_length"], 0.5)
            conn.execute(HISTORY_INSERT, (*row, r["environment"]["vllm_version"], "H100", json.dumps(r)))
    conn.close()
    (root / "registry").mkdir()
    return results


@pytest.mark.parametrize("models", [1, 100])
def test_report_over_a_long_history(tmp_path, models):
    results = _history(tmp_path, models)
    wall, cpu = time.perf_counter(), time.process_time()
    report.build(results, tmp_path / "site", registry=str(tmp_path / "registry"))
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    record(f"report over {RUNS:,} history runs, {models} model(s)", f"{wall:.1f} s wall, {cpu:.1f} s CPU", "seconds")
