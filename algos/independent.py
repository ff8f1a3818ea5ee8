"""Independent: a standalone small model used as the draft (speculators <= 0.4)."""

from specreg.normalization.algorithms import register_speculator

WHY = (
    "`independent` is a legacy speculators type (<= 0.4) and vLLM's speculators path never mapped it: "
    "the file is the draft model's own Hugging Face config. Serve it as an ordinary draft model: "
    "--speculative-config '{\"method\": \"draft_model\", \"model\": DRAFT, \"num_speculative_tokens\": K}'."
)


@register_speculator("independent", unservable=WHY)
def independent(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
