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

The vocabulary as SGLang shares it (the rules' `vocab`): the DFlash-family classes embed and score
with the verifier's tables; the EAGLE-3 worker replaces the draft's embedding with the verifier's
(`set_embed`) unless `target_hidden_size` differs from `hidden_size`, where vLLM keeps a draft's own
loaded embedding unless it equals the verifier's. A draft `vocab_size` other than the verifier's is
`verifier-vocab-mismatch` in those terms. `draft_vocab_size` against the verifier is the verifier
check's (`verifier-vocab-too-small`, an error the plan carries) and, against the draft's own
`vocab_size`, the export's refusal for the DFlash-family classes.

The maximum positions need no finding: SGLang builds the draft's model config with the served
length (`context_length=` the target's context_len, sglang/srt/speculative/eagle_worker_v2.py:229,
draft_worker_common.py:100) and refuses to start when it exceeds the draft's
(sglang/srt/configs/model_config.py:1291-1320, a ValueError unless
SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1, which raises the draft's max_position_embeddings to it).

The draft side is the config.json the export writes (what SGLang loads); the verifier's is its config
as read by the verifier check (`spec.checks.verifier`), when one ran."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Mapping

from specreg.vllm.agreement import compare

if TYPE_CHECKING:
    from specreg.normalization.speculator import Finding, Speculator

#: the findings the SGLang plan derives itself, in SGLang's terms, in place of the vLLM pre-flight's
CODES = frozenset({"verifier-rope-mismatch", "verifier-head-dim-mismatch", "verifier-vocab-mismatch"})


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
    read (none when no check ran): `verifier-rope-mismatch`, `verifier-head-dim-mismatch`,
    `verifier-vocab-mismatch`."""
    facts = spec.checks.verifier if spec.checks is not None else None
    rope = rules.get("rope")
    if facts is None or not facts.body or not config or rope is None:
        return []
    return [*_rope(config, worker, facts, rope, rules), *vocabulary(config, worker, facts, rules)]


def vocabulary(config: Mapping[str, Any], worker: str, facts: Any, rules: Mapping[str, Any]) -> list["Finding"]:
    """The draft's embedding vocabulary (`vocab_size`) against the verifier's, as the rules' `vocab`
    says SGLang's `worker` shares the embedding: `verifier-vocab-mismatch` with both sizes and what
    SGLang embeds the draft's tokens with instead."""
    from specreg.normalization.speculator import Finding

    rule = rules.get("vocab", {}).get(worker)
    mine, theirs = config.get("vocab_size"), facts.vocab_size
    if rule is None or not isinstance(mine, int) or not isinstance(theirs, int) or mine == theirs:
        return []
    engine, cls = f"SGLang {rules['sglang']}", config["architectures"][0]
    kept = rule.get("own_embedding_kept")
    target_hidden = config.get(kept) if kept else None
    own_head = config.get("draft_vocab_size") is not None or bool(config.get("tie_word_embeddings"))
    if own_head and target_hidden is not None and target_hidden != config.get("hidden_size"):
        # set_embed returns without replacing the draft's table (llama.py:912-916); a draft without a head
        # of its own gets set_embed_and_head instead, which always replaces both (llama.py:895-899)
        cost = (
            f"{engine}'s {cls} keeps the draft's own embedding ({kept} {target_hidden} is not its hidden_size), "
            f"and the verifier's token ids at or past {mine} fall outside it"
        )
    elif kept:
        # init_lm_head: set_embed(the target's embedding) (eagle_worker_v2.py:352-363, llama.py:910-918)
        cost = (
            f"{engine}'s {cls} replaces the draft's {mine}-row embedding with {facts.id}'s {theirs}-row one "
            "without a word, so every drafted token is embedded with a table the draft was not trained with "
            "(vLLM keeps a draft's own loaded embedding)"
        )
    else:
        # the DFlash family has no tables of its own (dflash_worker_v2.py:2490-2493, dspark.py:550-555)
        cost = (
            f"{engine}'s {cls} embeds and scores the draft's block with {facts.id}'s {theirs}-token embedding "
            f"and lm_head: the draft was trained against a {mine}-token verifier"
        )
    return [
        Finding.of(
            "verifier-vocab-mismatch",
            f"the draft's vocab_size is {mine}, {facts.id}'s {theirs}: {cost} ({rule['from']})",
            "$.vocab_size",
            fix="serve the draft with the verifier it was trained against (the one whose vocabulary it has)",
        )
    ]


def _rope(config: Mapping[str, Any], worker: str, facts: Any, rope: Mapping[str, Any], rules) -> list["Finding"]:
    """RoPE and head size as the two classes read them, by the vLLM pre-flight's `compare`."""
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
