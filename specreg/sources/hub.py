"""Fetching files from the Hugging Face Hub through huggingface_hub (imported on first use).

`load()` downloads config.json only; weight files are fetched only when a user materializes a
draft directory with its weights. huggingface_hub's cache, revisions and tokens are used as they are; the environment (HF_ENDPOINT, HF_HUB_OFFLINE, HF_HUB_CACHE, HF_HOME,
HF_TOKEN) is read at call time, so a process may change it between calls. A commit-hash revision
already in the cache is answered from disk without any request.

Errors (specreg/errors.py): OfflineError when no answer came (offline mode, a refused, reset or cut
connection, a timeout), after specreg's retries; HubError itself when the Hub answered and failed or
answered something refused; its other kinds for the Hub's refusals (no repository, gated, no
revision, no file).
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path

import attrs

from specreg import errors

CONFIG_NAME = "config.json"
_COMMIT = re.compile(r"^[0-9a-f]{40}\Z")
_REVISION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}\Z")


@attrs.frozen
class Fetched:
    path: Path
    repo_id: str
    revision: str | None
    commit: str | None
    #: set when the Hub failed and the cached copy was used instead: why
    stale: str | None = None


#: HTTP statuses worth retrying
TRANSIENT = {408, 429, 500, 502, 503, 504}


def _retries() -> tuple[int, float]:
    """(retries after the first try, first backoff in seconds): SPECREG_HUB_RETRIES (default 2),
    SPECREG_HUB_BACKOFF (default 0.5; doubled each time): a Hub that keeps failing is reported
    within about 2 s."""
    try:
        return max(0, int(os.environ.get("SPECREG_HUB_RETRIES", "2"))), max(
            0.0, float(os.environ.get("SPECREG_HUB_BACKOFF", "0.5"))
        )
    except ValueError:
        return 2, 0.5


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


def deadline() -> float:
    """Seconds one config or metadata fetch may take in all, retries included: SPECREG_HUB_DEADLINE
    (default 60). huggingface_hub's own timeouts bound each read, not a server that drips a byte
    every few seconds or a stream that never ends."""
    try:
        value = float(os.environ.get("SPECREG_HUB_DEADLINE", "60"))
    except ValueError:
        return 60.0
    return value if value > 0 and value == value else 60.0


def _bounded(call, *, what: str, source: str, repo_id: str, max_bytes: int | None):
    """Run a fetch under the total deadline and, while it streams, the byte cap (the growing
    `.incomplete` blob in the cache is watched, so a server lying about the size is stopped too).
    Past either bound the caller gets a HubError at once; the abandoned download runs on in a daemon
    thread until the process exits (Python cannot stop a thread), and never reaches the cache."""
    import threading
    import time

    limit = deadline()
    started = time.time()
    box: dict[str, object] = {}

    def run() -> None:
        try:
            box["value"] = call()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = exc

    worker = threading.Thread(target=run, name="specreg-hub-fetch", daemon=True)
    worker.start()
    blobs = _blobs_dir(repo_id) if max_bytes is not None else None
    end = time.monotonic() + limit
    while worker.is_alive():
        worker.join(0.1)
        if blobs is not None and worker.is_alive():
            grown = _incomplete_bytes(blobs, started)
            if grown > max_bytes:
                raise _over_limit(what, grown, max_bytes, source)
        if worker.is_alive() and time.monotonic() > end:
            raise errors.OfflineError(
                f"{what}: no complete answer within {limit:g} s (SPECREG_HUB_DEADLINE): gave up",
                source=source,
                transient=True,
                cache_fallback=True,
            )
    if "error" in box:
        raise box["error"]  # type: ignore[misc]
    return box["value"]


#: huggingface_hub's http_get when the body is not the size the metadata said (file_download.py, 2.4)
_CONSISTENCY = re.compile(r"Consistency check failed: file should be of size \d+ but has size (\d+)")


def _streamed_size(exc: object) -> int | None:
    """The bytes a download received, where `exc` is huggingface_hub's failed size check (else None)."""
    found = _CONSISTENCY.search(str(exc)) if isinstance(exc, OSError) else None
    return int(found.group(1)) if found else None


def _over_limit(what: str, grown: int, max_bytes: int, source: str) -> errors.HubError:
    return errors.HubError(
        f"{what} streamed {grown} bytes, over the {max_bytes}-byte limit for a config file (whatever its "
        "headers said): stopped",
        source=source,
    )


