"""normalize(): one speculators config.json (already parsed) -> a Speculator. Pure: no I/O."""

from __future__ import annotations

from typing import Any, Mapping

import attrs

from packaging.version import InvalidVersion, Version

from specreg.normalization import algorithms
from specreg import facts
from specreg.normalization.capabilities import NEWEST_KNOWN, note_unknown, short, target_version, unknown_rules
from specreg.errors import ConfigError, Problem
from specreg.normalization.fields import COUNT, STR, Fields, near_misses, type_name
from specreg.normalization.findings import SERVED_DIFFERENTLY
from specreg.normalization.ledger import account, account_native, near_misses as ledger_near_misses
from specreg.normalization.plan import Context, Envelope, Plan
from specreg.normalization.speculator import Finding, Origin, Provenance, Speculator, thaw
from specreg.sources.files import is_repo_id


# A Hub repo id: "name" or "org/name" (the Hub's own rules, checked without importing huggingface_hub).
def _read_envelope(root: Fields, version: Version) -> tuple[Envelope, list[Finding]]:
    """The fields every speculators config shares: draft length, verifier, versions (`version`: the vLLM
    targeted, which the findings name)."""
    findings: list[Finding] = []
    spec = root.obj("speculators_config", required=True)
    tokens, tokens_path, verifier = None, "$.speculators_config.proposal_methods[0].speculative_tokens", None
    if spec is not None:
        methods = spec.objects("proposal_methods", required=True)
        default_name = spec.get("default_proposal_method", STR)
        chosen = 0
        if methods:
            names = [m.get("proposal_type", STR) for m in methods]
            if default_name is not None:
                if default_name in names:
                    chosen = names.index(default_name)
                else:
                    spec.problem(
                        spec.at("default_proposal_method"),
                        f"names proposal type {default_name!r}, but proposal_methods has "
                        f"{', '.join(repr(n) for n in names if n) or 'none with a proposal_type'}",
                    )
            tokens = methods[chosen].get("speculative_tokens", COUNT, required=True)
            tokens_path = methods[chosen].at("speculative_tokens")
            if chosen != 0:
                findings.append(
                    Finding.of(
                        "proposal-method-not-first",
                        f"default_proposal_method is {default_name!r} (entry {chosen}), but vLLM takes the "
                        f"first proposal method; specreg uses {default_name!r} with {tokens} tokens",
                        spec.at("default_proposal_method"),
                    )
                )
        ver = spec.obj("verifier")
        verifier_path = "$.speculators_config.verifier.name_or_path"
        # an empty name is a real checkpoint's way of leaving the verifier to the command line: the
        # pair cannot be checked from the file alone, which is a warning, not a malformed field
        blank = ver is not None and isinstance(ver.raw("name_or_path"), str) and not ver.raw("name_or_path").strip()
        if ver is not None and not blank:
            verifier = ver.get("name_or_path", STR)
        if verifier is None:
            findings.append(
                Finding.of(
                    "verifier-missing",
                    "the config names no verifier (speculators_config.verifier.name_or_path is an empty "
                    "string): the pair cannot be checked from the file alone, and vLLM's automatic path "
                    "needs one: pass it explicitly (--verifier)"
                    if blank
                    else "the config names no verifier (speculators_config.verifier.name_or_path); "
                    "vLLM's automatic path needs one: pass it explicitly",
                    verifier_path,
                )
            )
        elif not (is_repo_id(verifier) and verifier.count("/") == 1):
            # a Hub verifier is `org/name`; a bare name (`verifier`) or a deeper path is the trainer's
            # folder, as an absolute path is
            findings.append(
                Finding.of(
                    "verifier-local-path",
                    f"the verifier {verifier!r} is a local path from training, not a Hub repo id; "
                    f"vLLM {short(version)} refuses it on its automatic path: pass the verifier explicitly",
                    verifier_path,
                )
            )
    sv_text = root.raw("speculators_version")
    speculators_version = None
    if isinstance(sv_text, str):
        try:
            speculators_version = Version(sv_text)
        except InvalidVersion:
            speculators_version = None
    return Envelope(tokens, tokens_path, verifier, speculators_version), findings


