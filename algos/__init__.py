"""specreg's built-in algorithms: one module per speculators_model_type, named after it (the folder
is listed to find them; see specreg.normalization.algorithms), and `REFUSED`, the types specreg
recognizes but vLLM's speculators path cannot serve, each with the reason its finding gives.

Installed as `specreg.algos` (pyproject maps this folder into the package). Each module holds one
function decorated with `specreg.register_speculator`, whose docstring tables the fields it reads.
"""

from specreg.normalization.capabilities import NEWEST_KNOWN, short


def _accepted() -> str:
    """ "(vLLM X accepts a, b and c)": the types the newest known release's speculators path maps, read from
    its facts (its algorithm_* rules), not listed here, where a new algorithm or release would leave it stale."""
    from specreg import facts

    rules = facts.release_rules(facts.known()[-1])
    names = sorted(
        r.removeprefix("algorithm_") for r, held in rules.items() if r.startswith("algorithm_") and held is True
    )
    listed = f"{', '.join(names[:-1])} and {names[-1]}" if len(names) > 1 else "".join(names)
    return f"(vLLM {short(NEWEST_KNOWN)} accepts {listed})"


_ACCEPTED = _accepted()

#: speculators_model_type -> why vLLM cannot serve it (the unservable-algorithm finding's message).
#: Each is registered with `refused` as its function, like an algorithm module's, on first use.
REFUSED = {
    # EAGLE-1 / HASS (speculators <= 0.4)
    "eagle": (
        "`eagle` (EAGLE-1/HASS) is a legacy speculators type, removed in speculators 0.5, and vLLM's "
        "speculators path never mapped it. Retrain or convert the draft as eagle3, or serve an original "
        'EAGLE checkpoint with --speculative-config \'{"method": "eagle", "model": ...}\'.'
    ),
    # a standalone small model used as the draft (speculators <= 0.4)
    "independent": (
        "`independent` is a legacy speculators type (<= 0.4) and vLLM's speculators path never mapped it: "
        "the file is the draft model's own Hugging Face config. Serve it as an ordinary draft model: "
        '--speculative-config \'{"method": "draft_model", "model": DRAFT, "num_speculative_tokens": K}\'.'
    ),
    "mlp": (
        "`mlp` is a legacy speculators type (<= 0.4) whose class never produced a loadable checkpoint, and "
        "vLLM's speculators path never mapped it. vLLM's own MLP speculator (method \"mlp_speculator\") "
        "uses a different config format."
    ),
    # the verifier's own multi-token-prediction layers, packaged by speculators 0.9
    "mtp": (
        f"speculators 0.9 writes `mtp` configs, but vLLM's speculators path has no `mtp` mapping {_ACCEPTED}. "
        "MTP layers are served from the verifier's own checkpoint: vllm serve VERIFIER --speculative-config "
        '\'{"method": "mtp", "num_speculative_tokens": K}\'.'
    ),
    # a DFlash-style draft with low-rank Jacobi refinement passes (speculators 0.9)
    "xpress": (
        f"speculators 0.9 writes `xpress` configs, but vLLM's speculators path has no `xpress` mapping {_ACCEPTED}. "
        'vLLM serves XPress drafts as method "dflash" only from their native checkpoint format (e.g. '
        "UIUC-SSAIL/Qwen3-8B-XPress-b16)."
    ),
}


def refused(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
