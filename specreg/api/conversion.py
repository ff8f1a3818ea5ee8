"""`specreg.convert`: the speculators-format twin of a native draft, written beside the verifier it
is for once the draft is checked against it (as `serve` checks it)."""

from __future__ import annotations

import os
from typing import Callable

from specreg.api import load, validation
from specreg.api.serve import NotServable
from specreg.api.verifier import require_verifier_check, served_beside
from specreg.vllm.conversion import check_weight_mode, write_twin
from specreg.vllm.preflight import accept_verifier, against_verifier


def convert(
    source: str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    verifier: str | None = None,
    revision: str | None = None,
    weights: str = "link",
    force: bool = False,
    force_verifier: bool = False,
    skip_verifier_check: bool = False,
    progress: Callable[[str], None] | None = None,
):
    """Write the speculators-format twin of a native draft into `directory` (empty unless force);
    see specreg.vllm.conversion.write_twin. A `verifier` other than the one the draft names is checked
    first, as serve_plan checks it: an error there raises NotServable before anything is written,
    unless force_verifier; a verifier that cannot be read is refused unless skip_verifier_check."""
    check_weight_mode(weights)
    validation.flag("force_verifier", force_verifier)
    validation.flag("skip_verifier_check", skip_verifier_check)
    spec = load(source, revision=revision, verifier=verifier, check_verifier=False)
    spec = require_verifier_check(against_verifier(spec, verifier), skip_verifier_check)
    mismatch = [f for f in (spec.checks.found if spec.checks is not None else ()) if f.severity == "error"]
    if mismatch and not force_verifier:
        raise NotServable(
            f"does not match the verifier {verifier} (see the errors above): its twin would not be served as "
            f"trained beside it; name the verifier it was trained with, or pass --force-verifier to write the "
            f"twin for {verifier} anyway: nothing written",
            findings=mismatch,
            source=str(source),
        )
    if force_verifier:
        spec = accept_verifier(spec)
    say = progress or (lambda _msg: None)
    checked = spec.checks.found if spec.checks is not None else ()
    for f in spec.findings:  # what the verifier check said (its overridden errors) or why it did not run
        if f.severity == "warning" and (f in checked or f.code == "verifier-unread"):
            say(f"warning: {f.code}: {f.message}")
    return write_twin(
        spec,
        directory,
        source=str(source),
        verifier=verifier,
        weights=weights,
        force=force,
        progress=progress,
        served_beside=served_beside(spec, verifier),
    )
