"""`specreg show`, `check` and `algorithms`: what specreg makes of a draft, and what it knows."""

from __future__ import annotations

import argparse
import json
from typing import Any

from specreg.cli import sglang
from specreg.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    json_value,
    load_draft,
    gpu_name,
    harness_int,
    print_lines,
    source_args,
)
from specreg.cli.sglang import engine_arg


def add_show(sub: Any) -> None:
    show = sub.add_parser("show", help="the normalized config, attention plan, provenance and findings")
    source_args(show)
    show.add_argument("--json", action="store_true", help="print Speculator.to_dict() as JSON (its `ledger` too)")
    show.add_argument(
        "--fields",
        action="store_true",
        help="also print the field ledger: every key of the config and how it is accounted for "
        "(read, a trainer's field at its default, unknown, ...)",
    )
    engine_arg(show)


def add_check(sub: Any) -> None:
    chk = sub.add_parser("check", help="pre-flight: the draft against its verifier's config and its weight headers")
    source_args(chk)
    chk.add_argument("--json", action="store_true", help="print Speculator.to_dict() (with `checks`) as JSON")
    chk.add_argument("--no-weights", action="store_true", help="skip the weight headers")
    engine_arg(chk)
    tp = harness_int("tensor_parallel_size")
    chk.add_argument("--tensor-parallel-size", type=tp, metavar="N", help="the verifier's tensor parallel size")
    chk.add_argument("--draft-tensor-parallel-size", type=tp, metavar="N", help="the draft's tensor parallel size")
    chk.add_argument(
        "--max-model-len",
        type=harness_int("max_model_len"),
        metavar="N",
        help="the server's "
        "--max-model-len (default: the verifier's max_position_embeddings), held against the draft's "
        "max_position_embeddings",
    )
    tokens_arg(chk)
    chk.add_argument(
        "--disable-hybrid-kv-cache-manager",
        action="store_true",
        help="the server's flag of that name (or a KV connector without HMA support): the KV-cache "
        "groups of the verifier's and the draft's layers are checked with the manager off",
    )
    gpu = chk.add_argument_group("the GPU (vLLM's attention-backend selector, per version)")
    gpu.add_argument(
        "--gpu",
        type=gpu_name,
        metavar="NAME",
        help="H100, A100, L40S, RTX 4090, B200, GB10, ... or "
        "sm_XY: which attention backend vLLM picks for the draft's layers there, and why others are "
        "refused",
    )
    gpu.add_argument(
        "--kv-cache-dtype",
        default="auto",
        metavar="DTYPE",
        help="the server's --kv-cache-dtype, which the draft inherits (auto, fp8, fp8_e4m3, fp8_e5m2; default auto)",
    )
    gpu.add_argument(
        "--dtype",
        metavar="DTYPE",
        help="bfloat16, float16 or float32 (default: the verifier's config, "
        "else the draft's: the draft runs in the verifier's dtype)",
    )
    gpu.add_argument(
        "--attention-backend",
        metavar="NAME",
        help="the draft's own backend "
        "(speculative_config.attention_backend; vLLM's names: FLASH_ATTN, FLASHINFER, TRITON_ATTN, "
        "FLEX_ATTENTION)",
    )


def tokens_arg(parser: Any) -> None:
    """`--num-speculative-tokens K` (vLLM's key): the draft length the user will serve with."""
    parser.add_argument(
        "--num-speculative-tokens",
        type=harness_int("k"),
        metavar="K",
        help="the num_speculative_tokens you will serve with (default: the trained length): an error past "
        "what the draft can produce, a warning past what it was trained for",
    )


def add_algorithms(sub: Any) -> None:
    algos = sub.add_parser("algorithms", help="the registered algorithms and the vLLM versions that serve them")
    algos.add_argument("--json", action="store_true")


