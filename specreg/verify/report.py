"""`specreg report DIR --out SITE`: a static HTML page from the results and history of verify
runs: the catalog with each model's latest verdict, and a page per model with its trend and its
per-position plot.

Every `history.sqlite` under DIR is read and merged (a nightly's shards each write one, and the
previous nights' merged history can be placed there too), so the trend spans shards and nights;
`--history-out FILE` writes the merged history for the next night. Result files and histories are
untrusted: a bad one is skipped with a warning on the page; files in SITE are replaced, never written
through a link planted there."""

from __future__ import annotations

import functools
import json
import sqlite3
from pathlib import Path
from typing import Any

from specreg.verify.nightly import directory_name
from specreg import atomic
from specreg.errors import SpecregError
from specreg.sources.files import FileTooLarge, read_regular
from specreg.verify.judge import show
from specreg.verify.outputs import (
    HISTORY,
    HISTORY_COLUMNS,
    HISTORY_INSERT,
    HISTORY_SCHEMA,
    MAX_RESULT_BYTES,
    PLOT,
    RESULT,
    bounds_text,
    harness_text,
    prompts_text,
    stopped_early,
    metric_rows,
    throughput_text,
)

#: what report reads from a results directory (untrusted: artifacts of other machines)
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
    if any(c < " " or c == "\x7f" for c in r["model"]):  # the model's page is a file named for it
        raise ValueError("model holds a control character")
    if not isinstance(r.get("started") or "", str):
        raise ValueError("started is not a date")
    if not isinstance(r.get("error") or "", str):
        raise ValueError("error is not a string")
    for key in ("harness", "statistics", "judgement", "baseline", "environment"):
        if not isinstance(r.get(key) or {}, dict):
            raise ValueError(f"{key} is not an object")
    if not isinstance((r.get("baseline") or {}).get("acceptance_length") or {}, dict):
        raise ValueError("baseline.acceptance_length is not an object")
    s = r.get("statistics") or {}
    # a result that measured anything has every metric the report tables (outputs.metric_rows)
    for key in ("acceptance_length", "draft_acceptance_rate"):
        if s and not _real(s.get(key)):
            raise ValueError(f"statistics.{key} is not a number")
    ci = s.get("al_interval")
    if ci is not None and not (isinstance(ci, list) and len(ci) == 2 and all(map(_real, ci))):
        raise ValueError("statistics.al_interval is not two numbers")
    pp = s.get("per_position")
    if s and not (isinstance(pp, list) and all(map(_real, pp))):
        raise ValueError("statistics.per_position is not a list of numbers")
    for key in ("output_tokens_per_s", "ms_per_output_token"):
        if (s.get(key) is not None or s.get("output_tokens_per_s")) and not _real(s.get(key)):
            raise ValueError(f"statistics.{key} is not a number")  # outputs.throughput_text prints both
    t = r.get("throughput") or {}
    if not isinstance(t, dict) or not all(
        _real(t[k]) for k in ("speedup", "output_tokens_per_s_without_draft") if t.get(k) is not None
    ):
        raise ValueError("throughput is not an object of numbers")
    j = r.get("judgement") or {}
    if not isinstance(j.get("reason") or "", str):
        raise ValueError("judgement.reason is not a string")
    for key in ("differences", "not_recorded_by_baseline"):
        if not (isinstance(j.get(key) or [], list) and all(isinstance(x, str) for x in j.get(key) or [])):
            raise ValueError(f"judgement.{key} is not a list of strings")
    checks = j.get("checks") or []
    if not isinstance(checks, list) or not all(map(_is_check, checks)):
        raise ValueError("judgement.checks is not a list of checks")


def _is_check(c: Any) -> bool:
    """A check as judge writes it, in the fields the report prints (outputs.bounds_text)."""
    if not isinstance(c, dict) or not isinstance(c.get("metric"), str) or not isinstance(c.get("verdict"), str):
        return False
    bounds = c.get("bounds")
    return (
        isinstance(bounds, list)
        and len(bounds) == 2
        and _real(bounds[0])
        and (bounds[1] is None or _real(bounds[1]))
        and "baseline" in c
        and isinstance(c.get("tolerance_from"), str)
    )


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
    good = [
        row
        for row in rows
        if isinstance(row[0], str)
        and isinstance(row[2], str)
        and (row[4] is None or _real(row[4]))
        and isinstance(row[8], (str, type(None)))
    ]
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


