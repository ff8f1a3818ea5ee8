"""The finding codes: stable names, severities and what each one means.

docs/findings.md is generated from `CODES` (``python -m specreg.docs``); a test fails when they drift.
"""

from __future__ import annotations

import attrs

from specreg import facts


def _since(rule: str) -> str:
    return str(facts.since(rule))


def _until(rule: str) -> str:
    """The last known release without the dated rule `rule`."""
    return facts.before(_since(rule))


#: the newest known release, and the releases a conformance group reads ("X.Y")
_NEWEST = facts.known()[-1]
_SELECTOR = facts.tested_by("selector")
_DEPLOYMENT = facts.tested_by("deployment_rules")

SEVERITIES = ("error", "warning", "info")

#: Codes meaning vLLM, given the unmodified file, would serve the draft differently from how it
#: was trained; specreg's draft_config (a materialized directory) serves it as trained.
SERVED_DIFFERENTLY = frozenset(
    {
        "served-causal-mismatch",
        "served-length-mismatch",
        "served-default-mismatch",
        "top-level-model-type",
        "proposal-method-not-first",
        "served-layer-ids-mismatch",
        "config-byte-order-mark",
    }
)


@attrs.frozen
class Code:
    code: str
    severity: str
    title: str
    explains: str
    #: what to do, carried by every finding of this code whose emitter gives no more specific fix
    fix: str | None = None


#: the one fix for every SERVED_DIFFERENTLY code: give vLLM specreg's draft_config instead of the file
SERVE_AS_TRAINED = (
    "serve specreg's draft_config, not the unmodified file: `specreg serve DRAFT`, or "
    "`specreg materialize DRAFT DIR` and serve DIR, or install specreg beside vLLM (its "
    "plugin gives vLLM the draft_config when it loads the draft)"
)


