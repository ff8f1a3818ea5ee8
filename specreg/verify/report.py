"""`specreg report DIR --out SITE`: a static HTML page from the results and history of verify
runs: the catalog with each model's latest verdict, and a page per model with its trend and its
per-position plot.

Every `history.sqlite` under DIR is read and merged (a nightly's shards each write one, and the
previous nights' merged history can be placed there too), so the trend spans shards and nights;
`--history-out FILE` writes the merged history for the next night. Result files and histories are
untrusted: a bad one is skipped with a warning on the page; files in SITE are replaced, never written
through a link planted there."""

from __future__ import annotations

import html
import json
import sqlite3
from pathlib import Path
from typing import Any

from specreg.verify.nightly import directory_name
from specreg import atomic
from specreg.errors import SpecregError
from specreg.sources.files import FileTooLarge, read_regular
from specreg.verify.outputs import (HISTORY, HISTORY_COLUMNS, HISTORY_INSERT, HISTORY_SCHEMA, PLOT, RESULT,
                                    bounds_text, metric_rows)

STYLE = """body{font-family:sans-serif;margin:2em;color:#222}table{border-collapse:collapse}
td,th{border:1px solid #ccc;padding:.3em .6em;text-align:left}.pass,.improved{background:#dfd}.out-of-band{background:#fdd}
.regressed,.crash,.timeout,.error{background:#fdd}.no-baseline,.refused,.invalid,.none,.secondary,.not-runnable{background:#eee}.warning{color:#a60}"""



#: what report reads from a results directory (untrusted: artifacts of other machines)
MAX_RESULT_BYTES = 8 * 2**20
MAX_PLOT_BYTES = 16 * 2**20
#: SQLite virtual-machine steps one history may take to read (a recursive view never ends)
MAX_HISTORY_STEPS = 50_000_000
_PNG = b"\x89PNG\r\n\x1a\n"


def _bounded_read(path: Path, limit: int) -> bytes:
    """A regular file's bytes, at most `limit` of them (sources.files.read_regular); a results tree's
    links are not followed at all, wherever they point."""
    if path.is_symlink():
        raise ValueError("a link, not a regular file")
    try:
        return read_regular(path, limit)
    except FileTooLarge:
        raise ValueError(f"larger than {limit // 2**20} MiB") from None


def _real(value: Any) -> bool:
    import math

    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_result(r: Any) -> None:
    """The fields the report reads, with the types it reads them as (ValueError otherwise)."""
    if not isinstance(r, dict) or not isinstance(r.get("model"), str) or not isinstance(r.get("verdict"), str):
        raise ValueError("not a verify result (an object with model and verdict)")
    if not 0 < len(r["model"]) <= 200 or len(r["verdict"]) > 40:
        raise ValueError("model or verdict of an impossible length")
    if not isinstance(r.get("started") or "", str):
        raise ValueError("started is not a date")
    for key in ("harness", "statistics", "judgement", "baseline", "environment"):
        if not isinstance(r.get(key) or {}, dict):
            raise ValueError(f"{key} is not an object")
    s = r.get("statistics") or {}
    if s.get("acceptance_length") is not None and not _real(s["acceptance_length"]):
        raise ValueError("statistics.acceptance_length is not a number")
    ci = s.get("al_interval")
    if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(map(_real, ci))):
        raise ValueError("statistics.al_interval is not two numbers")
    pp = s.get("per_position")
    if pp is not None and not (isinstance(pp, list) and all(map(_real, pp))):
        raise ValueError("statistics.per_position is not a list of numbers")
    checks = (r.get("judgement") or {}).get("checks") or []
    if not isinstance(checks, list) or not all(isinstance(c, dict) and isinstance(c.get("metric"), str) for c in checks):
        raise ValueError("judgement.checks is not a list of checks")


def _results(results_dir: Path, warnings: list[str]) -> list[dict[str, Any]]:
    found = []
    for path in sorted(results_dir.rglob(RESULT)):
        try:
            r = json.loads(_bounded_read(path, MAX_RESULT_BYTES).decode("utf-8"))
            _check_result(r)
        except RecursionError:
            warnings.append(f"skipped {path.relative_to(results_dir)}: nested too deeply")
            continue
        except (OSError, ValueError, UnicodeDecodeError) as exc:
            warnings.append(f"skipped {path.relative_to(results_dir)}: {exc}")
            continue
        r["_dir"] = path.parent
        found.append(r)
    return found