#: the most dates written under a trend's axis and vLLM versions written beside its points (a
#: label per run of a 10,000-run history is unreadable, and drawing them took most of a minute)
MAX_TREND_LABELS = 12


def _spread(indices: list[int], most: int) -> list[int]:
    """At most `most` of `indices`, evenly spread, the first and the last kept."""
    if len(indices) <= most:
        return indices
    step = (len(indices) - 1) / (most - 1)
    return sorted({indices[round(i * step)] for i in range(most)})


def _short(text: str, most: int) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _trend_png(path: Path, title: str, points: list[dict[str, Any]]) -> None:
    """AL against the run's date: each run's 95% interval, regressed runs in red, the vLLM version
    where it changes, and the baseline's value with its tolerance band (from the newest run's check).
    Every text is drawn as it is: matplotlib would read `$...$` in a model id, a dataset or a
    server's /version answer as mathematics, and fail on one it cannot parse."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot as plt

    with matplotlib.rc_context({"text.parse_math": False, "text.usetex": False}):
        fig, ax = plt.subplots(figsize=(7, 3), dpi=100)
        try:
            _draw_trend(ax, title, points)
            # fixed margins, fitting the bounded labels: tight_layout draws the figure once more
            fig.subplots_adjust(left=0.08, right=0.98, top=0.9, bottom=0.22)
            atomic.replace(path, lambda tmp: fig.savefig(tmp, format="png"))
        finally:
            plt.close(fig)


def _draw_trend(ax: Any, title: str, points: list[dict[str, Any]]) -> None:
    xs = list(range(len(points)))
    als = [p["al"] for p in points]
    lows = [max(0.0, p["al"] - p["ci"][0]) if p.get("ci") else 0.0 for p in points]
    highs = [max(0.0, p["ci"][1] - p["al"]) if p.get("ci") else 0.0 for p in points]
    ax.errorbar(xs, als, yerr=[lows, highs], fmt="-", color="#36c", capsize=3, label="measured (95% CI)")
    bad = [i for i, p in enumerate(points) if p["verdict"] in FAILING]
    failing = set(bad)
    good = [i for i in xs if i not in failing]
    ax.plot(good, [als[i] for i in good], "o", color="#36c")
    if bad:
        ax.plot(bad, [als[i] for i in bad], "o", color="#c22", label="regressed")
    ref = points[-1].get("check") or {}
    if not isinstance(ref.get("bounds"), list):
        ref = {}
    if _real(ref.get("baseline")):
        ax.axhline(ref["baseline"], color="#444", linestyle="--", linewidth=1, label=f"baseline {ref['baseline']:g}")
    bounds = ref.get("bounds") or [None, None]
    low, high = (bounds + [None, None])[:2]
    if _real(low):
        ax.axhspan(
            low, high if _real(high) else max(als + [low]) * 1.05, color="#9c9", alpha=0.2, label="tolerance band"
        )
    changes = [i for i, p in enumerate(points) if p.get("vllm") and (i == 0 or p["vllm"] != points[i - 1].get("vllm"))]
    for i in _spread(changes, MAX_TREND_LABELS):
        version = _short(str(points[i]["vllm"]), 40)
        ax.annotate(f"vLLM {version}", (i, als[i]), textcoords="offset points", xytext=(0, 6), fontsize=6, ha="center")
    ticks = _spread(xs, MAX_TREND_LABELS)
    ax.set_xticks(ticks)
    ax.set_xticklabels([_short(points[i]["date"], 20) for i in ticks], rotation=30, fontsize=7, ha="right")
    ax.set_ylabel("acceptance length")
    ax.set_title(_short(title, 120), fontsize=9)
    ax.legend(fontsize=6, loc="lower left")


#: verdicts from worst to best: an entry's verdict is the worst of its baselines' latest verdicts
SEVERITY = (
    "regressed",
    "out-of-band",
    "crash",
    "timeout",
    "error",
    "invalid",
    "unmatched",
    "refused",
    "interrupted",
    "secondary",
    "not-runnable",
    "no-baseline",
    "improved",
    "pass",
    "none",
)
FAILING = {"regressed", "out-of-band"}


def _rank(verdict: str) -> int:
    return SEVERITY.index(verdict) if verdict in SEVERITY else 0


def _worst(verdicts: list[str]) -> str:
    return min(verdicts, key=_rank) if verdicts else "none"


def _series_key(r: dict[str, Any]) -> tuple[str, str]:
    """(sort key, title) of the baseline a run belongs to: its dataset and the baseline it was judged by."""
    dataset = str((r.get("harness") or {}).get("dataset") or "no dataset")
    index = (r.get("judgement") or {}).get("baseline_index")
    if isinstance(index, int) and not isinstance(index, bool):
        return f"0-{index:04d}-{dataset}", f"{dataset}, baseline {index}"
    return f"1-{dataset}", f"{dataset}, not judged against a baseline"


def _history_results(runs: list[tuple], warnings: list[str]) -> list[dict[str, Any]]:
    """The result stored with each history row (untrusted: checked as result files are)."""
    out, bad = [], 0
    for row in runs:
        try:
            text = row[8]
            if not isinstance(text, str) or len(text) > MAX_RESULT_BYTES:
                raise ValueError("not a stored result")
            r = json.loads(text)
            _check_result(r)
        except (ValueError, RecursionError):
            bad += 1
            continue
        out.append(r)
    if bad:
        warnings.append(f"history: {bad} run(s) without a readable stored result skipped")
    return out


def _series(runs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """title -> {"runs": [...] oldest first, "key": sort key} for one model."""
    out: dict[str, dict[str, Any]] = {}
    for r in sorted(runs, key=lambda r: str(r.get("started") or "")):
        key, title = _series_key(r)
        out.setdefault(title, {"key": key, "runs": []})["runs"].append(r)
    return dict(sorted(out.items(), key=lambda kv: kv[1]["key"]))


def _verdict_before(runs: list[dict[str, Any]], day: str) -> str | None:
    """The entry's verdict from the runs before `day` (the previous night), None without any."""
    earlier = [r for r in runs if str(r.get("started") or "")[:10] < day]
    if not earlier:
        return None
    return _worst([s["runs"][-1]["verdict"] for s in _series(earlier).values()])


