"""The public operations, composed from the stages in one place: `load()` is fetch (sources) ->
normalize (normalization) -> attach the catalog entry (entries) -> pre-flight checks (vllm);
`normalize()` and `convert()` are the same stages for a config already in hand and for writing a
speculators-format twin. What each command prints is a function of its own module here:
`serve_plan` and `materialize` (serve.py), `check` (check.py), the catalog operations (catalog.py).
No stage imports this package or a later one (tests/test_architecture.py); docs/api.md documents it."""

from __future__ import annotations

import functools
import os
from typing import Any

from packaging.version import Version

from specreg.errors import ConfigError, HubError, SpecregError, with_article
from specreg.normalization import core, speculator
from specreg.normalization.speculator import Speculator
from specreg.sources import native
from specreg.sources.files import read_source


def _materialize(spec: Speculator, *args: Any, **kwargs: Any) -> Any:
    """Speculator.materialize's writer: the vllm stage's, imported on the first write (a command that
    writes nothing does not import it)."""
    from specreg.vllm.materialize import materialize

    return materialize(spec, *args, **kwargs)


speculator.WRITERS.setdefault("materialize", _materialize)


@functools.wraps(core.normalize)
def normalize(config: Any, *args: Any, **kwargs: Any) -> Speculator:
    # the stage itself (this module makes Speculator.materialize work), for a config that holds only
    # what a JSON file can: the file reader refuses NaN, infinity and other types, and so does this
    from specreg.api import validation

    validation.check_config(config, source=kwargs.get("source"))
    return core.normalize(config, *args, **kwargs)


def load(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    vllm: str | Version | None = None,
    check_verifier: bool | None = None,
    check_weights: bool = False,
    verifier: str | None = None,
) -> Speculator:
    """Read a draft's config.json and normalize it for one vLLM version.

    source: a local directory holding config.json, a path to a config file, "org/name" or
    "org/name@revision" on the Hugging Face Hub (config.json only is fetched, through
    huggingface_hub's cache; a cached commit-hash revision makes no request).

    check_verifier: read the verifier's config.json (`verifier`, else the one the config names) and
    check the draft against it; check_weights: read the draft's safetensors headers (never the
    weights) and check them. Their findings join `findings`; `checks` holds what was read. By default
    (None) a `verifier` other than the one the draft names is checked (as `specreg check` does it,
    weights aside): the draft will run beside it; False checks nothing.
    """
    from specreg.api import validation

    text = validation.source(source)
    revision, verifier = validation.text("revision", revision), validation.text("verifier", verifier)
    validation.version(vllm)
    if check_verifier is not None:  # None: check a verifier other than the draft's own
        validation.flag("check_verifier", check_verifier)
    validation.flag("check_weights", check_weights)
    given = verifier
    try:
        read = read_source(text, revision)
    except HubError as exc:
        from specreg.entries.lookup import pinned_copy

        read = pinned_copy(exc, text, revision)  # a pinned entry's copy stands in for an unreachable Hub
        if read is None:
            raise _with_catalog_help(exc, text, revision) from None
    origin = read.origin
    entry = invalid = None
    if origin.repo_id:
        entry, invalid = _catalog_entry(origin.repo_id)
        if verifier is None and entry is not None and native.detect(read.config, source=text) is not None:
            verifier = entry.verifier.id  # native formats name no verifier: the catalog's
    try:
        spec = core.normalize(
            read.config, vllm=vllm, source=text, origin=origin, verifier=verifier, manifest=read.manifest
        )
    except ConfigError as exc:
        raise _in_the_file(exc, text, origin) from None
    if origin.repo_id:
        spec = attach_catalog(spec, entry, invalid, stale=read.stale, pinned=read.pinned)
    if check_verifier or check_weights:
        from specreg.vllm.preflight import preflight

        spec = preflight(spec, verifier=verifier, check_verifier=bool(check_verifier), check_weights=check_weights)
    elif check_verifier is None and given:  # no verifier given: nothing to check, nothing to import
        from specreg.vllm.preflight import against_verifier

        spec = against_verifier(spec, given)
    return spec


def _in_the_file(exc: ConfigError, text: str, origin) -> ConfigError:
    """A problem at a JSON path of a local directory's config.json, said of the file (the line a user
    reads names what to open); a problem with a flag or the source keeps the source as given."""
    import copy

    label = origin.file_label()
    if label == text or exc.source != text or not all(p.path.startswith("$") for p in exc.problems):
        return exc
    named = copy.copy(exc)
    named.source = label
    named.args = (named.line(),)
    return named


