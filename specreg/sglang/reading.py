"""How SGLang reads a draft's config.json and its launch flags: the capture layers, each layer's
(window, causal), the proposals per step and the query rows. Written from the release's readers
(each step cites the function in the rules file); the SGLang tier runs those readers on every config
specreg has and checks they agree with this, so `specreg show` can say what SGLang would serve
without importing it."""

from __future__ import annotations

from typing import Any, Mapping

import attrs


@attrs.frozen
class Reading:
    """What SGLang would serve, from one config.json and the flags it is launched with."""

    #: why SGLang refuses the file before any weight loads (None: it loads)
    refused: str | None = None
    #: the hidden states captured, as ids of the target layer they enter (specreg's aux-id convention)
    capture: tuple[int, ...] | None = None
    #: how the capture layers were chosen: "config", or the fallback SGLang used without a word
    capture_from: str = "config"
    #: per draft layer: (window, causal); the window counts the current token, as sliding_window does
    attention: tuple[tuple[int | None, bool], ...] = ()
    #: draft tokens proposed per step, and the draft's query rows per step
    proposals: int | None = None
    query_rows: int | None = None
    sample_from_anchor: bool | None = None
    #: EAGLE-3: (num_steps, topk, num_draft_tokens) as resolved; a chain when topk is 1
    eagle_tree: tuple[int, int, int] | None = None


def _get(config: Mapping[str, Any], key: str, default: Any = None) -> Any:
    value = config.get(key, default) if isinstance(config, Mapping) else default
    return default if value is None else value


