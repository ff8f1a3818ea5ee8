"""EAGLE-1 / HASS: the legacy speculators `eagle` type (speculators <= 0.4)."""

from specreg.normalization.algorithms import register_speculator

WHY = (
    "`eagle` (EAGLE-1/HASS) is a legacy speculators type, removed in speculators 0.5, and vLLM's "
    "speculators path never mapped it. Retrain or convert the draft as eagle3, or serve an original "
    "EAGLE checkpoint with --speculative-config '{\"method\": \"eagle\", \"model\": ...}'."
)


@register_speculator("eagle", unservable=WHY)
def eagle(cfg, ctx):
    """Recognized, not served by vLLM's speculators path.

    | field | type | required / default | why |
    |---|---|---|---|
    """
    return None