def _history_rows(db: Path, warnings: list[str], where: str) -> list[tuple]:
    """The runs of one history file, or none with a warning (corrupt, locked, not a history)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=2)
        steps = [0]

        def budget() -> int:  # called every 1,000 steps; non-zero interrupts the query
            steps[0] += 1000
            return int(steps[0] > MAX_HISTORY_STEPS)

        conn.set_progress_handler(budget, 1000)
        try:
            rows = list(conn.execute(f"SELECT {', '.join(HISTORY_COLUMNS)} FROM runs"))
        finally:
            conn.close()
    except sqlite3.Error as exc:
        warnings.append(f"history {where} not read: {type(exc).__name__}: {exc}")
        return []
    good = [row for row in rows if isinstance(row[0], str) and isinstance(row[2], str)
            and (row[4] is None or _real(row[4])) and isinstance(row[8], (str, type(None)))]
    if len(good) < len(rows):
        warnings.append(f"history {where}: {len(rows) - len(good)} malformed row(s) skipped")
    return good


def merged_history(results_dir: Path, warnings: list[str]) -> list[tuple]:
    """Every run of every history.sqlite under `results_dir`, each once (shards and earlier nights)."""
    seen, rows = set(), []
    for db in sorted(results_dir.rglob(HISTORY)):
        if db.is_symlink() or not db.is_file():
            continue
        for row in _history_rows(db, warnings, str(db.relative_to(results_dir))):
            key = (row[0], row[2], row[8])
            if key not in seen:
                seen.add(key)
                rows.append(row)
    return sorted(rows, key=lambda row: str(row[2]))


def write_history(path: Path, rows: list[tuple]) -> None:
    """The merged history as one SQLite file (replaced whole: a reader never sees half of it)."""
    def make(tmp: Path) -> None:
        with sqlite3.connect(tmp) as conn:
            conn.execute(HISTORY_SCHEMA)
            conn.executemany(HISTORY_INSERT, rows)
        conn.close()

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic.replace(path, make)


def _write(path: Path, data: bytes | str) -> None:
    atomic.write_bytes(path, data.encode() if isinstance(data, str) else data)


def _trend_png(path: Path, model: str, points: list[tuple[str, float]]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 2.6), dpi=100)
    ax.plot(range(1, len(points) + 1), [p[1] for p in points], "o-")
    ax.set_xticks(range(1, len(points) + 1))
    ax.set_xlabel("run")
    ax.set_ylabel("acceptance length")
    ax.set_title(model, fontsize=9)
    fig.tight_layout()
    try:
        atomic.replace(path, lambda tmp: fig.savefig(tmp, format="png"))
    finally:
        plt.close(fig)


def _page(title: str, body: str) -> str:
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>{body}"
            "<script>for(const i of document.images){const m=()=>{i.dataset.loaded=i.naturalWidth>0?'yes':'no'};"
            "i.complete?m():(i.onload=m,i.onerror=m)}</script></body></html>")


def _directory(path: Path, *, named_by_user: bool = False) -> None:
    """A real directory at `path`. What the user named (--out) is used only if it is a directory or
    absent: a file or a link there is refused, never removed. Inside it, a link planted where the
    report writes is removed (the link, never what it points to); a file there is refused."""
    if path.is_symlink():
        if named_by_user:
            raise SpecregError(f"{path} is a link, not a directory: refusing to write the report through it "
                               "(name a directory with --out)", source=str(path))
        path.unlink()
    elif path.exists() and not path.is_dir():
        raise SpecregError(f"{path} exists and is not a directory: refusing to replace it "
                           "(name a directory with --out)", source=str(path))
    path.mkdir(parents=True, exist_ok=True)


def build(results_dir: Path, site: Path, *, registry: str | None = None, history_out: Path | None = None,
          warnings: list[str] | None = None) -> Path:
    from specreg.entries import catalog

    warnings = [] if warnings is None else warnings
    _directory(site, named_by_user=True)  # before anything is read or written
    results = _results(results_dir, warnings)
    runs = merged_history(results_dir, warnings)
    if history_out is not None:
        write_history(history_out, runs)
    history = [(row[0], str(row[2]), row[4], row[3]) for row in runs]
    latest: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: str(r.get("started") or "")):
        latest[r["model"]] = r
    _directory(site / "models")
    rows = []
    entries = list(catalog(registry))
    known = {e.id for e in entries}
    for model in [e.id for e in entries] + sorted(set(latest) - known):
        r = latest.get(model)
        entry = next((e for e in entries if e.id == model), None)
        verdict = r["verdict"] if r else "none"
        al = (r.get("statistics") or {}).get("acceptance_length") if r else None
        base = ((r or {}).get("baseline") or {}).get("acceptance_length") or {}
        link = _url(f"models/{directory_name(model)}.html")
        verdict = html.escape(str(verdict))  # from a result file: untrusted
        rows.append(
            f"<tr class='{verdict}' data-model='{html.escape(model)}'><td><a href='{link}'>{html.escape(model)}</a></td>"
            f"<td>{html.escape(entry.algorithm if entry else '-')}</td>"
            f"<td>{html.escape(entry.verifier.id if entry else '-')}</td>"
            f"<td class='verdict'>{verdict}</td><td>{'' if al is None else f'{al:.3f}'}</td>"
            f"<td>{html.escape(str(base.get('value') or '')) if base else ''}</td>"
            f"<td>{html.escape((r or {}).get('started') or '')}</td></tr>")
        _model_page(site, model, r, [(s, a) for m, s, a, _ in history if m == model and a is not None])
    table = ("<table id='catalog'><thead><tr><th>model</th><th>algorithm</th><th>verifier</th><th>latest verdict</th>"
             "<th>AL measured</th><th>AL baseline</th><th>when</th></tr></thead><tbody>" + "".join(rows) + "</tbody></table>")
    index = site / "index.html"
    notes = "".join(f"<p class='warning'>{html.escape(w)}</p>" for w in warnings)
    _write(index, _page("specreg: speculator verification", f"<h1>Speculator verification</h1>"
                        f"<p>{len(latest)} models measured, {len(entries)} in the catalog.</p>{notes}{table}"))
    return index


def _run_html(r: dict[str, Any]) -> str:
    """One run: its checks as a table, its harness, and what differs from the baseline."""
    esc = html.escape
    out = []
    if r.get("error"):
        out.append(f"<p class='error'>{esc(r['error'])}</p>")
    s, j = r.get("statistics") or {}, r.get("judgement") or {}
    if s:
        ci = s.get("al_interval")
        ci_text = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
        checks = {c["metric"]: c for c in j.get("checks", [])}
        table = []
        for name, label, value in metric_rows(s):
            row = f"<tr><td>{label}</td><td>{value:.3f}{ci_text if name == 'acceptance_length' else ''}</td>"
            c = checks.get(name)
            if c:
                table.append(f"{row}<td>{esc(str(c.get('baseline_text', c['baseline'])))}</td><td>{esc(bounds_text(c))}</td>"
                             f"<td class='{esc(str(c['verdict']))}'>{esc(str(c['verdict']))}</td></tr>")
            else:
                table.append(f"{row}<td>-</td><td>-</td><td>-</td></tr>")
        out.append("<table class='checks'><thead><tr><th>metric</th><th>measured</th><th>baseline</th><th>bounds</th>"
                   "<th>verdict</th></tr></thead><tbody>" + "".join(table) + "</tbody></table>")
    if j.get("reason"):
        out.append(f"<p>{esc(j['reason'])}</p>")
    if j.get("differences"):
        out.append("<p>Harness differences from the baseline:</p><ul>"
                   + "".join(f"<li>{esc(d)}</li>" for d in j["differences"]) + "</ul>")
    if j.get("not_recorded_by_baseline"):
        out.append(f"<p>Not recorded by the baseline: {esc(', '.join(j['not_recorded_by_baseline']))}</p>")
    harness = r.get("harness") or {}
    out.append("<p>Harness: " + esc(", ".join(f"{k}={v}" for k, v in harness.items() if v not in (None, {}, [])))
               + f"</p><p>Engine: {esc(str(r.get('engine')))}; vLLM {esc(str((r.get('environment') or {}).get('vllm_version')))}"
               f"; GPU {esc(str((r.get('environment') or {}).get('gpu')))}</p>")
    return "".join(out)


def _url(path: str) -> str:
    """A relative link, percent-encoded and then escaped for an attribute."""
    from urllib.parse import quote

    return html.escape(quote(path, safe="/."))


def _model_page(site: Path, model: str, r: dict[str, Any] | None, trend: list[tuple[str, float]]) -> None:
    name = directory_name(model)
    parts = [f"<h1>{html.escape(model)}</h1><p><a href='../index.html'>all models</a></p>"]
    if r is None:
        parts.append("<p>Not measured yet.</p>")
    else:
        v = html.escape(str(r["verdict"]))
        parts.append(f"<p>Latest verdict: <b class='{v}'>{v}</b> ({html.escape(str(r.get('started') or ''))})</p>")
        parts.append(_run_html(r))
        plot = Path(r["_dir"]) / PLOT
        try:
            image = _bounded_read(plot, MAX_PLOT_BYTES)
        except (OSError, ValueError):  # none, a link, too large, not a file: no image
            image = None
        if image is not None and image.startswith(_PNG):
            _write(site / "models" / f"{name}-per-position.png", image)
            parts.append(f"<img alt='per-position acceptance' src='{_url(name + '-per-position.png')}'>")
    if len(trend) >= 2:  # one point is not a trend
        _trend_png(site / "models" / f"{name}-trend.png", model, trend)
        parts.append(f"<img alt='acceptance length over runs' src='{_url(name + '-trend.png')}'>")
    _write(site / "models" / f"{name}.html", _page(model, "".join(parts)))
