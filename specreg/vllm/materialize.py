"""A vLLM-ready draft directory: the normalized config.json plus the draft's weight files.

vLLM runs its own speculators mapping on any config.json that carries `speculators_config`.
The file written here carries none: it is `Speculator.draft_config`, the form that mapping
would produce, with the trained semantics (and, where vLLM's plain path would rename the draft
class, the equivalent class name: `plain_path_config`). vLLM loads it as a plain config (it is given the
method explicitly through `speculative_config`), so nothing is re-mapped.

Weights are linked (symlinks to the Hugging Face cache, or to the local source directory),
copied (``weights="copy"``), or left out (``weights="none"``). Hub weights are fetched with
huggingface_hub on demand, at the commit the config came from.

Safety: every file is written under DIR, by name, through a temporary file in DIR and an atomic
rename; weight names from an index file must be plain file names (no directories, no ``..``,
no absolute paths); a non-empty DIR is refused unless ``force=True``, and then only the files
named here (and those a previous materialization listed in ``specreg.json``) are replaced.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

import attrs

from specreg import atomic
from specreg.errors import ConfigError, FileNotFoundOnHubError, SpecregError
from specreg.normalization import speculator as _speculator
from specreg.sources import hub
from specreg.sources.files import MANIFEST, file_kind, link_outside, read_config

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

WeightMode = Literal["link", "copy", "none"]

#: Where a draft's weights may live, in the order they are looked for.
SAFETENSORS_INDEX = "model.safetensors.index.json"
WEIGHT_CANDIDATES = (SAFETENSORS_INDEX, "model.safetensors", "pytorch_model.bin.index.json", "pytorch_model.bin")
_PLAIN_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,254}\Z")
MAX_INDEX_BYTES = 16 * 1024 * 1024


@attrs.frozen
class Materialized:
    """A written draft directory and what it holds."""

    directory: Path
    speculator: "Speculator"
    files: tuple[str, ...]
    weights: str

    def llm_kwargs(self, verifier: str | None = None) -> dict[str, Any]:
        """Keyword arguments for `vllm.LLM` that serve this directory as the draft."""
        return self.speculator.llm_kwargs(draft=str(self.directory), verifier=verifier)


#: what a weight index may name: weight files only. Anything else (config.json, which would replace
#: the normalized config with the source's; a .py file; a tokenizer) is refused, never fetched or linked.
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def _plain_name(name: Any, *, where: str, path: str) -> str:
    if not isinstance(name, str) or not _PLAIN_NAME.match(name) or ".." in name:
        raise ConfigError(
            f"{json.dumps(name)} is not a plain file name in the draft directory "
            "(no directories, '..' or absolute paths)",
            path,
            source=where,
        )
    return name


def _weight_name(name: Any, *, where: str, path: str) -> str:
    name = _plain_name(name, where=where, path=path)
    stem = name.rsplit(".", 1)[0]
    if not name.endswith(WEIGHT_SUFFIXES) and stem != "mask_embedding":
        raise ConfigError(f"{json.dumps(name)} is not a weight file ({', '.join(WEIGHT_SUFFIXES)}): a weight index "
                          "names weight files only, and specreg fetches or links nothing else", path, source=where)
    return name


def shards_of(index_path: Path, *, where: str) -> list[str]:
    """The weight file names a safetensors/bin index refers to, each checked to be a plain name."""
    with open(index_path, "rb") as f:
        data = f.read(MAX_INDEX_BYTES + 1)
    if len(data) > MAX_INDEX_BYTES:
        raise ConfigError(f"larger than {MAX_INDEX_BYTES} bytes: not a weight index", "$", source=where)
    try:
        doc = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"invalid JSON: {exc}", "$", source=where) from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not weight_map:
        raise ConfigError("a weight index needs a non-empty object 'weight_map'", "$.weight_map", source=where)
    names: list[str] = []
    for tensor, name in weight_map.items():
        _weight_name(name, where=where, path=f"$.weight_map[{json.dumps(tensor)}]")
        if name not in names:
            names.append(name)
    return names


def _local_weights(directory: Path) -> dict[str, Path]:
    """Weight files beside a local config.json (name -> path): regular files, or links that stay
    inside the draft directory (anything else is refused by name, never read or linked)."""
    for candidate in WEIGHT_CANDIDATES:
        path = _weight_file(directory, candidate)
        if path is None:
            continue
        if candidate.endswith(".index.json"):
            return {candidate: path, **_index_shards(directory, path)}
        if candidate == "model.safetensors":
            return safetensors_files(directory)  # sharded files without an index are served too
        return {candidate: path}
    return {}


def _weight_file(directory: Path, name: str) -> Path | None:
    """directory/name if it is a regular file there, or a link resolving to a regular file inside
    `directory`; None if there is nothing by that name; a SpecregError for anything else (a link out
    of the draft directory, a FIFO, a device, a directory)."""
    import stat

    path = directory / name
    if not os.path.lexists(path):
        return None
    real = link_outside(path, directory)
    if real is not None:
        raise SpecregError(f"{path} is a link to {real}, outside the draft directory {os.path.realpath(directory)}: "
                           "refusing to read it (copy the file into the directory)", source=str(path))
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        raise SpecregError(f"{path}: {exc.strerror}", source=str(path)) from None
    if not stat.S_ISREG(mode):
        raise SpecregError(f"{path} is {file_kind(mode)}, not a weight file: refusing to read it", source=str(path))
    return path


def _index_shards(directory: Path, index: Path) -> dict[str, Path]:
    """The weight files a weight index names, each by the rule of _weight_file (all must be there)."""
    found = {}
    for name in shards_of(index, where=str(index)):
        shard = _weight_file(directory, name)
        if shard is None:
            raise ConfigError(f"names {name}, which is not in {directory}", "$.weight_map", source=str(index))
        found[name] = shard
    return found


def safetensors_files(directory: Path) -> dict[str, Path]:
    """Every *.safetensors with a plain name beside a config, by the rule of _weight_file (vLLM globs
    them when there is no index)."""
    names = sorted(p.name for p in directory.glob("*.safetensors") if _PLAIN_NAME.match(p.name))
    return {name: shard for name in names if (shard := _weight_file(directory, name)) is not None}


def _hub_weights(spec: "Speculator", progress: Callable[[str], None]) -> dict[str, Path]:
    """Weight files of the Hub repo the config came from, fetched into the HF cache on demand."""
    origin = spec.origin
    revision = origin.commit or origin.revision
    for candidate in WEIGHT_CANDIDATES:
        try:
            path = hub.fetch_file(origin.repo_id, candidate, revision, source=origin.source, quiet_missing=True)
        except FileNotFoundOnHubError:
            continue
        if candidate.endswith(".index.json"):
            found = {candidate: path}
            names = shards_of(path, where=f"{origin.repo_id}/{candidate}")
            for i, name in enumerate(names, 1):
                progress(f"fetching {name} ({i}/{len(names)}) from {origin.repo_id}")
                found[name] = hub.fetch_file(origin.repo_id, name, revision, source=origin.source)
            return found
        progress(f"fetched {candidate} from {origin.repo_id}")
        return {candidate: path}
    return {}


def _check_target(directory: Path, force: bool) -> list[str]:
    """Refuse (without force) a non-empty DIR; return a previous manifest's files. Called under DIR's
    lock (write_locked), so DIR is a real directory by then."""
    entries = sorted(p.name for p in directory.iterdir())
    if entries and not force:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise SpecregError(f"{directory} is not empty ({shown}); choose an empty directory or pass --force")
    doc = trusted_manifest(directory) or {}
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    return [n for n in files if isinstance(n, str) and _PLAIN_NAME.match(n)]


#: the manifest field that proves specreg wrote it here: HMAC-SHA256 of the rest under a key kept in
#: specreg's cache (0600), so a planted specreg.json cannot make --force delete files specreg did not write
SIGNATURE = "signature"


KEY_BYTES = 32


class KeyUnusable(SpecregError):
    """specreg's manifest key cannot be trusted (not a regular file of the user's, readable by
    others, or the wrong length): no manifest is trusted, and none is signed, until it is removed."""


def _manifest_key() -> bytes:
    """The per-user HMAC key (created once, atomically, 0600); checked before every use."""
    path = cache_root() / "manifest.key"
    for _ in range(2):
        try:
            # no final link followed; a FIFO does not block the open
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            _create_key(path)
            continue
        except OSError as exc:
            raise KeyUnusable(f"{path}: cannot open the manifest key ({exc.strerror}: a link or not a file); "
                              "remove it and specreg makes a new one (directories it wrote before then need --force "
                              "into an empty directory)") from None
        import stat

        try:
            st = os.fstat(fd)
            why = None
            if not stat.S_ISREG(st.st_mode):
                why = "not a regular file"
            elif hasattr(os, "getuid") and st.st_uid != os.getuid():
                why = "owned by another user"
            elif st.st_mode & 0o077:
                why = f"readable or writable by others (mode {stat.S_IMODE(st.st_mode):o})"
            else:
                key = os.read(fd, KEY_BYTES + 1)
                if len(key) == KEY_BYTES:
                    return key
                why = f"{len(key)} bytes, not {KEY_BYTES} (an interrupted write?)"
        finally:
            os.close(fd)
        raise KeyUnusable(f"{path}: the manifest key is unusable ({why}); remove it and specreg makes a new one")
    raise KeyUnusable(f"{path}: the manifest key could not be created")


def _create_key(path: Path) -> None:
    """Write a new key to a temporary file and link it into place: the key file, when it exists, is
    always whole (a crash or a full disk leaves no empty key behind)."""
    import uuid

    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".manifest.key.{os.getpid()}.{uuid.uuid4().hex[:8]}")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(os.urandom(KEY_BYTES))
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(temp, path)
        except FileExistsError:
            pass  # another writer made it first: theirs is used
    finally:
        with contextlib.suppress(OSError):
            os.unlink(temp)


def _signature(doc: dict[str, Any]) -> str:
    import hashlib
    import hmac

    body = json.dumps({k: v for k, v in doc.items() if k != SIGNATURE}, sort_keys=True).encode()
    return hmac.new(_manifest_key(), body, hashlib.sha256).hexdigest()


def trusted_manifest(directory: Path) -> dict[str, Any] | None:
    """The specreg.json in `directory` if specreg wrote it with this machine's key, else None."""
    import hmac

    doc = _read_manifest(directory)
    if doc is None or not isinstance(doc.get(SIGNATURE), str):
        return None
    try:
        expected = _signature(doc)
    except KeyUnusable:
        return None  # fails closed: nothing is trusted with a key that is not specreg's own
    return doc if hmac.compare_digest(doc[SIGNATURE], expected) else None


