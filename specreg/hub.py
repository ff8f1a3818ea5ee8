"""Fetching files from the Hugging Face Hub through huggingface_hub (imported on first use).

`load()` downloads config.json only; weight files are fetched only when a user materializes a
draft directory with its weights. huggingface_hub's cache, revisions and tokens are used as they are; the environment (HF_ENDPOINT, HF_HUB_OFFLINE, HF_HUB_CACHE, HF_HOME,
HF_TOKEN) is read at call time, so a process may change it between calls. A commit-hash revision
already in the cache is answered from disk without any request.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs

from specreg import errors

CONFIG_NAME = "config.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}$")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$")


@attrs.frozen
class Fetched:
    path: Path
    repo_id: str
    revision: str | None
    commit: str | None


def _truthy(value: str | None) -> bool:
    return (value or "").strip().upper() in {"1", "ON", "YES", "TRUE"}


def offline() -> bool:
    return _truthy(os.environ.get("HF_HUB_OFFLINE")) or _truthy(os.environ.get("TRANSFORMERS_OFFLINE"))


def cache_dir() -> str | None:
    if os.environ.get("HF_HUB_CACHE"):
        return os.path.expanduser(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return os.path.join(os.path.expanduser(os.environ["HF_HOME"]), "hub")
    return None  # huggingface_hub's own default


def check_revision(revision: str, *, source: str) -> None:
    if not _REVISION.match(revision) or ".." in revision or revision.endswith("/"):
        raise errors.ConfigError(
            f"not a valid revision: {revision!r} (a branch, tag or 40-hex commit)", "revision", source=source
        )


def _commit_from_path(path: str) -> str | None:
    parts = Path(path).parts
    if "snapshots" in parts:
        i = parts.index("snapshots")
        if i + 1 < len(parts) and _COMMIT.match(parts[i + 1]):
            return parts[i + 1]
    return None


def fetch_config(repo_id: str, revision: str | None = None, *, source: str | None = None) -> Fetched:
    """Download (or find in the cache) `config.json` of `repo_id` at `revision`."""
    path = fetch_file(repo_id, CONFIG_NAME, revision, source=source)
    return Fetched(path=path, repo_id=repo_id, revision=revision, commit=_commit_from_path(str(path)))


def fetch_file(
    repo_id: str, filename: str, revision: str | None = None, *, source: str | None = None, quiet_missing: bool = False
) -> Path:
    """Download (or find in the cache) one file of `repo_id` at `revision`; huggingface_hub errors
    become specreg's. quiet_missing: a missing file (FileNotFoundOnHubError) is expected by the
    caller, so offline mode reports it as missing too rather than as an OfflineError."""
    import huggingface_hub
    from huggingface_hub import errors as hf

    source = source or repo_id
    is_offline = offline()
    where = f" at revision {revision!r}" if revision else ""
    if quiet_missing and revision and _COMMIT.match(revision):
        # hf_hub_download does not consult the cache's record of files missing at a commit
        cached = huggingface_hub.try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir(), revision=revision)
        if cached is huggingface_hub._CACHED_NO_EXIST:
            raise errors.FileNotFoundOnHubError(f"the repository {repo_id}{where} has no {filename}", source=source)
    try:
        path = huggingface_hub.hf_hub_download(
            repo_id,
            filename,
            revision=revision,
            endpoint=os.environ.get("HF_ENDPOINT") or None,
            cache_dir=cache_dir(),
            local_files_only=is_offline,
            token=os.environ.get("HF_TOKEN") or None,
        )
    except hf.GatedRepoError:
        raise errors.GatedRepoError(
            f"the repository {repo_id} is gated: accept its conditions on the Hub and log in "
            "(huggingface-cli login, or set HF_TOKEN)",
            source=source,
        ) from None
    except hf.RepositoryNotFoundError:
        raise errors.RepoNotFoundError(
            f"no repository {repo_id} on the Hub (or it is private and no valid token was sent)", source=source
        ) from None
    except hf.RevisionNotFoundError:
        raise errors.RevisionNotFoundError(
            f"the repository {repo_id} has no revision {revision!r}", source=source
        ) from None
    except hf.LocalEntryNotFoundError:
        if quiet_missing and is_offline:
            raise errors.FileNotFoundOnHubError(f"{filename} of {repo_id}{where} is not in the cache", source=source) from None
        why = "offline mode is on (HF_HUB_OFFLINE)" if is_offline else "the Hub could not be reached"
        raise errors.OfflineError(
            f"{filename} of {repo_id}{where} is not in the Hugging Face cache and {why}", source=source
        ) from None
    except hf.EntryNotFoundError:
        raise errors.FileNotFoundOnHubError(f"the repository {repo_id}{where} has no {filename}", source=source) from None
    except hf.OfflineModeIsEnabled:
        raise errors.OfflineError(
            f"{filename} of {repo_id}{where} is not in the cache and offline mode is on", source=source
        ) from None
    except hf.HFValidationError as exc:
        raise errors.ConfigError(f"not a valid Hub repo id or revision: {exc}", "source", source=source) from None
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else "?"
        raise errors.HubError(f"the Hub answered HTTP {status} for {filename} of {repo_id}{where}", source=source) from None
    except Exception as exc:
        # Connection failures mid-transfer come from the HTTP client (httpx) or the OS.
        if not isinstance(exc, OSError) and not type(exc).__module__.startswith(("httpx", "h11", "h2")):
            raise
        raise errors.HubError(
            f"could not fetch {filename} of {repo_id}{where}: {type(exc).__name__}", source=source
        ) from None
    return Path(path)
