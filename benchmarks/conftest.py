"""Shared helpers for the benchmarks: whole-process timing with peak memory, and a results table
printed at the end of the run (copied into docs/performance.md)."""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

RESULTS: list[tuple[str, str, str]] = []  # (what, figure, target)


def record(what: str, figure: str, target: str = "") -> None:
    RESULTS.append((what, figure, target))


#: Runs the command from a small launcher process: a child's peak RSS (ru_maxrss) includes the
#: memory of the process it was forked from, so forking from pytest would count pytest's too.
LAUNCHER = """
import json, os, sys, time
argv = json.loads(sys.argv[1])
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    os.execvp(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
print(json.dumps([time.perf_counter() - start, usage.ru_maxrss, os.waitstatus_to_exitcode(status)]))
"""


def process(argv: list[str], *, runs: int = 7, env: dict | None = None, cwd: Path | None = None) -> tuple[float, float]:
    """Median wall time (s) and median peak RSS (MiB) of a whole process, over `runs` runs after
    one warm-up (which also writes the .pyc files a normal installation has)."""
    import json

    environ = {**os.environ, **(env or {})}
    environ.pop("PYTHONDONTWRITEBYTECODE", None)
    times, peaks = [], []
    for i in range(runs + 1):
        r = subprocess.run(
            [sys.executable, "-S", "-c", LAUNCHER, json.dumps(argv)],
            capture_output=True,
            text=True,
            env=environ,
            cwd=cwd,
            timeout=900,
        )
        elapsed, maxrss_kib, code = json.loads(r.stdout.strip().splitlines()[-1])
        if code not in (0, 1):
            raise RuntimeError(f"{argv} failed: {r.stderr[-2000:]}")
        if i:
            times.append(elapsed)
            peaks.append(maxrss_kib / 1024)
    return statistics.median(times), statistics.median(peaks)


def pytest_terminal_summary(terminalreporter):
    if not RESULTS:
        return
    w = max(len(r[0]) for r in RESULTS)
    terminalreporter.write_sep("=", "specreg figures")
    for what, figure, target in RESULTS:
        terminalreporter.write_line(f"{what:<{w}}  {figure:<28} {target}")


@pytest.fixture(scope="session")
def draft_dir(tmp_path_factory) -> Path:
    """A local draft directory (the shipped example config)."""
    d = tmp_path_factory.mktemp("draft")
    (d / "config.json").write_bytes((ROOT / "examples" / "qwen3-8b-dflash" / "config.json").read_bytes())
    return d
