"""`specreg verify` and `report`: acceptance measured with vLLM and judged against the catalog."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from specreg.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_FINDINGS,
    EXIT_OK,
    SpecregErrorLine,
    int_range,
    number_range,
    progress_line,
    harness_int,
    harness_number,
)


def add_verify(sub: Any) -> None:
    from specreg.verify.prompts import DATASETS

    ver = sub.add_parser(
        "verify",
        help="measure acceptance with vLLM and judge it against the catalog",
        description="Measure a draft's acceptance with vLLM and judge it against its catalog baseline. With no "
        "harness flag, a catalog entry runs its primary baseline's harness (`specreg catalog show "
        "ENTRY --harness` prints it); a flag given overrides it. Exit: 0 pass or nothing to judge "
        "against, 1 regressed, 2 bad input or refused, 4 no baseline matched, 5 the engine failed, "
        "130 interrupted; 3 only for a specreg bug (docs/verify.md).",
    )
    ver.add_argument("model", nargs="?", metavar="MODEL", help="a catalog id / Hub id / local draft (omit with --all)")
    h = ver.add_argument_group("harness (default: the entry's baseline, else the value shown)")
    h.add_argument(
        "--baseline",
        type=int_range(0, 10_000),
        metavar="N",
        help="reproduce the entry's baseline N (0-based, as `catalog show` numbers them; default: its "
        "primary baseline)",
    )
    h.add_argument(
        "--against",
        metavar="ENTRY[:N]",
        help="judge MODEL (your own draft) against catalog ENTRY's baseline N (default: its primary): that "
        "baseline's harness and gate, as `verify ENTRY` runs them; the result says the baseline is another draft's",
    )
    h.add_argument(
        "--dataset", help=" | ".join(sorted(DATASETS)) + " | speed-bench:CATEGORY | FILE.jsonl (default gsm8k)"
    )
    h.add_argument(
        "--dataset-file",
        metavar="[DATASET=]FILE",
        action="append",
        help="the rows of the run's dataset from a local JSONL file; with --all, one per dataset "
        "(--dataset-file mt-bench=F1 --dataset-file gsm8k=F2)",
    )
    h.add_argument("--num-prompts", type=harness_int("num_prompts"), metavar="N", help="(default 80)")
    h.add_argument("--temperature", type=harness_number("temperature"), metavar="T", help="(default 0)")
    h.add_argument("--max-tokens", type=harness_int("max_tokens"), metavar="N", help="(default 256)")
    h.add_argument(
        "--k",
        type=_k_list,
        metavar="K[,K...]",
        help="draft tokens (default: the config's); several (1,3,5) run a sweep, in-process, reporting "
        "AL, per-position rates and tokens/s per k",
    )
    h.add_argument("--seed", type=harness_int("seed"), metavar="N", help="(default 42)")
    fmt = h.add_mutually_exclusive_group()
    fmt.add_argument("--chat", dest="chat", action="store_true", default=None, help="chat template (default)")
    fmt.add_argument("--raw", dest="chat", action="store_false", help="raw completion prompts")
    h.add_argument("--few-shot", type=harness_int("few_shot"), metavar="N", help="(default 0)")
    think = h.add_mutually_exclusive_group()
    think.add_argument(
        "--thinking",
        dest="thinking",
        action="store_true",
        default=None,
        help="chat_template_kwargs enable_thinking true (default: not sent)",
    )
    think.add_argument("--no-thinking", dest="thinking", action="store_false", help="enable_thinking false")
    h.add_argument(
        "--shots-split", metavar="SPLIT", help="take the few-shot examples from this split (vLLM's GSM8K: train)"
    )
    h.add_argument("--shots-file", metavar="FILE", help="the few-shot split's rows from a local JSONL file")
    h.add_argument(
        "--template", metavar="FMT", help="prompt format string over a row's fields, e.g. '{question}\\n...'"
    )
    h.add_argument("--stop", action="append", metavar="TEXT", help="a stop string (repeatable; default none)")
    h.add_argument(
        "--mode",
        choices=("batched", "prompt-at-a-time"),
        help="all prompts batched (default), or one generate per prompt",
    )
    h.add_argument(
        "--statistic",
        choices=("pooled", "mean-per-prompt"),
        default=None,
        help="AL over the whole run, or the mean of each prompt's AL (default: mean-per-prompt with "
        "--mode prompt-at-a-time, else pooled)",
    )
    h.add_argument(
        "--chunks",
        type=harness_int("chunks"),
        default=10,
        metavar="N",
        help="prompts run in this many chunks, for the interval (default 10)",
    )
    e = ver.add_argument_group("engine")
    e.add_argument("--server", metavar="URL", help="a running vLLM OpenAI-compatible server (default: vLLM in-process)")
    e.add_argument("--served-model", help="the model name the server serves (default: the first of /v1/models)")
    e.add_argument(
        "--compare-baseline-engine",
        nargs="?",
        const="in-process",
        metavar="URL",
        help="also run the prompts without the draft and report the speedup in output tokens/s "
        "(in-process; with --server, the URL of a server of the verifier alone)",
    )
    e.add_argument("--batch-size", type=harness_int("batch_size"), metavar="N", help="max_num_seqs (in-process)")
    e.add_argument(
        "--concurrency", type=harness_int("concurrency"), metavar="N", help="requests in flight (--server; default 1)"
    )
    e.add_argument(
        "--max-model-len",
        type=harness_int("max_model_len"),
        metavar="N",
        help="the engine's max_model_len (default: the entry's [serving])",
    )
    e.add_argument(
        "--tensor-parallel-size",
        type=harness_int("tensor_parallel_size"),
        metavar="N",
        help="(default: the entry's [serving])",
    )
    e.add_argument("--draft-sample-method", metavar="M", help="speculative_config.draft_sample_method (in-process)")
    cache = e.add_mutually_exclusive_group()
    cache.add_argument(
        "--prefix-caching", dest="prefix_caching", action="store_true", default=None, help="(default: vLLM's)"
    )
    cache.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    e.add_argument("--gpu", help="the GPU, when it cannot be read here (a remote server)")
    e.add_argument(
        "--timeout",
        type=number_range(1.0, 7 * 24 * 3600.0),
        default=3600,
        metavar="S",
        help="seconds a run may take (with --all: per entry; past it the result is timeout; default 3600)",
    )
    o = ver.add_argument_group("judging and outputs")
    o.add_argument(
        "--no-early-stop",
        dest="early_stop",
        action="store_false",
        help="run every planned prompt (the fixed-count test) instead of stopping once the verdict is "
        "decided (the sequential test, docs/verify.md)",
    )
    o.add_argument("--out", metavar="DIR", help="write result.json, summary.md, junit.xml, per_position.png here")
    o.add_argument("--history", metavar="DB", help="the SQLite history (default: OUT/../history.sqlite)")
    o.add_argument(
        "--strict-harness",
        action="store_true",
        help="refuse, before measuring, a harness that differs from the baseline's",
    )
    o.add_argument(
        "--update-baseline",
        action="store_true",
        help="add a measured baseline (a passing run, same harness) to the entry in --registry DIR, "
        "printing the change",
    )
    o.add_argument("--registry", metavar="DIR", help="a catalog directory (default: the shipped one)")
    o.add_argument(
        "--json",
        action="store_true",
        help="print the result (what result.json holds; with --all, the verdict per entry; with several "
        "--k, the sweep) as one JSON object on stdout instead of the text lines",
    )
    n = ver.add_argument_group("nightly")
    n.add_argument("--all", action="store_true", help="every catalog entry with a baseline, each in a subprocess")
    n.add_argument("--shard", default="1/1", metavar="I/N", help="with --all: this shard of N (default 1/1)")
    n.add_argument(
        "--resume",
        action="store_true",
        help="continue an interrupted run in --out (its measured chunks kept); with --all: skip entries already done",
    )


def _k_list(text: str) -> tuple[int, ...]:
    parse = harness_int("k")
    values = tuple(parse(part.strip()) for part in text.split(","))
    if len(set(values)) != len(values):
        raise argparse.ArgumentTypeError(f"a k is given twice: {text!r}")
    return values


def add_report(sub: Any) -> None:
    rep = sub.add_parser("report", help="a static HTML page from verify results and history")
    rep.add_argument("dir", metavar="DIR", help="where verify wrote its results (searched recursively)")
    rep.add_argument("--out", required=True, metavar="SITE")
    rep.add_argument(
        "--history-out", metavar="DB", help="write the merged history of every history.sqlite under DIR here"
    )
    rep.add_argument("--registry", metavar="DIR")
    rep.add_argument(
        "--json",
        action="store_true",
        help="print what was written (the index page, the merged history, the warnings) as JSON",
    )


def dataset_files(values: list[str] | None) -> tuple[str | None, dict[str, str]]:
    """`--dataset-file` values: (a file given without a dataset name, {dataset: file})."""
    plain, named = None, {}
    for value in values or ():
        name, sep, path = value.partition("=")
        if sep and name and "/" not in name and not name.endswith(".jsonl"):
            if name in named:
                raise SpecregErrorLine(f"--dataset-file {name}= is given twice")
            named[name] = path
        elif plain is not None:
            raise SpecregErrorLine(
                "--dataset-file FILE is given twice; name each file's dataset "
                "(--dataset-file mt-bench=F1 --dataset-file gsm8k=F2)"
            )
        else:
            plain = value
    return plain, named


def verify_options(args: argparse.Namespace, entry: Any = None):
    """`specreg verify`'s parsed flags as the run's Options: the entry's baseline harness (the one
    `specreg.verify.harness` builds for the nightly too) with the flags given on top."""
    from specreg.verify import harness
    from specreg.verify.run import Options

    given = {f: getattr(args, f) for f in harness.FIELDS if getattr(args, f, None) is not None}
    if "stop" in given:
        given["stop"] = tuple(given["stop"])
    if isinstance(given.get("k"), tuple):
        given["k"] = given["k"][0]  # a sweep's runs each get their own (_sweep)
    try:
        values, origin = harness.resolve(entry, given, getattr(args, "baseline", None))
    except ValueError as exc:
        raise SpecregErrorLine(str(exc)) from None
    values["statistic"] = values["statistic"] or (
        "mean-per-prompt" if values["mode"] == "prompt-at-a-time" else "pooled"
    )
    plain, named = dataset_files(args.dataset_file)
    base = values["dataset"].split(":")[0]
    if named and plain is None:
        if base not in named:
            raise SpecregErrorLine(f"--dataset-file names {', '.join(sorted(named))}, but this run's dataset is {base}")
        plain = named[base]
    return Options(
        server=args.server,
        dataset_file=plain,
        gpu=args.gpu,
        chunks=args.chunks,
        strict_harness=args.strict_harness,
        update_baseline=args.update_baseline,
        registry=args.registry,
        served_model=args.served_model,
        shots_file=args.shots_file,
        timeout=args.timeout,
        harness_from=origin,
        compare_baseline_engine=getattr(args, "compare_baseline_engine", None),
        resume=bool(getattr(args, "resume", False)),
        early_stop=getattr(args, "early_stop", True),
        against=entry.id if getattr(args, "against", None) else None,
        **values,
    )


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    import importlib.util

    missing = [
        m for m in ("datasets", "matplotlib", "prometheus_client", "httpx") if importlib.util.find_spec(m) is None
    ]
    if missing:
        raise SpecregErrorLine(f"verify needs {', '.join(missing)}: pip install 'specreg[verify]'")
    from specreg.verify.outputs import HISTORY
    from specreg.verify.run import verify

    if args.all and args.against:
        raise SpecregErrorLine("--against judges one draft: it does not go with --all")
    if args.all:
        from specreg.verify import nightly

        if not args.out:
            raise SpecregErrorLine("--all needs --out DIR")
        plain, named = dataset_files(args.dataset_file)
        if plain is not None:
            raise SpecregErrorLine(
                "with --all, name the dataset of each --dataset-file (--dataset-file "
                f"mt-bench={plain}): entries are run on their own baselines' datasets"
            )
        passthrough = []
        if args.server:
            passthrough += ["--server", args.server]
        if args.shots_file:
            passthrough += ["--shots-file", args.shots_file]
        if args.gpu:
            passthrough += ["--gpu", args.gpu]
        if not args.early_stop:
            passthrough.append("--no-early-stop")
        if args.chunks != 10:
            passthrough.append(f"--chunks={args.chunks}")
        passthrough += ["--timeout", f"{args.timeout:g}"]  # the entry's own deadline: it records its result
        try:
            nightly.parse_shard(args.shard)
        except ValueError as exc:
            raise SpecregErrorLine(str(exc)) from None
        verdicts = nightly.run_all(
            Path(args.out),
            shard_spec=args.shard,
            resume=args.resume,
            timeout=args.timeout,
            extra=passthrough,
            dataset_files=named,
            registry=args.registry,
            progress=progress_line,
        )
        bad = {k: v for k, v in verdicts.items() if v in ("regressed", "crash", "timeout", "error", "invalid")}
        if args.json:
            print(json.dumps({"out": args.out, "verdicts": verdicts}, indent=2))
            return EXIT_FINDINGS if bad else EXIT_OK
        print(
            f"{len(verdicts)} entries: "
            + ", ".join(f"{v} {list(verdicts.values()).count(v)}" for v in sorted(set(verdicts.values())))
        )
        return EXIT_FINDINGS if bad else EXIT_OK
    if not args.model:
        raise SpecregErrorLine("give a MODEL, or --all")
    from specreg.verify.run import catalog_entry

    entry = _against_entry(args) if args.against else catalog_entry(args.model, args.registry)
    if entry is None and not os.path.exists(args.model):
        from specreg.entries.lookup import closest_id
        from specreg.errors import SpecregError

        try:
            close = closest_id(args.model, args.registry)
        except SpecregError:  # the registry itself is refused below, in its own words
            close = None
        if close is not None:
            progress_line(f"{args.model} is not in the catalog (did you mean {close}?): no baseline to judge against")
    opts = verify_options(args, entry)
    out = Path(args.out) if args.out else None
    history = Path(args.history) if args.history else (out.parent / HISTORY if out else None)
    if args.k is not None and len(args.k) > 1:
        index = (opts.harness_from or {}).get("baseline_index")
        return _sweep(args, opts, out, history, entry.baselines[index].harness.k if index is not None else None)
    result = verify(args.model, opts, out=out, history=history, progress=progress_line)
    if args.json:
        from specreg.verify.outputs import result_text

        print(result_text(result), end="")
        return _exit_status(result)
    from specreg.verify.outputs import prompts_text

    s = result.get("statistics")
    line = f"{args.model}: {result['verdict']}"
    if s:
        line += f"; AL {s['acceptance_length']:.3f}, draft acceptance {s['draft_acceptance_rate']:.3f}"
    if result.get("error"):
        line += f"; {result['error']}"
    print(line)
    judgement = result.get("judgement") or {}
    origin = result.get("harness_from") or {}
    if result.get("against"):
        print(f"  {result['against']['text']}")
    if origin.get("baseline_index") is not None:
        line = f"  harness: baseline {origin['baseline_index']}'s"
        if origin.get("overridden"):
            line += f", overridden here: {', '.join(origin['overridden'])}"
        print(line)
    if prompts_text(result):
        print(f"  prompts: {prompts_text(result)}")
    for check in judgement.get("checks") or []:
        print(f"  {check['text']}")
    if judgement.get("reason") and result["verdict"] not in ("error", "timeout", "invalid", "interrupted"):
        print(f"  {judgement['reason']}")
    for d in judgement.get("differences", []):
        print(f"  harness differs: {d}")
    if judgement.get("not_recorded_by_baseline"):
        print(f"  not recorded by the baseline (not compared): {', '.join(judgement['not_recorded_by_baseline'])}")
    for other in judgement.get("others", []):
        print(f"  baseline {other['baseline_index']} (same harness): {other['verdict']}")
    update = result.get("baseline_update")
    if update is not None:
        if update.get("written"):
            print(f"  baseline written to {update['path']} (review the change):")
            print(update["diff"], end="")
        else:
            print(f"  --update-baseline: nothing written: {update['reason']}", file=sys.stderr)
    if out:
        print(f"  outputs in {out}")
    return _exit_status(result)


def _against_entry(args: argparse.Namespace) -> Any:
    """`--against ENTRY[:N]`: the catalog entry whose baseline judges the draft (N sets args.baseline)."""
    from specreg.verify.run import catalog_entry

    name, sep, index = args.against.rpartition(":")
    if not (sep and index.isdigit()):
        name, index = args.against, None
    if index is not None:
        if args.baseline is not None and args.baseline != int(index):
            raise SpecregErrorLine(f"--against {args.against} names baseline {index}, --baseline {args.baseline}")
        args.baseline = int(index)
    entry = catalog_entry(name, args.registry)
    if entry is None:
        from specreg.entries.lookup import closest_id
        from specreg.errors import SpecregError

        try:
            close = closest_id(name, args.registry)
        except SpecregError:
            close = None
        hint = f" (did you mean {close}?)" if close else ""
        raise SpecregErrorLine(
            f"--against {args.against}: {name} is not in the catalog{hint}; `specreg catalog list` lists the entries"
        )
    if not entry.baselines:
        raise SpecregErrorLine(f"--against {args.against}: {entry.id} has no baseline to judge against")
    from specreg.verify.harness import primary_baseline, why_not_runnable

    if args.baseline is None and primary_baseline(entry) is None:
        # `verify ENTRY` would offer --dataset here; a run against nothing is not what --against asks
        raise SpecregErrorLine(f"--against {args.against}: {why_not_runnable(entry)}")
    return entry


def _exit_status(result: dict[str, Any]) -> int:
    """The verdict's exit status; a refused --update-baseline makes a passing run exit 2."""
    from specreg.verify.run import EXIT

    code = EXIT[result["verdict"]]
    update = result.get("baseline_update")
    if update is not None and not update.get("written"):
        return code or EXIT_BAD_INPUT
    return code


