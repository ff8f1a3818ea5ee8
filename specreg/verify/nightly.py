"""`specreg verify --all [--shard I/N] [--resume]`: every catalog entry with a baseline, each in its
own subprocess with a timeout. A crash, an out-of-memory kill or a timeout is recorded as that
entry's result and the run goes on; finished results are never rewritten by a later failure, and
`--resume` skips entries whose result is already there. An entry file the catalog cannot read is
recorded as `invalid` (its problems as the error) and the other entries are measured."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence, TypeVar

from specreg.verify import outputs
from specreg.verify.run import utc_now, failed_result
from specreg.verify import harness
from specreg.entries import Baseline, Entry, read_catalog

FINAL = {
    "pass",
    "improved",
    "regressed",
    "out-of-band",
    "no-baseline",
    "secondary",
    "not-runnable",
    "refused",
    "invalid",
    "unmatched",
    "error",
    "timeout",
    "crash",
}


#: seconds an entry past its --timeout is given to record its own `timeout` result before it is killed
GRACE = 30.0


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--shard must be I/N with 1 <= I <= N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


T = TypeVar("T")


def shard(entries: Sequence[T], index: int, count: int) -> list[T]:
    """Shard I of N (1-based) of the entries in catalog order: every entry in exactly one shard."""
    return [e for i, e in enumerate(entries) if i % count == index - 1]


def directory_name(entry_id: str) -> str:
    return entry_id.replace("/", "--")


def runnable_baseline(entry: Entry) -> Baseline | None:
    """The baseline a nightly reproduces (`harness.primary_baseline`); None when the entry has none
    (reported, not run)."""
    picked = harness.primary_baseline(entry)
    return picked[1] if picked else None


def _done(out: Path) -> bool:
    try:
        return json.loads((out / outputs.RESULT).read_text()).get("verdict") in FINAL
    except (OSError, ValueError):
        return False


def _failure(entry: Entry, out: Path, history: Path, verdict: str, message: str) -> None:
    outputs.write_all(out, failed_result(entry.id, utc_now(), "subprocess", verdict, message), history)


def command(entry: Entry, out: Path, history: Path, extra: Sequence[str]) -> list[str]:
    """`specreg verify ENTRY --baseline N`: verify builds the baseline's harness itself, as for a single run."""
    picked = harness.primary_baseline(entry)
    chosen = ["--baseline", str(picked[0])] if picked else []
    return [
        sys.executable,
        "-m",
        "specreg",
        "verify",
        entry.id,
        "--out",
        str(out),
        "--history",
        str(history),
        *chosen,
        *extra,
    ]


def _file_id(file: str) -> str:
    """The entry id a catalog file stands for (registry/<org>/<name>.toml), whether or not it reads."""
    path = Path(file)
    return f"{path.parent.name}/{path.stem}"


def _read(registry: str | None) -> tuple[list[Entry], dict[str, list[str]]]:
    """The entries with a baseline whose files read without a problem, and id -> problem lines of the others."""
    entries, problems = read_catalog(registry)
    invalid: dict[str, list[str]] = {}
    for file, p in problems:
        invalid.setdefault(_file_id(file), []).append(f"{file}: {p.path}: {p.message}")
    good = [e for e in entries if e.baselines and _file_id(e.path or f"{e.id}.toml") not in invalid]
    return good, dict(sorted(invalid.items()))


def run_all(
    out_dir: Path,
    *,
    shard_spec: str = "1/1",
    resume: bool = False,
    timeout: float = 3600,
    extra: Sequence[str] = (),
    registry: str | None = None,
    dataset_files: dict[str, str] | None = None,
    make_command: Callable[[Entry, Path, Path, Sequence[str]], list[str]] = command,
    grace: float = GRACE,
    progress: Callable[[str], None] = lambda _m: None,
) -> dict[str, str]:
    """Verdict per entry id of this shard."""
    index, count = parse_shard(shard_spec)
    entries, invalid = _read(registry)
    mine = shard(entries, index, count)
    out_dir.mkdir(parents=True, exist_ok=True)
    history = out_dir / outputs.HISTORY
    verdicts: dict[str, str] = {}
    for entry_id in shard(list(invalid), index, count):
        out = out_dir / directory_name(entry_id)
        if not (resume and _done(out)):
            outputs.write_all(
                out, failed_result(entry_id, utc_now(), "none", "invalid", "; ".join(invalid[entry_id])), history
            )
        verdicts[entry_id] = json.loads((out / outputs.RESULT).read_text())["verdict"]
        progress(f"{entry_id}: {verdicts[entry_id]}: " + "; ".join(invalid[entry_id]))
    for n, entry in enumerate(mine, 1):
        out = out_dir / directory_name(entry.id)
        if resume and _done(out):
            verdicts[entry.id] = json.loads((out / outputs.RESULT).read_text())["verdict"]
            progress(f"[{n}/{len(mine)}] {entry.id}: done before ({verdicts[entry.id]}), skipped")
            continue
        progress(f"[{n}/{len(mine)}] {entry.id}")
        baseline = runnable_baseline(entry)
        dataset = baseline.harness.dataset if baseline is not None else None
        if baseline is None or dataset_files and dataset not in dataset_files:
            why = (
                harness.why_not_runnable(entry)
                if baseline is None
                else (
                    f"its baseline's dataset is {dataset} and --dataset-file gives rows for "
                    f"{', '.join(sorted(dataset_files or ()))} only"
                )
            )
            outputs.write_all(
                out, failed_result(entry.id, utc_now(), "none", "not-runnable", "", judgement={"reason": why}), history
            )
            verdicts[entry.id] = "not-runnable"
            progress(f"    not-runnable: {why}")
            continue
        rows = ["--dataset-file", f"{dataset}={dataset_files[dataset]}"] if dataset_files else []
        env = dict(os.environ)
        if registry:
            env["SPECREG_REGISTRY"] = str(registry)
        proc = subprocess.Popen(make_command(entry, out, history, [*rows, *extra]), env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout + grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _failure(entry, out, history, "timeout", f"no result within {timeout:g} s; killed")
        else:
            if not _done(out):
                why = (
                    "killed by SIGKILL (out of memory?)"
                    if code == -signal.SIGKILL
                    else f"killed by signal {-code}"
                    if code < 0
                    else f"exited with status {code} without a result"
                )
                _failure(entry, out, history, "crash", why)
        verdicts[entry.id] = json.loads((out / outputs.RESULT).read_text())["verdict"]
        progress(f"    {verdicts[entry.id]}")
    return verdicts