def _read_manifest(directory: Path) -> dict[str, Any] | None:
    """The specreg.json in `directory` as a JSON object, or None (missing, a link, unreadable, not an object)."""
    manifest = directory / MANIFEST
    if not manifest.is_file() or manifest.is_symlink():
        return None
    try:
        return read_config(manifest, source=str(manifest))[0]  # capped, strict JSON, an object
    except ConfigError:
        return None


def cache_root() -> Path:
    """specreg's own cache: $SPECREG_CACHE, else ~/.cache/specreg."""
    return Path(os.environ.get("SPECREG_CACHE") or Path.home() / ".cache" / "specreg").expanduser()


def default_directory(spec: "Speculator") -> Path:
    """Where `specreg serve` materializes a draft: one directory per source, content and vLLM version."""
    origin = spec.origin
    name = (origin.repo_id or Path(origin.path).parent.name or "draft") if origin else "draft"
    digest = (origin.sha256 or "")[:16] if origin else ""
    safe = re.sub(r"[^A-Za-z0-9._-]", "--", name)
    return cache_root() / "drafts" / f"{safe}-{digest}-vllm{spec.vllm_version}"


def same_draft(directory: str | os.PathLike[str], spec: "Speculator") -> bool:
    """Whether `directory` holds what specreg materialized from this same source content for this
    same vLLM version (re-running `serve --dir` then refreshes specreg's own files)."""
    manifest = trusted_manifest(Path(directory).expanduser()) or {}
    source = manifest.get("source")
    return (isinstance(source, dict) and spec.origin is not None and bool(spec.origin.sha256)
            and source.get("sha256") == spec.origin.sha256 and manifest.get("vllm_version") == spec.vllm_version
            and manifest.get("written_by") == "specreg")


