"""XPress: a DFlash-style draft with low-rank Jacobi refinement passes (speculators 0.9)."""

from specreg.normalization.algorithms import register_speculator

WHY = (
    "speculators 0.9 writes `xpress` configs, but vLLM's speculators path has no `xpress` mapping "
    "(vLLM 0.33 accepts eagle3, peagle, dflash, dflash2 and dspark). vLLM serves XPress drafts as "
    "method \"dflash\" only from their native checkpoint format (e.g. UIUC-SSAIL/Qwen3-8B-XPress-b16)."
)


@register_speculator("xpress", unservable=WHY)
def xpress(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