CODES: dict[str, Code] = {
    c.code: c
    for c in [
        # -- the unmodified file would be served differently from how it was trained ----------
        Code(
            "served-causal-mismatch",
            "warning",
            "vLLM would serve a draft layer with a different attention mask",
            "The targeted vLLM version, given the unmodified file, resolves a layer's causality "
            f"differently from how the draft was trained (e.g. vLLM {_since('dflash_causal_from_sliding_window_non_causal')}-"
            f"{_NEWEST} sets "
            "`dflash_config.causal = not sliding_window_non_causal`, making full-attention DFlash "
            "layers causal; vLLM's DSpark path ignores `sliding_window_non_causal`). specreg's "
            "`draft_config` states the trained mask; serve that, not the unmodified file.",
            fix=SERVE_AS_TRAINED,
        ),
        Code(
            "served-length-mismatch",
            "warning",
            "vLLM would read sample_from_anchor differently",
            "The targeted vLLM version defaults or forces `sample_from_anchor` differently from the "
            "trainer (vLLM's mapping defaults a missing value to false for every DFlash-family "
            f"algorithm, and vLLM {_since('algorithm_dspark')}-{_until('sample_from_anchor_mapped')} always serve DSpark "
            "with a bonus anchor), so the draft "
            "block would be misaligned.",
            fix=SERVE_AS_TRAINED,
        ),
        Code(
            "served-default-mismatch",
            "warning",
            "trainer and vLLM defaults differ for a missing field",
            "A field is missing and speculators (the trainer) and vLLM assume different defaults. "
            "specreg applies the trainer's default and writes it explicitly.",
            fix=SERVE_AS_TRAINED,
        ),
        Code(
            "served-layer-ids-mismatch",
            "warning",
            "vLLM would read the aux layer ids one layer off",
            "A ModelOpt-style `eagle_config.eagle_aux_hidden_state_layer_ids` counts the output of layer t; "
            "vLLM reads those ids as the hidden state entering layer i, one layer early. specreg's "
            "`draft_config` writes the trained ids (t + 1) at the top level, where vLLM reads them first.",
            fix=SERVE_AS_TRAINED,
        ),
        Code(
            "top-level-model-type",
            "warning",
            "a top-level model_type disables vLLM's speculators mapping",
            "vLLM picks its config class from a top-level `model_type` before it looks for "
            "`speculators_config`, so the file is loaded as a plain model and none of the mapping "
            "applies. Remove the key, or serve specreg's `draft_config`.",
            fix=SERVE_AS_TRAINED,
        ),
        # -- envelope ----------------------------------------------------------------------------
        Code(
            "verifier-missing",
            "warning",
            "no verifier named",
            "`speculators_config.verifier.name_or_path` is missing, null or an empty string (a checkpoint "
            "whose verifier is named on the command line); the pair cannot be checked from the file alone, "
            "and vLLM's automatic path "
            "needs it. Pass the verifier explicitly (`vllm serve VERIFIER --speculative-config ...`).",
            fix="name the verifier: `--verifier ORG/NAME` (or `vllm serve VERIFIER --speculative-config ...`)",
        ),
        Code(
            "config-byte-order-mark",
            "warning",
            "vLLM cannot read the unmodified config.json",
            "The file begins with a UTF-8 byte-order mark. specreg reads it, but transformers' config reader "
            "(`json.loads` of the text, which refuses a BOM) does not, so vLLM fails to load the unmodified "
            "directory. The directory `specreg materialize` writes has no BOM.",
        ),
        Code(
            "verifier-local-path",
            "warning",
            "the verifier is a local path",
            "`speculators_config.verifier.name_or_path` is a training-machine path, not a Hub repo id; "
            f"vLLM {_NEWEST} refuses it on its automatic path. Pass the verifier explicitly.",
            fix="name the verifier: `--verifier ORG/NAME` (or `vllm serve VERIFIER --speculative-config ...`)",
        ),
        Code(
            "proposal-method-not-first",
            "warning",
            "the default proposal method is not the first one",
            "vLLM takes the first entry of `proposal_methods`; speculators uses the one named by "
            "`default_proposal_method`. specreg uses the default one and says so.",
            fix=SERVE_AS_TRAINED,
        ),
        Code(
            "auto-map-ignored",
            "info",
            "auto_map present and ignored",
            "The file points at repository code (`auto_map`). specreg never imports or runs it.",
        ),
        # -- version capabilities ---------------------------------------------------------------
        Code(
            "vllm-unsupported-algorithm",
            "error",
            "the targeted vLLM version cannot serve this algorithm",
            "The algorithm was added to vLLM's speculators path in a later version than the one "
            "targeted (`--vllm`, or the installed vLLM).",
            fix="target a vLLM release that serves the algorithm (the message names the first)",
        ),
        Code(
            "vllm-maps-through-specreg",
            "warning",
            "no vLLM release maps this algorithm itself",
            "The algorithm is registered with `vllm_maps=False`: vLLM's speculators path has no entry for its "
            "type in any release, so vLLM loads the unmodified file only with specreg's plugin active (specreg "
            "installed beside vLLM adds the type when it reads the config). `specreg serve` therefore serves "
            "the directory `specreg materialize` writes, whose config.json vLLM loads without the plugin.",
            fix="serve the materialized directory (`specreg serve DRAFT` writes it), or install specreg beside "
            "vLLM so that its plugin serves the unmodified file",
        ),
        Code(
            "mask-set-by-field",
            "info",
            "a field of the algorithm set layers' masks",
            "The algorithm's registration names fields that set each layer's causality and window beyond the "
            "family's layer_types rule (a variant's mask hook); the plan's attention entries and their provenance "
            "name the field, and the draft_config states the mask those layers were trained with.",
        ),
        Code(
            "vllm-removed-algorithm",
            "error",
            "the targeted vLLM version removed this algorithm",
            "A release after the first one that served the algorithm removed it (a release that refuses P-EAGLE: "
            "its speculators path raises, and parallel drafting is left to DFlash and DSpark). The message "
            "quotes the release's own refusal (read from its wheel by `python -m specreg.facts refresh`) and "
            "names the last release that serves the algorithm.",
            fix="serve the draft with the last vLLM release that serves its algorithm (the message names it)",
        ),
        Code(
            "composite-model-type",
            "error",
            "the draft's model_type is a composite (vision-language) config",
            "transformers builds a vision-language (or audio) config for this `model_type`, with the "
            "language fields under `text_config`; vLLM's draft classes read `vocab_size` and the layer "
            "fields at the top level and fail at startup. The list is read from each transformers "
            "release (`specreg/transformers/facts/`).",
        ),
        Code(
            "unknown-model-type",
            "error",
            "the draft's model_type is unknown to transformers and to vLLM",
            "vLLM builds the draft's config object from its `model_type`, with transformers' "
            "`CONFIG_MAPPING` or vLLM's own `_CONFIG_REGISTRY`; a type neither has (a trainer's own "
            "name such as `dspark`) fails to load. The tables are read from each transformers "
            "release (`specreg/transformers/facts/`) and each vLLM wheel (`specreg/normalization/model_types.py`).",
        ),
        Code(
            "vllm-startup-refusal",
            "error",
            "vLLM refuses this draft at startup",
            "The targeted vLLM version raises while building the drafter for this config (for example "
            "`_raise_if_mrope` in `v1/spec_decode/llm_base_proposer.py`: DFlash and parallel drafting "
            "do not support M-RoPE). docs/semantics.md lists each refusal with the wheel line that "
            "decides it; specreg reports it before any GPU time.",
        ),
        Code(
            "trained-key-not-served",
            "error",
            "a training setting vLLM does not read",
            "The file records a setting of how the draft was trained (a position encoding, a "
            "prefix-visibility rule, an attention mode) that the targeted vLLM's draft classes never "
            "read, so the served draft would differ from the trained one. The keys vLLM does read, "
            "and the trained-side keys that do not change what is served, are tables in "
            "`specreg/sources/native/keys.py` checked against each wheel's code.",
        ),
        Code(
            "unknown-trained-key",
            "warning",
            "a training key neither vLLM nor specreg knows",
            "The file's `dflash_config` holds a key no vLLM draft class reads and specreg's tables "
            "(`specreg/sources/native/keys.py`) do not list; if it changed how the draft was trained, "
            "the served draft differs. Tell specreg what it means (an issue), or check the trainer.",
        ),
        Code(
            "vllm-unsupported-feature",
            "error",
            "the targeted vLLM version cannot serve a trained feature",
            "The draft needs something the targeted vLLM cannot do (a causal DFlash layer before "
            f"{_since('dflash_causal_layers')}, Qwen3 Eagle-3 layers before {_since('eagle_arch_by_model_type')}, `sample_from_anchor` on a DFlash draft that "
            "needs the V2 model runner).",
        ),
        Code(
            "needs-v2-model-runner",
            "info",
            "the draft needs vLLM's V2 model runner (VLLM_USE_V2_MODEL_RUNNER=1)",
            "vLLM serves DFlash-family drafts with both sliding and full-attention layers, and DFlash2's "
            "candidate head, only on its V2 model runner. `specreg serve` sets the variable; "
            "`spec.serve_env`, `llm_kwargs().env` and `materialize --json` carry it.",
            fix="start vLLM with VLLM_USE_V2_MODEL_RUNNER=1 in its environment (`specreg serve` sets it)",
        ),
        Code(
            "unservable-algorithm",
            "error",
            "a known algorithm that vLLM's speculators path cannot serve",
            "The type is recognized (legacy, or not accepted by vLLM's speculators path); the message "
            "says why and what to do instead.",
        ),
        # -- cross-field ------------------------------------------------------------------------
        Code(
            "draft-length-mismatch",
            "error",
            "the draft length disagrees with the trained block",
            "`speculative_tokens` must be `block_size - 1` when `sample_from_anchor` is false and "
            "`block_size` when it is true; a different length misaligns the draft block.",
        ),
        Code(
            "aux-layers-missing",
            "warning",
            "no aux hidden-state layer ids",
            "The file names no aux layer ids, so vLLM picks its own default layers for the verifier. "
            "specreg never guesses them: check that vLLM's default is what the draft was trained on.",
        ),
        # -- pre-flight: the draft against its verifier's config --------------------------------
        Code(
            "verifier-unread",
            "warning",
            "the verifier given could not be read",
            "A verifier was given that is not the one the draft names, so `serve`, `materialize`, `show` and "
            "`specreg.load` check the draft against it, as `check` does; its config.json could not be read "
            "(the Hub unreachable, or offline mode, and no copy in the Hugging Face cache), so the draft "
            "was not checked against it. `check` refuses to go on without it.",
            fix="name a local copy of the verifier (`--verifier LOCAL_DIR`, a directory holding its config.json), "
            "or run `specreg check DRAFT --verifier VERIFIER` once the Hub answers",
        ),
        Code(
            "verifier-layer-out-of-range",
            "error",
            "aux layer ids beyond the verifier's layers",
            "An aux layer id (the hidden state entering layer i) is negative or past the verifier's "
            f"`num_hidden_layers` (vLLM >= {_since('aux_capture_through_last_layer')} also captures the last layer's output as id L; before, "
            "ids go up to L - 1). vLLM would capture fewer hidden states than the draft was trained on.",
        ),
        Code(
            "verifier-hidden-size-mismatch",
            "error",
            "the draft was trained for another hidden size",
            "`target_hidden_size` (or the draft's `hidden_size` when it is unset) differs from the "
            "verifier's `hidden_size`: the fc layer cannot take the verifier's hidden states.",
        ),
        Code(
            "verifier-vocab-too-small",
            "error",
            "the draft vocabulary is larger than the verifier's",
            "`draft_vocab_size` exceeds the verifier's `vocab_size`: the draft was trained for another tokenizer.",
        ),
        Code(
            "draft-vocab-reduced",
            "info",
            "a reduced draft vocabulary",
            "`draft_vocab_size` is smaller than the verifier's vocabulary: the weights must carry the "
            "`d2t` offsets (target = draft + d2t[draft]) and `t2d`; `check_weights` verifies them.",
        ),
        Code(
            "verifier-vocab-mismatch",
            "warning",
            "the draft's embedding vocabulary is not the verifier's",
            "The draft's `vocab_size` differs from the verifier's: token ids from the verifier's "
            "tokenizer may fall outside the draft's embedding. For SGLang, the plan says what SGLang embeds "
            "the draft's tokens with instead (its EAGLE-3 worker replaces the draft's embedding with the "
            "verifier's; its DFlash-family classes use the verifier's embedding and lm_head).",
        ),
        Code(
            "mask-token-out-of-vocab",
            "error",
            "the mask token is outside the verifier's vocabulary",
            "`mask_token_id` (DFlash family) or `pard_token` (P-EAGLE) is not a token id of the verifier.",
        ),
        Code(
            "verifier-no-aux-capture",
            "warning",
            "vLLM cannot capture aux hidden states from this verifier architecture",
            "In the target vLLM release, the class vLLM's model registry serves the verifier's "
            "architecture with does not implement aux hidden-state capture (SupportsEagle3), which "
            "Eagle-3, P-EAGLE and the DFlash family need (read from every known release's registry; "
            "past the newest, the newest's).",
        ),
        Code(
            "verifier-no-layer-zero-capture",
            "error",
            "the verifier's class does not capture aux id 0, the embedding output the draft reads",
            "The draft's aux ids include 0 (a DFlash-family target id -1): the state entering the verifier's "
            "first layer, its embedding output. vLLM captures it only where the verifier's class records an aux "
            "state before its first layer (qwen2.py and llama.py call `_maybe_add_hidden_state(..., "
            "self.start_layer, ...)` before the layer loop); a class that records after each layer, or another "
            "way (the Transformers backend), never gives id 0, and the draft reads other features than trained. "
            "Read from each known release's model code (aux_capture.json's layer_zero); the vLLM plugin refuses "
            "such a pairing at startup.",
            fix="serve a vLLM release whose class for the verifier captures the state entering layer 0, or a "
            "draft trained without layer 0",
        ),
        Code(
            "verifier-rope-mismatch",
            "warning",
            "the draft's RoPE differs from its verifier's",
            "A RoPE parameter both configs state differs (rope_theta, rope_type or a scaling factor of "
            "rope_parameters/rope_scaling, partial_rotary_factor: what vLLM's `get_rope` reads after "
            "`patch_rope_parameters` folds the legacy names in). vLLM rotates the draft's positions with the "
            "draft's own parameters, so the draft and the verifier whose hidden states it reads disagree on the "
            "angle of every position (a dynamic-NTK difference: from original_max_position_embeddings on): the "
            "draft was trained beside another verifier, or its layer config was edited. The message gives both "
            "values. The SGLang plan compares what SGLang's classes read instead (rope_scaling before "
            "rope_parameters, partial_rotary_factor from the top level only, the neox style, the DFlash "
            "classes' rope_dim; `rotated dimensions` where one side's width rotates another share of the same "
            "heads): docs/sglang.md.",
            fix="pair the draft with the verifier it was trained beside",
        ),
        Code(
            "verifier-head-dim-mismatch",
            "warning",
            "the draft's attention head size differs from its verifier's",
            "head_dim (else hidden_size // num_attention_heads) differs between the draft's layer config and "
            "the verifier's: `get_rope` rotates head size x partial_rotary_factor dimensions, so the two rotate "
            "different parts of their heads: a draft trained beside this verifier has its layer shape (the SGLang "
            "plan: as SGLang's draft class reads the written config.json).",
            fix="pair the draft with the verifier it was trained beside",
        ),
        Code(
            "speculative-tokens-beyond-draft",
            "error",
            "num_speculative_tokens is more than the draft produces a step",
            "The K given (`--num-speculative-tokens`, or the one vLLM was given, read by the plugin) is larger "
            "than what the draft can produce: a DFlash-family draft drafts the positions of one trained block "
            "(block_size - 1 after its anchor, block_size with sample_from_anchor) in one pass, and vLLM fills K "
            "mask positions without refusing more, past the block where the draft was never trained. The "
            "plugin refuses it at startup.",
            fix="serve with the draft's trained num_speculative_tokens or less",
        ),
        Code(
            "speculative-tokens-untrained",
            "warning",
            "num_speculative_tokens is more than the draft was trained for",
            "The K given is larger than the draft length its trainer wrote "
            "(speculators_config.proposal_methods[0].speculative_tokens; speculators' Eagle-3 trainer, "
            "scripts/train.py, writes its test-time-training steps there: `speculative_tokens=args.ttt_steps`): "
            "vLLM drafts an Eagle-3 draft one step "
            "after another and fills K parallel slots of a P-EAGLE one, so it drafts past the trained depth, "
            "where the tokens are accepted less often. The message names the trained value.",
            fix="serve with the trained num_speculative_tokens, or measure the acceptance at the K you want",
        ),
        Code(
            "aux-layer-zero",
            "info",
            "the draft reads the verifier's embedding output (aux id 0)",
            "A DFlash-family aux id 0 (native target id -1, as speculators' DSpark converter writes it) is the "
            "state entering the verifier's first layer. Whether vLLM captures it is a fact of the verifier's "
            "class in the targeted release, so the draft alone is accepted and `specreg check` (against the "
            "named or given verifier) and the vLLM plugin (against the verifier served) say whether it is "
            "(`verifier-no-layer-zero-capture`).",
        ),
        Code(
            "draft-tp-invalid",
            "error",
            "a draft tensor parallel size vLLM refuses",
            "vLLM accepts a draft tensor parallel size of 1 or the target's.",
        ),
        # -- pre-flight: weight headers ----------------------------------------------------------
        Code(
            "weights-fc-shape",
            "error",
            "the fc layer is sized for another number of aux layers",
            "`fc.weight` takes target hidden size x number of aux layers inputs; the weights and the "
            "config's aux layer ids (or `target_hidden_size`) disagree.",
        ),
        Code(
            "weights-vocab-map-missing",
            "error",
            "a reduced vocabulary without its mapping table",
            "`draft_vocab_size` is smaller than the verifier's vocabulary but the weights carry no `d2t`.",
        ),
        Code(
            "weights-vocab-map-unexpected",
            "warning",
            "a vocabulary mapping table without a reduced vocabulary",
            "The weights carry `d2t`/`t2d` but `draft_vocab_size` equals the verifier's vocabulary.",
        ),
        Code(
            "weights-vocab-map-shape",
            "error",
            "a vocabulary mapping table of the wrong shape or dtype",
            "`d2t` must be I64 [draft_vocab_size]; `t2d` must be BOOL [verifier vocab_size].",
        ),
        Code(
            "weights-lm-head-rows",
            "error",
            "the lm_head does not have draft_vocab_size rows",
            "`lm_head.weight` rows must equal `draft_vocab_size`.",
        ),
        Code(
            "weights-lm-head-missing",
            "error",
            "a reduced-vocabulary DSpark draft without its own lm_head",
            "A DSpark draft shares the verifier's `lm_head` unless its weights carry one, and a "
            "full-vocabulary head cannot score a reduced `draft_vocab_size`: some vLLM releases refuse "
            "the checkpoint at load, newer ones load it with the verifier's head.",
        ),
        Code(
            "weights-embed-missing",
            "error",
            "a DSpark draft whose input vocabulary outgrows the verifier's, without its own embedding",
            "A DSpark draft shares the verifier's `embed_tokens` unless its weights carry one, and the "
            "verifier's has no rows for ids past its vocabulary: some vLLM releases refuse the "
            "checkpoint at load, newer ones load it with the verifier's embedding.",
        ),
        Code(
            "weights-mask-hidden",
            "error",
            "P-EAGLE's mask_hidden is missing or mis-sized",
            "A P-EAGLE draft carries `mask_hidden`, shaped [..., fc input width].",
        ),
        Code(
            "weights-dspark-heads",
            "error",
            "DSpark's Markov or confidence head does not match the config",
            "The Markov head (`markov_w1`/`markov_w2`, plus `gate_proj` or `joint_proj`) and the "
            "confidence head (`proj`) are sized by `markov_rank`, `markov_head_type`, "
            "`draft_vocab_size`, the hidden size and `confidence_head_with_markov`.",
        ),
        Code(
            "weights-layer-count",
            "error",
            "the weights hold another number of decoder layers",
            "The distinct `layers.N.` in the weights differ from `num_hidden_layers`.",
        ),
        Code(
            "weights-unavailable",
            "warning",
            "no safetensors to check",
            "The draft has no safetensors weights (only .bin, or none), so the weight checks did not run.",
        ),
        # -- the GPU (check --gpu) ------------------------------------------------------------------
        Code(
            "no-attention-backend",
            "error",
            "no attention backend serves the draft's layers on that GPU",
            "vLLM's selector (`CudaPlatform.get_valid_backends`) refuses every backend for the draft's "
            "layers (head size, causal or non-causal, sliding window, dtype and KV-cache dtype) on the "
            "GPU's compute capability, so the draft cannot start there. The finding gives each backend's "
            "reason in vLLM's words, and what would serve it: another KV-cache dtype for the draft, "
            "another dtype, or the GPUs where a backend is valid.",
        ),
        Code(
            "attention-backend-refused",
            "error",
            "the backend given for the draft is refused",
            "The draft's `speculative_config.attention_backend` (`check --attention-backend`) fails that "
            "backend's `validate_configuration` for the draft's layers on the GPU: vLLM raises \"Selected "
            'backend ... is not valid for this configuration" at startup. The fix names the backends vLLM '
            "finds valid.",
        ),
        Code(
            "draft-attention-backend",
            "info",
            "the draft's layers get another backend than the verifier's",
            "vLLM selects the draft's attention backend on its own (its --attention-backend does not reach "
            "the drafter, `_create_draft_vllm_config`); `speculative_config.attention_backend` pins it.",
        ),
        Code(
            "attention-backend",
            "info",
            "the backend vLLM picks for the draft's layers",
            "The first backend in vLLM's priority order for the GPU whose `validate_configuration` "
            "accepts the draft's layers, and why the ones before it were refused.",
        ),
        Code(
            "draft-quantization",
            "info",
            "the draft is loaded with its own quantization config",
            f"vLLM {_DEPLOYMENT[0]}-{_DEPLOYMENT[-1]}'s draft classes build their layers with `get_draft_quant_config`: "
            "the draft's "
            "`quantization_config`, never the verifier's. Reported when either is quantized.",
        ),
        Code(
            "draft-quant-layer-names",
            "error",
            "the draft's quantization config names modules vLLM serves under other names",
            "The draft classes build draft layer i as `layers.{i + start_layer_id}` (the verifier's layer "
            "count) and load its weights by the checkpoint's index, so a quantization config naming "
            "`layers.N` of the draft (an ignore or exclude list) matches no module: the modules it named are "
            "built with another quantization than their weights. vLLM renames a ModelOpt config's "
            f"exclude_modules for DFlash from {_since('dflash_renames_modelopt_exclusions')} and every ModelOpt name from "
            f"{_since('dflash_renames_modelopt_names')}; Eagle-3 classes rename none. "
            "The draft's `fc` runs as `model.fc`, which a compressed-tensors ignore list (whole names) naming "
            "`fc` does not match.",
        ),
        Code(
            "quantization-gpu",
            "error",
            "vLLM refuses the quantization method on this GPU or in this dtype",
            "`VllmConfig._get_quantization_config` raises at startup when the GPU's compute capability is "
            "below the method class's `get_min_capability()`, or the dtype the model runs in (for the draft, "
            "the verifier's) is not one of its `get_supported_act_dtypes()` (`check --gpu`; per version, "
            "read from each wheel).",
        ),
        Code(
            "draft-disables-hybrid-kv",
            "info",
            "the drafter turns vLLM's hybrid KV-cache manager off for this verifier",
            "A verifier with chunked local attention (`attention_chunk_size`) and an Eagle-family drafter "
            "(`use_eagle()`'s methods): `VllmConfig.__post_init__` disables the hybrid KV-cache manager, so "
            "the chunked layers keep KV for the whole sequence, and refuses --enable-hybrid-kv-cache-manager.",
        ),
        Code(
            "kv-cache-groups",
            "error",
            "vLLM cannot group the verifier's and the draft's KV-cache layers",
            "The engine core's `get_kv_cache_groups` raises at startup on the verifier's and the draft's "
            "attention layers together: a page size that neither divides the largest nor can be padded "
            f"({_SELECTOR[0]}-{_until('kv_pads_non_mla')}: a backend that does not index KV by the block stride; "
            f"{_since('kv_pads_non_mla')}+: MLA), a Mamba hybrid's "
            f"state page smaller than the draft's ({_SELECTOR[0]}-{_until('kv_mamba_pads')}), or two sliding windows with the hybrid KV-cache "
            "manager off (specreg.vllm.kv_cache; held to each wheel's function by the conformance tier).",
        ),
        Code(
            "kv-cache-groups-hybrid-off",
            "warning",
            "with the hybrid KV-cache manager off, vLLM cannot group the layers",
            "The layers group with the hybrid KV-cache manager on (the default on CUDA), but with it off "
            "(--disable-hybrid-kv-cache-manager, or a KV connector without HMA support) the sliding-window "
            "layers become full attention that keeps its window, and vLLM raises on two windows.",
        ),
        Code(
            "kv-cache-pages-padded",
            "info",
            "vLLM pads some layers' KV pages to the largest",
            "The layers are not all of one type and a layer's KV page does not divide the largest, so "
            "`unify_kv_cache_spec_page_size` pads it: that share of each of its pages holds nothing.",
        ),
        Code(
            "draft-dtype-differs",
            "info",
            "the draft runs in the verifier's dtype",
            "`SpeculativeConfig` gives the draft's ModelConfig the target's dtype, so a draft saved in "
            "another dtype is cast to the verifier's.",
        ),
        Code(
            "draft-positions-raised",
            "info",
            "vLLM raises the draft's max_position_embeddings to the served length",
            "The draft's `max_position_embeddings` is below the served max_model_len and the targeted vLLM "
            f"raises it (`_maybe_override_draft_max_position_embeddings`: eagle/eagle3 from "
            f"{_since('raises_draft_positions_eagle')}, every method with cache-only RoPE from "
            f"{_since('raises_draft_positions_cache_only_rope')}).",
        ),
        Code(
            "draft-positions-limit",
            "warning",
            "vLLM limits max_model_len to the draft's positions",
            "The draft's `max_position_embeddings` is below the served length and its RoPE type is not one "
            f"vLLM {_NEWEST} resizes, so the server's max_model_len is limited to the draft's.",
        ),
        Code(
            "draft-positions-short",
            "warning",
            "the draft's rotary cache is shorter than the served length",
            "The draft's `max_position_embeddings` is below the served max_model_len and the targeted vLLM "
            "does not raise it for this method: positions past it index out of the draft's rotary cache "
            "(vLLM #48894).",
        ),
        # -- catalog -------------------------------------------------------------------------------
        Code(
            "catalog-pin-mismatch",
            "error",
            "the repository changed under its catalog pin",
            "The catalog entry for this repository is pinned to a config.json with a different sha256 "
            "than the one loaded: the file changed since it was pinned (or the pin is wrong). Its "
            "baselines may not describe this draft. Load the pinned revision, or re-pin the entry "
            "(`specreg catalog pin ID --revision R`) after checking the change.",
            fix="load the pinned revision (ORG/NAME@REVISION), or re-pin the entry after checking the change: `specreg catalog pin ID --revision R`",
        ),
        Code(
            "catalog-other-revision",
            "info",
            "the catalog entry is pinned at another revision",
            "The loaded revision is not the one the catalog entry is pinned to; the content may still "
            "be the same (then no `catalog-pin-mismatch`).",
        ),
        Code(
            "catalog-entry-invalid",
            "warning",
            "the catalog entry for this repository is malformed",
            "The catalog has a file for this repository that does not pass `specreg catalog check`; it "
            "was not attached. The message lists its problems.",
            fix="mend the entry until `specreg catalog check` passes",
        ),
        # -- the Hub ------------------------------------------------------------------------------
        Code(
            "hub-cached-copy",
            "warning",
            "the Hub failed; the cached copy was used",
            "The Hub kept failing (HTTP 429/5xx, a dropped connection or a timeout, after retries with "
            "backoff), and the Hugging Face cache held config.json for the revision asked for: that copy "
            "was used. It may be older than the Hub's current revision.",
        ),
        Code(
            "hub-pinned-copy",
            "warning",
            "the Hub failed; the catalog entry's pinned copy was used",
            "The Hub could not be reached (offline mode, no connection) or kept failing, and the draft is a "
            "pinned catalog entry: its config.json at the pinned revision was used, from huggingface_hub's "
            "cache, else from the snapshot `specreg catalog pin` wrote beside the entry (each only when its "
            "sha256 is the pinned one). The message names the revision and the file. The Hub's default "
            "branch may have moved past the pin.",
        ),
        # -- native formats ------------------------------------------------------------------------
        Code(
            "native-format",
            "info",
            "a native (non-speculators) config",
            "The config was written by another trainer (z-lab DFlash, DeepSpec DSpark, SpecForge / SGLang "
            "/ the EAGLE-3 release) and read through its speculators-format equivalent "
            "(`specreg convert` writes it). Provenance and paths name the native file's fields.",
        ),
        Code(
            "recognized-by-structure",
            "warning",
            "a native config read by its fields, not its class name",
            "The file's `architectures` name a class no layout lists, and its fields are exactly one "
            "layout's (z-lab DFlash: `dflash_config.target_layer_ids`, `mask_token_id`, `block_size`, no other "
            "trainer's fields), as trainers that save z-lab's layout under their own class name write it "
            "(Tencent AngelSlim's `QwenDFlashDraftModel`, NeMo Automodel's `Qwen3DFlashDraftModel`). specreg "
            "reads it as that layout; the config cannot show the class's modules, and a class that builds "
            "others under the same fields is another draft (look-alikes specreg knows are refused by name).",
        ),
        Code(
            "native-draft-length-default",
            "info",
            "the native config has no draft length",
            "Native EAGLE-3 configs do not say how many tokens to draft; specreg assumes 3 (the k vLLM's "
            "Eagle-3 CI measures). Serve with the num_speculative_tokens you want.",
        ),
        Code(
            "invalid-draft-shape",
            "error",
            "vLLM cannot build the draft's layers",
            "A structural check vLLM or its transformers config class makes when loading the draft fails "
            "(hidden size not a multiple of the heads, query heads not a multiple of the key/value heads, "
            "no heads): serving would fail only after the GPU was allocated.",
        ),
        Code(
            "vllm-version-unchecked",
            "warning",
            "the target vLLM is newer than specreg's rules",
            "The target vLLM version is newer than the newest one specreg's rules were checked against; "
            "the plan uses that newest version's rules, which a newer vLLM may have changed.",
            fix="upgrade specreg (`pip install -U specreg`) to rules checked against that vLLM",
        ),
        Code(
            "gpu-facts-unknown",
            "warning",
            "no attention-backend facts for the target vLLM",
            "`--gpu` asks which attention backend vLLM picks for the draft's layers on that GPU; the target "
            "release is older than the oldest whose selector specreg ran, so that, the KV-cache layout and "
            "the quantization methods on the GPU are not known. Everything else is checked.",
            fix="check the GPU on a release with attention facts (`--vllm`), or on the GPU itself",
        ),
        Code(
            "verifier-aux-capture-unknown",
            "warning",
            "whether vLLM captures the verifier's aux hidden states is not known",
            "The target release is older than the oldest release whose model files specreg read for aux "
            "hidden-state capture (`SupportsEagle3`), so whether its class for the verifier can hand aux "
            "hidden states to an Eagle-3 or DFlash draft is not known: neither passed nor refused.",
            fix="check the verifier's class in that vLLM's model file (`SupportsEagle3`), or target a release with facts",
        ),
        Code(
            "vllm-before-facts",
            "warning",
            "the target vLLM is older than specreg's facts",
            "The target vLLM release is older than the oldest release whose facts specreg computed from its "
            "wheel. Nothing is refused or passed on a rule the facts do not hold for it: each rule the plan "
            "asked is named as not known, and the plan is the oldest known release's.",
            fix="check the draft on the oldest release with facts (`--vllm`), or against that vLLM's own code",
        ),
        Code(
            "markov-head-off",
            "info",
            "a DSpark draft without a Markov head",
            "`markov_rank: 0` means the draft has no Markov logit-bias head (speculators and DeepSpec build "
            "none). vLLM builds a zero-width Markov head for it, which adds nothing to the logits.",
        ),
        Code(
            "unread-field",
            "info",
            "a key no reader read is a near miss of a missing field",
            "specreg records every field it reads. A key of the config that nothing read, and that is a near miss "
            "(difflib's ratio >= 0.8) of a field the algorithm or the envelope reads in the same object and "
            "that is missing, is probably that field misspelt: as written, the field takes its default. "
            "Unknown keys stay allowed; keys read anywhere else in the config, and transformers config keys, "
            "are never reported. A config gives at most 20 of these findings, then one counting the rest.",
        ),
        Code(
            "unknown-field",
            "warning",
            "a key no known trainer release writes and nothing reads",
            "Every key of a speculators-format config is accounted for (`specreg show --fields`, "
            "`specreg.normalization.ledger`). This key is read by neither specreg nor the targeted vLLM, is "
            "no transformers config key, and no speculators release whose config classes specreg has read "
            "(`python -m specreg.speculators list`) writes it in that object. When the file's "
            "speculators_version is newer than those releases, a newer trainer wrote it, and it may change how "
            "the draft was trained (a new head, shifted labels) in a way no vLLM release builds; otherwise the "
            "file was edited by hand or written by another tool. The message names the version the file claims. "
            "A native config (z-lab DFlash, DSpark, native EAGLE-3) is accounted for the same way against the "
            "fields its layout's known writers write, read from each trainer's code at a cited commit "
            "(specreg/sources/native/facts/, tests/native_trainer_facts.py: SpecForge, z-lab DFlash, ModelOpt's "
            "export, NeMo Automodel, DeepSpec, AngelSlim): the message names those writers.",
            fix="find out what wrote the field and whether the draft was trained with it; upgrade specreg for "
            "a newer trainer's facts",
        ),
        Code(
            "trainer-field-ignored",
            "warning",
            "a trainer field the engine does not read, at a value that changes the draft",
            "The key is a field a known speculators release writes (its config classes, read by "
            "`python -m specreg.speculators refresh`), at another value than that release's default, and "
            "neither specreg nor the targeted vLLM reads it: vLLM builds the draft as if the field were at "
            "its default, which is not the network that was trained. At its default the field is accounted "
            "for silently (status `trainer`). For a native config, the field is one a known writer of its layout "
            "writes, at another value than every default those writers' code states.",
            fix="serve with an engine release that reads the field, or check that the draft does not depend on it",
        ),
        Code(
            "trainer-default-applied",
            "info",
            "a trainer default was applied",
            "A missing field was filled with the trainer's default; the provenance says which.",
        ),
        # -- SGLang, the second engine (specreg.sglang) ------------------------------------------
        Code(
            "sglang-unservable",
            "error",
            "SGLang cannot serve the draft as trained",
            "The SGLang release specreg targets has no way to serve this draft as it was trained (no class "
            "for the algorithm, a training setting its draft class never reads, a mask its config cannot "
            "express, a head it replaces with the target's); the message says which, in SGLang's terms.",
        ),
        Code(
            "sglang-served-differently",
            "warning",
            "SGLang would serve the unmodified file differently",
            "Given the unmodified config.json, SGLang would refuse it or serve it with other capture layers, "
            "masks, block or draft length than the draft was trained with. The directory `specreg materialize "
            "DRAFT DIR --engine sglang` writes, with the flags `specreg serve DRAFT --engine sglang` prints, "
            "serves it as trained.",
        ),
        Code(
            "sglang-version-unchecked",
            "warning",
            "the installed SGLang is newer than specreg's SGLang rules",
            "The installed SGLang is newer than the newest release specreg's SGLang rules were read from; the "
            "plan uses that newest release's rules, which a newer SGLang may have changed.",
        ),
    ]
}