def _nested(config: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = config.get(key)
    return value if isinstance(value, Mapping) else {}


def build_target_layer_ids(num_target_layers: int, num_draft_layers: int) -> list[int]:
    """SGLang's guess of DFlash capture layers (layer-output ids) when a config names none
    (sglang/srt/speculative/dflash_utils.py: build_target_layer_ids, 0.5.23)."""
    if num_draft_layers == 1:
        return [num_target_layers // 2]
    start, end = 1, num_target_layers - 3
    span = end - start
    return [int(round(start + (i * span) / (num_draft_layers - 1))) for i in range(num_draft_layers)]


def block_attention(config: Mapping[str, Any]) -> tuple[tuple[int | None, bool], ...]:
    """Each DFlash-family layer's (window, causal) (sglang/srt/models/dflash.py:
    _get_dflash_layer_attention_params): no layer_types -> every layer full and non-causal; else
    full_attention non-causal and sliding_attention causal, unless a top-level is_causal decides."""
    text = _nested(config, "text_config") or config
    layer_types = text.get("layer_types", config.get("layer_types"))
    n = int(_get(text, "num_hidden_layers", 0))
    if layer_types is None:
        return ((None, False),) * n
    is_causal = text.get("is_causal")
    window = _get(text, "sliding_window", config.get("sliding_window"))
    out = []
    for kind in layer_types[:n]:
        sliding = kind == "sliding_attention"
        causal = sliding if is_causal is None else bool(is_causal)
        out.append((window if sliding else None, causal))
    return tuple(out)


def read(
    config: Mapping[str, Any],
    algorithm: str,
    rules: Mapping[str, Any],
    *,
    flags: Mapping[str, int] | None = None,
    target_layers: int | None = None,
    target_architecture: str | None = None,
) -> Reading:
    """What SGLang serves from `config` for `algorithm` (an entry of the rules' `architectures`, whose
    worker decides the reading) launched with `flags` (setting -> value: the
    speculative_* settings given on the command line). `target_layers`, when known, resolves the
    capture layers SGLang guesses when the config names none."""
    flags = flags or {}
    if not isinstance(config.get("model_type"), str):
        return Reading(refused=f"config.json has no model_type, so SGLang's {rules['config_from']} refuses it")
    worker = rules["architectures"][algorithm]["algorithm"]
    if worker == "EAGLE3":
        return _eagle3(config, rules["eagle3"], flags, target_layers, target_architecture)
    block = rules["dflash"]
    model_type = config["model_type"]
    if model_type in block["autoconfig_unknown"]:
        return Reading(refused=f"transformers' AutoConfig knows no model_type {model_type!r} ({rules['config_from']})")
    text = _nested(config, "text_config") or config
    if "sliding_attention" in (text.get("layer_types") or ()):
        window = text.get("sliding_window")
        if model_type in block["window_nulled_by"] and not text.get("use_sliding_window"):
            window = None
        if window is None:
            return Reading(
                refused="its sliding_attention layers have no sliding_window as SGLang reads the file: "
                f"{block['window_nulled_from']}"
            )
    return _block(config, worker == "DSPARK", rules, flags, target_layers)


def _eagle3(config, rule, flags, target_layers, target_architecture) -> Reading:
    ids = _nested(config, "eagle_config").get("eagle_aux_hidden_state_layer_ids")
    if ids:
        capture, how = tuple(int(i) + 1 for i in ids), "config"
    else:
        n = target_layers
        capture = (2, n // 2, n - 3) if n else None
        how = "SGLang's fallback [2, N // 2, N - 3] (llama.py: set_eagle3_layers_to_capture)"
    keys = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    defaults = rule["default_flags"]
    chosen = (
        tuple(flags[k] for k in keys)
        if all(k in flags for k in keys)
        else defaults.get(target_architecture or "", defaults["*"])
    )
    steps, topk, tokens = (int(v) for v in chosen)
    n_layers = int(_get(config, "num_hidden_layers", 1))
    # every layer causal; a window only from --speculative-draft-window-size (llama_eagle3.py: __init__)
    window = flags.get("speculative_draft_window_size")
    return Reading(
        capture=capture,
        capture_from=how,
        attention=((window, True),) * n_layers,
        proposals=steps,
        query_rows=1,
        eagle_tree=(steps, topk, tokens),
    )


def _block(config, dspark, rules, flags, target_layers) -> Reading:
    dflash = _nested(config, "dflash_config")
    ids = dflash.get("target_layer_ids", config.get("target_layer_ids"))
    if dspark and config.get("dspark_target_layer_ids") is not None:
        ids = config["dspark_target_layer_ids"]
    n_layers = int(_get(_nested(config, "text_config") or config, "num_hidden_layers", 0))
    if ids is not None:
        capture, how = tuple(int(i) + 1 for i in ids), "config"
    else:
        capture = (
            tuple(i + 1 for i in build_target_layer_ids(target_layers, n_layers))
            if target_layers and n_layers
            else None
        )
        how = "SGLang's guess (dflash_utils.py: build_target_layer_ids)"
    block = dflash.get("block_size", config.get("block_size"))
    if dspark:  # SGLang's DSpark worker
        gamma = flags.get("speculative_dspark_block_size")
        if gamma is None and flags.get("speculative_num_draft_tokens") is not None:
            gamma = int(flags["speculative_num_draft_tokens"]) - 1
        if gamma is None:
            gamma = config.get("dspark_block_size", block)
        gamma = int(gamma if gamma is not None else rules["dspark"]["default_gamma"])
        anchor = bool(_get(config, "sample_from_anchor", rules["dspark"]["sample_from_anchor_default"]))
        return Reading(
            capture=capture,
            capture_from=how,
            attention=block_attention(config),
            proposals=gamma,
            query_rows=gamma if anchor else gamma + 1,
            sample_from_anchor=anchor,
        )
    size = flags.get("speculative_dflash_block_size", flags.get("speculative_num_draft_tokens"))
    size = int(size if size is not None else block if block is not None else rules["dflash"]["default_block"])
    # SGLang's DFlash worker always drafts after the anchor (the bonus token): block - 1 proposals
    return Reading(
        capture=capture,
        capture_from=how,
        attention=block_attention(config),
        proposals=size - 1,
        query_rows=size,
        sample_from_anchor=False,
    )
