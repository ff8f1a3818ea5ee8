"""`--engine sglang` of `specreg serve`, `materialize`, `check` and `show`: the same trained plan, as
SGLang serves it (specreg.sglang)."""

from __future__ import annotations

import argparse
import json
import sys

from specreg.cli.common import EXIT_FINDINGS, EXIT_OK, Refused, print_lines, progress_line
from specreg.errors import SpecregError

ENGINES = ("vllm", "sglang")


def engine_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--engine",
        choices=ENGINES,
        default="vllm",
        help="the engine to serve with: vllm (default) or sglang (docs/sglang.md)",
    )


def _plan(args: argparse.Namespace, *, check_weights: bool = True):
    from specreg.sglang.plan import sglang_plan

    for flag, name in (("gpu", "--gpu"), ("spec_flags", "--spec-flags"), ("vllm", "--vllm")):
        if getattr(args, flag, None):
            raise SpecregError(f"{name} is about vLLM; with --engine sglang leave it out")
    return sglang_plan(
        args.source,
        revision=args.revision,
        verifier=args.verifier,
        check_weights=check_weights,
        force_verifier=getattr(args, "force_verifier", False),
        skip_verifier_check=getattr(args, "skip_verifier_check", False),
    )


def _report(plan, source: str, quiet: bool = False) -> None:
    """The findings on stderr (with -q, errors only); a plan SGLang cannot serve as trained ends the
    command (exit 1)."""
    from specreg.sglang.agreement import CODES

    shown = ("error",) if quiet else ("error", "warning")
    spec = plan.speculator
    checked = spec.checks.found if spec.checks is not None else ()
    # what the check against a given verifier said (errors overridden by --force-verifier) or why it did not run
    # (less the RoPE and head-size findings in vLLM's terms where the plan has them as SGLang reads the two)
    reread = CODES if plan.config else ()
    verifier = [
        f
        for f in spec.findings
        if f.severity == "warning" and (f in checked or f.code == "verifier-unread") and f.code not in reread
    ]
    print_lines(
        [f"# {f.severity}: {f.code}: {f.message}" for f in (*verifier, *plan.findings) if f.severity in shown],
        file=sys.stderr,
    )
    if not plan.servable:
        raise Refused(
            f"error: {source}: not servable as trained by SGLang {plan.sglang_version} (see the errors above)"
        )


def _serving(plan):
    """The catalog entry's [serving] hints for the draft, or None."""
    entry = plan.speculator.catalog
    return entry.serving if entry is not None else None


def _verifier(plan, args: argparse.Namespace) -> str:
    verifier = args.verifier or plan.verifier
    if not verifier:
        raise SpecregError("the config names no verifier; pass --verifier ORG/NAME", source=args.source)
    return verifier


def serve(args: argparse.Namespace) -> int:
    from specreg.api.serve import serve_line
    from specreg.sglang.flags import hint_flags, merge
    from specreg.sglang.rules import rules
    from specreg.sglang.write import default_directory

    plan = _plan(args, check_weights=not args.config_only)
    extra = merge(list(getattr(args, "vllm_args", []) or []), rules(plan.sglang_version))
    _report(plan, args.source, args.quiet)
    extra += hint_flags(
        extra, rules(plan.sglang_version), _serving(plan), (lambda _m: None) if args.quiet else progress_line
    )
    verifier = _verifier(plan, args)
    directory = args.dir or default_directory(plan)
    weights = "none" if args.config_only else "link"
    # written again without --force where it holds exactly what specreg wrote of this same draft
    done = plan.materialize(
        directory,
        weights=weights,
        force=args.force,
        progress=None if args.quiet else progress_line,
    )
    argv = done.argv(verifier=verifier, extra=tuple(extra))
    if args.json:
        print(json.dumps({"env": plan.env, "argv": argv}, indent=2))
    else:
        print(serve_line(plan.env, argv))
    return EXIT_OK


def materialize(args: argparse.Namespace) -> int:
    from specreg.api.serve import serve_line

    plan = _plan(args, check_weights=not args.config_only)
    _report(plan, args.source, args.quiet)
    verifier = _verifier(plan, args)
    weights = "none" if args.config_only else "copy" if args.copy else "link"
    done = plan.materialize(args.dir, weights=weights, force=args.force, progress=None if args.quiet else progress_line)
    argv = done.argv(verifier=verifier)
    if args.json:
        print(json.dumps({"env": plan.env, "argv": argv}, indent=2))
        return EXIT_OK
    n = len(done.files) - 2
    what = {
        "none": "no weights (--config-only)",
        "copy": f"{n} weight files copied",
        "link": f"{n} weight files linked",
    }
    print(f"wrote {done.directory}: config.json, specreg.json, {what[weights]}")
    print(serve_line(plan.env, argv))
    return EXIT_OK


def check(args: argparse.Namespace) -> int:
    """The SGLang findings, nothing written: exit 1 when SGLang cannot serve the draft as trained."""
    plan = _plan(args)
    if getattr(args, "json", False):
        print(json.dumps(plan.to_dict(), indent=2))
    else:
        print_lines(_findings(plan))
    return EXIT_FINDINGS if plan.errors else EXIT_OK


def show(args: argparse.Namespace) -> int:
    """What SGLang is given (config.json and flags) and what it would serve from the unmodified file."""
    plan = _plan(args, check_weights=False)
    if args.json:
        print(json.dumps(plan.to_dict(), indent=2))
        return EXIT_FINDINGS if plan.errors else EXIT_OK
    t = plan.trained
    out = [
        f"{args.source}  ({plan.algorithm}, for SGLang {plan.sglang_version})",
        f"  {'draft tokens':<14}{t.proposals}",
        f"  {'query rows':<14}{t.query_rows}",
        f"  {'capture':<14}{list(t.capture) if t.capture else '-'}  (the hidden states entering these layers)",
    ]
    if plan.servable:
        out += ["", f"flags  {' '.join(plan.flags)}", "", "config.json: what SGLang reads beyond the layer config"]
        for key in (
            "architectures",
            "model_type",
            "eagle_config",
            "dflash_config",
            "layer_types",
            "is_causal",
            "sliding_window",
            "sample_from_anchor",
        ):
            if key in plan.config:
                out.append(f"  {key} = {json.dumps(plan.config_dict()[key])}")
    out += ["", *_findings(plan)]
    print_lines(out)
    return EXIT_FINDINGS if plan.errors else EXIT_OK


def _findings(plan) -> list[str]:
    if not plan.findings:
        return ["findings: none"]
    out = ["findings"]
    for f in plan.findings:
        out.append(f"  {f.severity:<8}{f.code}" + (f"  at {f.path}" if f.path else ""))
        out.append(f"      {f.message}")
    return out
