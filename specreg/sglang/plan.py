"""`specreg.sglang_plan(source)`: load a draft (specreg.load) and export it for SGLang."""

from __future__ import annotations

import os
from pathlib import Path

from specreg.api import load
from specreg.sglang.export import SGLangPlan, export


def sglang_plan(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    sglang: str | None = None,
    verifier: str | None = None,
    check_verifier: bool | None = None,
    check_weights: bool = True,
    force_verifier: bool = False,
    skip_verifier_check: bool = False,
) -> SGLangPlan:
    """The draft at `source` as SGLang `sglang` (the newest release specreg knows when None) serves it as
    trained: `.config` (config.json), `.argv(DIR)`, `.findings`, `.materialize(DIR)`, `.to_dict()`.

    check_weights: read the checkpoint's tensor names (safetensors headers only), so a DFlash/DSpark
    head SGLang would skip is refused; check_verifier: read the verifier's config, whose layer count
    and class decide what SGLang guesses for an unmodified file; by default (None) a `verifier` other
    than the one the draft names is checked (specreg.load): its errors refuse the plan, unless
    force_verifier makes them warnings; a verifier that cannot be read refuses it, unless
    skip_verifier_check."""
    from specreg.api.verifier import require_verifier_check
    from specreg.vllm import preflight

    spec = load(source, revision=revision, verifier=verifier, check_verifier=check_verifier)
    spec = require_verifier_check(spec, skip_verifier_check)
    if force_verifier:
        spec = preflight.accept_verifier(spec)
    names = None
    if check_weights and spec.origin is not None:
        if spec.origin.repo_id:
            found = preflight.hub_weights(
                spec.origin.repo_id, spec.origin.commit or spec.origin.revision, source=spec.origin.source
            )
        elif spec.origin.path:
            found = preflight.local_weights(Path(spec.origin.path).parent)
        else:
            found = None
        names = tuple(found[0]) if found else None
    facts = spec.checks.verifier if spec.checks is not None else None
    return export(
        spec,
        sglang=sglang,
        tensor_names=names,
        target_layers=facts.num_hidden_layers if facts else None,
        target_architecture=facts.architectures[0] if facts and facts.architectures else None,
    )
