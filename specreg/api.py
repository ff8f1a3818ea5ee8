"""load(): a source (local dir, config.json path, "org/name", "org/name@rev") -> Speculator."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from packaging.version import Version

from specreg.sources import hub

from specreg.sources import native
from specreg.errors import ConfigError
from specreg.normalization.core import is_repo_id, normalize
from specreg.normalization.speculator import Origin, Speculator

#: config.json files are a few KiB; anything this large is not one (and is not read whole).
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def read_config(path: Path, *, source: str) -> tuple[dict[str, Any], str]:
    """Parse a config.json with a size cap; returns the object and the file's sha256."""
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "$", source=source) from None
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path} is larger than {MAX_CONFIG_BYTES} bytes: not a config.json", "$", source=source)
    digest = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", "$", source=source) from None

    def no_constants(name: str) -> Any:
        raise ValueError(f"{name} is not valid JSON")

    def finite(literal: str) -> float:
        number = float(literal)
        if number in (float("inf"), float("-inf")):  # 1e400: valid JSON syntax, no real number
            raise ValueError(f"the number {literal[:40]} is out of range (it would be read as infinity)")
        return number

    try:
        value = json.loads(text, parse_constant=no_constants, parse_float=finite)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}", "$", source=source) from None
    except ValueError as exc:
        raise ConfigError(f"invalid JSON: {exc}", "$", source=source) from None
    except RecursionError:
        raise ConfigError("invalid JSON: nested too deeply", "$", source=source) from None
    if not isinstance(value, dict):
        raise ConfigError(f"the top level must be a JSON object, got a {type(value).__name__}", "$", source=source)
    return value, digest


def _split_source(source: str, revision: str | None) -> tuple[str, str | None]:
    repo_id, rev = source, revision
    if "@" in source:
        repo_id, _, at_rev = source.rpartition("@")
        if revision is not None and revision != at_rev:
            raise ConfigError(
                f"two revisions given: {at_rev!r} in the source and {revision!r} as revision=", "revision", source=source
            )
        rev = at_rev
    if not is_repo_id(repo_id):
        raise ConfigError(
            "neither an existing local path nor a Hub repo id (org/name or org/name@revision)", "source", source=source
        )
    if rev is not None:
        hub.check_revision(rev, source=source)
    return repo_id, rev


def _manifest_beside(config_path: Path, source: str) -> dict[str, Any] | None:
    """The specreg.json of a directory specreg materialized, when there is one beside config.json."""
    from specreg.vllm.materialize import MANIFEST

    path = config_path.parent / MANIFEST
    if config_path.name != hub.CONFIG_NAME or not path.is_file():
        return None
    try:
        manifest, _ = read_config(path, source=f"{source} ({MANIFEST})")
    except ConfigError:
        return None  # not a manifest specreg can read: the config is read on its own
    return manifest


def load(
    source: str | os.PathLike[str],
    *,
    revision: str | None = None,
    vllm: str | Version | None = None,
    check_verifier: bool = False,
    check_weights: bool = False,
    verifier: str | None = None,
) -> Speculator:
    """Read a draft's config.json and normalize it for one vLLM version.

    source: a local directory holding config.json, a path to a config file, "org/name" or
    "org/name@revision" on the Hugging Face Hub (config.json only is fetched, through
    huggingface_hub's cache; a cached commit-hash revision makes no request).

    check_verifier: read the verifier's config.json (`verifier`, else the one the config names) and
    check the draft against it; check_weights: read the draft's safetensors headers (never the
    weights) and check them. Their findings join `findings`; `checks` holds what was read.
    """
    text = os.fspath(source)
    if not isinstance(text, str) or not text.strip():
        raise ConfigError("the source is empty", "source", source=str(source))
    local = Path(text).expanduser()
    manifest = None
    if local.exists():
        if revision is not None:
            raise ConfigError("a revision applies to Hub sources, not to a local path", "revision", source=text)
        path = local / hub.CONFIG_NAME if local.is_dir() else local
        if not path.is_file():
            raise ConfigError(f"no {hub.CONFIG_NAME} in the directory {local}", "source", source=text)
        config, digest = read_config(path, source=text)
        origin = Origin(source=text, path=str(path), sha256=digest)
        manifest = _manifest_beside(path, text)
    elif text.startswith((".", "/", "~")) or text.endswith(".json") or os.sep + os.sep in text:
        raise ConfigError("no such file or directory", "source", source=text)
    else:
        repo_id, rev = _split_source(text, revision)
        fetched = hub.fetch_config(repo_id, rev, source=text, max_bytes=MAX_CONFIG_BYTES)
        config, digest = read_config(fetched.path, source=text)
        origin = Origin(
            source=text,
            path=str(fetched.path),
            repo_id=repo_id,
            revision=rev,
            commit=fetched.commit,
            sha256=digest,
        )
    entry = invalid = None
    if origin.repo_id:
        entry, invalid = _catalog_entry(origin.repo_id)
        if verifier is None and entry is not None and native.detect(config, source=text) is not None:
            verifier = entry.verifier.id  # native formats name no verifier: the catalog's
    spec = normalize(config, vllm=vllm, source=text, origin=origin, verifier=verifier, manifest=manifest)
    if origin.repo_id:
        spec = attach_catalog(spec, entry, invalid, stale=fetched.stale)
    if check_verifier or check_weights:
        from specreg.vllm.preflight import preflight

        spec = preflight(spec, verifier=verifier, check_verifier=check_verifier, check_weights=check_weights)
    return spec


def _catalog_entry(repo_id: str):
    """(the catalog entry for a repo or None, a finding when its file is malformed or None). Reads
    only that entry's file (no scan of the catalog)."""
    from specreg.entries import catalog as zoo
    from specreg.normalization.speculator import Finding

    try:
        return zoo.lookup(repo_id), None
    except zoo.CatalogError as exc:
        return None, Finding.of("catalog-entry-invalid", "; ".join(f"{p.path}: {p.message}" for _, p in exc.problems))


def attach_catalog(spec: Speculator, entry, invalid=None, *, stale: str | None = None) -> Speculator:
    """Attach a Hub draft's catalog entry with findings about its pin, and the findings of the fetch
    (a malformed entry, a cached copy used because the Hub failed)."""
    import attrs

    from specreg.normalization.speculator import Finding

    origin = spec.origin
    found = [f for f in (invalid, stale and Finding.of("hub-cached-copy", stale)) if f]
    if entry is not None and entry.config_sha256 and entry.config_sha256 != origin.sha256:
        found.append(Finding.of(
            "catalog-pin-mismatch",
            f"the catalog pins {entry.id} to config sha256 {entry.config_sha256[:12]}... at revision "
            f"{entry.revision}; the loaded config.json (commit {origin.commit or '?'}) has {origin.sha256[:12]}...",
        ))
    if entry is not None and entry.revision and origin.commit and entry.revision != origin.commit:
        found.append(Finding.of(
            "catalog-other-revision",
            f"loaded commit {origin.commit}; the catalog entry is pinned at {entry.revision}",
        ))
    return attrs.evolve(spec, catalog=entry, findings=(*spec.findings, *found))