def _envelope_findings(root: Fields, algo: algorithms.Algorithm, ctx: Context) -> list[Finding]:
    findings = []
    if root.present("model_type") and not algo.unservable:
        findings.append(
            Finding.of(
                "top-level-model-type",
                f"a top-level model_type ({root.raw('model_type')!r}) makes vLLM load this file as a plain "
                "model and skip its speculators mapping entirely",
                "$.model_type",
            )
        )
    if root.present("auto_map"):
        findings.append(
            Finding.of(
                "auto-map-ignored",
                "auto_map points at repository code; specreg never imports or runs it",
                "$.auto_map",
            )
        )
    if algo.method is not None and not algo.vllm_maps:
        findings.append(
            Finding.of(
                "vllm-maps-through-specreg",
                f"no vLLM release maps speculators_model_type {algo.name!r} itself: vLLM serves the unmodified "
                "file only with specreg's plugin active (specreg installed beside vLLM), and `specreg serve` "
                "prints a command for the directory `specreg materialize` writes",
                "$.speculators_model_type",
            )
        )
    if algo.method is not None and algo.rule is not None and facts.below(ctx.vllm):
        # a release older than every known one: a native layout is served by its registry class, not the
        # speculators mapping the rule reads; a rule no wheel answered for it is refused only on a start
        # the facts saw (a later release serves it, the oldest does not), never on a typed edge
        read = facts.state(algo.rule, ctx.vllm)
        if ctx.native_architecture is not None or (read is None and algo.served_by(facts.oldest())):
            note_unknown(algo.rule)
            return findings
    unserved = algo.method is not None and not algo.served_by(ctx.vllm)
    # asked only where vLLM does not serve it: it reads every known release's facts
    removed_after = algo.last_served_before(ctx.vllm) if unserved else None
    if unserved and removed_after is not None:
        words = facts.refusal(ctx.vllm, algo.name)
        findings.append(
            Finding.of(
                "vllm-removed-algorithm",
                f"{ctx.vllm_label} no longer serves {algo.name}"
                + (f': its speculators path says "{words}"' if words else "")
                + f"; the last release that serves it is vLLM {removed_after}",
                "$.speculators_model_type",
            )
        )
    elif unserved and algo.vllm_min is not None:
        findings.append(
            Finding.of(
                "vllm-unsupported-algorithm",
                f"{algo.name} is served by vLLM >= {short(algo.vllm_min)}; the target is {ctx.vllm_label}",
                "$.speculators_model_type",
            )
        )
    return findings


def normalize(
    config: Mapping[str, Any],
    *,
    vllm: str | Version | None = None,
    source: str | None = None,
    origin: Origin | None = None,
    verifier: str | None = None,
    manifest: Mapping[str, Any] | None = None,
) -> Speculator:
    """Normalize a parsed config.json into vLLM-ready configuration for one vLLM version.

    The speculators format, or a native one (z-lab DFlash, DeepSpec DSpark, SpecForge/SGLang/
    EAGLE-3 release; see `specreg.sources.native`), which names no verifier: pass `verifier`. With the
    `manifest` (specreg.json) of a directory specreg materialized, the config is read back as the
    vLLM-ready layout it is (`specreg.normalization.readback`).
    Raises `specreg.ConfigError` (a ValueError) naming the JSON path for malformed input, and
    `specreg.UnknownAlgorithmError` for an unknown `speculators_model_type`. The input is never mutated.
    """
    from specreg.sources import native
    from specreg.normalization import readback

    if readback.is_manifest(manifest) and isinstance(config, Mapping) and "speculators_config" not in config:
        converted = readback.to_speculators(config, manifest, source=source)  # type: ignore[arg-type]
        vllm = vllm if vllm is not None else manifest.get("vllm_version")  # type: ignore[union-attr]
        served = native.architecture_of(config)  # the class specreg wrote; vLLM loads it by that registry name
    else:
        found = native.recognize(config, source=source)
        if found is None:
            return _normalize_speculators(config, vllm=vllm, source=source, origin=origin)
        layout, name = found
        converted = native.to_speculators(config, layout.format, verifier=verifier, source=source)
        served = layout.serves(name).vllm_class
    try:
        spec = _normalize_speculators(
            converted.config, vllm=vllm, source=source, origin=origin, native_architecture=served
        )
    except ConfigError as exc:
        remapped = [Problem(converted.native_path(p.path) or "$", p.message) for p in exc.problems]
        raise type(exc)(remapped, source=exc.source) from None
    return _as_native(spec, config, converted)


