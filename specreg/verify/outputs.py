"""What a run leaves in `--out DIR`: result.json, summary.md, junit.xml, per_position.png, and a
row in the SQLite history (DIR/../history.sqlite by default, shared by every run of a nightly)."""

from __future__ import annotations

import contextlib
import json
import sqlite3
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree as ET

from specreg import atomic
from specreg.verify.judge import label, show

RESULT, SUMMARY, JUNIT, PLOT = "result.json", "summary.md", "junit.xml", "per_position.png"
#: the run history beside the results of a nightly (one per shard; `specreg report` merges them)
HISTORY = "history.sqlite"
#: the most a result file read back (by the report, by --resume) may hold: results are untrusted files
MAX_RESULT_BYTES = 8 * 2**20


def result_text(result: dict[str, Any]) -> str:
    """A result as result.json holds it (and `verify --json` prints it)."""
    return json.dumps(result, indent=2, default=str) + "\n"


def write_result(out: Path, result: dict[str, Any]) -> None:
    out.mkdir(parents=True, exist_ok=True)
    atomic.write_bytes(out / RESULT, result_text(result).encode())


def metric_rows(s: dict[str, Any]) -> list[tuple[str, str, float]]:
    """(check name, label, measured value) of every reported metric, in table order."""
    return [
        ("acceptance_length", "acceptance length", s["acceptance_length"]),
        ("draft_acceptance_rate", "draft acceptance rate", s["draft_acceptance_rate"]),
    ] + [(f"per_position[{i}]", label(f"per_position[{i}]"), p) for i, p in enumerate(s["per_position"])]


def bounds_text(check: dict[str, Any]) -> str:
    lo, hi = check["bounds"]
    return f">= {lo:.3f}" + (f", <= {hi:.3f}" if hi is not None else "") + f" ({check['tolerance_from']})"


def summary_markdown(r: dict[str, Any]) -> str:
    s, j, h = r.get("statistics") or {}, r.get("judgement") or {}, r["harness"]
    lines = [f"## {r['model']}: **{r['verdict']}**", ""]
    against = r.get("against")
    if isinstance(against, dict) and against.get("text"):
        lines += [str(against["text"]), ""]
    if r.get("error"):
        lines += [f"Engine failure: `{r['error']}`", ""]
    if s:
        ci = s.get("al_interval")
        ci_text = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f} over {s['chunks']} chunks)" if ci else ""
        lines += ["| metric | measured | baseline | bounds | verdict |", "|---|---|---|---|---|"]
        checks = {c["metric"]: c for c in j.get("checks", [])}
        for name, label, value in metric_rows(s):
            shown = f"{value:.3f}" + (ci_text if name == "acceptance_length" else "")
            c = checks.get(name)
            if c:
                lines.append(
                    f"| {label} | {shown} | {c.get('baseline_text', c['baseline'])} | {bounds_text(c)} | {c['verdict']} |"
                )
            else:
                lines.append(f"| {label} | {shown} | - | - | - |")
        lines.append("")
    if j.get("reason"):
        lines += [f"{j['reason']}", ""]
    if prompts_text(r):
        lines += [f"Prompts: {prompts_text(r)}", ""]
    if j.get("differences"):
        lines += ["Harness differences from the baseline:", ""]
        lines += [f"- {d}" for d in j["differences"]]
        lines.append("")
    if j.get("not_recorded_by_baseline"):
        lines += [f"Not recorded by the baseline (not compared): {', '.join(j['not_recorded_by_baseline'])}", ""]
    speed = throughput_text(r)
    if speed:
        lines += [speed, ""]
    env = r.get("environment") or {}
    lines += [
        f"Harness: {harness_text(h)}",
        "",
        f"Engine: {r['engine']}; vLLM {show(env.get('vllm_version'))}; "
        f"GPU {show(env.get('gpu'))}; driver {show(env.get('driver'))}",
        "",
    ]
    return "\n".join(lines)


def harness_text(h: dict[str, Any]) -> str:
    """A run's harness in one line: every field it states, no None."""
    return ", ".join(f"{k}={show(v)}" for k, v in h.items() if v not in (None, {}, []))


def prompts_text(r: dict[str, Any]) -> str:
    """ "24 of 80 (the verdict was decided: the rest was not run)", or "" for a result that does not say
    (one written before the sequential test, or a run that measured nothing)."""
    used, planned = r.get("prompts_used"), r.get("prompts_planned")
    if not (isinstance(used, int) and isinstance(planned, int)) or isinstance(used, bool) or isinstance(planned, bool):
        return ""
    return f"{used} of {planned}" + (" (the verdict was decided: the rest was not run)" if stopped_early(r) else "")


def stopped_early(r: dict[str, Any]) -> bool:
    """Whether the sequential test stopped the run before its last planned prompt."""
    return isinstance(r.get("sequential"), dict) and r["sequential"].get("stopped_early") is True