def _with_catalog_help(exc: HubError, text: str, revision: str | None) -> HubError:
    """A Hub failure for a catalog id, with what the catalog knows and how to go on without the Hub.
    Only for a failure to reach the Hub (offline, a connection or the Hub failing): a refusal
    (no such repo, gated, no such revision) is the answer, not an outage. A repo the Hub does not
    have, or cannot be asked for, whose id is close to a catalog id gets that id ("did you mean")."""
    from specreg.errors import (
        FileNotFoundOnHubError,
        GatedRepoError,
        OfflineError,
        RepoNotFoundError,
        RevisionNotFoundError,
    )
    from specreg.sources import hub
    from specreg.sources.files import split_source

    if isinstance(exc, (GatedRepoError, RevisionNotFoundError, FileNotFoundOnHubError)):
        return exc  # the repository exists
    try:
        repo_id, _ = split_source(text, revision)
    except SpecregError:
        return exc
    entry, _ = _catalog_entry(repo_id)
    if entry is None:
        # no such repo, or none could be asked for: a typo is likely; a Hub failing for a repo is not one
        return _with_closest_id(exc, repo_id) if isinstance(exc, (RepoNotFoundError, OfflineError)) else exc
    if isinstance(exc, RepoNotFoundError):
        return exc
    hints = (
        ", ".join(
            f"{k}={v}"
            for k, v in (
                ("k", entry.serving.k),
                ("tensor_parallel_size", entry.serving.tensor_parallel_size),
                ("max_model_len", entry.serving.max_model_len),
            )
            if v is not None
        )
        if entry.serving
        else ""
    )
    known = (
        f"{entry.id} is in specreg's catalog: {with_article(entry.algorithm)} draft for {entry.verifier.id}"
        + (f", pinned at {entry.revision}" if entry.revision else "")
        + (f"; serving hints {hints}" if hints else "")
        + f". Without the Hub: `specreg catalog show {entry.id}` works offline; copy the repository where "
        f"the Hub is reachable (`hf download {entry.id}`) and run `specreg show DIR`, or "
        + (
            "put it in the Hugging Face cache (offline mode is on)"
            if hub.offline()
            else "set HF_HUB_OFFLINE=1 with it in the Hugging Face cache"
        )
    )
    out = type(exc)(
        f"{exc.message}. {known}", source=exc.source, transient=exc.transient, cache_fallback=exc.cache_fallback
    )
    return out


def _with_closest_id(exc: HubError, repo_id: str) -> HubError:
    """A Hub failure for an id the catalog lacks, with the catalog id it most likely meant."""
    from specreg.entries.lookup import closest_id

    close = closest_id(repo_id)
    if close is None:
        return exc
    return type(exc)(
        f"{exc.message} (did you mean {close}? It is in specreg's catalog)",
        source=exc.source,
        transient=exc.transient,
        cache_fallback=exc.cache_fallback,
    )


def _catalog_entry(repo_id: str):
    """(the catalog entry for a repo or None, a finding when its file is malformed or None). Reads
    only that entry's file (no scan of the catalog)."""
    from specreg import entries
    from specreg.normalization.speculator import Finding

    try:
        return entries.lookup(repo_id), None
    except entries.CatalogError as exc:
        return None, Finding.of("catalog-entry-invalid", "; ".join(f"{p.path}: {p.message}" for _, p in exc.problems))


def attach_catalog(
    spec: Speculator, entry, invalid=None, *, stale: str | None = None, pinned: str | None = None
) -> Speculator:
    """Attach a Hub draft's catalog entry with findings about its pin, and the findings of the fetch
    (a malformed entry, a cached copy or the entry's pinned copy used because the Hub failed)."""
    import attrs

    from specreg.normalization.speculator import Finding

    origin = spec.origin
    found = [
        f
        for f in (
            invalid,
            stale and Finding.of("hub-cached-copy", stale),
            pinned and Finding.of("hub-pinned-copy", pinned),
        )
        if f
    ]
    if entry is not None and entry.config_sha256 and entry.config_sha256 != origin.sha256:
        found.append(
            Finding.of(
                "catalog-pin-mismatch",
                f"the catalog pins {entry.id} to config sha256 {entry.config_sha256[:12]}... at revision "
                f"{entry.revision}; the loaded config.json (commit {origin.commit or '?'}) has {origin.sha256[:12]}...",
            )
        )
    if entry is not None and entry.revision and origin.commit and entry.revision != origin.commit:
        found.append(
            Finding.of(
                "catalog-other-revision",
                f"loaded commit {origin.commit}; the catalog entry is pinned at {entry.revision}",
            )
        )
    return attrs.evolve(spec, catalog=entry, findings=(*spec.findings, *found))