def _as_native(spec: Speculator, config: Mapping[str, Any], converted: Any) -> Speculator:
    """A Speculator normalized from a converted native config, re-pointed at the native file."""
    import attrs

    provenance = {}
    for key, prov in spec.provenance.items():
        why = next((converted.defaults[s] for s in prov.sources if s in converted.defaults), None)
        how = next((converted.derived[s] for s in prov.sources if s in converted.derived), None)
        if why is not None:
            provenance[key] = Provenance("default", (), why)
        elif how is not None and prov.kind == "source":
            provenance[key] = Provenance("derived", tuple(converted.native_path(s) for s in prov.sources), how)
        else:
            provenance[key] = attrs.evolve(prov, sources=tuple(converted.native_path(s) for s in prov.sources))
    # How vLLM's speculators mapping would read the twin says nothing about the native file (vLLM
    # never maps it): those findings are dropped; materialize serves the native draft as trained.
    findings = [
        attrs.evolve(f, path=converted.native_path(f.path)) for f in spec.findings if f.code not in SERVED_DIFFERENTLY
    ]
    attention, draft = spec.attention, spec.draft_config_dict()
    if converted.causal_everywhere:
        attention, draft, extra = _causal_everywhere(spec, converted.causal_everywhere, provenance, draft)
        findings += extra
    labels = {
        "zlab": "z-lab DFlash",
        "zlab-dflash2": "z-lab DFlash2",
        "deepspec": "DeepSpec DSpark",
        "eagle3-native": "native EAGLE-3",
    }
    if converted.format == "materialized":
        findings.append(
            Finding.of(
                "native-format",
                "read back as the directory specreg materialized: the plan is "
                "what vLLM will serve from it (specreg.json gives the length and the verifier)",
            )
        )
    else:
        findings.append(
            Finding.of(
                "native-format",
                f"read as a {labels[converted.format]} config (not the "
                "speculators format); `specreg convert` writes its speculators-format twin",
            )
        )
    findings += [Finding.of(code, message, path) for code, message, path in converted.notes]
    if isinstance(config.get("auto_map"), Mapping):
        findings.append(
            Finding.of(
                "auto-map-ignored", "auto_map points at repository code; specreg never imports or runs it", "$.auto_map"
            )
        )
    ledger = spec.ledger
    if converted.format != "materialized":  # the native file's own keys, against its trainers' writers
        reported = {f.path: f.code for f in findings if f.path is not None}
        native = account_native(
            config, converted.format, spec.algorithm, f"vLLM {short(Version(spec.vllm_version))}", reported
        )
        findings += native.findings
        ledger = native.entries
    return attrs.evolve(
        spec,
        provenance=provenance,
        findings=_ordered(findings),
        ledger=ledger,
        source_config=config,
        format=converted.format,
        attention=attention,
        draft_config=draft,
    )


def _causal_everywhere(spec: Speculator, path: str, provenance: dict, draft: dict) -> tuple:
    """A native draft trained causal on every layer, full attention included (is_causal /
    dflash_config.causal = true): the plan says so, the flag the targeted vLLM reads states it, and
    an error finding when that vLLM cannot serve it (the one model in `dflash_family`)."""
    import attrs

    from specreg.normalization.capabilities import parse_version
    from specreg.normalization.dflash_family import mask_flag, vllm_layer_causal, why_unservable
    from specreg.normalization.plan import set_path

    attention = tuple(attrs.evolve(a, causal=True) for a in spec.attention)
    for a in attention:
        provenance[f"attention[{a.layer}]"] = Provenance("derived", (path,), "every layer was trained causal")
    ctx = Context(vllm=parse_version(spec.vllm_version), source=None, envelope=None)
    # the DSpark layout's own mask rules (dspark_per_layer_causal), a trait of the registration
    dspark, trained = bool(getattr(algorithms.get(spec.algorithm).variant, "top_level", False)), [True] * len(attention)
    outputs = {"draft_config": draft}
    for stale in ("draft_config.is_causal", "draft_config.dflash_config.causal"):
        provenance.pop(stale, None)
    draft.pop("is_causal", None)
    draft.get("dflash_config", {}).pop("causal", None)
    flag = mask_flag(ctx, dspark, trained, draft)
    if flag is not None:
        set_path(outputs, flag[0], flag[1])
        provenance[flag[0]] = Provenance("derived", (path,), "every layer was trained causal")
    findings = []
    if vllm_layer_causal(ctx, dspark, draft, len(trained)) != trained:
        findings.append(Finding.of("vllm-unsupported-feature", why_unservable(ctx, dspark, trained), path))
    return attention, draft, findings


