"""The `specreg` command line: show, serve, algorithms.

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
from typing import Any, Sequence

EXIT_OK, EXIT_FINDINGS, EXIT_BAD_INPUT, EXIT_INTERNAL = 0, 1, 2, 3


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="specreg",
        description="Normalize speculative-decoding draft configs into vLLM-ready configuration, as trained.",
    )
    sub = p.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def source_args(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("source", help="a local dir, a config.json path, org/name or org/name@revision")
        sp.add_argument("--revision", help="a Hub branch, tag or commit (or use org/name@revision)")
        sp.add_argument("--vllm", metavar="X.Y", help="the vLLM version to target (default: installed, else newest known)")

    show = sub.add_parser("show", help="the normalized config, attention plan, provenance and findings")
    source_args(show)
    show.add_argument("--json", action="store_true", help="print Speculator.to_dict() as JSON")

    serve = sub.add_parser("serve", help="print the `vllm serve` command line for the draft")
    source_args(serve)
    serve.add_argument("--verifier", help="the verifier model, when the config names none (or to override it)")

    algos = sub.add_parser("algorithms", help="the registered algorithms and the vLLM versions that serve them")
    algos.add_argument("--json", action="store_true")
    return p


def _load(args: argparse.Namespace):
    from specreg.loader import load

    return load(args.source, revision=args.revision, vllm=args.vllm)


def _fmt(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False)


def _show(args: argparse.Namespace) -> int:
    from specreg.speculator import thaw

    spec = _load(args)
    if args.json:
        print(spec.to_json())
        return EXIT_FINDINGS if spec.errors else EXIT_OK
    out = []
    sv = spec.source_config.get("speculators_version")
    out.append(f"{args.source}  ({spec.algorithm}" + (f", speculators {sv}" if sv else "") + ")")
    rows = [
        ("method", spec.method or "- (not servable by vLLM's speculators path)"),
        ("verifier", spec.verifier or "- (not named)"),
        ("draft tokens", spec.num_speculative_tokens),
        ("target vLLM", spec.vllm_version),
    ]
    if spec.origin and spec.origin.commit:
        rows.append(("commit", spec.origin.commit))
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


def serve_command(spec, model: str, verifier: str, revision: str | None = None) -> str:
    """The `vllm serve` line that serves `spec` (the draft at `model`) beside `verifier`."""
    cfg: dict[str, Any] = {"model": model}
    if revision:
        cfg["revision"] = revision
    cfg.update(spec.speculative_config_dict())
    env = "VLLM_USE_V2_MODEL_RUNNER=1 " if spec.needs_v2_model_runner else ""
    return f"{env}vllm serve {shlex.quote(verifier)} --speculative-config {shlex.quote(json.dumps(cfg))}"


def _serve(args: argparse.Namespace) -> int:
    from specreg.errors import ConfigError

    spec = _load(args)
    for f in spec.findings:
        if f.severity != "info":
            print(f"# {f.severity}: {f.code}: {f.message}", file=sys.stderr)
    if not spec.servable:
        print(
            f"error: {args.source}: not servable as trained by vLLM {spec.vllm_version} (see the errors above)",
            file=sys.stderr,
        )
        return EXIT_FINDINGS
    local_verifier = any(f.code == "verifier-local-path" for f in spec.findings)
    verifier = args.verifier or (None if local_verifier else spec.verifier)
    if not verifier:
        raise ConfigError(
            "the config names no usable verifier; pass --verifier ORG/NAME",
            "$.speculators_config.verifier.name_or_path",
            source=args.source,
        )
    origin = spec.origin
    if origin.repo_id:
        model, revision = origin.repo_id, origin.revision
    else:
        model, revision = os.path.dirname(os.path.abspath(origin.path)), None
    print(serve_command(spec, model, verifier, revision))
    return EXIT_OK


def _algorithms(args: argparse.Namespace) -> int:
    from specreg.registry import algorithms, broken_plugins

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


def main(argv: Sequence[str] | None = None) -> int:
    from specreg.errors import SpecregError

    args = _parser().parse_args(argv)
    handler = {"show": _show, "serve": _serve, "algorithms": _algorithms}[args.command]
    try:
        return handler(args)
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
