"""`specreg catalog list | show | check | pin`."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specreg.cli.common import print_lines, printable

EXIT_OK, EXIT_PROBLEMS = 0, 1


def add_catalog(sub: Any) -> None:
    cat = sub.add_parser("catalog", help="the catalog of known speculators: list, show, check, pin")
    csub = cat.add_subparsers(dest="catalog_command", required=True, metavar="ACTION")

    def registry_arg(p: argparse.ArgumentParser) -> None:
        p.add_argument("--registry", metavar="DIR", help="a catalog directory (default: the one shipped with specreg)")

    ls = csub.add_parser("list", help="the entries, as a table or JSON")
    ls.add_argument(
        "pattern",
        nargs="?",
        metavar="PATTERN",
        help="only ids matching this shell-style pattern, case-insensitively ('RedHatAI/*dflash*')",
    )
    ls.add_argument("--algorithm", help="only this algorithm (e.g. dflash)")
    ls.add_argument(
        "--verifier",
        help="only drafts for this verifier (e.g. Qwen/Qwen3-8B, any case), their figures best first "
        "within each group of the same metric, k, dataset and engine",
    )
    ls.add_argument("--tag", help="only entries with this tag")
    ls.add_argument(
        "--k",
        type=int,
        metavar="K",
        help="only entries with a baseline measured at K draft tokens, and (with --verifier) only those figures",
    )
    ls.add_argument("--json", action="store_true", help="a JSON list of entries with their baselines")
    registry_arg(ls)

    show = csub.add_parser("show", help="one entry with its baselines and their harnesses")
    show.add_argument("id", metavar="ID")
    show.add_argument("--json", action="store_true")
    show.add_argument(
        "--harness",
        nargs="?",
        const=-1,
        type=int,
        metavar="N",
        help="print the `specreg verify` command that reproduces baseline N (default: the primary one)",
    )
    registry_arg(show)

    chk = csub.add_parser("check", help="validate every entry offline (exit 1 listing every problem)")
    chk.add_argument("--json", action="store_true", help="the entry count, problems and warnings as JSON")
    registry_arg(chk)

    pin = csub.add_parser("pin", help="fetch config.json and write its commit and sha256 into the entry")
    pin.add_argument("id", metavar="ID")
    pin.add_argument("--revision", help="the branch, tag or commit to pin (default: the pinned one, else main)")
    pin.add_argument("--json", action="store_true", help="what was pinned (entry, file, revision, sha256) as JSON")
    registry_arg(pin)


def run(args: argparse.Namespace) -> int:
    return {"list": _list, "show": _show, "check": _check, "pin": _pin}[args.catalog_command](args)


def _al(entry) -> str:
    values = [
        b.metrics.acceptance_length.value
        for b in entry.baselines
        if b.metrics.acceptance_length and b.metrics.acceptance_length.value is not None
    ]
    if not values:
        return "-"
    return f"{min(values):g}" if len(values) == 1 else f"{min(values):g}-{max(values):g}"


def _ks(entry) -> str:
    """The k its baselines were measured at ("3,7"), "?" where none says (each says why in k_note),
    "-" without baselines."""
    from specreg.api.catalog import baseline_ks

    if not entry.baselines:
        return "-"
    return ",".join(map(str, baseline_ks(entry))) or "?"


def _list(args: argparse.Namespace) -> int:
    from specreg.api.catalog import catalog_list

    listing = catalog_list(
        args.pattern, algorithm=args.algorithm, verifier=args.verifier, tag=args.tag, k=args.k, registry=args.registry
    )
    if args.json:
        print(json.dumps([e.to_dict() for e in listing.entries], indent=2, ensure_ascii=False))
        return EXIT_OK
    if args.verifier is not None:
        _print_table(*_ranking(listing))
        print(
            f"{len(listing.entries)} of {listing.total} entries; figures ranked only within the same metric, k, "
            "dataset and engine (#1 starts a group); ? is what the source does not say, and a figure without "
            "its k or dataset is not ranked (#-)",
            file=sys.stderr,
        )
        return EXIT_OK
    rows = [
        (e.id, e.algorithm, e.verifier.id, _ks(e), e.status, str(len(e.baselines)), _al(e)) for e in listing.entries
    ]
    _print_table(("id", "algorithm", "verifier", "k", "status", "baselines", "AL"), rows)
    print(f"{len(listing.entries)} of {listing.total} entries", file=sys.stderr)
    return EXIT_OK


#: a ranked metric's short name in the table (as `catalog show` names it)
_METRIC_NAMES = {"acceptance_length": "AL", "draft_acceptance_rate": "accept"}


def _ranking(listing) -> tuple[tuple[str, ...], list[tuple[str, ...]]]:
    """One row per figure, a group's rank restarting at 1; then the entries without a figure."""
    rows, place, previous = [], 0, None
    for f in listing.figures:
        place = place + 1 if f.group == previous else 1
        previous = f.group
        shown = ["?" if v is None else str(v) for v in (f.k, f.dataset, f.engine)]
        rows.append(
            (_METRIC_NAMES[f.metric], *shown, str(place) if f.ranked else "-", f"{f.value:g}")
            + (f.algorithm or "-", f.entry_id, str(f.baseline))
        )
    ranked = {f.entry_id for f in listing.figures}
    rows += [("-", "-", "-", "-", "-", "-", e.algorithm, e.id, "-") for e in listing.entries if e.id not in ranked]
    return ("metric", "k", "dataset", "engine", "#", "value", "algorithm", "id", "baseline"), rows