def _blobs_dir(repo_id: str) -> Path | None:
    try:
        import huggingface_hub
        from huggingface_hub.file_download import repo_folder_name

        root = Path(cache_dir() or huggingface_hub.constants.HF_HUB_CACHE).expanduser()
        return root / repo_folder_name(repo_id=repo_id, repo_type="model") / "blobs"
    except Exception:  # noqa: BLE001 - an invalid id is reported by the download itself
        return None


def _incomplete_bytes(blobs: Path, since: float) -> int:
    """The largest partial download in `blobs` begun by this fetch (modified since it started)."""
    biggest = 0
    try:
        for part in blobs.glob("*.incomplete"):
            st = part.stat()
            if st.st_mtime >= since - 1:
                biggest = max(biggest, st.st_size)
    except OSError:
        pass
    return biggest


#: the largest config.json specreg fetches or reads (every config: drafts, verifiers, pins)
MAX_CONFIG_BYTES = 4 * 1024 * 1024


def fetch_config(
    repo_id: str, revision: str | None = None, *, source: str | None = None, max_bytes: int | None = MAX_CONFIG_BYTES
) -> Fetched:
    """Download (or find in the cache) `config.json` of `repo_id` at `revision`.

    Transient failures (429, 5xx, dropped connections, timeouts) are retried with backoff; when
    they persist and the cache holds a copy for that revision, the copy is used and `stale` says
    why. A file larger than `max_bytes` (by the Hub's metadata, and again while it streams) is
    refused; the whole fetch, retries included, ends within `deadline()` seconds.
    """
    source = source or repo_id
    where = f" at revision {revision!r}" if revision else ""
    # looked up first: a failed download may already have moved the cached ref to the new commit
    cached_before = cached(repo_id, CONFIG_NAME, revision)
    what = f"{CONFIG_NAME} of {repo_id}{where}"
    try:
        return _bounded(
            lambda: _fetch_config(repo_id, revision, source, max_bytes, cached_before, what),
            what=what,
            source=source,
            repo_id=repo_id,
            max_bytes=max_bytes,
        )
    except errors.HubError as exc:
        # the Hub kept failing (after specreg's retries, or past the deadline): a cached copy stands in
        if not exc.cache_fallback:
            raise
        copy = cached_before or cached(repo_id, CONFIG_NAME, revision)
        if copy is None:
            raise
        return Fetched(
            path=copy,
            repo_id=repo_id,
            revision=revision,
            commit=_commit_from_path(str(copy)),
            stale=f"{exc.message}; using the cached copy",
        )


def _fetch_config(
    repo_id: str, revision: str | None, source: str, max_bytes: int | None, cached_before: Path | None, what: str
) -> Fetched:
    """The fetch itself, with specreg's retries; a Hub that keeps failing ends in a transient HubError
    (fetch_config then falls back to the cached copy when there is one). `what`: the file, as errors name it."""
    import time

    retries, backoff = _retries()
    for attempt in range(retries + 1):
        try:
            if max_bytes is not None and cached_before is None:
                # first fetch of this ref: one HEAD to refuse an oversized file before downloading
                # it (a later fetch of a moved ref is capped when read, not before)
                _check_size(repo_id, CONFIG_NAME, revision, max_bytes, source)
            try:
                path = fetch_file(repo_id, CONFIG_NAME, revision, source=source)
            except errors.HubError as exc:
                # A flood that ends before the watch (`_bounded`) looks at it again, 0.1 s on, fails
                # huggingface_hub's own size check instead, which names the size it got (and removes
                # the partial file): over the cap, that is the cap's refusal, not a failed connection.
                got = _streamed_size(exc.__context__)
                if max_bytes is not None and got is not None and got > max_bytes:
                    raise _over_limit(what, got, max_bytes, source) from None
                raise
            return Fetched(path=path, repo_id=repo_id, revision=revision, commit=_commit_from_path(str(path)))
        except errors.HubError as exc:
            if not exc.cache_fallback:
                raise
            failure = exc
            if not exc.transient:
                break  # huggingface_hub already retried this one
            if attempt < retries:
                time.sleep(backoff * 2**attempt)
    tries = f"tried {attempt + 1} time{'s' * (attempt > 0)}" + (
        ", each retried by huggingface_hub" if not failure.transient else ""
    )
    raise type(failure)(f"{failure.message} ({tries})", source=source, transient=True)


def cached(repo_id: str, filename: str, revision: str | None) -> Path | None:
    """The cached copy of a file for a revision (branch, tag or commit), without any request."""
    import huggingface_hub

    found = huggingface_hub.try_to_load_from_cache(repo_id, filename, cache_dir=cache_dir(), revision=revision)
    return Path(found) if isinstance(found, str) else None