#: Draft classes that vLLM's plain config path would rename. For method "eagle3", vLLM wraps a
#: plain draft config in EAGLEConfig, which prefixes "Eagle3" to any architecture that neither
#: starts nor ends with it: "PeagleQwen3ForCausalLM" would become an unknown class. vLLM's model
#: registry maps each Peagle name to the same class as the Eagle3 name written instead (checked
#: per version by tests/conformance); P-EAGLE itself comes from `parallel_drafting` and
#: `pard_token`, which are kept.
PLAIN_PATH_ARCHITECTURES = {
    "PeagleLlamaForCausalLM": "Eagle3LlamaForCausalLM",
    "PeagleQwen3ForCausalLM": "Eagle3Qwen3ForCausalLM",
}


def plain_path_config(spec: "Speculator") -> tuple[dict[str, Any], list[str]]:
    """`draft_config` in the form vLLM loads directly (no speculators mapping), and what was changed."""
    config = spec.draft_config_dict()
    changes: list[str] = []
    archs = config.get("architectures")
    if spec.method == "eagle3" and isinstance(archs, list):
        renamed = [PLAIN_PATH_ARCHITECTURES.get(a, a) for a in archs]
        if renamed != archs:
            changes.append(
                f"architectures {archs} -> {renamed}: the same vLLM class, under a name vLLM's "
                "EAGLEConfig does not rename"
            )
            config["architectures"] = renamed
    return config, changes


