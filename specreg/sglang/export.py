"""The same draft, served as trained by SGLang: from specreg's normalized `Speculator` (its trained
plan, unchanged) to an SGLang-ready config.json and the `python -m sglang.launch_server` flags.

Only the served side is new: what SGLang reads, and where, comes from the rules file of the SGLang
release targeted (specreg/sglang/rules/). Every export is read back through `reading.read` (SGLang's
readers, as the SGLang tier checks them) and must give the trained plan; where SGLang cannot say
what the draft was trained with, the export is refused with a `sglang-unservable` finding instead."""

from __future__ import annotations

import json
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Iterable, Mapping

import attrs

from specreg.errors import with_article
from specreg.normalization.speculator import Finding, as_tuple, thaw
from specreg.sglang import agreement, reading
from specreg.sglang.rules import rules as release_rules
from specreg.sglang.rules import target

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: trained-plan errors about vLLM alone (the draft itself is fine for another engine)
VLLM_ONLY_ERRORS = frozenset(
    {
        "vllm-unsupported-algorithm",
        "vllm-removed-algorithm",
        "vllm-startup-refusal",
        "trained-key-not-served",
        "vllm-unsupported-feature",
        "unservable-algorithm",
        "composite-model-type",
        "unknown-model-type",
        "draft-tp-invalid",
        "no-attention-backend",
        "attention-backend-refused",
        "draft-quant-layer-names",
        "quantization-gpu",
        "kv-cache-groups",
    }
)
#: keys of vLLM's draft_config that SGLang reads nowhere, or reads elsewhere in its own layout
_VLLM_KEYS = (
    "dspark_bonus_anchor",
    "eagle_aux_hidden_state_layer_ids",
    "target_layer_ids",
    "mask_token_id",
    "block_size",
    "norm_before_residual",
)
#: SGLang's speculative workers (`--speculative-algorithm`), as its rules' `architectures` name them
EAGLE3, DSPARK = "EAGLE3", "DSPARK"
UNSERVABLE_FIX = "serve the draft with vLLM (`specreg serve DRAFT`), which serves it as trained"
SERVED_FIX = "serve it with `specreg serve DRAFT --engine sglang` (or `specreg materialize DRAFT DIR --engine sglang`)"


@attrs.frozen
class Trained:
    """The trained plan in the terms SGLang's reading is compared in (`reading.Reading`)."""

    proposals: int | None
    capture: tuple[int, ...] | None
    attention: tuple[tuple[int | None, bool], ...]
    query_rows: int | None
    sample_from_anchor: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "proposals": self.proposals,
            "capture": list(self.capture) if self.capture else None,
            "attention": [{"window": w, "causal": c} for w, c in self.attention],
            "query_rows": self.query_rows,
            "sample_from_anchor": self.sample_from_anchor,
        }


def _block_family(algorithm: str) -> bool:
    """Whether `algorithm` is a member of the DFlash family (its registration's variant)."""
    from specreg.normalization import algorithms, dflash_family

    return isinstance(algorithms.get(algorithm).variant, dflash_family.Variant)


def served_as(algorithm: str) -> str:
    """The entry of SGLang's rules (`architectures`) that serves `algorithm`: its variant's `sglang_as`
    where it names one (a member SGLang serves with another member's class and worker), else its own."""
    from specreg.normalization import algorithms

    return getattr(algorithms.get(algorithm).variant, "sglang_as", None) or algorithm


def trained(spec: "Speculator") -> Trained:
    dc = spec.draft_config
    attention = tuple((a.window, a.causal) for a in spec.attention)
    k = spec.num_speculative_tokens
    if _block_family(spec.algorithm):
        flash = dc.get("dflash_config") or {}
        ids = dc.get("target_layer_ids", flash.get("target_layer_ids"))
        anchor = dc.get("sample_from_anchor", flash.get("sample_from_anchor", False))
        rows = None if k is None else k if anchor else k + 1
        return Trained(k, tuple(i + 1 for i in ids) if ids is not None else None, attention, rows, bool(anchor))
    ids = dc.get("eagle_aux_hidden_state_layer_ids")
    return Trained(k, tuple(ids) if ids else None, attention, 1, None)