def _check_size(repo_id: str, filename: str, revision: str | None, max_bytes: int, source: str) -> None:
    """One HEAD, without huggingface_hub's retries, before the first download of a ref: refuses a file
    over max_bytes from the Hub's metadata, and turns a Hub failure (429, 5xx, a dropped connection)
    into one HubError naming what the Hub answered, so specreg's own retry policy applies
    (huggingface_hub would retry that HEAD 5 times, backing off up to 8 s, logging each try)."""
    import huggingface_hub
    from huggingface_hub import errors as hf

    if offline():
        return
    _tell_offline_mode()
    where = f" at revision {revision!r}" if revision else ""
    url = huggingface_hub.hf_hub_url(
        repo_id, filename, revision=revision, endpoint=os.environ.get("HF_ENDPOINT") or None
    )
    try:
        meta = huggingface_hub.get_hf_file_metadata(
            url, token=os.environ.get("HF_TOKEN") or None, retry_on_errors=False
        )
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        if status in TRANSIENT:
            raise errors.HubError(
                f"the Hub answered HTTP {status} for {filename} of {repo_id}{where}",
                source=source,
                transient=True,
                cache_fallback=True,
            ) from None
        return  # 401/403/404 and the like: the download maps them to specreg's typed errors
    except Exception as exc:  # noqa: BLE001 - a connection failure: retried like a 5xx
        failure = connection_failure(exc, f"{filename} of {repo_id}{where}", source)
        if failure is not None:
            raise failure from None
        return
    _check_answer(meta, repo_id, filename, source)
    if meta.size is not None and meta.size > max_bytes:
        raise errors.HubError(
            f"{filename} of {repo_id}{where} is {meta.size} bytes, over the {max_bytes}-byte limit for a "
            "config file: not downloaded",
            source=source,
        )


_ETAG = re.compile(r'^(W/)?"?[A-Za-z0-9._+=-]{1,128}"?\Z')


def _check_answer(meta: object, repo_id: str, filename: str, source: str) -> None:
    """The Hub's metadata names where huggingface_hub writes the file (blobs/<etag>, snapshots/<commit>):
    an ETag or commit that is a path ("/abs", "../../x") would put it outside the cache. Refused."""
    etag = getattr(meta, "etag", None)
    commit = getattr(meta, "commit_hash", None)
    if etag is not None and (not _ETAG.match(etag) or ".." in etag):
        raise errors.HubError(
            f"the Hub answered an ETag {etag[:80]!r} for {filename} of {repo_id}, which is not a "
            "content hash (a path would place the file outside the cache): refused",
            source=source,
        )
    if commit is not None and not _COMMIT.match(commit):
        raise errors.HubError(
            f"the Hub answered a commit {commit[:80]!r} for {filename} of {repo_id}, which is not a "
            "40-hex commit: refused",
            source=source,
        )


def _inside_cache(path: Path, repo_id: str, filename: str, source: str) -> Path:
    """A downloaded file must lie inside the Hugging Face cache (resolved: snapshots link to blobs)."""
    import huggingface_hub

    root = Path(cache_dir() or huggingface_hub.constants.HF_HUB_CACHE).expanduser().resolve()
    real = path.resolve()
    if root != real and root not in real.parents:
        raise errors.HubError(
            f"{filename} of {repo_id} came back at {real}, outside the Hugging Face cache ({root}): "
            "refused; nothing is linked or copied from there",
            source=source,
        )
    return path


def _tell_offline_mode() -> bool:
    """Whether offline mode is on now, told to huggingface_hub too: it reads HF_HUB_OFFLINE once, when
    first imported, and refuses every request after that while it was on then (OfflineModeIsEnabled)."""
    from huggingface_hub import constants

    constants.HF_HUB_OFFLINE = offline()
    return constants.HF_HUB_OFFLINE


#: a progress_bars() choice made before huggingface_hub was imported, applied by the first download
_progress_bars: list[bool] = []


def progress_bars(show: bool) -> None:
    """Turn huggingface_hub's download progress bars on or off (the CLI: on for a terminal, off
    with -q or when stderr is not a terminal). Told to huggingface_hub before the first download
    (`fetch_file`), so that a command that downloads nothing does not import it."""
    import sys

    _progress_bars[:] = [show]
    if "huggingface_hub" in sys.modules:
        _apply_progress_bars()


def _apply_progress_bars() -> None:
    if _progress_bars:
        from huggingface_hub.utils import disable_progress_bars, enable_progress_bars

        (enable_progress_bars if _progress_bars.pop() else disable_progress_bars)()