def _show(args: argparse.Namespace) -> int:
    from specreg.normalization.speculator import thaw

    if args.engine == "sglang":
        return sglang.show(args)
    spec = load_draft(args)
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
        entry = spec.catalog
        # "pinned, pinned at ..." said it twice: a pin's revision says pinned; verified says more
        state = entry.status if not entry.revision else f"pinned at {entry.revision[:12]}"
        if entry.revision and entry.status != "pinned":
            state = f"{entry.status}, {state}"
        n = len(entry.baselines)
        rows.append(("catalog", f"{entry.id} ({state}; {n} baseline{'s' * (n != 1)}: specreg catalog show {entry.id})"))
    rows.append(("next", _next_step(args, spec)))
    out += [f"  {k:<14}{v}" for k, v in rows]
    if spec.attention:
        out.append("")
        out.append("attention, as trained")
        out.append(f"  {'layer':<7}{'kind':<9}{'window':<8}causal")
        for a in spec.attention:
            out.append(f"  {a.layer:<7}{a.kind:<9}{a.window or '-':<8}{'yes' if a.causal else 'no'}")
    if spec.method:
        out.append("")
        out.append(f"speculative_config  {json_value(spec.speculative_config_dict())}")
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
            out.append(f"  {field[len('draft_config.') :]} = {json_value(thaw(value))}")
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
    if getattr(args, "fields", False):
        out += [""] + _ledger_lines(spec)
    print_lines(out)
    return EXIT_FINDINGS if spec.errors else EXIT_OK


def _ledger_lines(spec: Any) -> list[str]:
    """`show --fields`: every key of the source config and how it is accounted for."""
    from specreg.normalization import ledger

    if not spec.ledger:
        return [
            f"fields: no ledger for a {spec.format} config (the directory specreg materialized: its keys are "
            "specreg's own)"
        ]
    counts: dict[str, int] = {}
    for e in spec.ledger:
        counts[e.status] = counts.get(e.status, 0) + 1
    tally = ", ".join(f"{counts[s]} {s}" for s in sorted(counts, key=ledger.STATUSES.index))
    out = [f"fields: {len(spec.ledger)} keys, every one accounted for ({tally})"]
    width = max(len(e.path) for e in spec.ledger)
    for e in spec.ledger:
        out.append(f"  {e.status:<13}{e.path:<{width}}  {e.note}".rstrip())
    return out


def _next_step(args: argparse.Namespace, spec: Any) -> str:
    """The command that serves the draft, on show's first screen (the provenance below runs long)."""
    import shlex

    flags = {flag: getattr(args, flag) for flag in ("revision", "vllm", "verifier") if getattr(args, flag)}

    def command(name: str, **override: str) -> str:
        given = [f"--{flag} {shlex.quote(value)}" for flag, value in {**flags, **override}.items()]
        return " ".join([f"specreg {name}", shlex.quote(args.source), *given])

    if not spec.servable:
        first = _first_serving_release(spec)
        if first is None:
            return f"none: vLLM {spec.vllm_version} cannot serve it as trained (the errors under findings)"
        return (
            f"none for vLLM {spec.vllm_version} (the errors under findings); vLLM {first} is the first release "
            f"that serves it as trained: {command('show', vllm=first)}"
        )
    how = (
        "materializes it as trained, then prints the `vllm serve` line"
        if spec.materialize_reason
        else "prints the `vllm serve` line"
    )
    return f"{command('serve')}  ({how})"


def _first_serving_release(spec: Any) -> str | None:
    """The first known vLLM release after the targeted one whose rules serve the draft as trained,
    found by planning it for each (each error names its own rule's release; this is the one where
    none is left), or None."""
    from packaging.version import Version

    from specreg import facts
    from specreg.errors import SpecregError
    from specreg.normalization.core import normalize
    from specreg.normalization.speculator import thaw

    if spec.format == "materialized":
        return None  # read back with its manifest, for the release it was written for
    config = thaw(spec.source_config)
    for release in facts.known():
        if Version(release) <= Version(spec.vllm_version):
            continue
        try:
            if normalize(config, vllm=release, verifier=spec.verifier).servable:
                return release
        except SpecregError:
            return None
    return None


def _check(args: argparse.Namespace) -> int:
    from specreg.api.check import check

    if args.engine == "sglang":
        return sglang.check(args)
    report = check(
        load_draft(args, check_verifier=False),
        verifier=args.verifier,
        weights=not args.no_weights,
        tensor_parallel_size=args.tensor_parallel_size,
        draft_tensor_parallel_size=args.draft_tensor_parallel_size,
        max_model_len=args.max_model_len,
        hybrid_kv_cache_manager=not args.disable_hybrid_kv_cache_manager,
        gpu=args.gpu,
        kv_cache_dtype=args.kv_cache_dtype,
        dtype=args.dtype,
        attention_backend=args.attention_backend,
        num_speculative_tokens=args.num_speculative_tokens,
    )
    spec = report.speculator
    if args.json:
        print(json.dumps(report.to_dict(), indent=2))
        return EXIT_FINDINGS if report.errors else EXIT_OK
    v, w = report.verifier, report.weights
    out = [f"{args.source}  ({spec.algorithm}, target vLLM {spec.vllm_version})"]
    if v:
        arch = ", ".join(v.architectures) or "architecture not named"
        text = " (text_config)" if v.text_config else ""
        out.append(
            f"  verifier  {v.id}: {arch}, {v.num_hidden_layers} layers, hidden {v.hidden_size}, "
            f"vocab {v.vocab_size}{text}"
        )
    if w:
        dtypes = ", ".join(f"{k} {n:,}" for k, n in w.dtypes.items())
        read = f"; {w.header_bytes:,} header bytes read" if w.header_bytes is not None else ""
        out.append(
            f"  weights   {len(w.files)} file{'s' * (len(w.files) != 1)}, {w.tensors} tensors, "
            f"{w.parameters:,} parameters ({dtypes}){read}"
        )
    if report.gpu is not None:
        out += _gpu_lines(report.gpu)
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
    print_lines(out)
    return EXIT_FINDINGS if spec.errors else EXIT_OK