def _json_bytes(value: Any) -> bytes:
    """UTF-8 JSON; a string that UTF-8 cannot hold (a lone surrogate, which JSON's \\ud800 escape
    can carry) makes the whole file ASCII with escapes, so the value arrives as it was written."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:
        return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode()


def check_weight_mode(weights: str) -> None:
    if weights not in ("link", "copy", "none"):
        raise ValueError(f"weights must be 'link', 'copy' or 'none', not {weights!r}")


def weight_sources(spec: "Speculator", weights: str, say: Callable[[str], None], *,
                   required: bool = True) -> dict[str, Path]:
    """The draft's weight files (name -> path; fetched into the HF cache for a Hub draft), or {} for
    weights="none", or when there are none and they are not `required`. (Writing into the draft's own
    directory is refused before this, by `refuse_source_as_target`.)"""
    if weights == "none":
        return {}
    origin = spec.origin
    if origin is None or (origin.repo_id is None and origin.path is None):
        raise SpecregError("the draft was normalized from a dict, so there are no weights to link; "
                           "use weights='none' (--config-only)")
    if origin.repo_id:
        sources = _hub_weights(spec, say)
    else:
        sources = _local_weights(Path(origin.path).parent)
    if not sources and not required:
        return {}
    if not sources:
        where = origin.repo_id or str(Path(origin.path).parent)
        error = FileNotFoundOnHubError if origin.repo_id else SpecregError
        raise error(
            f"no weight files in {where} (looked for {', '.join(WEIGHT_CANDIDATES)}); "
            "weights='none' (--config-only) writes the config alone",
            source=origin.source,
        )
    for name in sources:
        _plain_name(name, where=origin.source, path="$")
    return sources


def write_directory(target: Path, config: dict[str, Any], sources: dict[str, Path], weights: str,
                    manifest: dict[str, Any], previous: list[str], say: Callable[[str], None]) -> None:
    """Write config.json, the weights (linked or copied) and the signed manifest into `target`; then
    remove files the previous (trusted) manifest listed that this one does not. Entries about to be
    replaced are set aside first and put back if any write fails, so a failure leaves DIR as it was."""
    import uuid

    target.mkdir(parents=True, exist_ok=True)
    names = ["config.json", *sources, MANIFEST]
    tag = uuid.uuid4().hex[:8]
    kept: dict[str, Path] = {}
    # the journal says what this write set aside and writes: a write killed half-way (SIGKILL, power)
    # is rolled back from it by the next run on this directory (recover_interrupted_write)
    _journal(target, {"tag": tag, "state": "writing", "names": names})
    try:
        for name in names:
            old = target / name
            if old.is_symlink() or old.exists():
                if old.is_dir() and not old.is_symlink():
                    raise SpecregError(f"{old} is a directory; refusing to replace it")
                aside = target / f".{name}.specreg-old-{tag}"
                os.rename(old, aside)
                kept[name] = aside
        atomic.write_bytes(target / "config.json", _json_bytes(config))
        for i, (name, src) in enumerate(sources.items(), 1):
            real = Path(os.path.realpath(src))
            if weights == "link":
                atomic.replace(target / name, lambda tmp, real=real: os.symlink(real, tmp))
            else:
                say(f"copying {name} ({i}/{len(sources)})")
                atomic.replace(target / name, lambda tmp, real=real: shutil.copyfile(real, tmp))
        signed = dict(manifest)
        signed[SIGNATURE] = _signature(manifest)
        atomic.write_bytes(target / MANIFEST, _json_bytes(signed))
        _journal(target, {"tag": tag, "state": "done", "names": names})
    except BaseException:
        for name in names:
            new = target / name
            if name in kept or new.is_symlink() or new.is_file():
                with contextlib.suppress(FileNotFoundError):
                    new.unlink()
        for name, aside in kept.items():
            os.replace(aside, target / name)
        with contextlib.suppress(FileNotFoundError):
            (target / JOURNAL).unlink()
        raise
    for aside in kept.values():
        aside.unlink()
    for stale in set(previous) - set(manifest["files"]):
        path = target / stale
        if path.is_symlink() or path.is_file():
            path.unlink()
    (target / JOURNAL).unlink()


#: a write in progress in DIR (see write_directory); never left behind by a write that ends
JOURNAL = ".specreg-write.json"
_ASIDE = re.compile(r"\.(?P<name>[A-Za-z0-9][A-Za-z0-9._-]{0,254})\.specreg-old-(?P<tag>[0-9a-f]{8})\Z")
_TEMP = re.compile(r"\.[A-Za-z0-9][A-Za-z0-9._-]{0,254}\.specreg-tmp-[0-9]+-[0-9]+-[0-9a-f]{8}\Z")


def _journal(target: Path, doc: dict[str, Any]) -> None:
    atomic.write_bytes(target / JOURNAL, _json_bytes(doc))


def recover_interrupted_write(target: Path) -> str | None:
    """Undo (or finish) a write into `target` that was killed half-way, from its journal; called under
    DIR's lock before anything else. Returns what was done, or None when there was nothing to do.

    "writing": every file the write set aside is put back, every file it wrote is removed (a DIR it
    found empty is left empty), and its temporary files go. "done": the new draft is whole; only the
    set-aside originals and temporary files go. Only names the journal lists and specreg's own
    temporary-name patterns are touched."""
    path = target / JOURNAL
    if path.is_symlink() or not path.is_file():
        return None
    try:
        doc = json.loads(path.read_bytes()[:1 << 20])
        tag, state, names = doc["tag"], doc["state"], [n for n in doc["names"] if _PLAIN_NAME.match(n)]
    except (OSError, ValueError, KeyError, TypeError):
        return None  # not ours: left alone (the --force check refuses what it does not trust)
    asides = {}
    for entry in target.iterdir():
        m = _ASIDE.match(entry.name)
        if m and m["tag"] == tag and not entry.is_dir():
            asides[m["name"]] = entry
        elif _TEMP.match(entry.name) and not entry.is_dir():
            entry.unlink()
    if state == "writing":
        for name in names:
            new = target / name
            if new.is_symlink() or new.is_file():
                new.unlink()
        for name, aside in asides.items():
            if name in names:
                os.replace(aside, target / name)
        done = "rolled back an interrupted write"
    else:
        for aside in asides.values():
            aside.unlink()
        done = "finished cleaning up after a write that was interrupted once it was whole"
    path.unlink()
    return done


def materialize(
    spec: "Speculator",
    directory: str | os.PathLike[str],
    *,
    weights: WeightMode = "link",
    force: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Materialized:
    """Write `spec` as a vLLM-ready draft directory (see the module docstring)."""
    check_weight_mode(weights)
    if spec.method is None:
        raise SpecregError(f"{spec.algorithm} drafts are not served by vLLM's speculators path; nothing to materialize",
                           source=spec.origin.source if spec.origin else None)
    if spec.errors:
        raise SpecregError(
            f"not servable as trained by vLLM {spec.vllm_version} "
            f"({', '.join(sorted({f.code for f in spec.errors}))}); nothing was written",
            source=spec.origin.source if spec.origin else None,
        )
    say = progress or (lambda _msg: None)
    target = Path(directory).expanduser().absolute()
    refuse_source_as_target(spec, target)
    # Gather every input before writing anything: a failed download leaves DIR untouched.
    sources = weight_sources(spec, weights, say)
    config, changes = plain_path_config(spec)
    if "quantization_config" not in config and (quant := hf_quant_config(spec)) is not None:
        config["quantization_config"] = quant
        changes.append(f"quantization_config from {HF_QUANT_CONFIG}: vLLM's get_config reads that file beside a "
                       "config.json that has none (ModelOpt wrote it there before 0.31), and this directory's "
                       "config.json is specreg's")
    manifest = {
        "written_by": "specreg",
        "source": spec.origin.to_dict() if spec.origin else None,
        "algorithm": spec.algorithm,
        "vllm_version": spec.vllm_version,
        # what vLLM is given beside config.json: `specreg show DIR` reads the directory back with it
        "verifier": spec.verifier,
        "speculative_config": spec.speculative_config_dict(),
        "weights": weights,
        "config_changes": changes,
        "files": ["config.json", *sources, MANIFEST],
        "findings": [f.to_dict() for f in spec.findings],
    }
    write_locked(target, force, config, sources, weights, manifest, say)
    return Materialized(directory=target, speculator=spec, files=tuple(manifest["files"]), weights=weights)


#: where ModelOpt before 0.31 wrote a checkpoint's quantization (vLLM's get_config reads it when the
#: config.json has no quantization_config: transformers_utils/config.py, 0.20-0.33)
HF_QUANT_CONFIG = "hf_quant_config.json"


def hf_quant_config(spec: "Speculator") -> dict[str, Any] | None:
    """The draft's hf_quant_config.json (local directory or Hub repo), or None where it has none. A
    link out of the draft's directory is refused, as for its weights."""
    origin = spec.origin
    if origin is None:
        return None
    if origin.repo_id:
        try:
            path = hub.fetch_file(origin.repo_id, HF_QUANT_CONFIG, origin.commit or origin.revision,
                                  source=origin.source, quiet_missing=True)
        except FileNotFoundOnHubError:
            return None
        where = f"{origin.repo_id}/{HF_QUANT_CONFIG}"
    elif origin.path:
        directory = Path(origin.path).parent
        path = directory / HF_QUANT_CONFIG
        where = str(path)
        if not os.path.lexists(path):
            return None
        if path.is_symlink() and (real := link_outside(path, directory)) is not None:
            raise ConfigError(f"a link to {real}, outside the draft's directory: specreg reads no file a link "
                              "points out to", "$", source=where)
    else:
        return None
    quant, _ = read_config(path, source=where)
    return quant