def _sweep(args: argparse.Namespace, opts: Any, out: Any, history: Any, baseline_k: int | None) -> int:
    """`--k 1,3,5`: one in-process run per k (a server's k is fixed when it starts), each written to
    OUT/k-K, and a table of AL, per-position rates and output tokens/s per k. The exit status is the
    run's whose k is the baseline's (the only one its gate applies to), else 0 when every run measured."""
    import attrs

    from specreg import atomic
    from specreg.verify.run import EXIT, verify

    if args.server:
        raise SpecregErrorLine(
            "--k with several values runs in-process: a server's draft length is fixed when it "
            "starts (run one server per k, one verify each)"
        )
    rows, codes = [], {}
    for k in args.k:
        run_opts = attrs.evolve(opts, k=k)
        result = verify(
            args.model, run_opts, out=out / f"k-{k}" if out else None, history=history, progress=progress_line
        )
        s = result.get("statistics") or {}
        rows.append(
            {
                "k": k,
                "verdict": result["verdict"],
                "acceptance_length": s.get("acceptance_length"),
                "per_position": s.get("per_position"),
                "output_tokens_per_s": s.get("output_tokens_per_s"),
                "error": result.get("error"),
            }
        )
        codes[k] = EXIT[result["verdict"]]
    best = max((r for r in rows if r["output_tokens_per_s"]), key=lambda r: r["output_tokens_per_s"], default=None)
    sweep = json.dumps({"model": args.model, "runs": rows, "best_k": best["k"] if best else None}, indent=2) + "\n"
    if out:
        out.mkdir(parents=True, exist_ok=True)
        atomic.write_bytes(out / "sweep.json", sweep.encode())
    code = (
        codes[baseline_k]
        if baseline_k in codes
        else (max(codes.values()) if any(c >= 2 for c in codes.values()) else EXIT_OK)
    )
    if args.json:
        print(sweep, end="")
        return code
    print(f"{args.model}: k sweep ({', '.join(map(str, args.k))}); a property of this engine, GPU and batch")
    print("  k  AL      tokens/s  per-position")
    for r in rows:
        al = f"{r['acceptance_length']:.3f}" if r["acceptance_length"] is not None else "-"
        tps = f"{r['output_tokens_per_s']:.1f}" if r["output_tokens_per_s"] is not None else "-"
        pp = " / ".join(f"{p:.3f}" for p in r["per_position"] or []) or (r["error"] or r["verdict"])
        print(f"  {r['k']:<2} {al:<7} {tps:<9} {pp}")
    if best is not None:
        print(f"  most output tokens/s: k = {best['k']}")
    return code


def _report(args: argparse.Namespace) -> int:
    import importlib.util
    from pathlib import Path

    if importlib.util.find_spec("matplotlib") is None:
        raise SpecregErrorLine("report needs matplotlib: pip install 'specreg[verify]'")

    from specreg.verify.report import build

    if not Path(args.dir).is_dir():
        raise SpecregErrorLine(f"{args.dir}: no such results directory (the --out of `specreg verify`)")
    warnings: list[str] = []
    index = build(
        Path(args.dir),
        Path(args.out),
        registry=args.registry,
        history_out=Path(args.history_out) if args.history_out else None,
        warnings=warnings,
    )
    if args.json:
        print(
            json.dumps(
                {"index": str(index), "history_out": args.history_out, "warnings": warnings},
                indent=2,
                ensure_ascii=False,
            )
        )
        return EXIT_OK
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"wrote {index}")
    return EXIT_OK


HANDLERS = {"verify": _verify, "report": _report}
