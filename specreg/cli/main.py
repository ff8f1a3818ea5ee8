"""The `specreg` command line: show, check, serve, materialize, convert, algorithms, catalog, verify, report.

Exit codes: 0 ok; 1 the draft has error findings; 2 bad input (one line on stderr,
``error: <source>: <json path>: <what is wrong>``); 3 an internal error (a bug: please report it;
SPECREG_DEBUG=1 shows the traceback).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
from typing import Any, NoReturn, Sequence

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _count(minimum: int) -> Any:
    """An argparse type: an integer >= minimum (a clear usage error, exit 2, otherwise)."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if value < minimum or value > 10**9:
            raise argparse.ArgumentTypeError(f"must be an integer from {minimum} to 1000000000, got {value}")
        return value
    return parse


def _number(low: float, high: float) -> Any:
    """An argparse type: a finite number in [low, high] (nan and inf refused)."""
    def parse(text: str) -> float:
        import math

        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be a finite number from {low:g} to {high:g}, got {text}")
        return value
    return parse


class _Version(argparse.Action):
    """--version: specreg's version, the vLLM it targets and huggingface_hub's (computed only when asked)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_args: Any) -> None:
        from importlib.metadata import PackageNotFoundError, version

        from specreg.normalization.capabilities import NEWEST_KNOWN, installed_vllm, short

        def of(name: str) -> str:
            try:
                return version(name)
            except PackageNotFoundError:
                return "not installed"

        vllm = installed_vllm()
        target = f"vLLM {vllm} (installed)" if vllm else f"vLLM {short(NEWEST_KNOWN)} (newest known; none installed)"
        print(f"specreg {of('specreg')}; targets {target}; huggingface_hub {of('huggingface_hub')}")
        parser.exit()


class _OneLineParser(argparse.ArgumentParser):
    """Usage errors as one line naming the command and the fix (`--help` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_BAD_INPUT, f"error: {self.prog}: {message} (see {self.prog} --help)\n")