def _gpu_lines(report: Any) -> list[str]:
    """The selector's answers, one block per group of layers: picked first, then each refusal. A backend
    refused for every group is said once, after the groups, with the groups each reason holds for."""
    from specreg.vllm.attention import cubins_words, gpu_label

    out = [
        f"  gpu       {gpu_label(report.gpu)}, vLLM {report.version}'s attention selector; dtype {report.dtype} "
        f"({report.dtype_from}), KV cache {report.kv_cache_dtype}"
    ]
    groups = (*report.draft, *report.verifier)
    everywhere = set.intersection(*(set(g.selection.refused) for g in groups)) if len(groups) > 1 else set()
    explained = False
    for group in groups:
        s = group.selection
        # the selector's question, not the mask: vLLM's DFlash drafter asks for a non-causal backend for
        # every draft layer once one is non-causal (each layer's trained mask is in `specreg show`)
        asked = "backend asked for causal attention"
        if s.case.non_causal:
            why = "" if explained else " (vLLM asks it for every draft layer when one is non-causal)"
            asked, explained = f"backend asked for non-causal attention{why}", True
        out.append(
            f"    {group.label}: head size {s.case.head_size}, {asked}"
            f"{', sliding window' if s.case.sliding else ''}{', attention sinks' if s.case.sink else ''}"
        )
        if group.given is not None:
            out.append(
                f"      given    {report.attention_backend}: "
                + (f"refused ({', '.join(group.given)})" if group.given else "valid")
            )
        out.append(
            f"      {'default' if group.given is not None else 'picks':<9}{s.chosen or '- (none valid)'}"
            + (f"  (valid: {', '.join(s.valid)})" if len(s.valid) > 1 else "")
        )
        for backend, why in s.refused.items():
            if backend not in everywhere:
                out.append(f"      refuses  {backend}: {', '.join(why)}")
        if group.other is not None:
            o = group.other
            out.append(
                f"      {cubins_words(o.cubins)}: {o.chosen or '- (none valid)'}"
                + (f"  (valid: {', '.join(o.valid)})" if o.valid else "")
            )
    for backend in [b for b in groups[0].selection.refused if b in everywhere]:
        reasons: dict[str, list[str]] = {}
        for group in groups:
            for why in group.selection.refused[backend]:
                reasons.setdefault(why, []).append(group.label.split(" (")[0])
        said = [why if len(where) == len(groups) else f"{why} ({'; '.join(where)})" for why, where in reasons.items()]
        out.append(f"    every group refuses {backend}: {', '.join(said)}")
    return out


def _algorithms(args: argparse.Namespace) -> int:
    from specreg.normalization.algorithms import algorithms, broken_plugins

    algos = algorithms()
    broken = broken_plugins()
    if args.json:
        import attrs

        doc = {"algorithms": [a.to_dict() for a in algos], "broken_plugins": [attrs.asdict(b) for b in broken]}
        print(json.dumps(doc, indent=2))
        return EXIT_OK
    rows = [("name", "vLLM method", "since vLLM", "module")]
    rows += [(a.name, a.method or "-", a.since, a.module) for a in algos]
    widths = [max(len(row[i]) for row in rows) + 2 for i in range(3)]  # a plugin's name may be long
    # a plugin's module name is its own text; each broken plugin was logged as one line when it loaded
    print_lines(["".join(cell.ljust(w) for cell, w in zip(row, widths)) + row[3] for row in rows])
    return EXIT_OK


HANDLERS = {"show": _show, "check": _check, "algorithms": _algorithms}
