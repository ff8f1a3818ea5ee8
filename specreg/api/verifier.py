"""The verifier a draft is served beside when it is not the one the draft names: a check of the pair
that cannot run (the verifier's config unreadable) refuses unless waived, and what specreg.json
records of that verifier and of what the user overrode."""

from __future__ import annotations

from typing import Any

import attrs

from specreg.errors import SpecregError
from specreg.normalization.speculator import Speculator


#: the waiver of a verifier check that cannot run, as the commands and the API name it
SKIP_CHECK = "--skip-verifier-check (skip_verifier_check=True in Python)"


def require_verifier_check(spec: Speculator, skip_verifier_check: bool) -> Speculator:
    """A verifier given to serve beside whose config could not be read (a `verifier-unread` finding:
    offline, the Hub down) is a check the user asked for that cannot run: refused, unless waived with
    skip_verifier_check (then the warning says the draft is served unchecked)."""
    unread = [f for f in spec.findings if f.code == "verifier-unread"]
    if not unread:
        return spec
    if not skip_verifier_check:
        raise SpecregError(
            f"{unread[0].message}; nothing written: give a verifier this machine can read, or pass "
            f"{SKIP_CHECK} to serve the draft beside it unchecked",
            source=spec.origin.source if spec.origin else None,
        )
    waived = " (served unchecked: --skip-verifier-check)"
    return attrs.evolve(
        spec,
        findings=tuple(
            attrs.evolve(f, message=f.message + waived) if f in unread and not f.message.endswith(waived) else f
            for f in spec.findings
        ),
    )


def served_beside(spec: Speculator, verifier: str | None) -> dict[str, Any] | None:
    """What specreg.json records of a verifier other than the one the draft names that it is written
    to be served beside: which, whether the draft was checked against it, and the errors of that check
    the user overrode with --force-verifier (preflight.accept_verifier made them warnings). None for
    the verifier the draft names."""
    from specreg.vllm.preflight import trained_verifier

    if not verifier or verifier == trained_verifier(spec):
        return None
    checks = spec.checks
    checked = checks is not None and checks.verifier is not None and checks.verifier.id == verifier
    forced = " (served anyway: --force-verifier)"  # preflight.accept_verifier's mark on what it made a warning
    return {
        "verifier": verifier,
        "checked": checked,
        "overridden": sorted({f.code for f in checks.found if f.message.endswith(forced)}) if checked else [],
    }