def _parser() -> argparse.ArgumentParser:
    p = _OneLineParser(
        prog="specreg",
        description="Normalize speculative-decoding draft configs into vLLM-ready configuration, as trained.",
    )
    p.add_argument("--version", action=_Version, help="specreg's version, the vLLM it targets and "
                   "huggingface_hub's, then exit")
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def source_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("source", help="a local dir, a config.json path, org/name or org/name@revision")
        sp.add_argument("--revision", help="a Hub branch, tag or commit (or use org/name@revision)")
        sp.add_argument("--vllm", metavar="X.Y", help="the vLLM version to target (default: installed, else newest known)")
        sp.add_argument("--verifier", help="the verifier (Hub id or local dir): for native formats, which name none, "
                        "or to override the config's")

    show = sub.add_parser("show", help="the normalized config, attention plan, provenance and findings")
    source_args(show)
    show.add_argument("--json", action="store_true", help="print Speculator.to_dict() as JSON")

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
    serve.add_argument("-q", "--quiet", action="store_true", help="no download progress bars")

    def directory_args(sp: argparse.ArgumentParser, metavar: str) -> None:
        """SOURCE, the directory to write and how the weights get there (materialize, convert)."""
        source_args(sp)
        sp.add_argument("dir", metavar=metavar, help="the directory to write (must be empty unless --force)")
        sp.add_argument("-q", "--quiet", action="store_true", help="no download progress bars")
        how = sp.add_mutually_exclusive_group()
        how.add_argument("--config-only", action="store_true", help="write config.json only, no weights")
        how.add_argument("--copy", action="store_true", help="copy the weight files instead of linking them")
        sp.add_argument("--force", action="store_true", help=f"write into a non-empty {metavar} (replaces only "
                        "the files it writes)")

    mat = sub.add_parser("materialize", help="write a vLLM-ready draft directory (config.json as trained + weights)")
    directory_args(mat, "DIR")
    mat.add_argument("--json", action="store_true", help="print the keyword arguments for vllm.LLM as JSON")

    conv = sub.add_parser("convert", help="write the speculators-format twin of a native draft (z-lab, DeepSpec, EAGLE-3)")
    directory_args(conv, "OUT_DIR")

    chk = sub.add_parser("check", help="pre-flight: the draft against its verifier's config and its weight headers")
    source_args(chk)
    chk.add_argument("--json", action="store_true", help="print Speculator.to_dict() (with `checks`) as JSON")
    chk.add_argument("--no-weights", action="store_true", help="skip the weight headers")
    chk.add_argument("--tensor-parallel-size", type=int, metavar="N", help="the verifier's tensor parallel size")
    chk.add_argument("--draft-tensor-parallel-size", type=int, metavar="N", help="the draft's tensor parallel size")

    ver = sub.add_parser("verify", help="measure acceptance with vLLM and judge it against the catalog")
    ver.add_argument("model", nargs="?", metavar="MODEL", help="a catalog id / Hub id / local draft (omit with --all)")
    ver.add_argument("--server", metavar="URL", help="a running vLLM OpenAI-compatible server (default: vLLM in-process)")
    ver.add_argument("--served-model", help="the model name the server serves (default: the first of /v1/models)")
    ver.add_argument("--dataset", default="gsm8k", help="gsm8k | mt-bench | humaneval | speed-bench[:category] | FILE.jsonl")
    ver.add_argument("--dataset-file", metavar="FILE", help="the named dataset's rows from a local JSONL file")
    ver.add_argument("--num-prompts", type=_count(1), default=80)
    ver.add_argument("--temperature", type=_number(0.0, 100.0), default=0.0)
    ver.add_argument("--max-tokens", type=_count(1), default=256)
    ver.add_argument("--k", type=_count(1), help="draft tokens (default: the config's)")
    ver.add_argument("--batch-size", type=_count(1), help="max_num_seqs (in-process)")
    ver.add_argument("--concurrency", type=_count(1), default=1, help="requests in flight (--server)")
    ver.add_argument("--seed", type=_count(0), default=42)
    fmt = ver.add_mutually_exclusive_group()
    fmt.add_argument("--chat", dest="chat", action="store_true", default=True, help="chat template (default)")
    fmt.add_argument("--raw", dest="chat", action="store_false", help="raw completion prompts")
    ver.add_argument("--few-shot", type=_count(0), default=0)
    think = ver.add_mutually_exclusive_group()
    think.add_argument("--thinking", dest="thinking", action="store_true", default=None)
    think.add_argument("--no-thinking", dest="thinking", action="store_false")
    ver.add_argument("--shots-split", metavar="SPLIT", help="take the few-shot examples from this split (vLLM's GSM8K: train)")
    ver.add_argument("--shots-file", metavar="FILE", help="the few-shot split's rows from a local JSONL file")
    ver.add_argument("--template", metavar="FMT", help="prompt format string over a row's fields, e.g. '{question}\\n...'")
    ver.add_argument("--stop", action="append", metavar="TEXT", help="a stop string (repeatable)")
    ver.add_argument("--max-model-len", type=_count(1), metavar="N", help="the engine's max_model_len (default: the entry's [serving])")
    ver.add_argument("--mode", choices=("batched", "prompt-at-a-time"), default="batched",
                     help="all prompts batched, or one generate per prompt")
    ver.add_argument("--statistic", choices=("pooled", "mean-per-prompt"), default=None,
                     help="AL over the whole run, or the mean of each prompt's AL (default: mean-per-prompt with "
                          "--mode prompt-at-a-time, else pooled)")
    ver.add_argument("--draft-sample-method", metavar="M", help="speculative_config.draft_sample_method (in-process)")
    cache = ver.add_mutually_exclusive_group()
    cache.add_argument("--prefix-caching", dest="prefix_caching", action="store_true", default=None)
    cache.add_argument("--no-prefix-caching", dest="prefix_caching", action="store_false")
    ver.add_argument("--chunks", type=_count(1), default=10, help="prompts run in this many chunks (for the interval)")
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

    rep = sub.add_parser("report", help="a static HTML page from verify results and history")
    rep.add_argument("dir", metavar="DIR", help="where verify wrote its results (searched recursively)")
    rep.add_argument("--out", required=True, metavar="SITE")
    rep.add_argument("--history-out", metavar="DB", help="write the merged history of every history.sqlite under DIR here")
    rep.add_argument("--registry", metavar="DIR")

    from specreg.cli import catalog as catalog_cli

    catalog_cli.add_parser(sub)

    algos = sub.add_parser("algorithms", help="the registered algorithms and the vLLM versions that serve them")
    algos.add_argument("--json", action="store_true")
    return p


