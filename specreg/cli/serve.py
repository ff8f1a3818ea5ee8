"""`specreg serve`, `materialize` and `convert`: the vLLM-ready directory, the `vllm serve` line,
and the speculators-format twin of a native draft."""

from __future__ import annotations

import argparse
import json
import shlex
import sys
from typing import Any, Sequence

from specreg import facts
from specreg.cli.common import (EXIT_OK, SpecregErrorLine, load_draft, progress_line, Refused, directory_args, gpu_name,
                                print_lines, source_args)


def add_serve(sub: Any) -> None:
    serve = sub.add_parser(
        "serve", help="print the `vllm serve` command line for the draft",
        usage="specreg serve SOURCE [options] [-- VLLM_FLAGS...]",
        description="Print the `vllm serve` line (with the environment it needs) that serves the draft as trained. "
        "vLLM flags after `--` are passed through; the catalog's [serving] hints (tensor parallel size, max model "
        "length, quantization) are added unless given.")
    source_args(serve)
    serve.add_argument(
        "--dir",
        help="where to materialize the draft when the unmodified file would be served differently from its "
        "training (default: a directory under ~/.cache/specreg/drafts, or $SPECREG_CACHE/drafts); re-running "
        "with the same source refreshes specreg's own files there",
    )
    serve.add_argument("--force", action="store_true", help="replace specreg's files in a --dir that holds another draft")
    serve.add_argument("--config-only", action="store_true", help="materialize config.json without weights")
    serve.add_argument("--json", action="store_true", help='print {"env": {...}, "argv": [...]} instead of a shell line')
    serve.add_argument("--spec-flags", action="store_true",
                       help="write the draft as --spec-model/--spec-method/--spec-tokens "
                            f"(vLLM {facts.since('spec_flags')}+) instead of "
                            "--speculative-config, where those three say all of it")
    serve.add_argument("--gpu", type=gpu_name, metavar="NAME", help="the GPU to serve on (H100, A100, L40S, RTX 4090, "
                       "B200, GB10, ... or sm_XY): refuse a draft no attention backend serves there, and write the "
                       "draft's own kv_cache_dtype or attention_backend into the speculative config where that makes "
                       "it start")
    serve.add_argument("-q", "--quiet", action="store_true", help="no download progress bars")


def add_materialize(sub: Any) -> None:
    mat = sub.add_parser("materialize", help="write a vLLM-ready draft directory (config.json as trained + weights)")
    directory_args(mat, "DIR")
    mat.add_argument("--json", action="store_true", help="print the keyword arguments for vllm.LLM as JSON")


def add_convert(sub: Any) -> None:
    conv = sub.add_parser("convert", help="write the speculators-format twin of a native draft (z-lab, DeepSpec, EAGLE-3)")
    directory_args(conv, "OUT_DIR")


def serve_argv(kwargs: dict[str, Any], flags: Sequence[str] = (), *, spec_flags: bool = False) -> list[str]:
    """`vllm serve` for `llm_kwargs`-shaped arguments, then any further vLLM flags. `spec_flags`: the
    draft as vLLM's --spec-model/--spec-method/--spec-tokens (the caller checks they say all of it)."""
    sc = kwargs["speculative_config"]
    if spec_flags:
        draft = ["--spec-model", str(sc["model"]), "--spec-method", str(sc["method"]),
                 "--spec-tokens", str(sc["num_speculative_tokens"])]
    else:
        draft = ["--speculative-config", json.dumps(sc)]
    return ["vllm", "serve", kwargs["model"], *draft, *flags]


#: the speculative_config keys the --spec-* flags carry
_SPEC_FLAG_KEYS = {"model", "method", "num_speculative_tokens"}