def _run_algorithm(algo: Any, fields: Fields, ctx: Context, source: str | None) -> Plan:
    """The algorithm module's plan; a plugin's own failure is reported naming the plugin (a built-in
    module's is a specreg bug and propagates)."""
    from specreg.errors import SpecregError

    try:
        return algo.function(fields, ctx)
    except (ConfigError, RecursionError):
        raise
    except Exception as exc:
        if algo.origin.startswith("specreg.algos."):
            raise
        raise SpecregError(
            f"the algorithm plugin {algo.origin} for {algo.name!r} failed on this config "
            f"({type(exc).__name__}: {exc}); report it to that plugin's authors",
            source=source,
        ) from exc


def _normalize_speculators(config: Mapping[str, Any], **how: Any) -> Speculator:
    """The speculators config planned; for a vLLM older than every release with facts, with the one
    finding that says so and names each rule the plan asked whose value there is not known."""
    with unknown_rules() as unknown:
        spec = _plan_speculators(config, **how)
    version = Version(spec.vllm_version)
    if not facts.below(version):
        return spec
    oldest = short(facts.oldest())
    asked = f"; not known for {short(version)}: {', '.join(sorted(unknown))}" if unknown else ""
    wheel_read = f"{version.major}.{version.minor}" in facts.older_releases()
    read = f"{short(version)}'s own rules where its wheel was read, the rest" if wheel_read else "the rules"
    finding = Finding.of(
        "vllm-before-facts",
        f"vLLM {short(version)} is older than {oldest}, the oldest release specreg has every fact for: the plan "
        f"applies {read} as {oldest} has them, unchecked against {short(version)}{asked}",
        None,
    )
    return attrs.evolve(spec, findings=tuple(_ordered([*spec.findings, finding])))


def _plan_speculators(
    config: Mapping[str, Any],
    *,
    vllm: str | Version | None = None,
    source: str | None = None,
    origin: Origin | None = None,
    native_architecture: str | None = None,
) -> Speculator:
    try:
        if not isinstance(config, Mapping):
            raise ConfigError(f"the top level must be a JSON object, got {type_name(config)}", "$")
        version = target_version(vllm)
        ledger = None
        root = Fields(config)
        name = root.get("speculators_model_type", STR, required=True)
        if name is None:
            if not root.present("speculators_model_type") and not root.present("speculators_config"):
                from specreg.sources.native import not_a_draft

                raise ConfigError(
                    not_a_draft(config),
                    "$.architectures" if root.present("architectures") else "$.speculators_model_type",
                )
            root.done()
        algo = algorithms.get(name, source=source)
        envelope, findings = _read_envelope(root, version)
        ctx = Context(vllm=version, source=source, envelope=envelope, native_architecture=native_architecture)
        if envelope.num_speculative_tokens is None or algo.unservable:
            root.done()  # every envelope problem together; a recognized type stops here
        if algo.unservable:
            plan = Plan()
            plan.find("unservable-algorithm", algo.unservable, "$.speculators_model_type")
            if envelope.num_speculative_tokens is not None:
                plan.copy("num_speculative_tokens", envelope.num_speculative_tokens, envelope.tokens_path)
        else:
            # The module reads through its own view (its own read log) sharing the problem list,
            # so envelope and algorithm problems are reported together.
            fields = Fields(config, problems=root.problems)
            plan = _run_algorithm(algo, fields, ctx, source)
            root.done()
            _carry_quantization(config, plan)
            if native_architecture is None:  # the user's own file: every key of it is accounted for
                ledger = account(config, root.reads | fields.reads, algo.name, ctx.vllm_label)
                plan.findings.extend(_unread_fields(ledger_near_misses(ledger), algo.name))
                plan.findings.extend(ledger.findings)
            else:  # a native file's twin: its own keys are the converter's (specreg.sources.native)
                plan.findings.extend(_unread_fields(near_misses(config, root.reads | fields.reads), algo.name))
        findings = _envelope_findings(root, algo, ctx) + findings + plan.findings
        if version > NEWEST_KNOWN:
            findings.append(
                Finding.of(
                    "vllm-version-unchecked",
                    f"vLLM {version} is newer than {short(NEWEST_KNOWN)}, the newest version specreg's rules were checked "
                    f"against: the plan uses {short(NEWEST_KNOWN)}'s rules, which vLLM {version} may have changed",
                    None,
                )
            )
    except ConfigError as exc:
        if exc.source is None and source is not None:
            raise type(exc)(exc.problems, source=source) from None
        raise
    except RecursionError:
        raise ConfigError("the config is nested too deeply", "$", source=source) from None

    method = algo.method if not algo.unservable else None
    speculative_config: dict[str, Any] = {}
    provenance = dict(plan.provenance)
    if method is not None:
        speculative_config["method"] = method
        provenance["speculative_config.method"] = Provenance(
            "derived", ("$.speculators_model_type",), f"vLLM serves {algo.name} as method {algo.method!r}"
        )
        speculative_config["num_speculative_tokens"] = plan.num_speculative_tokens
        provenance["speculative_config.num_speculative_tokens"] = provenance["num_speculative_tokens"]
        speculative_config.update(plan.outputs["speculative_config"])
    if envelope.verifier is not None:
        provenance["verifier"] = Provenance("source", ("$.speculators_config.verifier.name_or_path",))
    try:  # the Speculator freezes a deep copy of the source
        if origin is not None and origin.bom:
            findings.append(
                Finding.of(
                    "config-byte-order-mark",
                    "config.json begins with a UTF-8 byte-order mark: transformers' config reader refuses it "
                    '("Unexpected UTF-8 BOM"), so vLLM cannot load the unmodified file; serve the directory '
                    "specreg materialize writes, which has none",
                    "$",
                    fix="specreg serve DRAFT (or materialize it), or save the file without the mark",
                )
            )
        return Speculator(
            algorithm=algo.name,
            method=method,
            verifier=envelope.verifier,
            num_speculative_tokens=plan.num_speculative_tokens,
            draft_config=plan.outputs["draft_config"],
            speculative_config=speculative_config,
            attention=plan.attention,
            findings=_ordered(findings),
            provenance=provenance,
            vllm_version=str(version),
            source_config=config,
            origin=origin,
            token_limits=plan.token_limits,
            ledger=ledger.entries if ledger is not None else (),
        )
    except RecursionError:
        raise ConfigError("the config is nested too deeply", "$", source=source) from None