def _load(args: argparse.Namespace):
    from specreg.api import load

    return load(args.source, revision=args.revision, vllm=args.vllm, verifier=args.verifier)


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _show(args: argparse.Namespace) -> int:
    from specreg.normalization.speculator import thaw

    spec = _load(args)
    if args.json:
        print(spec.to_json())
        return EXIT_FINDINGS if spec.errors else EXIT_OK
    out = []
    sv = spec.source_config.get("speculators_version")
    fmt = f", {spec.format} format" if spec.format != "speculators" else ""
    out.append(f"{args.source}  ({spec.algorithm}{fmt}" + (f", speculators {sv}" if sv else "") + ")")
    rows = [
        ("method", spec.method or "- (not servable by vLLM's speculators path)"),
        ("verifier", spec.verifier or "- (not named)"),
        ("draft tokens", spec.num_speculative_tokens),
        ("target vLLM", spec.vllm_version),
    ]
    if spec.origin and spec.origin.commit:
        rows.append(("commit", spec.origin.commit))
    if spec.catalog is not None:
        pin = f", pinned at {spec.catalog.revision[:12]}" if spec.catalog.revision else ""
        rows.append(("catalog", f"{spec.catalog.id} ({spec.catalog.status}{pin}; {len(spec.catalog.baselines)} "
                                f"baselines: specreg catalog show {spec.catalog.id})"))
    out += [f"  {k:<14}{v}" for k, v in rows]
    if spec.attention:
        out.append("")
        out.append("attention, as trained")
        out.append(f"  {'layer':<7}{'kind':<9}{'window':<8}causal")
        for a in spec.attention:
            out.append(f"  {a.layer:<7}{a.kind:<9}{a.window or '-':<8}{'yes' if a.causal else 'no'}")
    if spec.method:
        out.append("")
        out.append(f"speculative_config  {_fmt(spec.speculative_config_dict())}")
        out.append("")
        out.append("draft_config: what specreg sets beyond transformer_layer_config")
        copied = 0
        for field, prov in sorted(spec.provenance.items()):
            if not field.startswith("draft_config."):
                continue
            if prov.kind == "source" and prov.sources[0].startswith("$.transformer_layer_config."):
                copied += 1
                continue
            value = spec.draft_config
            for part in field.split(".")[1:]:
                value = value[part]
            out.append(f"  {field[len('draft_config.'):]} = {_fmt(thaw(value))}")
            out.append(f"      {prov.describe()}")
        out.append(f"  (+ {copied} fields copied from transformer_layer_config)")
    out.append("")
    if spec.findings:
        out.append("findings")
        for f in spec.findings:
            out.append(f"  {f.severity:<8}{f.code}" + (f"  at {f.path}" if f.path else ""))
            out.append(f"      {f.message}")
    else:
        out.append("findings: none")
    print("\n".join(out))
    return EXIT_FINDINGS if spec.errors else EXIT_OK


def serve_argv(kwargs: dict[str, Any], flags: Sequence[str] = ()) -> list[str]:
    """`vllm serve` for `llm_kwargs`-shaped arguments, then any further vLLM flags."""
    return ["vllm", "serve", kwargs["model"], "--speculative-config", json.dumps(kwargs["speculative_config"]),
            *flags]


def serve_command(spec, kwargs: dict[str, Any]) -> str:
    """The `vllm serve` line for `llm_kwargs`-shaped arguments, with the environment it needs."""
    return serve_line(spec.serve_env, serve_argv(kwargs))


def _servable(spec, args: argparse.Namespace) -> str:
    """Report the findings on stderr; return the verifier to serve beside, or raise / exit 1."""
    from specreg.errors import ConfigError

    for f in spec.findings:
        if f.severity != "info":
            print(f"# {f.severity}: {f.code}: {f.message}", file=sys.stderr)
    if not spec.servable:
        raise _Refused(f"error: {args.source}: not servable as trained by vLLM {spec.vllm_version} (see the errors above)")
    local_verifier = any(f.code == "verifier-local-path" for f in spec.findings)
    verifier = args.verifier or (None if local_verifier else spec.verifier)
    if not verifier:
        raise ConfigError(
            "the config names no usable verifier; pass --verifier ORG/NAME",
            "$.speculators_config.verifier.name_or_path",
            source=args.source,
        )
    return verifier


class _Refused(Exception):
    """The draft has error findings: the message is printed and the exit status is 1."""


