"""`specreg serve`, `materialize` and `convert`: the vLLM-ready directory, the `vllm serve` line,
and the speculators-format twin of a native draft."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from specreg import facts
from specreg.errors import with_article
from specreg.cli import sglang
from specreg.cli.sglang import engine_arg
from specreg.cli.show import tokens_arg
from specreg.cli.common import (
    EXIT_OK,
    Refused,
    directory_args,
    gpu_name,
    load_draft,
    print_lines,
    progress_line,
    source_args,
)


def add_serve(sub: Any) -> None:
    serve = sub.add_parser(
        "serve",
        help="print the `vllm serve` command line for the draft",
        usage="specreg serve SOURCE [options] [-- VLLM_FLAGS...]",
        description="Print the `vllm serve` line (with the environment it needs) that serves the draft as trained. "
        "vLLM flags after `--` are passed through; the catalog's [serving] hints (tensor parallel size, max model "
        "length, quantization) are added unless given.",
    )
    source_args(serve)
    serve.add_argument(
        "--dir",
        help="where to materialize the draft when the unmodified file would be served differently from its "
        "training (default: a directory under ~/.cache/specreg/drafts, or $SPECREG_CACHE/drafts); re-running "
        "with the same source refreshes specreg's own files there",
    )
    serve.add_argument(
        "--force", action="store_true", help="replace specreg's files in a --dir that holds another draft"
    )
    serve.add_argument("--config-only", action="store_true", help="materialize config.json without weights")
    serve.add_argument(
        "--json", action="store_true", help='print {"env": {...}, "argv": [...]} instead of a shell line'
    )
    serve.add_argument(
        "--spec-flags",
        action="store_true",
        help="write the draft as --spec-model/--spec-method/--spec-tokens "
        f"(vLLM {facts.since('spec_flags')}+) instead of "
        "--speculative-config, where those three say all of it",
    )
    serve.add_argument(
        "--gpu",
        type=gpu_name,
        metavar="NAME",
        help="the GPU to serve on (H100, A100, L40S, RTX 4090, "
        "B200, GB10, ... or sm_XY): refuse a draft no attention backend serves there, and write the "
        "draft's own kv_cache_dtype or attention_backend into the speculative config where that makes "
        "it start",
    )
    serve.add_argument(
        "-q", "--quiet", action="store_true", help="no download progress bars, notes or warnings (errors still print)"
    )
    tokens_arg(serve)
    force_verifier_arg(serve)
    engine_arg(serve)


def force_verifier_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force-verifier",
        action="store_true",
        help="serve the draft beside --verifier even where it does not match it (the errors `specreg check` "
        "finds for that pair are printed as warnings): for someone who knows better than the configs",
    )
    parser.add_argument(
        "--skip-verifier-check",
        action="store_true",
        help="serve the draft beside a --verifier whose config cannot be read here (offline, the Hub down) "
        "without checking the pair; without it that is refused",
    )


def add_materialize(sub: Any) -> None:
    mat = sub.add_parser("materialize", help="write a vLLM-ready draft directory (config.json as trained + weights)")
    directory_args(mat, "DIR")
    mat.add_argument("--json", action="store_true", help="print the keyword arguments for vllm.LLM as JSON")
    force_verifier_arg(mat)
    engine_arg(mat)


def add_convert(sub: Any) -> None:
    conv = sub.add_parser(
        "convert", help="write the speculators-format twin of a native draft (z-lab, DeepSpec, EAGLE-3)"
    )
    directory_args(conv, "OUT_DIR")
    conv.add_argument(
        "--json", action="store_true", help="print what was written (directory, format, files, verifier) as JSON"
    )
    force_verifier_arg(conv)


def _report(spec, quiet: bool = False) -> None:
    """The findings a user must see before serving: every one but info, on stderr (with -q, errors only)."""
    for f in spec.findings:
        if f.severity == "error" or (f.severity != "info" and not quiet):
            print_lines([f"# {f.severity}: {f.code}: {f.message}"], file=sys.stderr)


def _checked(args: argparse.Namespace):
    """The draft checked against a --verifier other than its own (its errors warnings with
    --force-verifier), its findings reported."""
    from specreg.api.verifier import require_verifier_check
    from specreg.vllm.agreement import served_with
    from specreg.vllm.preflight import accept_verifier, against_verifier

    spec = load_draft(args, check_verifier=False)
    if spec.servable:  # one refused already is not checked further
        spec = require_verifier_check(against_verifier(spec, args.verifier), args.skip_verifier_check)
    if args.force_verifier:
        spec = accept_verifier(spec)
    spec = served_with(spec, getattr(args, "num_speculative_tokens", None))
    _report(spec, args.quiet)
    return spec


def _refused(exc, source: str) -> Refused:
    """specreg.api.serve.NotServable as the CLI says it: one line (exit 1), after the GPU's error findings
    (the draft's own were reported with the others)."""
    for f in exc.findings if exc.gpu else ():
        print_lines([f"# error: {f.code}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "")], file=sys.stderr)
    return Refused(f"error: {source}: {exc.message}", exc.findings)


def _serve(args: argparse.Namespace) -> int:
    from specreg.api.serve import NotServable, serve_plan, vllm_settings

    if args.engine == "sglang":
        return sglang.serve(args)
    vllm_settings(args.vllm_args)  # bad flags are refused before anything is read
    spec = _checked(args)
    say = None if args.quiet else progress_line

    def plan(write: bool, progress: Any):
        return serve_plan(
            spec,
            verifier=args.verifier,
            vllm_args=args.vllm_args,
            directory=args.dir,
            force=args.force,
            config_only=args.config_only,
            gpu=args.gpu,
            spec_flags=args.spec_flags,
            force_verifier=args.force_verifier,
            skip_verifier_check=args.skip_verifier_check,
            write=write,
            progress=progress,
        )

    try:
        # every refusal (the GPU, --spec-flags, the verifier) before anything is written or downloaded
        done = plan(False, None)
        if done.directory is not None:
            done = plan(True, say)
        elif not args.quiet:
            print_lines([f"# {n}" for n in done.notes], file=sys.stderr)
    except NotServable as exc:
        raise _refused(exc, args.source) from None
    plan = done
    if args.json:
        print(json.dumps({"env": dict(plan.env), "argv": list(plan.argv)}, indent=2))
    else:
        print(plan.shell_line())
    return EXIT_OK


def _materialize(args: argparse.Namespace) -> int:
    from specreg.api.serve import NotServable, materialize, serve_argv, serve_line
    from specreg.normalization.speculator import thaw

    if args.engine == "sglang":
        return sglang.materialize(args)
    spec = _checked(args)
    weights = "none" if args.config_only else "copy" if args.copy else "link"
    try:
        done = materialize(
            spec,
            args.dir,
            verifier=args.verifier,
            weights=weights,
            force=args.force,
            force_verifier=args.force_verifier,
            skip_verifier_check=args.skip_verifier_check,
            progress=None if args.quiet else progress_line,
        )
    except NotServable as exc:
        raise _refused(exc, args.source) from None
    kwargs = thaw(done.llm_kwargs)
    if args.json:
        print(json.dumps({"env": dict(done.env), "llm_kwargs": kwargs}, indent=2))
    else:
        n = len(done.files) - 2
        what = {
            "none": "no weights (--config-only)",
            "copy": f"{n} weight files copied",
            "link": f"{n} weight files linked",
        }[weights]
        print(f"wrote {done.directory}: config.json, specreg.json, {what}")
        print(serve_line(spec.serve_env, serve_argv(kwargs)))
    if spec.needs_v2_model_runner and not args.json and not args.quiet:
        print(
            "# set VLLM_USE_V2_MODEL_RUNNER=1: vLLM serves this draft as trained on its V2 model runner only",
            file=sys.stderr,
        )
    return EXIT_OK


def _convert(args: argparse.Namespace) -> int:
    from specreg.api.conversion import convert
    from specreg.api.serve import NotServable

    weights = "none" if args.config_only else "copy" if args.copy else "link"
    try:
        done = convert(
            args.source,
            args.dir,
            verifier=args.verifier,
            revision=args.revision,
            weights=weights,
            force=args.force,
            force_verifier=args.force_verifier,
            skip_verifier_check=args.skip_verifier_check,
            progress=None if args.quiet else progress_line,
        )
    except NotServable as exc:
        print_lines([f"# error: {f.code}: {f.message}" for f in exc.findings], file=sys.stderr)
        raise _refused(exc, args.source) from None
    if args.json:
        print(json.dumps(done.to_dict(), indent=2))
        return EXIT_OK
    n = len(done.files) - 2
    print(
        f"wrote {done.directory}: the speculators-format twin of {with_article(done.format)} draft "
        f"(config.json, specreg.json, {n} weight file{'s' * (n != 1)})"
    )
    return EXIT_OK


HANDLERS = {"serve": _serve, "materialize": _materialize, "convert": _convert}