@functools.cache
def templates() -> Any:
    """The pages' jinja2 templates (templates/, package data), every value escaped."""
    try:
        import jinja2
    except ImportError:
        raise SpecregError("report needs jinja2: pip install 'specreg[verify]'") from None
    from importlib.resources import files

    folder = files(__package__) / "templates"
    return jinja2.Environment(
        loader=jinja2.FunctionLoader(lambda name: (folder / name).read_text(encoding="utf-8")),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def _render(template: str, **values: Any) -> str:
    return templates().get_template(template).render(**values)


def _directory(path: Path, *, named_by_user: bool = False) -> None:
    """A real directory at `path`. What the user named (--out) is used only if it is a directory or
    absent: a file or a link there is refused, never removed. Inside it, a link planted where the
    report writes is removed (the link, never what it points to); a file there is refused."""
    if path.is_symlink():
        if named_by_user:
            raise SpecregError(
                f"{path} is a link, not a directory: refusing to write the report through it "
                "(name a directory with --out)",
                source=str(path),
            )
        path.unlink()
    elif path.exists() and not path.is_dir():
        raise SpecregError(
            f"{path} exists and is not a directory: refusing to replace it (name a directory with --out)",
            source=str(path),
        )
    path.mkdir(parents=True, exist_ok=True)


def build(
    results_dir: Path,
    site: Path,
    *,
    registry: str | None = None,
    history_out: Path | None = None,
    warnings: list[str] | None = None,
) -> Path:
    from specreg.entries import catalog

    warnings = [] if warnings is None else warnings
    _directory(site, named_by_user=True)  # before anything is read or written
    results = _results(results_dir, warnings)
    runs = merged_history(results_dir, warnings)
    if history_out is not None:
        write_history(history_out, runs)
    stored = _history_results(runs, warnings)
    seen = {(r["model"], str(r.get("started") or "")) for r in stored}
    # a result with no history row (its history was not readable) is still a run
    stored += [r for r in results if (r["model"], str(r.get("started") or "")) not in seen]
    by_model: dict[str, list[dict[str, Any]]] = {}
    for r in stored:
        by_model.setdefault(r["model"], []).append(r)
    latest: dict[str, dict[str, Any]] = {}
    for r in sorted(results, key=lambda r: str(r.get("started") or "")):
        latest[r["model"]] = r
    _directory(site / "models")
    entries = list(catalog(registry).values())
    known = {e.id for e in entries}
    measured = set(latest) | set(by_model)
    # only what was run: a site of one draft is one row, not the catalog's 200 unmeasured ones
    order = [e.id for e in entries if e.id in measured] + sorted(measured - known)
    summary: list[tuple[str, str, str | None, dict[str, Any] | None]] = []
    for model in order:
        series = _series(by_model.get(model, []))
        verdict = (
            _worst([s["runs"][-1]["verdict"] for s in series.values()])
            if series
            else (latest[model]["verdict"] if model in latest else "none")
        )
        newest = max((str(r.get("started") or "") for s in series.values() for r in s["runs"]), default="")
        before = _verdict_before(by_model.get(model, []), newest[:10]) if newest else None
        summary.append((model, verdict, before, latest.get(model)))
        _model_page(site, model, verdict, latest.get(model), series, warnings)
    summary.sort(key=lambda row: (_rank(row[1]), order.index(row[0])))
    rows = []
    for model, verdict, before, r in summary:
        entry = next((e for e in entries if e.id == model), None)
        al = (r.get("statistics") or {}).get("acceptance_length") if r else None
        base = ((r or {}).get("baseline") or {}).get("acceptance_length") or {}
        rows.append(
            {
                "model": model,
                "verdict": verdict,
                "link": _url(f"models/{directory_name(model)}.html"),
                # a draft outside the catalog: what its run read from its own config
                "algorithm": entry.algorithm if entry else _said(r, "algorithm"),
                "verifier": entry.verifier.id if entry else _said(r, "verifier"),
                "change": "" if before is None or before == verdict else f"was {before}",
                "al": "" if al is None else f"{al:.3f}",
                "baseline": _number(base.get("value")) if base else "",
                "started": (r or {}).get("started") or "",
            }
        )
    counts: dict[str, int] = {}
    for _, verdict, _, _ in summary:
        counts[verdict] = counts.get(verdict, 0) + 1
    versions = sorted(
        {
            str(v)
            for r in latest.values()
            for v in [(r.get("environment") or {}).get("vllm_version")]
            if isinstance(v, str)
        }
    )
    index = site / "index.html"
    _write(
        index,
        _render(
            "index.html",
            title="specreg: speculator verification",
            rows=rows,
            warnings=warnings,
            versions=versions,
            measured=len(summary),
            catalog_size=len(entries),
            changed=sum(1 for _, verdict, before, _ in summary if before is not None and before != verdict),
            counts=sorted(counts.items(), key=lambda kv: _rank(kv[0])),
        ),
    )
    return index


def _said(r: dict[str, Any] | None, key: str) -> str:
    """A text a result records (the draft's algorithm, its verifier), or "-"."""
    value = (r or {}).get(key)
    return value if isinstance(value, str) and value else "-"


def _bounds(check: dict[str, Any] | None) -> str:
    try:
        return bounds_text(check) if check else ""
    except (KeyError, TypeError, ValueError):  # a stored result of another shape
        return ""


def _number(value: Any) -> str:
    return f"{value:g}" if _real(value) else ""


def _latest_run(r: dict[str, Any]) -> dict[str, Any]:
    """What run.html shows of one run: its checks, what differs from the baseline, its harness."""
    s, j = r.get("statistics") or {}, r.get("judgement") or {}
    metrics = None
    if s:
        ci = s.get("al_interval")
        ci_text = f" (95% CI {ci[0]:.3f}-{ci[1]:.3f})" if ci else ""
        checks = {c["metric"]: c for c in j.get("checks") or []}
        metrics = []
        for name, label, value in metric_rows(s):
            c = checks.get(name)
            metrics.append(
                {
                    "label": label,
                    "measured": f"{value:.3f}{ci_text if name == 'acceptance_length' else ''}",
                    "check": {
                        "baseline": str(c.get("baseline_text", c["baseline"])),
                        "bounds": bounds_text(c),
                        "verdict": str(c["verdict"]),
                    }
                    if c
                    else None,
                }
            )
    env = r.get("environment") if isinstance(r.get("environment"), dict) else {}
    return {
        "started": str(r.get("started") or ""),
        "against": _against(r),
        "error": r.get("error"),
        "metrics": metrics,
        "reason": j.get("reason"),
        "differences": j.get("differences"),
        "not_recorded": j.get("not_recorded_by_baseline"),
        "speed": throughput_text(r),
        "prompts": prompts_text(r),
        "harness": harness_text(r.get("harness") or {}),
        "engine": show(r.get("engine")),
        "vllm": show(env.get("vllm_version")),
        "gpu": show(env.get("gpu")),
        "plot": None,
    }


def _against(r: dict[str, Any]) -> str | None:
    """The line of a run judged with `--against` (another draft's baseline), else None."""
    against = r.get("against")
    return str(against.get("text")) if isinstance(against, dict) and against.get("text") else None


def _prompts_cell(r: dict[str, Any]) -> str:
    """A run's prompts in the trend table: "24/80 early", "80/80", or "" where the result does not say."""
    if not prompts_text(r):
        return ""
    return f"{r['prompts_used']}/{r['prompts_planned']}" + (" early" if stopped_early(r) else "")


def _url(path: str) -> str:
    """A relative link, percent-encoded (the template escapes it for the attribute)."""
    from urllib.parse import quote

    return quote(path, safe="/.")


def _model_page(
    site: Path,
    model: str,
    verdict: str,
    r: dict[str, Any] | None,
    series: dict[str, dict[str, Any]],
    warnings: list[str],
) -> None:
    name = directory_name(model)
    latest = None
    if r is not None:
        latest = _latest_run(r)
        plot = Path(r["_dir"]) / PLOT
        try:
            image = _bounded_read(plot, MAX_PLOT_BYTES)
        except (OSError, ValueError):  # none, a link, too large, not a file: no image
            image = None
        if image is not None and image.startswith(_PNG):
            _write(site / "models" / f"{name}-per-position.png", image)
            latest["plot"] = _url(name + "-per-position.png")
    shown = []
    for n, (title, s) in enumerate(series.items()):
        runs = s["runs"]
        last = runs[-1]
        reason = (last.get("judgement") or {}).get("reason")
        table = []
        points = []
        for run in runs:
            st = run.get("statistics") or {}
            al, ci = st.get("acceptance_length"), st.get("al_interval")
            check = next(
                (c for c in (run.get("judgement") or {}).get("checks") or [] if c.get("metric") == "acceptance_length"),
                None,
            )
            env = run.get("environment") or {}
            date = str(run.get("started") or "")[:10]
            table.append(
                {
                    "verdict": str(run["verdict"]),
                    "date": date,
                    "vllm": str(env.get("vllm_version") or "-"),
                    "al": "" if al is None else f"{al:.3f}",
                    "ci": f"{ci[0]:.3f}-{ci[1]:.3f}" if ci else "",
                    "bounds": _bounds(check),
                    "prompts": _prompts_cell(run),
                }
            )
            if _real(al):
                points.append(
                    {
                        "al": al,
                        "ci": ci,
                        "verdict": run["verdict"],
                        "vllm": env.get("vllm_version"),
                        "date": date,
                        "check": check,
                    }
                )
        trend = None
        if len(points) >= 2:  # one point is not a trend
            image = f"{name}-trend.png" if n == 0 else f"{name}-trend-{n + 1}.png"
            try:
                _trend_png(site / "models" / image, f"{model}: {title}", points)
                trend = _url(image)
            except (ValueError, OverflowError, RuntimeError) as exc:  # matplotlib refusing what a result holds
                warnings.append(f"trend of {model} ({title}) not drawn: {type(exc).__name__}: {str(exc)[:200]}")
        shown.append(
            {
                "title": title,
                "verdict": str(last["verdict"]),
                "runs": table,
                "trend": trend,
                "why": str(reason) if reason and last["verdict"] != "pass" else None,
            }
        )
    _write(
        site / "models" / f"{name}.html",
        _render("model.html", title=model, verdict=str(verdict), latest=latest, series=shown),
    )