def _progress(message: str) -> None:
    print(f"# {message}", file=sys.stderr)


def _serve(args: argparse.Namespace) -> int:
    from specreg.vllm.materialize import default_directory, same_draft

    given = _given_flags(list(args.vllm_args))  # bad flags are refused before anything is read
    spec = _load(args)
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
        done = spec.materialize(directory, weights=weights, force=force, progress=_progress)
        if reason:
            print(f"# {reason}: serving the materialized directory {done.directory}", file=sys.stderr)
        kwargs = done.llm_kwargs(verifier=verifier)
    argv = serve_argv(kwargs, flags)
    if args.json:
        print(json.dumps({"env": spec.serve_env, "argv": argv}, indent=2))
    else:
        print(serve_line(spec.serve_env, argv))
    return EXIT_OK


#: the catalog's [serving] hints and the vLLM flag each becomes
_HINT_FLAGS = {"tensor_parallel_size": "--tensor-parallel-size", "max_model_len": "--max-model-len",
               "quantization": "--quantization"}
#: flags specreg writes itself: refused after `--`
_OWN_FLAGS = ("--speculative-config", "--speculative_config", "--model")


def _given_flags(extra: list[str]) -> dict[str, str | None]:
    """The vLLM flags after `--` (name -> value); the ones specreg writes itself are refused."""
    given: dict[str, str | None] = {}
    for i, arg in enumerate(extra):
        if not arg.startswith("--"):
            continue
        name, eq, value = arg.partition("=")
        if name in _OWN_FLAGS or name.replace("_", "-") in _OWN_FLAGS:
            raise SpecregErrorLine(f"{arg.split('=')[0]} after --: specreg writes the model and the speculative "
                                   "config itself; pass vLLM's other flags there")
        following = extra[i + 1] if i + 1 < len(extra) and not extra[i + 1].startswith("--") else None
        given[name.replace("_", "-")] = value if eq else following
    return given


def _vllm_flags(spec, extra: list[str], given: dict[str, str | None]) -> list[str]:
    """The vLLM flags after `--`, plus the catalog's [serving] hints the user did not give (a differing
    value is kept, with a note)."""
    serving = getattr(spec.catalog, "serving", None) if spec.catalog is not None else None
    added: list[str] = []
    for field, flag in _HINT_FLAGS.items():
        hint = getattr(serving, field, None) if serving is not None else None
        if hint is None:
            continue
        if flag not in given:
            added += [flag, str(hint)]
        elif given[flag] != str(hint):
            print(f"# note: the catalog entry serves this draft with {flag} {hint}; you asked for {given[flag]}",
                  file=sys.stderr)
    return list(extra) + added