@attrs.frozen
class SGLangPlan:
    """A draft as SGLang serves it as trained: the config.json to write, the launch flags, the findings
    (errors: SGLang cannot; `sglang-served-differently`: the unmodified file would be served otherwise)."""

    sglang_version: str
    algorithm: str
    verifier: str | None
    trained: Trained
    #: config.json as SGLang loads it ({} when refused)
    config: Mapping[str, Any] = attrs.field(converter=lambda d: MappingProxyType(dict(d)))
    #: the draft's speculative flags (after --speculative-draft-model-path)
    flags: tuple[str, ...]
    findings: tuple[Finding, ...] = attrs.field(converter=as_tuple)
    #: how SGLang would read the unmodified file, launched with no speculative flags but the algorithm
    unmodified: reading.Reading
    speculator: "Speculator" = attrs.field(repr=False, eq=False)

    @property
    def errors(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.severity == "error")

    @property
    def servable(self) -> bool:
        return not self.errors

    @property
    def env(self) -> dict[str, str]:
        """The environment SGLang needs to serve it as trained (none)."""
        return {}

    def argv(self, draft: str, *, verifier: str | None = None, extra: Iterable[str] = ()) -> list[str]:
        """`python -m sglang.launch_server` serving `draft` (a directory written by `materialize`)
        beside the verifier, then the user's flags (checked by `specreg.sglang.flags.merge`)."""
        from specreg.errors import SpecregError

        if not self.servable:
            raise SpecregError(
                f"not servable as trained by SGLang {self.sglang_version} "
                f"({', '.join(sorted({f.code for f in self.errors}))})"
            )
        model = verifier or self.verifier
        if not model:
            raise SpecregError("the config names no verifier; pass verifier=")
        return [
            "python",
            "-m",
            "sglang.launch_server",
            "--model-path",
            model,
            "--speculative-draft-model-path",
            str(draft),
            *self.flags,
            *extra,
        ]

    def config_dict(self) -> dict[str, Any]:
        return thaw(self.config)

    def materialize(self, directory: Any, *, weights: str = "link", force: bool = False, progress: Any = None) -> Any:
        """Write the SGLang-ready directory (config.json, the weights linked/copied/left out, specreg.json)."""
        from specreg.sglang.write import materialize

        return materialize(self, directory, weights=weights, force=force, progress=progress)

    def to_dict(self) -> dict[str, Any]:
        return {
            "engine": "sglang",
            "sglang_version": self.sglang_version,
            "algorithm": self.algorithm,
            "verifier": self.verifier,
            "servable": self.servable,
            "trained": self.trained.to_dict(),
            "config": self.config_dict(),
            "flags": list(self.flags),
            "env": self.env,
            "findings": [f.to_dict() for f in self.findings],
        }


