"""MTP: the verifier's own multi-token-prediction layers, packaged by speculators 0.9."""

from specreg.normalization.algorithms import register_speculator

WHY = (
    "speculators 0.9 writes `mtp` configs, but vLLM's speculators path has no `mtp` mapping "
    "(vLLM 0.33 accepts eagle3, peagle, dflash, dflash2 and dspark). MTP layers are served from the "
    "verifier's own checkpoint: vllm serve VERIFIER --speculative-config "
    "'{\"method\": \"mtp\", \"num_speculative_tokens\": K}'."
)


@register_speculator("mtp", unservable=WHY)
def mtp(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