def serve_line(env: dict[str, str], argv: list[str]) -> str:
    """A shell line: the environment, then the command, each word quoted."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in argv)])


def _materialize(args: argparse.Namespace) -> int:
    spec = _load(args)
    verifier = _servable(spec, args)
    weights = "none" if args.config_only else "copy" if args.copy else "link"
    done = spec.materialize(args.dir, weights=weights, force=args.force, progress=_progress)
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


def _algorithms(args: argparse.Namespace) -> int:
    from specreg.normalization.algorithms import algorithms, broken_plugins

    algos = algorithms()
    broken = broken_plugins()
    if args.json:
        import attrs

        doc = {"algorithms": [a.to_dict() for a in algos], "broken_plugins": [attrs.asdict(b) for b in broken]}
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    print(f"{'name':<13}{'vLLM method':<13}{'since vLLM':<12}module")
    for a in algos:
        method = a.method or "-"
        since = str(a.vllm_min) if a.vllm_min else "not served"
        print(f"{a.name:<13}{method:<13}{since:<12}{a.module}")
    for b in broken:
        print(f"broken plugin skipped: {b.entry_point} = {b.value}: {b.error}", file=sys.stderr)
    return EXIT_OK


def _check(args: argparse.Namespace) -> int:
    from specreg.vllm.preflight import preflight

    spec = _load(args)
    spec = preflight(
        spec,
        verifier=args.verifier,
        check_weights=not args.no_weights,
        tensor_parallel_size=args.tensor_parallel_size,
        draft_tensor_parallel_size=args.draft_tensor_parallel_size,
    )
    if args.json:
        print(spec.to_json())
        return EXIT_FINDINGS if spec.errors else EXIT_OK
    v, w = spec.checks.verifier, spec.checks.weights
    out = [f"{args.source}  ({spec.algorithm}, target vLLM {spec.vllm_version})"]
    if v:
        arch = ", ".join(v.architectures) or "architecture not named"
        text = " (text_config)" if v.text_config else ""
        out.append(f"  verifier  {v.id}: {arch}, {v.num_hidden_layers} layers, hidden {v.hidden_size}, "
                   f"vocab {v.vocab_size}{text}")
    if w:
        dtypes = ", ".join(f"{k} {n:,}" for k, n in w.dtypes.items())
        read = f"; {w.header_bytes:,} header bytes read" if w.header_bytes is not None else ""
        out.append(f"  weights   {len(w.files)} file{'s' * (len(w.files) != 1)}, {w.tensors} tensors, "
                   f"{w.parameters:,} parameters ({dtypes}){read}")
    out.append("")
    if not spec.findings:
        out.append("no findings")
    else:
        width = max(len(f.code) for f in spec.findings)
        out.append(f"  {'severity':<9}{'code':<{width + 2}}message")
        for f in spec.findings:
            out.append(f"  {f.severity:<9}{f.code:<{width + 2}}{f.message}")
            if f.fix:
                out.append(f"  {'':<9}{'':<{width + 2}}fix: {f.fix}")
    errors = len(spec.errors)
    out.append("")
    out.append(f"{errors} error{'s' * (errors != 1)}" if errors else "ok: no errors")
    print("\n".join(out))
    return EXIT_FINDINGS if spec.errors else EXIT_OK


def _convert(args: argparse.Namespace) -> int:
    from specreg.api import convert

    weights = "none" if args.config_only else "copy" if args.copy else "link"
    done = convert(args.source, args.dir, verifier=args.verifier, revision=args.revision, weights=weights,
                   force=args.force, progress=_progress)
    n = len(done.files) - 2
    print(f"wrote {done.directory}: the speculators-format twin of a {done.format} draft "
          f"(config.json, specreg.json, {n} weight file{'s' * (n != 1)})")
    if done.verifier is None:
        print("# warning: no verifier: the twin's speculators_config.verifier.name_or_path is null, which vLLM's "
              "automatic path refuses; convert again with --verifier ORG/NAME", file=sys.stderr)
    return EXIT_OK


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
    history = Path(args.history) if args.history else (out.parent / "history.sqlite" if out else None)
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


class SpecregErrorLine(Exception):
    """Bad command-line usage: one line, exit 2."""


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


def _catalog(args: argparse.Namespace) -> int:
    from specreg.cli import catalog as catalog_cli

    return catalog_cli.run(args)


def main(argv: Sequence[str] | None = None) -> int:
    from specreg.errors import SpecregError

    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list[str] = []
    if "--" in argv:
        at = argv.index("--")
        argv, extra = argv[:at], argv[at + 1:]
    if not argv:
        _parser().print_help(sys.stderr)
        return EXIT_BAD_INPUT
    args = _parser().parse_args(argv)
    args.vllm_args = extra
    if extra and args.command != "serve":
        print(f"error: flags after -- are passed to vLLM by `specreg serve` only, not by `specreg {args.command}`",
              file=sys.stderr)
        return EXIT_BAD_INPUT
    handler = {"show": _show, "serve": _serve, "materialize": _materialize, "algorithms": _algorithms, "check": _check,
               "convert": _convert, "verify": _verify, "report": _report,
               "catalog": _catalog}[args.command]
    if getattr(args, "quiet", None) is not None:  # commands that may download weights
        from specreg.sources.hub import progress_bars

        progress_bars(not args.quiet and sys.stderr.isatty())
    try:
        return handler(args)
    except _Refused as exc:
        print(str(exc), file=sys.stderr)
        return EXIT_FINDINGS
    except SpecregErrorLine as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except SpecregError as exc:  # ConfigError included: its line carries the JSON path
        print(f"error: {exc.line()}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except BrokenPipeError:
        return EXIT_OK
    except Exception as exc:  # a bug: one line, not a traceback, unless asked for
        if os.environ.get("SPECREG_DEBUG"):
            raise
        print(f"error: internal error ({type(exc).__name__}: {exc}); please report it (SPECREG_DEBUG=1 shows the traceback)", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":
    sys.exit(main())
