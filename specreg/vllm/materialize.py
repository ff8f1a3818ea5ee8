"""A vLLM-ready draft directory: the normalized config.json plus the draft's weight files.

vLLM runs its own speculators mapping on any config.json that carries `speculators_config`.
The file written here carries none: it is `Speculator.draft_config`, the form that mapping
would produce, with the trained semantics (and, where vLLM's plain path would rename the draft
class, the equivalent class name: `plain_path_config`). vLLM loads it as a plain config (it is given the
method explicitly through `speculative_config`), so nothing is re-mapped.

Weights are linked (symlinks to the Hugging Face cache, or to the local source directory),
copied (``weights="copy"``), or left out (``weights="none"``). Hub weights are fetched with
huggingface_hub on demand, at the commit the config came from.

Safety: every file is written under DIR through DIR's open descriptor, as one write that a kill at
any step cannot leave half done (specreg/dirwrite.py); weight names from an index file must be plain
file names (no directories, no ``..``, no absolute paths); a non-empty DIR is refused unless
``force=True``, and then only the files named here (and those a previous materialization listed in
its signed ``specreg.json``) are replaced.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

import attrs

from specreg import dirwrite
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
        path = weight_file(directory, candidate)
        if path is None:
            continue
        if candidate.endswith(".index.json"):
            return {candidate: path, **index_shards(directory, path)}
        if candidate == "model.safetensors":
            return safetensors_files(directory)  # sharded files without an index are served too
        return {candidate: path}
    return {}


def weight_file(directory: Path, name: str) -> Path | None:
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


def index_shards(directory: Path, index: Path) -> dict[str, Path]:
    """The weight files a weight index names, each by the rule of weight_file (all must be there)."""
    found = {}
    for name in shards_of(index, where=str(index)):
        shard = weight_file(directory, name)
        if shard is None:
            raise ConfigError(f"names {name}, which is not in {directory}", "$.weight_map", source=str(index))
        found[name] = shard
    return found


def safetensors_files(directory: Path) -> dict[str, Path]:
    """Every *.safetensors with a plain name beside a config, by the rule of weight_file (vLLM globs
    them when there is no index)."""
    names = sorted(p.name for p in directory.glob("*.safetensors") if _PLAIN_NAME.match(p.name))
    return {name: shard for name in names if (shard := weight_file(directory, name)) is not None}


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


def _check_target(directory: dirwrite.Directory, force: bool, manifest: dict[str, Any],
                  say: Callable[[str], None]) -> list[str]:
    """Refuse (without force) a non-empty DIR; return a previous signed manifest's files. Called under
    DIR's lock, after `dirwrite.recover`: what looks like a leftover of specreg's but carries no proof is
    named and never touched. A DIR holding only what the same write wrote before (its signed manifest
    equal to `manifest`) is written again without force: rerunning a command, killed or not, succeeds."""
    entries = directory.entries()
    doc = _trusted(_read_manifest(directory.path, dir_fd=directory.fd)) or {}
    files = doc.get("files") if isinstance(doc.get("files"), list) else []
    same = {k: v for k, v in doc.items() if k != SIGNATURE} == manifest and set(entries) <= set(files)
    foreign = dirwrite.foreign_leftovers(directory)
    unproven = (f"; {', '.join(foreign)} looks like a leftover of an interrupted specreg write, but carries no "
                "proof that this specreg made it: specreg never touches it (remove it yourself if it is not yours)"
                ) if foreign else ""
    if entries and not force and not same:
        shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
        raise SpecregError(f"{directory.path} is not empty ({shown}){unproven}; choose an empty directory or "
                           "pass --force")
    if foreign:
        say(f"{directory.path}: left as it is{unproven}")
    return [n for n in files if isinstance(n, str) and _PLAIN_NAME.match(n)]


#: the manifest field that proves specreg wrote it here: HMAC-SHA256 of the rest under specreg's key
#: (dirwrite.key), so a planted specreg.json cannot make --force delete files specreg did not write
SIGNATURE = "signature"


def _signature(doc: dict[str, Any]) -> str:
    body = json.dumps({k: v for k, v in doc.items() if k != SIGNATURE}, sort_keys=True).encode()
    return dirwrite.mac(body)


def trusted_manifest(directory: Path) -> dict[str, Any] | None:
    """The specreg.json in `directory` if specreg wrote it with this machine's key, else None."""
    return _trusted(_read_manifest(directory))


def _trusted(doc: dict[str, Any] | None) -> dict[str, Any] | None:
    import hmac

    if doc is None or not isinstance(doc.get(SIGNATURE), str):
        return None
    try:
        expected = _signature(doc)
    except dirwrite.KeyUnusable:
        return None  # fails closed: nothing is trusted with a key that is not specreg's own
    return doc if hmac.compare_digest(doc[SIGNATURE], expected) else None


def _read_manifest(directory: Path, *, dir_fd: int | None = None) -> dict[str, Any] | None:
    """The specreg.json in `directory` (or in the open directory `dir_fd`) as a JSON object, or None
    (missing, a link, unreadable, not an object)."""
    manifest = directory / MANIFEST
    if dir_fd is None and (not manifest.is_file() or manifest.is_symlink()):
        return None
    try:
        return read_config(Path(MANIFEST) if dir_fd is not None else manifest, source=str(manifest),
                           dir_fd=dir_fd)[0]  # capped, strict JSON, an object
    except ConfigError:
        return None


cache_root = dirwrite.cache_root


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
                       "config.json that has none (older ModelOpt releases wrote it there), and this directory's "
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
    """Write config.json, the weights (linked or copied) and the signed manifest into `target` as one
    write (dirwrite): concurrent writers take turns under DIR's lock, an interrupted earlier write is
    rolled back or finished first, and a failure or a kill at any step leaves the previous draft or the
    new one whole. Files a previous signed manifest listed that this one does not are removed with it."""
    if target.is_symlink():
        raise SpecregError(f"{target} is a link (to {os.readlink(target)}): name the directory itself; specreg "
                           "writes and replaces files only in a real directory", source=str(target))
    if target.exists() and not target.is_dir():
        raise SpecregError(f"{target} exists and is not a directory", source=str(target))
    with dirwrite.opened(target) as directory:
        for line in dirwrite.recover(directory):
            say(f"{target}: {line}")
        previous = _check_target(directory, force, manifest, say)
        files: dict[str, dirwrite.Content] = {"config.json": _json_bytes(config)}
        for name, src in sources.items():
            real = os.path.realpath(src)
            files[name] = dirwrite.Link(real) if weights == "link" else dirwrite.Copy(real)
        signed = dict(manifest)
        signed[SIGNATURE] = _signature(manifest)
        files[MANIFEST] = _json_bytes(signed)
        stale = [n for n in previous if n not in manifest["files"]]
        dirwrite.write(directory, files, set_aside=stale, say=say)


_speculator.WRITERS["materialize"] = materialize  # Speculator.materialize() writes through this stage
