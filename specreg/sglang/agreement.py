"""The draft against its verifier as SGLang reads them: the RoPE parameters and head size each one's
class gives SGLang's `get_rope` (sglang/srt/layers/rotary_embedding/factory.py, whose cache key is
head size, rotated dimensions, base, neox style and the whole scaling dict), compared by the vLLM
pre-flight's rule (`specreg.vllm.agreement.compare`: only what both configs state, both values in
each finding). What SGLang reads differs from vLLM's `patch_rope_parameters`, and is data of the
release's rules (specreg/sglang/rules/<version>.json, `rope`), each with the file and lines it was read
from:

- the dict: `rope_scaling`, else `rope_parameters` (transformers' `convert_rope_params_to_dict`, in the
  release SGLang pins, folds the top-level `rope_theta` and a `type` into it); vLLM's legacy names
  (`rotary_emb_base`, `rotary_pct`, `rotary_emb_fraction`) are read by neither;
- `partial_rotary_factor` from the top level only (a share written inside the dict alone is not read);
- the neox style (`rope_is_neox_style`, and for the DFlash-family classes `is_neox_style`), part of
  get_rope's key, which vLLM's draft classes take from the model class;
- the DFlash-family classes' `rope_dim` in the dict: the rotated width, replacing the share;
- `original_max_position_embeddings` for the scaling types whose angles it sets: transformers defaults
  it to `max_position_embeddings`, and the EAGLE-3 class (llama.py) writes a top-level one over it.

The draft side is the config.json the export writes (what SGLang loads); the verifier's is its config
as read by the verifier check (`spec.checks.verifier`), when one ran."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from specreg.vllm.agreement import compare

if TYPE_CHECKING:
    from specreg.normalization.speculator import Finding, Speculator

#: the findings the SGLang plan derives itself, in SGLang's terms, in place of the vLLM pre-flight's
CODES = frozenset({"verifier-rope-mismatch", "verifier-head-dim-mismatch"})


def rope_view(config: Mapping[str, Any], reader: Mapping[str, Any], rope: Mapping[str, Any]) -> dict[str, Any]:
    """The RoPE parameters `config` gives an SGLang class whose reading is `reader` (an entry of the
    rules' `rope.readers`): the dict as transformers leaves it, the top-level names the class reads,
    its neox style. Only what the config states: a class default is not a difference."""
    params = next((config[k] for k in rope["dicts"] if isinstance(config.get(k), Mapping) and config[k]), None)
    view: dict[str, Any] = dict(params) if isinstance(params, Mapping) else {}
    if "type" in view and "rope_type" not in view:
        view["rope_type"] = view.pop("type")
    else:
        view.pop("type", None)
    if "rope_theta" not in view and config.get("rope_theta") is not None:
        view["rope_theta"] = config["rope_theta"]  # folded into the dict by transformers, read from it
    original = "original_max_position_embeddings"
    if view.get("rope_type") in rope["original_max_types"] and config.get("max_position_embeddings") is not None:
        view.setdefault(original, config["max_position_embeddings"])  # transformers' default for these types
    if view and reader.get("original_max_top_level") and config.get(original):
        view[original] = config[original]  # llama.py writes the top-level one into the dict
    for name in rope["top_level"]:  # read from the top level, never from the dict
        view.pop(name, None)
        if config.get(name) is not None:
            view[name] = config[name]
    width = reader.get("rotary_dim")
    if width and width in view:
        view.pop("partial_rotary_factor", None)  # the explicit width replaces the share
    elif width is None:
        for key in {r["rotary_dim"] for r in rope["readers"].values() if r.get("rotary_dim")}:
            view.pop(key, None)  # a width this class does not read
    neox = next((config[n] for n in reader["neox_style"] if config.get(n) is not None), None)
    if neox is not None:
        view["is_neox_style"] = bool(neox)
    return view


def head(
    config: Mapping[str, Any], view: Mapping[str, Any], reader: Mapping[str, Any]
) -> tuple[int | None, int | None]:
    """(head size, rotated dimensions) as the class reads them: head_dim, else hidden_size //
    num_attention_heads; the reader's explicit width, else the head size times the top-level share."""
    from specreg.sources.decoder import head_size

    size = head_size(dict(config))
    if size is None:
        return None, None
    width = reader.get("rotary_dim")
    if width and isinstance(view.get(width), int):
        return size, int(view[width])
    from specreg.vllm.agreement import rotated

    return size, rotated(size, view.get("partial_rotary_factor", 1.0))


def findings(spec: "Speculator", config: Mapping[str, Any], worker: str, rules: Mapping[str, Any]) -> list["Finding"]:
    """The written config.json of a draft SGLang's `worker` class reads against the verifier the check
    read (none when no check ran): `verifier-rope-mismatch`, `verifier-head-dim-mismatch`."""
    facts = spec.checks.verifier if spec.checks is not None else None
    rope = rules.get("rope")
    if facts is None or not facts.body or not config or rope is None:
        return []
    draft_reader, verifier_reader = rope["readers"][worker], rope["readers"]["verifier"]
    d, v = rope_view(config, draft_reader, rope), rope_view(facts.body, verifier_reader, rope)
    (hd, rd), (hv, rv) = head(config, d, draft_reader), head(facts.body, v, verifier_reader)
    widths = {"partial_rotary_factor", *(r["rotary_dim"] for r in rope["readers"].values() if r.get("rotary_dim"))}
    if hd == hv and rd != rv and widths & (set(d) | set(v)):
        # one side's width (a share, or the DFlash classes' rope_dim) rotates another part of the same heads
        d, v = {**d, "rotated dimensions": rd}, {**v, "rotated dimensions": rv}
    return compare(
        d,
        v,
        (hd, rd),
        (hv, rv),
        facts.id,
        engine=f"SGLang {rules['sglang']}",
        rotator=f"SGLang {rules['sglang']}'s get_rope",
    )
