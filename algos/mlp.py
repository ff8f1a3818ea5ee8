"""MLP: the legacy speculators `mlp` type (speculators <= 0.4)."""

from specreg.normalization.algorithms import register_speculator

WHY = (
    "`mlp` is a legacy speculators type (<= 0.4) whose class never produced a loadable checkpoint, and "
    "vLLM's speculators path never mapped it. vLLM's own MLP speculator (method \"mlp_speculator\") "
    "uses a different config format."
)


@register_speculator("mlp", unservable=WHY)
def mlp(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