def fetch_file(
    repo_id: str, filename: str, revision: str | None = None, *, source: str | None = None, quiet_missing: bool = False
) -> Path:
    """Download (or find in the cache) one file of `repo_id` at `revision`; huggingface_hub errors
    become specreg's. quiet_missing: a missing file (FileNotFoundOnHubError) is expected by the
    caller, so offline mode reports it as missing too rather than as an OfflineError."""
    import huggingface_hub
    from huggingface_hub import errors as hf

    _apply_progress_bars()
    source = source or repo_id
    is_offline = _tell_offline_mode()
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
            "(hf auth login, or set HF_TOKEN)",
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
            raise errors.FileNotFoundOnHubError(
                f"{filename} of {repo_id}{where} is not in the cache", source=source
            ) from None
        why = "offline mode is on (HF_HUB_OFFLINE)" if is_offline else "the Hub could not be reached"
        what = filename if source == f"{repo_id}{where}" else f"{filename} of {repo_id}{where}"  # name the id once
        raise errors.OfflineError(f"{what} is not in the Hugging Face cache and {why}", source=source) from None
    except hf.EntryNotFoundError:
        raise errors.FileNotFoundOnHubError(
            f"the repository {repo_id}{where} has no {filename}", source=source
        ) from None
    except hf.OfflineModeIsEnabled:
        raise errors.OfflineError(
            f"{filename} of {repo_id}{where} is not in the cache and offline mode is on", source=source
        ) from None
    except hf.HFValidationError as exc:
        raise errors.ConfigError(f"not a valid Hub repo id or revision: {exc}", "source", source=source) from None
    except hf.HfHubHTTPError as exc:
        status = exc.response.status_code if exc.response is not None else None
        # huggingface_hub itself retries a HEAD on 408/429/5xx (5 times, backoff up to 8 s) and a
        # GET on 408/429; what it did not retry is worth retrying here
        method = exc.response.request.method if exc.response is not None and exc.response.request else None
        retried = status in TRANSIENT and (method == "HEAD" or status in (408, 429))
        raise errors.HubError(
            f"the Hub answered HTTP {status or '?'} for {filename} of {repo_id}{where}",
            source=source,
            transient=status in TRANSIENT and not retried,
            cache_fallback=status in TRANSIENT,
        ) from None
    except Exception as exc:
        failure = connection_failure(exc, f"{filename} of {repo_id}{where}", source)
        if failure is None:
            raise
        raise failure from None
    return _inside_cache(Path(path), repo_id, filename, source)


def connection_failure(exc: BaseException, what: str, source: str) -> "errors.OfflineError | None":
    """A transient OfflineError (a cached copy may stand in) for a connection failure (they come from the
    HTTP client, httpx, or the OS), or None when `exc` is something else."""
    if not isinstance(exc, OSError) and not type(exc).__module__.startswith(("httpx", "h11", "h2")):
        return None
    how = (
        "timed out"
        if "Timeout" in type(exc).__name__ or isinstance(exc, TimeoutError)
        else f"the connection failed ({type(exc).__name__})"
    )
    if source and what.endswith(f" of {source}"):  # the line starts with the source: name it once
        what = what[: -len(f" of {source}")]
    return errors.OfflineError(f"could not fetch {what}: {how}", source=source, transient=True)


def probe(what: str, *, source: str) -> None:
    """Whether the Hub endpoint answers at all, with the policy of every other fetch (specreg's
    retries and backoff, SPECREG_HUB_DEADLINE): a HubError in about 2 s when it cannot be reached,
    before a library with its own, longer backoff (datasets' load_dataset: 5 retries, 8 s apart) is
    handed the request. Any HTTP answer means reachable; offline mode skips it (the cache answers)."""
    import httpx

    if offline() or _truthy(os.environ.get("HF_DATASETS_OFFLINE")):
        return
    endpoint = (os.environ.get("HF_ENDPOINT") or "https://huggingface.co").rstrip("/")
    retries, backoff = _retries()
    end = time.monotonic() + deadline()
    failure: BaseException | None = None
    for attempt in range(retries + 1):
        left = end - time.monotonic()
        if left <= 0:
            break
        try:
            httpx.head(endpoint, timeout=min(10.0, left))
            return
        except httpx.HTTPError as exc:
            failure = exc
        if attempt < retries:
            time.sleep(backoff * 2**attempt)
    said = connection_failure(failure, what, source) if failure is not None else None
    message = said.message if said is not None else f"could not fetch {what}: timed out"
    raise errors.OfflineError(
        f"{message} (tried {attempt + 1} time{'s' * (attempt > 0)})", source=source, transient=True
    )