def refuse_source_as_target(spec: "Speculator", target: Path) -> None:
    """The directory written is never the one the draft was read from (its config.json is the source)."""
    origin = spec.origin
    if origin is not None and origin.repo_id is None and origin.path:
        if os.path.realpath(Path(origin.path).parent) == os.path.realpath(target):
            raise SpecregError(f"{target} is the draft's own directory; write into another one",
                               source=origin.source)


def write_locked(target: Path, force: bool, config: dict[str, Any], sources: dict[str, Path], weights: str,
                 manifest: dict[str, Any], say: Callable[[str], None]) -> None:
    """Check and write DIR under its lock: concurrent writers (processes or threads) take turns, so DIR
    always holds one whole draft; a refused or failed first write removes the DIR it created."""
    if target.is_symlink():
        raise SpecregError(f"{target} is a link (to {os.readlink(target)}): name the directory itself; specreg "
                           "writes and replaces files only in a real directory", source=str(target))
    if target.exists() and not target.is_dir():
        raise SpecregError(f"{target} exists and is not a directory", source=str(target))
    with atomic.locked(target) as created:
        started = False
        try:
            recovered = recover_interrupted_write(target)
            if recovered:
                say(f"{target}: {recovered}")
            previous = _check_target(target, force)
            started = created and not previous and not any(target.iterdir())
            write_directory(target, config, sources, weights, manifest, previous, say)
        except BaseException:
            if started:
                # this call created DIR and held its lock from the first file on: only its files are there
                shutil.rmtree(target, ignore_errors=True)
            elif created:
                with contextlib.suppress(OSError):
                    target.rmdir()  # refused before writing: removed only while still empty
            raise


_speculator.WRITERS["materialize"] = materialize  # Speculator.materialize() writes through this stage