def _spec_flags_allowed(spec, kwargs: dict[str, Any]) -> None:
    from packaging.version import Version

    from specreg.cli.vllm_flags import SPEC_FLAGS_SINCE

    if Version(spec.vllm_version) < Version(SPEC_FLAGS_SINCE):
        raise SpecregErrorLine(f"--spec-flags: vLLM {spec.vllm_version} has no --spec-model/--spec-method/--spec-tokens "
                               f"(they arrive in {SPEC_FLAGS_SINCE}); drop --spec-flags")
    extra = sorted(set(kwargs["speculative_config"]) - _SPEC_FLAG_KEYS)
    if extra:
        raise SpecregErrorLine("--spec-flags: this draft's speculative config also sets " + ", ".join(extra)
                               + ", which the --spec-* flags cannot say; serve it with --speculative-config (drop "
                                 "--spec-flags)")


def serve_command(spec, kwargs: dict[str, Any]) -> str:
    """The `vllm serve` line for `llm_kwargs`-shaped arguments, with the environment it needs."""
    return serve_line(spec.serve_env, serve_argv(kwargs))


def _servable(spec, args: argparse.Namespace) -> str:
    """Report the findings on stderr; return the verifier to serve beside, or raise / exit 1."""
    from specreg.errors import ConfigError

    for f in spec.findings:
        if f.severity != "info":
            print_lines([f"# {f.severity}: {f.code}: {f.message}"], file=sys.stderr)
    if not spec.servable:
        raise Refused(f"error: {args.source}: not servable as trained by vLLM {spec.vllm_version} (see the errors above)")
    local_verifier = any(f.code == "verifier-local-path" for f in spec.findings)
    verifier = args.verifier or (None if local_verifier else spec.verifier)
    if not verifier:
        raise ConfigError(
            "the config names no usable verifier; pass --verifier ORG/NAME",
            "$.speculators_config.verifier.name_or_path",
            source=args.source,
        )
    return verifier


def _serve(args: argparse.Namespace) -> int:
    from specreg.vllm.manifest import default_directory, same_draft

    given = _given_flags(list(args.vllm_args))  # bad flags are refused before anything is read
    spec = load_draft(args)
    verifier = _servable(spec, args)
    flags = _vllm_flags(spec, list(args.vllm_args), given)
    reason = spec.materialize_reason
    if reason is None and not args.dir:
        kwargs = spec.llm_kwargs(verifier=verifier)
    else:
        directory = args.dir or default_directory(spec)
        # specreg's own cache directory is replaced freely; a --dir too when it holds this same draft
        force = not args.dir or args.force or same_draft(directory, spec)
        weights = "none" if args.config_only else "link"
        done = spec.materialize(directory, weights=weights, force=force, progress=progress_line)
        if reason:
            print_lines([f"# {reason}: serving the materialized directory {done.directory}"], file=sys.stderr)
        kwargs = done.llm_kwargs(verifier=verifier)
    if args.gpu:
        kwargs = _fit_gpu(spec, args, kwargs, given)
    if args.spec_flags:
        _spec_flags_allowed(spec, kwargs)
    argv = serve_argv(kwargs, flags, spec_flags=args.spec_flags)
    if args.json:
        print(json.dumps({"env": spec.serve_env, "argv": argv}, indent=2))
    else:
        print(serve_line(spec.serve_env, argv))
    return EXIT_OK


