"""`specreg verify` and `report`: acceptance measured with vLLM and judged against the catalog."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from specreg.cli.common import (EXIT_FINDINGS, EXIT_OK, SpecregErrorLine, _count, _number, _progress, harness_int,
                                harness_number)


def add_verify(sub: Any) -> None:
    ver = sub.add_parser("verify", help="measure acceptance with vLLM and judge it against the catalog")
    ver.add_argument("model", nargs="?", metavar="MODEL", help="a catalog id / Hub id / local draft (omit with --all)")
    ver.add_argument("--server", metavar="URL", help="a running vLLM OpenAI-compatible server (default: vLLM in-process)")
    ver.add_argument("--served-model", help="the model name the server serves (default: the first of /v1/models)")
    ver.add_argument("--dataset", default="gsm8k", help="gsm8k | mt-bench | humaneval | speed-bench[:category] | FILE.jsonl")
    ver.add_argument("--dataset-file", metavar="FILE", help="the named dataset's rows from a local JSONL file")
    ver.add_argument("--num-prompts", type=harness_int("num_prompts"), default=80)
    ver.add_argument("--temperature", type=harness_number("temperature"), default=0.0)
    ver.add_argument("--max-tokens", type=harness_int("max_tokens"), default=256)
    ver.add_argument("--k", type=harness_int("k"), help="draft tokens (default: the config's)")
    ver.add_argument("--batch-size", type=harness_int("batch_size"), help="max_num_seqs (in-process)")
    ver.add_argument("--concurrency", type=harness_int("concurrency"), default=1, help="requests in flight (--server)")
    ver.add_argument("--seed", type=harness_int("seed"), default=42)
    fmt = ver.add_mutually_exclusive_group()
    fmt.add_argument("--chat", dest="chat", action="store_true", default=True, help="chat template (default)")
    fmt.add_argument("--raw", dest="chat", action="store_false", help="raw completion prompts")
    ver.add_argument("--few-shot", type=harness_int("few_shot"), default=0)
    think = ver.add_mutually_exclusive_group()
    think.add_argument("--thinking", dest="thinking", action="store_true", default=None)
    think.add_argument("--no-thinking", dest="thinking", action="store_false")
    ver.add_argument("--shots-split", metavar="SPLIT", help="take the few-shot examples from this split (vLLM's GSM8K: train)")
    ver.add_argument("--shots-file", metavar="FILE", help="the few-shot split's rows from a local JSONL file")
    ver.add_argument("--template", metavar="FMT", help="prompt format string over a row's fields, e.g. '{question}\\n...'")
    ver.add_argument("--stop", action="append", metavar="TEXT", help="a stop string (repeatable)")
    ver.add_argument("--max-model-len", type=harness_int("max_model_len"), metavar="N", help="the engine's max_model_len (default: the entry's [serving])")
    ver.add_argument("--mode", choices=("batched", "prompt-at-a-time"), default="batched",
                     help="all prompts batched, or one generate per prompt")
    ver.add_argument("--statistic", choices=("pooled", "mean-per-prompt"), default=None,
                     help="AL over the whole run, or the mean of each prompt's AL (default: mean-per-prompt with "
                          "--mode prompt-at-a-time, else pooled)")
    ver.add_argument("--draft-sample-method", metavar="M", help="speculative_config.draft_sample_method (in-process)")
    cache = ver.add_mutually_exclusive_group()
    cache.add_argument("--prefix-caching", dest="prefix_caching", action="store_true", default=None)
    cache.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    ver.add_argument("--chunks", type=harness_int("chunks"), default=10, help="prompts run in this many chunks (for the interval)")
    ver.add_argument("--gpu", help="the GPU, when it cannot be read here (a remote server)")
    ver.add_argument("--tensor-parallel-size", type=int)
    ver.add_argument("--out", metavar="DIR", help="write result.json, summary.md, junit.xml, per_position.png here")
    ver.add_argument("--history", metavar="DB", help="the SQLite history (default: OUT/../history.sqlite)")
    ver.add_argument("--strict-harness", action="store_true", help="refuse to compare unless the harness matches")
    ver.add_argument("--update-baseline", action="store_true", help="write a measured baseline into the entry")
    ver.add_argument("--registry", metavar="DIR", help="a catalog directory (default: the shipped one)")
    ver.add_argument("--all", action="store_true", help="every catalog entry with a baseline, each in a subprocess")
    ver.add_argument("--shard", default="1/1", metavar="I/N", help="with --all: this shard of N")
    ver.add_argument("--resume", action="store_true", help="with --all: skip entries already done")
    ver.add_argument("--timeout", type=_number(1.0, 7 * 24 * 3600.0), default=3600, help="seconds a run may take (with --all: per entry; a run past it is recorded as timeout)")


def add_report(sub: Any) -> None:
    rep = sub.add_parser("report", help="a static HTML page from verify results and history")
    rep.add_argument("dir", metavar="DIR", help="where verify wrote its results (searched recursively)")
    rep.add_argument("--out", required=True, metavar="SITE")
    rep.add_argument("--history-out", metavar="DB", help="write the merged history of every history.sqlite under DIR here")
    rep.add_argument("--registry", metavar="DIR")


def verify_options(args: argparse.Namespace):
    """`specreg verify`'s parsed flags as the run's Options (the nightly's harness flags included)."""
    from specreg.verify.run import Options

    return Options(server=args.server, dataset=args.dataset, dataset_file=args.dataset_file,
                   num_prompts=args.num_prompts, temperature=args.temperature, max_tokens=args.max_tokens, k=args.k,
                   batch_size=args.batch_size, concurrency=args.concurrency, seed=args.seed, chat=args.chat,
                   few_shot=args.few_shot, thinking=args.thinking, chunks=args.chunks, gpu=args.gpu,
                   tensor_parallel_size=args.tensor_parallel_size, strict_harness=args.strict_harness,
                   update_baseline=args.update_baseline, registry=args.registry, served_model=args.served_model,
                   stop=tuple(args.stop) if args.stop else None, shots_split=args.shots_split,
                   shots_file=args.shots_file, template=args.template, max_model_len=args.max_model_len,
                   mode=args.mode, statistic=args.statistic or
                   ("mean-per-prompt" if args.mode == "prompt-at-a-time" else "pooled"),
                   draft_sample_method=args.draft_sample_method, prefix_caching=args.prefix_caching,
                   timeout=args.timeout)


def _verify(args: argparse.Namespace) -> int:
    from pathlib import Path

    import importlib.util

    missing = [m for m in ("datasets", "matplotlib", "prometheus_client", "httpx") if importlib.util.find_spec(m) is None]
    if missing:
        raise SpecregErrorLine(f"verify needs {', '.join(missing)}: pip install 'specreg[verify]'")
    from specreg.verify.outputs import HISTORY
    from specreg.verify.run import EXIT, verify

    if args.all:
        from specreg.verify import nightly

        if not args.out:
            raise SpecregErrorLine("--all needs --out DIR")
        passthrough = []
        if args.server:
            passthrough += ["--server", args.server]
        if args.dataset_file:
            passthrough += ["--dataset-file", args.dataset_file]
        if args.shots_file:
            passthrough += ["--shots-file", args.shots_file]
        if args.gpu:
            passthrough += ["--gpu", args.gpu]
        passthrough += ["--timeout", f"{args.timeout:g}"]  # the entry's own deadline: it records its result
        try:
            nightly.parse_shard(args.shard)
        except ValueError as exc:
            raise SpecregErrorLine(str(exc)) from None
        verdicts = nightly.run_all(Path(args.out), shard_spec=args.shard, resume=args.resume, timeout=args.timeout,
                                   extra=passthrough, registry=args.registry, progress=_progress)
        bad = {k: v for k, v in verdicts.items() if v in ("regressed", "crash", "timeout", "error", "invalid")}
        print(f"{len(verdicts)} entries: " + ", ".join(f"{v} {list(verdicts.values()).count(v)}"
                                                        for v in sorted(set(verdicts.values()))))
        return EXIT_FINDINGS if bad else EXIT_OK
    if not args.model:
        raise SpecregErrorLine("give a MODEL, or --all")
    opts = verify_options(args)
    out = Path(args.out) if args.out else None
    history = Path(args.history) if args.history else (out.parent / HISTORY if out else None)
    result = verify(args.model, opts, out=out, history=history, progress=_progress)
    s = result.get("statistics")
    line = f"{args.model}: {result['verdict']}"
    if s:
        line += f"; AL {s['acceptance_length']:.3f}, draft acceptance {s['draft_acceptance_rate']:.3f}"
    if result.get("error"):
        line += f"; {result['error']}"
    print(line)
    judgement = result.get("judgement") or {}
    for d in judgement.get("differences", []):
        print(f"  harness differs: {d}")
    if judgement.get("not_recorded_by_baseline"):
        print(f"  not recorded by the baseline: {', '.join(judgement['not_recorded_by_baseline'])}")
    if out:
        print(f"  outputs in {out}")
    return EXIT[result["verdict"]]


def _report(args: argparse.Namespace) -> int:
    import importlib.util
    from pathlib import Path

    if importlib.util.find_spec("matplotlib") is None:
        raise SpecregErrorLine("report needs matplotlib: pip install 'specreg[verify]'")

    from specreg.verify.report import build

    if not Path(args.dir).is_dir():
        raise SpecregErrorLine(f"{args.dir}: no such results directory (the --out of `specreg verify`)")
    warnings: list[str] = []
    index = build(Path(args.dir), Path(args.out), registry=args.registry,
                  history_out=Path(args.history_out) if args.history_out else None, warnings=warnings)
    for w in warnings:
        print(f"warning: {w}", file=sys.stderr)
    print(f"wrote {index}")
    return EXIT_OK


HANDLERS = {"verify": _verify, "report": _report}