#: the built-in codes that carry no fix, and why none is given (tests/test_findings.py holds every
#: other code to a fix: its Code's, or the one each emitter passes)
NO_FIX: dict[str, str] = {
    "auto-map-ignored": "nothing to change: specreg and vLLM's draft classes never run that code",
    "trained-key-not-served": "the draft was trained with something no vLLM draft class serves; only retraining changes that",
    "unknown-trained-key": "specreg cannot tell what the key changed in training, so it cannot say what to do",
    "vllm-unsupported-feature": "depends on the feature: the message names the vLLM release that serves it, when one does",
    "unservable-algorithm": "the way out differs per algorithm, and the message gives it",
    "draft-length-mismatch": "the file contradicts itself; which of the two values is wrong only the trainer knows",
    "aux-layers-missing": "the ids are the trainer's to give; specreg never guesses them",
    "draft-vocab-reduced": "nothing to change: a reduced vocabulary is served through the weights' mapping tables",
    "weights-vocab-map-shape": "the checkpoint's tables are broken; only the trainer's export can write them again",
    "draft-attention-backend": "nothing to change: which backend vLLM picks for the draft",
    "attention-backend": "nothing to change: which backend vLLM picks for the draft",
    "draft-quantization": "nothing to change: how vLLM quantizes the draft",
    "draft-disables-hybrid-kv": "nothing in the draft to change: vLLM's own rule for such a verifier with any Eagle-family drafter",
    "kv-cache-pages-padded": "nothing to change: vLLM pads the pages and serves",
    "draft-dtype-differs": "nothing to change: vLLM casts the draft to the verifier's dtype",
    "draft-positions-raised": "nothing to change: vLLM raises the draft's positions itself",
    "catalog-other-revision": "nothing to change: a note that the content may differ from the pinned one",
    "hub-cached-copy": "nothing in the draft to change: the Hub failed, and a later run reads its current revision",
    "hub-pinned-copy": "nothing in the draft to change: the Hub failed, and a later run reads its current revision",
    "native-format": "nothing to change: how the file was read",
    "recognized-by-structure": "the config cannot show the class's modules; the message says what would make it another draft",
    "native-draft-length-default": "the draft length is a serving choice the file never made",
    "invalid-draft-shape": "the file describes layers no class builds; only the trainer's real values mend it",
    "markov-head-off": "nothing to change: a draft trained without a Markov head",
    "trainer-default-applied": "nothing to change: the provenance names the default applied",
    "mask-set-by-field": "nothing to change: the provenance names the field that set each layer's mask",
    "aux-layer-zero": "nothing to change: a note; `specreg check` against the verifier says whether its class captures id 0",
}


