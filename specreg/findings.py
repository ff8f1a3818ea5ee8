"""The finding codes: stable names, severities and what each one means.

docs/findings.md is generated from `CODES` (``python -m specreg.docs``); a test fails when they drift.
"""

from __future__ import annotations

import attrs

SEVERITIES = ("error", "warning", "info")

#: Codes meaning vLLM, given the unmodified file, would serve the draft differently from how it
#: was trained; specreg's draft_config (a materialized directory) serves it as trained.
SERVED_DIFFERENTLY = frozenset(
    {"served-causal-mismatch", "served-length-mismatch", "served-default-mismatch", "top-level-model-type",
     "proposal-method-not-first"}
)


@attrs.frozen
class Code:
    code: str
    severity: str
    title: str
    explains: str


CODES: dict[str, Code] = {
    c.code: c
    for c in [
        # -- the unmodified file would be served differently from how it was trained ----------
        Code(
            "served-causal-mismatch",
            "warning",
            "vLLM would serve a draft layer with a different attention mask",
            "The targeted vLLM version, given the unmodified file, resolves a layer's causality "
            "differently from how the draft was trained (e.g. vLLM 0.26-0.33 sets "
            "`dflash_config.causal = not sliding_window_non_causal`, making full-attention DFlash "
            "layers causal; vLLM's DSpark path ignores `sliding_window_non_causal`). specreg's "
            "`draft_config` states the trained mask; serve that, not the unmodified file.",
        ),
        Code(
            "served-length-mismatch",
            "warning",
            "vLLM would read sample_from_anchor differently",
            "The targeted vLLM version defaults or forces `sample_from_anchor` differently from the "
            "trainer (vLLM's mapping defaults a missing value to false for every DFlash-family "
            "algorithm, and vLLM 0.25-0.26 always serve DSpark with a bonus anchor), so the draft "
            "block would be misaligned.",
        ),
        Code(
            "served-default-mismatch",
            "warning",
            "trainer and vLLM defaults differ for a missing field",
            "A field is missing and speculators (the trainer) and vLLM assume different defaults. "
            "specreg applies the trainer's default and writes it explicitly.",
        ),
        Code(
            "top-level-model-type",
            "warning",
            "a top-level model_type disables vLLM's speculators mapping",
            "vLLM picks its config class from a top-level `model_type` before it looks for "
            "`speculators_config`, so the file is loaded as a plain model and none of the mapping "
            "applies. Remove the key, or serve specreg's `draft_config`.",
        ),
        # -- envelope ----------------------------------------------------------------------------
        Code(
            "verifier-missing",
            "warning",
            "no verifier named",
            "`speculators_config.verifier.name_or_path` is missing or null; vLLM's automatic path "
            "needs it. Pass the verifier explicitly (`vllm serve VERIFIER --speculative-config ...`).",
        ),
        Code(
            "verifier-local-path",
            "warning",
            "the verifier is a local path",
            "`speculators_config.verifier.name_or_path` is a training-machine path, not a Hub repo id; "
            "vLLM 0.33 refuses it on its automatic path. Pass the verifier explicitly.",
        ),
        Code(
            "proposal-method-not-first",
            "warning",
            "the default proposal method is not the first one",
            "vLLM takes the first entry of `proposal_methods`; speculators uses the one named by "
            "`default_proposal_method`. specreg uses the default one and says so.",
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
        ),
        Code(
            "vllm-unsupported-feature",
            "error",
            "the targeted vLLM version cannot serve a trained feature",
            "The draft needs something the targeted vLLM cannot do (a causal DFlash layer before "
            "0.23, Qwen3 Eagle-3 layers before 0.24, `sample_from_anchor` on a DFlash draft that "
            "needs the V2 model runner).",
        ),
        Code(
            "needs-v2-model-runner",
            "info",
            "mixed sliding/full attention needs VLLM_USE_V2_MODEL_RUNNER=1",
            "vLLM serves DFlash drafts with both sliding and full-attention layers only on the V2 "
            "model runner; `specreg serve` sets the variable.",
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
        # -- catalog -------------------------------------------------------------------------------
        Code(
            "catalog-pin-mismatch",
            "error",
            "the repository changed under its catalog pin",
            "The catalog entry for this repository is pinned to a config.json with a different sha256 "
            "than the one loaded: the file changed since it was pinned (or the pin is wrong). Its "
            "baselines may not describe this draft. Load the pinned revision, or re-pin the entry "
            "(`specreg catalog pin ID --revision R`) after checking the change.",
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
        ),
        Code(
            "trainer-default-applied",
            "info",
            "a trainer default was applied",
            "A missing field was filled with the trainer's default; the provenance says which.",
        ),
    ]
}