def export(
    spec: "Speculator",
    *,
    sglang: str | None = None,
    tensor_names: Iterable[str] | None = None,
    target_layers: int | None = None,
    target_architecture: str | None = None,
) -> SGLangPlan:
    """The SGLang plan of a normalized draft for SGLang `sglang` (default: the installed release, else the
    newest known; see `rules.target`). `tensor_names`: the checkpoint's tensor names, when
    known (a DFlash/DSpark head SGLang would skip is refused); `target_layers` and
    `target_architecture`: the verifier's, when known (they decide SGLang's fallbacks)."""
    version, unchecked = target(sglang)
    rules = release_rules(version)
    found: list[Finding] = [f for f in spec.errors if f.code not in VLLM_ONLY_ERRORS]
    if unchecked:
        found.append(
            Finding.of(
                "sglang-version-unchecked",
                unchecked,
                None,
                fix="upgrade specreg to rules read from that SGLang, or pass sglang= a known release",
            )
        )
    plan = trained(spec)
    algo = spec.algorithm
    served = served_as(algo)
    version = rules["sglang"]

    def refuse(message: str, path: str | None = None) -> None:
        found.append(Finding.of("sglang-unservable", message, path, fix=UNSERVABLE_FIX))

    config: dict[str, Any] = {}
    flags: list[str] = []
    if algo in rules["not_served"]:
        refuse(rules["not_served"][algo], "$.speculators_config.algorithm")
    elif served not in rules["architectures"]:
        refuse(
            f"SGLang {version} has no class for {with_article(algo)} draft (specreg/sglang/rules/{version}.json)",
            "$.speculators_config.algorithm",
        )
    else:
        if plan.capture is None and rules["architectures"][served]["algorithm"] == EAGLE3 and target_layers:
            # the trained plan leaves the ids to the engine's default, which SGLang's fallback equals: written out
            n = target_layers
            plan = attrs.evolve(plan, capture=(2, n // 2, n - 3))
        config, flags = _export(spec, plan, rules, refuse, tensor_names)
    if not found:
        _read_back(config, flags, served, rules, plan, refuse, target_layers)
    unmodified = reading.Reading(refused=f"SGLang {version} serves no {algo} draft")
    if served in rules["architectures"]:
        unmodified = reading.read(
            thaw(spec.source_config),
            served,
            rules,
            target_layers=target_layers,
            target_architecture=target_architecture,
        )
        found += _served_differently(unmodified, plan, spec, rules)
    if config:
        # the written config.json against the verifier, as SGLang's classes read the two
        found += agreement.findings(spec, config, rules["architectures"][served]["algorithm"], rules)
    return SGLangPlan(
        sglang_version=version,
        algorithm=algo,
        verifier=spec.verifier,
        trained=plan,
        config=config if not any(f.severity == "error" for f in found) else {},
        flags=tuple(flags),
        findings=found,
        unmodified=unmodified,
        speculator=spec,
    )


def _export(spec, plan: Trained, rules, refuse, tensor_names) -> tuple[dict[str, Any], list[str]]:
    k = spec.num_speculative_tokens
    rule = rules["architectures"][served_as(spec.algorithm)]
    worker = rule["algorithm"]
    config = spec.draft_config_dict()
    flash = config.pop("dflash_config", None) or {}
    mask = config.get("mask_token_id", flash.get("mask_token_id"))
    for key in _VLLM_KEYS:
        config.pop(key, None)
    config["architectures"] = [rule["class"]]
    flags = ["--speculative-algorithm", worker]
    if worker == EAGLE3:
        _eagle3(spec, plan, config, rules, refuse)
        flags += [
            "--speculative-num-steps",
            str(k),
            "--speculative-eagle-topk",
            "1",
            "--speculative-num-draft-tokens",
            str(k + 1),
        ]
    else:
        # SGLang's DSpark worker drafts a whole block from the anchor, its DFlash worker after it
        block = k if worker == DSPARK else k + 1
        flash.pop("sample_from_anchor", None)
        flash.update(target_layer_ids=[i - 1 for i in plan.capture or ()], mask_token_id=mask, block_size=block)
        config["dflash_config"] = flash
        _block(spec, plan, config, rules, refuse, tensor_names, worker)
        if worker == DSPARK:
            config["sample_from_anchor"] = plan.sample_from_anchor
            flags += ["--speculative-dspark-block-size", str(block)]
        else:
            flags += ["--speculative-dflash-block-size", str(block)]
    quant = _quantization(config, rules, refuse)
    flags += [rules["quantization_flag"], quant]
    return config, flags


def _eagle3(spec, plan: Trained, config: dict[str, Any], rules, refuse) -> None:
    rule = rules["eagle3"]
    dc = spec.draft_config
    if dc.get("norm_before_residual") is True:
        refuse(
            "the draft was trained with norm_before_residual: true (the residual taken after the hidden-state "
            "norm); SGLang's LlamaForCausalLMEagle3 never reads it: its first layer always keeps the un-normed "
            f"target state as the residual ({rule['norm_before_residual_from']})",
            "$.norm_before_residual",
        )
    model_type = config.get("model_type")
    if model_type not in rule["layer_model_types"]:
        refuse(
            f"the draft's layers are {model_type}; SGLang's only EAGLE-3 draft class builds "
            f"{', '.join(rule['layer_model_types'])} layers ({rule['layer_model_types_from']})",
            "$.transformer_layer_config.model_type",
        )
    if plan.capture is None:
        refuse(
            "the config names no aux layer ids: SGLang would capture its own fallback "
            f"{rule['aux_ids_fallback']}, and specreg never guesses the trained ones",
            "$.eagle_aux_hidden_state_layer_ids",
        )
    else:
        config["eagle_config"] = {
            "eagle_aux_hidden_state_layer_ids": [i - 1 for i in plan.capture],
            "use_aux_hidden_state": True,
        }


def _block(spec, plan: Trained, config: dict[str, Any], rules, refuse, tensor_names, worker: str) -> None:
    rule = rules["dspark"] if worker == DSPARK else rules["dflash"]
    if worker != DSPARK and plan.sample_from_anchor:
        refuse(
            "the draft was trained with sample_from_anchor: true (it proposes from the anchor row); SGLang's "
            "DFlash worker never reads sample_from_anchor and always drafts after the anchor, block_size - 1 "
            f"tokens ({rules['dflash']['block_from']})",
            "$.sample_from_anchor",
        )
    if worker == DSPARK and not config.get("markov_rank"):
        refuse(f"markov_rank is 0 (no Markov head); {rule['markov_required_from']}", "$.markov_rank")
    elif worker == DSPARK and config.get("markov_head_type") is None:
        refuse(
            "the config names no markov_head_type; SGLang's parse_dspark_draft_config requires one when "
            "markov_rank > 0 (sglang/srt/speculative/dspark_components/dspark_config.py)",
            "$.markov_head_type",
        )
    nope = config.get("no_rope_layers")
    if isinstance(nope, list) and nope:
        refuse(
            f"the draft was trained without RoPE in layers {sorted(set(nope))} (no_rope_layers); SGLang's "
            f"{config['architectures'][0]} rotates every layer ({rules['dflash']['nope_layers_from']})",
            "$.transformer_layer_config.no_rope_layers",
        )
    layers = rules["dflash"]
    if config.get("model_type") in layers["qwen3_layer_names"]:
        config["model_type"] = layers["layer_model_type"]  # a trainer's own name for these Qwen3 layers
    else:
        refuse(
            f"the draft's layers are {config.get('model_type')}; SGLang's {config['architectures'][0]} builds "
            f"{layers['layer_model_type']} layers ({layers['layer_model_type_from']})",
            "$.transformer_layer_config.model_type",
        )
    # the mask: layer_types plus one top-level is_causal is all SGLang reads
    kinds = ["sliding_attention" if a.kind == "sliding" else "full_attention" for a in spec.attention]
    windows = sorted({a.window for a in spec.attention if a.kind == "sliding"})
    causal = {c for _w, c in plan.attention}
    config["layer_types"] = kinds
    config["num_hidden_layers"] = len(kinds)
    config.pop("is_causal", None)
    if len(causal) == 1:
        config["is_causal"] = causal.pop()
    elif any(c != (kind == "sliding_attention") for (_w, c), kind in zip(plan.attention, kinds)):
        layers = ", ".join(
            f"{i} ({kinds[i].split('_')[0]}, {'causal' if c else 'non-causal'})"
            for i, (_w, c) in enumerate(plan.attention)
        )
        refuse(
            f"the trained masks (layers {layers}) cannot be said to SGLang: it reads layer_types (full non-causal, "
            "sliding causal) and one top-level is_causal for every layer "
            f"({rules['dflash']['mask_from']})",
            "$.transformer_layer_config.layer_types",
        )
    if len(windows) > 1:
        refuse(
            f"the sliding layers were trained with windows {windows}; SGLang reads one sliding_window for every layer",
            "$.transformer_layer_config.sliding_window",
        )
    if windows:
        config["sliding_window"] = windows[0]
        config["use_sliding_window"] = True
    vocab, draft_vocab = config.get("vocab_size"), config.get("draft_vocab_size")
    if isinstance(vocab, int) and isinstance(draft_vocab, int) and draft_vocab != vocab:
        refuse(
            f"the draft was trained with its own {draft_vocab}-token head (vocab_size {vocab}); SGLang's "
            f"{config['architectures'][0]} uses the target's lm_head ({rule['skipped_tensors_from']})",
            "$.draft_vocab_size",
        )
    own = sorted(
        n
        for n in tensor_names or ()
        if n.removeprefix("model.").startswith(("lm_head.", "embed_tokens.")) or n.split(".")[-1] in ("d2t", "t2d")
    )
    if own:
        refuse(
            f"the checkpoint holds {', '.join(own[:4])}{' ...' if len(own) > 4 else ''}: a head of the draft's "
            f"own, which SGLang skips without a word and replaces with the target's ({rule['skipped_tensors_from']})",
            "$",
        )


def _quantization(config: dict[str, Any], rules, refuse) -> str:
    quant = config.get("quantization_config")
    method = quant.get("quant_method") if isinstance(quant, dict) else None
    if method is None:
        return "unquant"  # not the target's --quantization, which an unset draft setting inherits
    if method not in rules["quantization_choices"]:
        refuse(
            f"the draft is quantized with {json.dumps(method)}, which SGLang's {rules['quantization_flag']} does "
            f"not offer ({rules['quantization_choices_from']})",
            "$.quantization_config.quant_method",
        )
    return str(method)


def _read_back(config, flags, algo, rules, plan: Trained, refuse, target_layers) -> None:
    """The export through SGLang's readers must give the trained plan; a difference is a refusal."""
    settings = {}
    for name, value in zip(flags[::2], flags[1::2]):
        dest = rules["options"].get(name)
        if dest and value.lstrip("-").isdigit():
            settings[dest] = int(value)
    got = reading.read(config, algo, rules, flags=settings, target_layers=target_layers)
    for problem in differences(got, plan):
        refuse(f"SGLang would read the written config as {problem}")


def differences(got: reading.Reading, plan: Trained) -> list[str]:
    """How SGLang's reading differs from the trained plan, one phrase each (empty: served as trained)."""
    if got.refused:
        return [f"nothing at all: {got.refused}"]
    out = []
    if plan.capture is not None and got.capture != plan.capture:
        shown = list(got.capture) if got.capture else "layers it guesses from the target's layer count"
        out.append(
            f"capturing the hidden states entering layers {shown} ({got.capture_from}), trained on {list(plan.capture)}"
        )
    masks = [i for i, (a, b) in enumerate(zip(got.attention, plan.attention)) if a != b]
    if masks or len(got.attention) != len(plan.attention):
        show = "; ".join(f"layer {i}: {_mask(got.attention[i])}, trained {_mask(plan.attention[i])}" for i in masks)
        out.append(f"masks {show or f'for {len(got.attention)} layers, trained {len(plan.attention)}'}")
    if got.eagle_tree is not None and got.eagle_tree[1:] != (1, (plan.proposals or 0) + 1):
        steps, topk, tokens = got.eagle_tree
        out.append(
            f"a top-{topk} tree of {tokens} draft tokens over {steps} steps, trained as a chain of {plan.proposals}"
        )
    elif got.proposals != plan.proposals or got.query_rows != plan.query_rows:
        out.append(
            f"{got.proposals} proposals from {got.query_rows} query rows per step, trained "
            f"{plan.proposals} from {plan.query_rows}"
        )
    if plan.sample_from_anchor is not None and got.sample_from_anchor != plan.sample_from_anchor:
        out.append(
            f"sample_from_anchor {str(got.sample_from_anchor).lower()}, trained {str(plan.sample_from_anchor).lower()}"
        )
    return out


def _mask(attention: tuple[int | None, bool]) -> str:
    window, causal = attention
    return f"{'causal' if causal else 'non-causal'}{f', window {window}' if window else ''}"


def _served_differently(unmodified: reading.Reading, plan: Trained, spec, rules) -> list[Finding]:
    out = [
        Finding.of(
            "sglang-served-differently",
            f"given the unmodified file, SGLang {rules['sglang']} would serve {problem}",
            None,
            fix=SERVED_FIX,
        )
        for problem in differences(unmodified, plan)
    ]
    eagle = rules["architectures"][served_as(spec.algorithm)]["algorithm"] == EAGLE3
    if eagle and spec.draft_config.get("norm_before_residual") is True and not unmodified.refused:
        out.append(
            Finding.of(
                "sglang-served-differently",
                "given the unmodified file, SGLang would keep the "
                "un-normed target state as the first layer's residual; the draft was trained with "
                "norm_before_residual: true",
                "$.norm_before_residual",
                fix=UNSERVABLE_FIX,
            )
        )
    return out
