"""`specreg verify --all [--shard I/N] [--resume]`: every catalog entry with a baseline, each in its
own subprocess with a timeout. A crash, an out-of-memory kill or a timeout is recorded as that
entry's result and the run goes on; finished results are never rewritten by a later failure, and
`--resume` skips entries whose result is already there."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Callable, Sequence

from specreg.verify import outputs
from specreg.verify.run import _now, failed_result
from specreg.verify.prompts import DATASETS
from specreg.entries import Baseline, Entry, catalog

FINAL = {"pass", "improved", "regressed", "out-of-band", "no-baseline", "secondary", "not-runnable", "refused", "invalid",
         "error", "timeout", "crash"}


#: seconds an entry past its --timeout is given to record its own `timeout` result before it is killed
GRACE = 30.0


def parse_shard(text: str) -> tuple[int, int]:
    m = re.fullmatch(r"(\d+)/(\d+)", text or "")
    if not m or not 1 <= int(m.group(1)) <= int(m.group(2)):
        raise ValueError(f"--shard must be I/N with 1 <= I <= N, got {text!r}")
    return int(m.group(1)), int(m.group(2))


def shard(entries: Sequence[Entry], index: int, count: int) -> list[Entry]:
    """Shard I of N (1-based) of the entries in catalog order: every entry in exactly one shard."""
    return [e for i, e in enumerate(entries) if i % count == index - 1]


def directory_name(entry_id: str) -> str:
    return entry_id.replace("/", "--")


def runnable_baseline(entry: Entry) -> Baseline | None:
    """The baseline a nightly reproduces: the first primary (not `secondary`) one with an acceptance
    length on a dataset verify can load; None when the entry has none (reported, not run)."""
    for b in entry.baselines:
        if not b.secondary and b.harness.dataset in DATASETS and b.metrics.acceptance_length is not None:
            return b
    return None


def _why_not_runnable(entry: Entry) -> str:
    primary = [b for b in entry.baselines if not b.secondary]
    if not primary:
        return "only secondary baselines (reported beside a run, never a gate): nothing to reproduce"
    datasets = sorted({str(b.harness.dataset) for b in primary})
    return (f"no primary baseline on a dataset verify can load (the baselines use {', '.join(datasets)}; "
            f"verify knows {', '.join(sorted(DATASETS))})")


def harness_args(entry: Entry) -> list[str]:
    """Arguments reproducing the harness of the entry's runnable baseline: every field it states."""
    b = runnable_baseline(entry)
    if b is None:
        return []
    h = b.harness
    args = ["--dataset", h.dataset + (f":{h.subset}" if h.subset else "")]
    for flag, value in (("--num-prompts", h.num_prompts), ("--temperature", h.temperature),
                        ("--max-tokens", h.max_tokens), ("--k", h.k), ("--batch-size", h.batch_size),
                        ("--seed", h.seed), ("--few-shot", h.prompt.few_shot),
                        ("--shots-split", h.prompt.shots_split), ("--template", h.prompt.template),
                        ("--max-model-len", h.max_model_len), ("--tensor-parallel-size", h.tensor_parallel_size),
                        ("--mode", h.mode), ("--statistic", h.statistic),
                        ("--draft-sample-method", h.draft_sample_method)):
        if value is not None:
            args.append(f"{flag}={value}")  # one argument: a value may begin with "-" (a stop string "--all")
    for text in h.stop or ():
        args.append(f"--stop={text}")
    if h.prompt.chat_template is False:
        args.append("--raw")
    if h.prompt.thinking is not None:
        args.append("--thinking" if h.prompt.thinking else "--no-thinking")
    if h.prefix_caching is not None:
        args.append("--prefix-caching" if h.prefix_caching else "--no-prefix-caching")
    return args


def _done(out: Path) -> bool:
    try:
        return json.loads((out / outputs.RESULT).read_text()).get("verdict") in FINAL
    except (OSError, ValueError):
        return False


def _failure(entry: Entry, out: Path, history: Path, verdict: str, message: str) -> None:
    outputs.write_all(out, failed_result(entry.id, _now(), "subprocess", verdict, message), history)


def command(entry: Entry, out: Path, history: Path, extra: Sequence[str]) -> list[str]:
    return [sys.executable, "-m", "specreg", "verify", entry.id, "--out", str(out), "--history", str(history),
            *harness_args(entry), *extra]


def run_all(out_dir: Path, *, shard_spec: str = "1/1", resume: bool = False, timeout: float = 3600,
            extra: Sequence[str] = (), registry: str | None = None,
            make_command: Callable[[Entry, Path, Path, Sequence[str]], list[str]] = command, grace: float = GRACE,
            progress: Callable[[str], None] = lambda _m: None) -> dict[str, str]:
    """Verdict per entry id of this shard."""
    index, count = parse_shard(shard_spec)
    entries = [e for e in catalog(registry) if e.baselines]
    mine = shard(entries, index, count)
    out_dir.mkdir(parents=True, exist_ok=True)
    history = out_dir / outputs.HISTORY
    verdicts: dict[str, str] = {}
    for n, entry in enumerate(mine, 1):
        out = out_dir / directory_name(entry.id)
        if resume and _done(out):
            verdicts[entry.id] = json.loads((out / outputs.RESULT).read_text())["verdict"]
            progress(f"[{n}/{len(mine)}] {entry.id}: done before ({verdicts[entry.id]}), skipped")
            continue
        progress(f"[{n}/{len(mine)}] {entry.id}")
        if runnable_baseline(entry) is None:
            outputs.write_all(out, failed_result(entry.id, _now(), "none", "not-runnable", "",
                                                 judgement={"reason": _why_not_runnable(entry)}), history)
            verdicts[entry.id] = "not-runnable"
            progress("    not-runnable")
            continue
        env = dict(os.environ)
        if registry:
            env["SPECREG_REGISTRY"] = str(registry)
        proc = subprocess.Popen(make_command(entry, out, history, extra), env=env, start_new_session=True)
        try:
            code = proc.wait(timeout=timeout + grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            _failure(entry, out, history, "timeout", f"no result within {timeout:g} s; killed")
        else:
            if not _done(out):
                why = "killed by SIGKILL (out of memory?)" if code == -signal.SIGKILL else \
                    f"killed by signal {-code}" if code < 0 else f"exited with status {code} without a result"
                _failure(entry, out, history, "crash", why)
        verdicts[entry.id] = json.loads((out / outputs.RESULT).read_text())["verdict"]
        progress(f"    {verdicts[entry.id]}")
    return verdicts