def _fit_gpu(spec, args: argparse.Namespace, kwargs: dict[str, Any], given: dict[str, str | None]) -> dict[str, Any]:
    """`--gpu`: the draft's attention on that GPU (specreg.vllm.gpu_plan.serve_fit), with the flags given."""
    import os

    from specreg.vllm.attention import AttentionError
    from specreg.vllm.gpu_plan import serve_fit

    v2 = "VLLM_USE_V2_MODEL_RUNNER" in spec.serve_env or os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "") in ("1", "true")
    try:
        written, notes, errors = serve_fit(spec, args.gpu, server_kv_cache_dtype=given.get("kv_cache_dtype"),
                                           server_dtype=given.get("dtype"), server_backend=given.get("attention_backend"),
                                           v2_runner=v2)
    except AttentionError as exc:
        raise SpecregErrorLine(f"--gpu {args.gpu}: {exc}") from None
    for f in errors:
        print_lines([f"# error: {f.code}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "")], file=sys.stderr)
    if errors:
        raise Refused(f"error: {args.source}: no attention backend serves the draft on {args.gpu} (see above)")
    for note in notes:
        print_lines([f"# gpu: {note}"], file=sys.stderr)
    return {**kwargs, "speculative_config": {**kwargs["speculative_config"], **written}}


#: the catalog's [serving] hints (each a vLLM setting of the same name)
_HINTS = ("tensor_parallel_size", "max_model_len", "quantization")


def _given_flags(extra: list[str]) -> dict[str, str | None]:
    """The vLLM settings the flags after `--` give (setting -> value), read as vLLM reads them
    (`vllm_flags`: any alias or abbreviation, `_` or `-`, `=`); the ones specreg writes itself are refused."""
    from specreg.cli.vllm_flags import OWNED, named, settings, spelling

    names = named(extra)
    given, _how = settings(extra)
    owned = sorted(OWNED & (set(given) | set(names)))
    if owned:
        user, full = names.get(owned[0], (spelling(owned[0]),) * 2)
        read = "" if user.split(".", 1)[0] == full else f"vLLM reads it as {full}; "
        raise SpecregErrorLine(f"{user} after --: {read}specreg writes the model and the speculative config itself; "
                               "pass vLLM's other flags there")
    return given


def _vllm_flags(spec, extra: list[str], given: dict[str, str | None]) -> list[str]:
    """The vLLM flags after `--`, plus the catalog's [serving] hints the user did not give in any
    spelling (a differing value is the user's, with a note)."""
    from specreg.cli.vllm_flags import spelling

    serving = getattr(spec.catalog, "serving", None) if spec.catalog is not None else None
    added: list[str] = []
    for field in _HINTS:
        hint = getattr(serving, field, None) if serving is not None else None
        if hint is None:
            continue
        if field not in given:
            added += [spelling(field), str(hint)]
        elif given[field] != str(hint):
            print_lines([f"# note: the catalog entry serves this draft with {spelling(field)} {hint}; you asked for "
                         f"{given[field]}"], file=sys.stderr)
    return list(extra) + added


def serve_line(env: dict[str, str], argv: list[str]) -> str:
    """A shell line: the environment, then the command, each word quoted."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in argv)])


def _materialize(args: argparse.Namespace) -> int:
    spec = load_draft(args)
    verifier = _servable(spec, args)
    weights = "none" if args.config_only else "copy" if args.copy else "link"
    done = spec.materialize(args.dir, weights=weights, force=args.force, progress=progress_line)
    kwargs = done.llm_kwargs(verifier=verifier)
    if args.json:
        print(json.dumps({"env": kwargs.env, "llm_kwargs": kwargs}, indent=2))
    else:
        n = len(done.files) - 2
        what = {"none": "no weights (--config-only)", "copy": f"{n} weight files copied",
                "link": f"{n} weight files linked"}[weights]
        print(f"wrote {done.directory}: config.json, specreg.json, {what}")
        print(serve_command(spec, kwargs))
    if spec.needs_v2_model_runner and not args.json:
        print("# set VLLM_USE_V2_MODEL_RUNNER=1: vLLM serves this draft as trained on its V2 model runner only",
              file=sys.stderr)
    return EXIT_OK


def _convert(args: argparse.Namespace) -> int:
    from specreg.api import convert

    weights = "none" if args.config_only else "copy" if args.copy else "link"
    done = convert(args.source, args.dir, verifier=args.verifier, revision=args.revision, weights=weights,
                   force=args.force, progress=progress_line)
    n = len(done.files) - 2
    print(f"wrote {done.directory}: the speculators-format twin of a {done.format} draft "
          f"(config.json, specreg.json, {n} weight file{'s' * (n != 1)})")
    return EXIT_OK


HANDLERS = {"serve": _serve, "materialize": _materialize, "convert": _convert}