#: the most unread-field findings one config gives (100,000 near-miss keys gave 41 MB of JSON, and
#: 27 MB in vLLM's log through the plugin): the first ones, then one finding counting the rest
MAX_UNREAD_FINDINGS = 20


def _unread_fields(misses: list[tuple[str, str, str]], algorithm: str) -> list[Finding]:
    """An info finding for each key no reader read that is a near miss of a missing field (a typo that
    would otherwise leave the field at its default without a word), at most MAX_UNREAD_FINDINGS."""
    found = [
        Finding.of(
            "unread-field",
            f"{key} is not a field {algorithm} reads, and {field} is missing: did you "
            f"mean {field}? As written, {field} takes its default and {key} is kept unread",
            path,
            fix=f"rename {key} to {field}",
        )
        for path, key, field in misses[:MAX_UNREAD_FINDINGS]
    ]
    rest = misses[MAX_UNREAD_FINDINGS:]
    if rest:
        fields = sorted({field for _, _, field in rest})
        shown = ", ".join(fields[:5]) + (f" and {len(fields) - 5:,} more" if len(fields) > 5 else "")
        found.append(
            Finding.of(
                "unread-field",
                f"{len(rest):,} more keys are not fields {algorithm} reads and are near misses of missing "
                f"fields ({shown}); only the first {MAX_UNREAD_FINDINGS} are listed",
                rest[0][0],
                fix="rename each to the field it misses, or remove it",
            )
        )
    return found


def _carry_quantization(config: Mapping[str, Any], plan: Plan) -> None:
    """A quantized draft's `quantization_config` kept in the draft config specreg writes.

    Trainers and quantizers (save_pretrained, llm-compressor, ModelOpt) write it at the top of
    config.json, beside transformer_layer_config. vLLM's `get_config` puts the file's top-level
    quantization_config on the draft's config whatever the format (transformers_utils/config.py, in
    every known release), so the unmodified file is served quantized; the directory `materialize` and `serve`
    write holds specreg's draft_config instead of the file, and would lose it without this."""
    q = config.get("quantization_config")
    draft = plan.outputs["draft_config"]
    if isinstance(q, Mapping) and "quantization_config" not in draft and draft:
        plan.copy("draft_config.quantization_config", thaw(q), "$.quantization_config")


def _ordered(findings: list[Finding]) -> list[Finding]:
    rank = {"error": 0, "warning": 1, "info": 2}
    return sorted(findings, key=lambda f: rank[f.severity])