def _print_table(head: tuple[str, ...], rows: list[tuple[str, ...]]) -> None:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]
    for r in [head, *rows]:
        print(printable("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip()))


def _fmt_metric(m) -> str:
    parts = []
    if m.value is not None:
        parts.append(f"{m.value:g}")
    if m.low is not None:
        parts.append(f"range {m.low:g}-{m.high:g}")
    if m.floor is not None:
        parts.append(f"floor {m.floor:g}")
    if m.tolerance is not None and m.direction == "two-sided":
        parts.append(f"[within ±{m.tolerance:.0%}]")
    elif m.tolerance is not None:
        parts.append(f"[at least {1 - m.tolerance:.0%} of it]")
    if m.notes:
        parts.append(f"({m.notes})")
    return " ".join(parts)


def _harness_line(h) -> str:
    d = {k: v for k, v in _plain(h).items() if k not in ("notes", "prompt")}
    prompt = {k: v for k, v in _plain(h.prompt).items()}
    items = [f"{k}={v}" for k, v in d.items()]
    items += [f"{k}={v}" for k, v in prompt.items()]
    return ", ".join(items) or "(not stated)"


def _plain(obj) -> dict[str, Any]:
    import attrs

    return {k: v for k, v in attrs.asdict(obj, recurse=False).items() if v is not None and not attrs.has(type(v))}


def _show(args: argparse.Namespace) -> int:
    from specreg.api.catalog import catalog_entry
    from specreg.errors import SpecregError

    entry = catalog_entry(args.id, registry=args.registry)
    if args.harness is not None:
        from specreg.verify import harness

        index = None if args.harness == -1 else args.harness
        if index is not None and not 0 <= index < len(entry.baselines):
            raise SpecregError(
                f"{entry.id} has no baseline {index}"
                + (f" (its baselines are 0-{len(entry.baselines) - 1})" if entry.baselines else "")
            )
        print(harness.command_line(entry, index))
        return EXIT_OK
    if args.json:
        print(json.dumps(entry.to_dict(), indent=2, ensure_ascii=False))
        return EXIT_OK
    out = [entry.id, f"  algorithm  {entry.algorithm} ({entry.format} format)", f"  verifier   {entry.verifier.id}"]
    pin = f"{entry.status}" + (f" at {entry.revision} (config sha256 {entry.config_sha256})" if entry.revision else "")
    out.append(f"  status     {pin}")
    if entry.license:
        out.append(f"  license    {entry.license}")
    if entry.tags:
        out.append(f"  tags       {', '.join(entry.tags)}")
    serving = _plain(entry.serving)
    if serving:
        out.append("  serving    " + ", ".join(f"{k}={v}" for k, v in serving.items()))
    if entry.notes:
        out.append(f"  notes      {entry.notes}")
    out.append(f"  file       {entry.path}")
    if not entry.baselines:
        out += ["", "no baselines (nothing published with numbers)"]
    for i, b in enumerate(entry.baselines):
        out.append("")  # a blank line between blocks: each line is escaped on its own, a newline in one would show
        out.append(
            f"baseline {i}: {b.kind}{' (secondary)' if b.secondary else ''}, {b.source}"
            + (f", {b.date}" if b.date else "")
        )
        out.append(f"  harness   {_harness_line(b.harness)}")
        if b.harness.notes:
            out.append(f"            {b.harness.notes}")
        if b.harness.unknown():
            out.append(f"  unknown   {', '.join(b.harness.unknown())} (the source does not say)")
        m = b.metrics
        if m.acceptance_length:
            out.append(f"  AL        {_fmt_metric(m.acceptance_length)}")
        if m.per_position:
            out.append("  per-pos   " + " / ".join(f"{v:g}" for v in m.per_position.values))
        if m.draft_acceptance_rate:
            out.append(f"  accept    {_fmt_metric(m.draft_acceptance_rate)}")
        if m.accuracy:
            out.append(f"  accuracy  {_fmt_metric(m.accuracy)}")
        if b.provenance:
            p = b.provenance
            origin = "printed in the source" if p.figure == "printed" else "computed from the source"
            out.append(f"  figure    {origin}" + (f"; its row: {p.row}" if p.row else ""))
            if p.note:
                out.append(f"            {p.note}")
    print_lines(out)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from specreg.api.catalog import catalog_check

    report = catalog_check(registry=args.registry)
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return EXIT_PROBLEMS if report.problems else EXIT_OK
    for file, p in report.warnings:
        print(printable(f"warning: {file}: {p.path}: {p.message}"), file=sys.stderr)
    for file, p in report.problems:
        print(printable(f"error: {file}: {p.path}: {p.message}"), file=sys.stderr)
    n, w = len(report.problems), len(report.warnings)
    print(f"{report.entries} entries: {n} problem{'s' * (n != 1)}, {w} warning{'s' * (w != 1)}")
    return EXIT_PROBLEMS if report.problems else EXIT_OK


def _pin(args: argparse.Namespace) -> int:
    from specreg.api.catalog import catalog_pin
    from specreg.entries.lookup import closest_id
    from specreg.errors import SpecregError

    try:
        done = catalog_pin(args.id, revision=args.revision, registry=args.registry)
    except SpecregError as exc:
        close = closest_id(args.id, args.registry)  # None for an id the catalog has: another failure
        if close is None:
            raise
        raise SpecregError(f"{exc.message} (did you mean {close}?)", source=exc.source) from None
    if args.json:
        print(json.dumps(done.to_dict(), indent=2, ensure_ascii=False))
        return EXIT_OK
    if done.changed:
        was = f" (was {done.previous_revision})" if done.previous_revision else ""
        print(f"pinned {done.entry_id} at {done.revision}{was}, config sha256 {done.config_sha256}: {done.path}")
    else:
        print(f"{done.entry_id} is already pinned at {done.revision} (config sha256 {done.config_sha256})")
    return EXIT_OK


HANDLERS = {"catalog": lambda args: run(args)}
