"""The conversion the DFlash-family layouts share (z-lab DFlash and DFlash2, DeepSpec DSpark).

A plain HF config of the draft layers plus ``dflash_config`` (``target_layer_ids``: the output of
layer t; ``mask_token_id``; ``block_size`` here or at the top level; optional ``causal``,
``use_swa``, ``swa_window_size``) and ``num_target_layers``.
"""

from __future__ import annotations

from typing import Any, Mapping

from specreg.errors import ConfigError, Problem, show_value
from specreg.sources.native import keys
from specreg.sources.native.common import (
    DFLASH2_FIELDS,
    DSPARK_FIELDS as _DSPARK_FIELDS,
    Converted,
    dflash_field,
    layer_config,
    note,
    require,
    speculators_envelope,
)

#: the most layers a config may declare (normalization.fields.MAX_COUNT, which reports a larger
#: value; this stage comes before it and must not build a layer list from such a value first)
_MAX_LAYERS = 4096


def convert(config: Mapping[str, Any], fmt: str, verifier: str | None, source: str | None) -> Converted:
    problems: list[Problem] = []
    ids, ids_path = dflash_field(config, "target_layer_ids")
    block, block_path = dflash_field(config, "block_size")
    mask, mask_path = dflash_field(config, "mask_token_id")
    require(problems, ids, "$.dflash_config.target_layer_ids", "the target layer ids (never guessed)")
    require(problems, block, "$.dflash_config.block_size", "block_size (in dflash_config or at the top level)")
    require(problems, mask, "$.dflash_config.mask_token_id", "mask_token_id")
    if ids is not None and (
        not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids)
    ):
        problems.append(Problem(ids_path, f"must be a list of layer indices, got {ids!r}"))
    if block is not None and (not isinstance(block, int) or isinstance(block, bool) or block < 2):
        problems.append(Problem(block_path, f"must be an integer >= 2, got {block!r}"))
    if problems:
        raise ConfigError(problems, source=source)

    layer = layer_config(config)
    n = layer.get("num_hidden_layers")
    if isinstance(n, int) and not (0 < n <= _MAX_LAYERS):
        n = None  # out of range: the layer list is not built from it (the normalizer reports the value)
    types = layer.get("layer_types")
    use_swa, _ = dflash_field(config, "use_swa")
    # causality: dflash_config.causal = true, else a top-level is_causal, else dflash_config.causal, else
    # sliding layers only. NeMo Automodel stamps dflash_config.causal = true on a JetSpec draft, trained
    # causal in the block, and writes is_causal = false on every DFlash-family draft, JetSpec's too
    # (nemo_automodel/recipes/llm/train_jetspec.py and train_dflash.py at 36044ad): the stamp is the one
    # that says how it was trained. A JetSpec file from before the stamp (before 71e2dd459) reads as DFlash.
    dflash = config.get("dflash_config")
    if isinstance(dflash, Mapping) and dflash.get("causal") is True:
        causal, causal_path = True, "$.dflash_config.causal"
    elif "is_causal" in config:
        causal, causal_path = config["is_causal"], "$.is_causal"
    else:
        causal, causal_path = dflash_field(config, "causal")
    if types is None and isinstance(n, int) and not use_swa:
        layer["layer_types"] = ["full_attention"] * n  # what a missing layer_types means (transformers' default)
    if use_swa and isinstance(n, int):
        if types is None or "sliding_attention" not in types:
            layer["layer_types"] = ["sliding_attention"] * n
        window, _ = dflash_field(config, "swa_window_size")
        if window is not None:
            layer["sliding_window"] = window
    types = layer.get("layer_types")
    sliding = isinstance(types, list) and "sliding_attention" in types
    if sliding:
        # transformers' Qwen3Config drops sliding_window unless use_sliding_window is true (speculators
        # writes it so); without it vLLM's DFlash model finds no window for its sliding layers
        layer["use_sliding_window"] = True
    full = not isinstance(types, list) or "full_attention" in types
    causal_everywhere = causal_path if causal is True and full else None
    if causal_everywhere:
        non_causal, nc_path = True, causal_everywhere  # then every layer is set causal (normalization)
    elif causal is None and use_swa:
        non_causal, nc_path = True, "$.dflash_config.use_swa"  # use_swa drafts attend bidirectionally
    elif causal is None:
        # z-lab trains sliding layers causal and full layers bidirectional; with no sliding layer the
        # flag only matters to vLLM's reading, so state "non-causal", which is what was trained.
        non_causal = not sliding
        nc_path = "$.layer_types"
    else:
        non_causal = not causal
        nc_path = causal_path
    defaults: dict[str, str] = {
        "$.sample_from_anchor": "DeepSpec DSpark drafts from the anchor: block_size tokens"
        if fmt == "deepspec"
        else "z-lab DFlash drafts block_size - 1 tokens after the bonus anchor",
    }
    if fmt == "deepspec" and causal is None:
        non_causal = True  # (also the placeholder of a causal-everywhere draft)
        defaults["$.sliding_window_non_causal"] = (
            "DeepSpec trains the DSpark block bidirectional unless is_causal is set"
        )
    algorithm = {"deepspec": "dspark", "zlab-dflash2": "dflash2"}.get(fmt, "dflash")
    anchor = fmt == "deepspec"  # DeepSpec's DSpark drafts from the anchor
    tokens = block if anchor else block - 1
    dv, dv_path = dflash_field(config, "draft_vocab_size")
    out: dict[str, Any] = {
        "speculators_model_type": algorithm,
        "architectures": [
            {"deepspec": "DSparkSpeculator", "zlab-dflash2": "DFlash2Speculator"}.get(fmt, "DFlashSpeculator")
        ],
        "transformer_layer_config": layer,
        "aux_hidden_state_layer_ids": [i + 1 for i in ids],
        "block_size": block,
        "mask_token_id": mask,
        "draft_vocab_size": dv if dv is not None else layer.get("vocab_size"),
        "sample_from_anchor": anchor,
        "sliding_window_non_causal": non_causal,
        "target_hidden_size": None,
        "speculators_config": speculators_envelope(algorithm, tokens, verifier),
    }
    paths = {
        "$.aux_hidden_state_layer_ids": ids_path,
        "$.block_size": block_path,
        "$.mask_token_id": mask_path,
        "$.sliding_window_non_causal": nc_path,
        "$.speculators_config.proposal_methods[0].speculative_tokens": block_path,
        "$.speculators_config.verifier.name_or_path": "verifier",
        "$.draft_vocab_size": dv_path or "$.vocab_size",
        # the algorithm (and so vLLM's class) is what the file's architecture name says
        "$.speculators_model_type": "$.architectures" if "architectures" in config else "$.dflash_config",
    }
    if fmt == "zlab-dflash2":
        for name in DFLASH2_FIELDS:
            value, path = dflash_field(config, name)
            if value is not None:
                out[name] = value
                paths[f"$.{name}"] = path
    for name in keys.CARRIED.get(algorithm, {}):
        value, path = dflash_field(config, name)
        if value is not None and name not in out:
            out[name] = value
            paths[f"$.{name}"] = path
    if anchor:
        for name in _DSPARK_FIELDS:
            value, path = dflash_field(config, name)
            if value is not None:
                out[name] = value
                paths[f"$.{name}"] = path
    derived = {
        "$.aux_hidden_state_layer_ids": "output of layer t -> speculators' id t + 1 (the hidden state entering it)",
        "$.speculators_config.proposal_methods[0].speculative_tokens": "block_size"
        if fmt == "deepspec"
        else "block_size - 1",
    }
    return Converted(
        format=fmt,
        config=out,
        paths=paths,
        defaults=defaults,
        derived=derived,
        causal_everywhere=causal_everywhere,
        notes=tuple(_unserved(config, algorithm)),
    )