def throughput_text(r: dict[str, Any]) -> str:
    """Output tokens per second (and the speedup without the draft, when measured), or ""."""
    s, t = r.get("statistics") or {}, r.get("throughput") or {}
    if not s.get("output_tokens_per_s"):
        return ""
    text = f"Output: {s['output_tokens_per_s']:.1f} tokens/s, {s['ms_per_output_token']:.2f} ms per token"
    if t.get("speedup"):
        text += (
            f"; without the draft {t['output_tokens_per_s_without_draft']:.1f} tokens/s: speedup {t['speedup']:.2f}x"
        )
    return text + " (this engine, GPU, batch and concurrency)"


def junit_xml(r: dict[str, Any]) -> bytes:
    suite = ET.Element("testsuite", name="specreg-verify", tests="0", failures="0", errors="0")
    checks = (r.get("judgement") or {}).get("checks", [])
    failures = errors = 0
    if r.get("error"):
        case = ET.SubElement(suite, "testcase", classname=r["model"], name="engine")
        ET.SubElement(case, "error", message=r["error"])
        errors += 1
    for c in checks:
        case = ET.SubElement(suite, "testcase", classname=r["model"], name=c["metric"])
        if c["verdict"] == "regressed":
            failures += 1
            ET.SubElement(
                case,
                "failure",
                message=f"{c['measured']:.4f} outside {c['bounds']} of baseline {c.get('baseline_text', c['baseline'])}",
            )
    if not checks and not r.get("error"):
        case = ET.SubElement(suite, "testcase", classname=r["model"], name="acceptance_length")
        ET.SubElement(case, "skipped", message=(r.get("judgement") or {}).get("reason") or r["verdict"])
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    suite.set("errors", str(errors))
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)


def plot_png(path: Path, r: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    measured = (r.get("statistics") or {}).get("per_position") or []
    baseline = (r.get("baseline") or {}).get("per_position") or []
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=100)
    if measured:
        ax.plot(range(1, len(measured) + 1), measured, "o-", label="measured")
    if baseline:
        ax.plot(range(1, len(baseline) + 1), baseline, "s--", label="baseline")
    positions = max(len(measured), len(baseline))
    if positions:
        ax.set_xticks(range(1, positions + 1))
    ax.set_xlabel("draft position")
    ax.set_ylabel("acceptance rate")
    ax.set_ylim(0, 1)
    ax.set_title(f"{r['model']} ({r['harness'].get('dataset')})", fontsize=9)
    ax.legend(loc="upper right")
    fig.tight_layout()
    try:
        atomic.replace(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)


#: seconds a run waits for another writer of the history before it gives up on its row (the run is kept)
HISTORY_WAIT = 10.0

HISTORY_SCHEMA = """CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT, model TEXT NOT NULL, dataset TEXT, started TEXT NOT NULL,
    verdict TEXT NOT NULL, acceptance_length REAL, draft_acceptance_rate REAL, vllm_version TEXT, gpu TEXT,
    result TEXT NOT NULL)"""
#: the columns of a run, in the order HISTORY_INSERT takes them (and report reads them back)
HISTORY_COLUMNS = (
    "model",
    "dataset",
    "started",
    "verdict",
    "acceptance_length",
    "draft_acceptance_rate",
    "vllm_version",
    "gpu",
    "result",
)
HISTORY_INSERT = f"INSERT INTO runs ({', '.join(HISTORY_COLUMNS)}) VALUES ({', '.join('?' * len(HISTORY_COLUMNS))})"


def append_history(db: Path, r: dict[str, Any]) -> None:
    db.parent.mkdir(parents=True, exist_ok=True)
    if db.is_symlink() or (db.exists() and not db.is_file()):
        # sqlite would follow the link and create or change the file it points to
        raise OSError(f"{db} is a link or not a regular file; a history is a plain SQLite file")
    with contextlib.closing(sqlite3.connect(db, timeout=HISTORY_WAIT)) as conn, conn:
        conn.execute(HISTORY_SCHEMA)
        s = r.get("statistics") or {}
        conn.execute(
            HISTORY_INSERT,
            (
                r["model"],
                r["harness"].get("dataset"),
                r["started"],
                r["verdict"],
                s.get("acceptance_length"),
                s.get("draft_acceptance_rate"),
                r["environment"].get("vllm_version"),
                r["environment"].get("gpu"),
                json.dumps(r, default=str),
            ),
        )


def write_all(out: Path, r: dict[str, Any], history: Path | None) -> list[str]:
    """Every output of a run; returns the file names written."""
    write_result(out, r)
    atomic.write_bytes(out / SUMMARY, summary_markdown(r).encode())
    atomic.write_bytes(out / JUNIT, junit_xml(r))
    written = [RESULT, SUMMARY, JUNIT]
    if r.get("statistics"):
        plot_png(out / PLOT, r)
        written.append(PLOT)
    if history is not None:
        try:
            append_history(history, r)
        except (sqlite3.Error, OSError) as exc:
            # the run's own files are written already: a broken or busy history never loses it
            print(
                f"warning: {history}: the run was not added to the history ({type(exc).__name__}: {exc}); "
                f"its result is in {out / RESULT}",
                file=sys.stderr,
            )
    return written