#: a plugin's own finding code: "<plugin>/<name>" (built-in codes have no "/")
_PLUGIN_CODE = __import__("re").compile(r"^[a-z0-9][a-z0-9_.-]*/[a-z0-9][a-z0-9-]*\Z")


def register_finding(code: str, severity: str, title: str, explains: str = "") -> Code:
    """Declare a plugin's own finding code, namespaced "<plugin>/<name>" so it can never collide with
    specreg's (or another plugin's); `Plan.find` then accepts it. Registering the same code again with
    the same meaning is a no-op; with another, a RegistryError."""
    from specreg.errors import RegistryError

    if not isinstance(code, str) or not _PLUGIN_CODE.match(code):
        raise RegistryError(
            f"finding code {code!r}: a plugin's code is namespaced, '<plugin>/<name>' in lower case "
            "(e.g. 'myplugin/head-too-wide'); specreg's own codes are listed in docs/findings.md"
        )
    if severity not in SEVERITIES:
        raise RegistryError(f"finding code {code!r}: severity {severity!r} is not one of {', '.join(SEVERITIES)}")
    new = Code(code, severity, title, explains)
    if code in CODES and CODES[code] != new:
        raise RegistryError(f"finding code {code!r} is already registered with another meaning")
    CODES[code] = new
    return new


def code_of(code: str) -> Code:
    """The registered Code (a clear RegistryError, naming how to register one, for an unknown code)."""
    from specreg.errors import RegistryError

    found = CODES.get(code)
    if found is None:
        raise RegistryError(
            f"unknown finding code {code!r}: specreg's codes are in docs/findings.md; a plugin "
            "declares its own first, namespaced: specreg.register_finding('myplugin/name', "
            "'warning', 'what it means')"
        )
    return found