def _unserved(config: Mapping[str, Any], algorithm: str) -> list[tuple[str, str, str | None]]:
    """Findings for dflash_config keys of training that vLLM never reads (`keys.NOT_SERVED`), and
    for keys specreg has no entry for: it cannot tell what they changed in training."""
    import difflib

    dflash = config.get("dflash_config")
    if not isinstance(dflash, Mapping):
        return []
    known = set(keys.CARRIED.get(algorithm, {})) | set(keys.CONSUMED) | set(keys.TRAINED_SIDE) | set(DFLASH2_FIELDS)
    notes = []
    for name, value in dflash.items():
        path = f"$.dflash_config.{name}"
        if name in keys.NOT_SERVED:
            notes.append(
                note(
                    "trained-key-not-served",
                    f"dflash_config.{name} = {show_value(value, 60)}: {keys.NOT_SERVED[name]}, so the served draft "
                    "is not the trained one",
                    path,
                )
            )
        elif name in ("training_mode", "loss_type") and isinstance(value, str) and value in keys.OBJECTIVES:
            notes.append(
                note(
                    "trained-key-not-served",
                    f"dflash_config.{name} = {show_value(value, 40)}: {keys.OBJECTIVES[value]}",
                    path,
                )
            )
        elif name == "attention_mode" and value not in ("gqa", "mha", None):
            notes.append(
                note(
                    "trained-key-not-served",
                    f"dflash_config.attention_mode = {show_value(value, 40)}: "
                    "vLLM's DFlash-family classes build GQA attention",
                    path,
                )
            )
        elif name not in known and difflib.get_close_matches(name, known, n=1, cutoff=keys.NEAR_MISS_CUTOFF):
            field = difflib.get_close_matches(name, known, n=1, cutoff=keys.NEAR_MISS_CUTOFF)[0]
            notes.append(
                note(
                    "unread-field",
                    f"dflash_config.{name} is not a key specreg or vLLM reads, and it is a "
                    f"near miss of {field}: did you mean {field}? As written, {field} takes its default "
                    f"and {name} is kept unread",
                    path,
                )
            )
        elif name not in known:
            notes.append(
                note(
                    "unknown-trained-key",
                    f"dflash_config.{name} = {show_value(value, 60)} is a key no vLLM draft class reads and "
                    "specreg has no entry for: if it changed how the draft was trained, the served draft "
                    "differs",
                    path,
                )
            )
    return notes
