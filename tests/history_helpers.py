"""Verify runs as a history.sqlite stores them, for the report's tests and benchmarks (no conftest
import: benchmarks/ has its own)."""

import json
from pathlib import Path


def stored_run(model: str, day: int, **fields) -> dict:
    """A run as a history row stores it: a pass on MT-Bench against baseline 0."""
    run_ = {
        "model": model,
        "started": f"2026-01-{day:02d}T00:00:00+00:00",
        "engine": "e",
        "verdict": "pass",
        "statistics": {
            "acceptance_length": 3.0,
            "draft_acceptance_rate": 0.5,
            "al_interval": [2.9, 3.1],
            "per_position": [0.9],
        },
        "judgement": {
            "reason": "within the band",
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
        "environment": {"vllm_version": "0.33.0", "gpu": "H100"},
        "notes": [],
    }
    return {**run_, **fields}


def history_results(tmp_path, runs: list[dict]) -> Path:
    """A results directory holding only a history.sqlite of `runs` (and an empty registry)."""
    import sqlite3

    from specreg.verify.outputs import HISTORY_INSERT, HISTORY_SCHEMA

    results = tmp_path / "results"
    results.mkdir()
    with sqlite3.connect(results / "history.sqlite") as conn:
        conn.execute(HISTORY_SCHEMA)
        for r in runs:
            s = r["statistics"] or {}
            row = (r["model"], r["harness"].get("dataset"), r["started"], r["verdict"], s.get("acceptance_length"))
            env = r["environment"]
            conn.execute(HISTORY_INSERT, (*row, 0.5, env.get("vllm_version"), env.get("gpu"), json.dumps(r)))
    conn.close()
    (tmp_path / "registry").mkdir()
    return results
