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
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal, Mapping

import attrs

from specreg import dirwrite
from specreg.errors import SpecregError
from specreg.normalization import speculator as _speculator
from specreg.sources.files import MANIFEST
from specreg.vllm.draft_weights import PLAIN_NAME, check_weight_mode, weight_sources
from specreg.vllm.manifest import (
    FOLDER,
    SIGNATURE,
    STAMPS,
    WRITTEN,
    draft_identity,
    judged_manifest,
    signature,
    user_changes,
)
from specreg.vllm.vllm_config import HF_QUANT_CONFIG, hf_quant_config, plain_path_config

if TYPE_CHECKING:
    from specreg.normalization.speculator import Speculator

#: where specreg keeps the drafts it materializes (specreg.sglang.write reads it here)
cache_root = dirwrite.cache_root

WeightMode = Literal["link", "copy", "none"]


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

    @property
    def verifier(self) -> str | None:
        """The verifier the draft's config names (None where it names none: pass it to `llm_kwargs`)."""
        return self.speculator.verifier

    @property
    def env(self) -> dict[str, str]:
        """The environment vLLM needs to serve the directory as trained (as `specreg.materialize`'s)."""
        return dict(self.speculator.serve_env)


def _check_target(
    directory: dirwrite.Directory, force: bool, manifest: dict[str, Any], say: Callable[[str], None]
) -> list[str]:
    """Refuse (without force) a non-empty DIR unless it holds exactly what specreg wrote there of this
    same write (`_replaceable`): every file as its signed manifest records it, by content, nothing
    added; the refusal names each file the user changed, replaced or added. Returns the previous
    manifest's files that are still what specreg wrote (only those are set aside with the write).
    Called under DIR's lock, after `dirwrite.recover`: what looks like a leftover of specreg's but
    carries no proof is named and never touched."""
    entries = directory.entries()
    doc, why = judged_manifest(directory.path, dir_fd=directory.fd)
    trusted = doc if why is None else None
    stale = [n for n in (trusted or {}).get("files", []) if isinstance(n, str) and n not in manifest["files"]]
    # with --force only the files it would remove are looked at (each copied weight read once)
    changed = user_changes(trusted, directory, only=stale if force else None) if trusted is not None else []
    foreign = dirwrite.foreign_leftovers(directory)
    unproven = (
        (
            f"; {', '.join(foreign)} looks like a leftover of an interrupted specreg write, but carries no "
            "proof that this specreg made it: specreg never touches it (remove it yourself if it is not yours)"
        )
        if foreign
        else ""
    )
    if entries and not force:
        if trusted is None:
            untrusted = f" ({MANIFEST} there, but {why})" if doc is not None else ""
            raise _not_empty(directory.path, entries, untrusted + unproven)
        if not _replaceable(trusted, manifest):
            raise _not_empty(directory.path, entries, _held(trusted) + unproven)
        if foreign:
            raise _not_empty(directory.path, entries, unproven)
        if changed:
            raise SpecregError(
                "changed since specreg wrote it: "
                f"{', '.join(f'{name} ({how})' for name, how in changed)}; specreg rewrites only a directory "
                "holding exactly what it wrote; move your files out, or pass --force to replace specreg's own names (a file not named here is kept)",
                source=str(directory.path),
            )
    if foreign:
        say(f"{directory.path}: left as it is{unproven}")
    if trusted is None:
        return []
    kept = {name for name, _how in changed}
    if force and (left := [n for n in stale if n in kept]):
        say(f"{directory.path}: left {', '.join(left)}: changed since specreg wrote it, so yours now")
    files = trusted.get("files") if isinstance(trusted.get("files"), list) else []
    return [n for n in files if isinstance(n, str) and PLAIN_NAME.match(n) and n not in kept]


def _replaceable(doc: dict[str, Any], manifest: dict[str, Any]) -> bool:
    """Whether a trusted previous write may be replaced by `manifest` without --force (its files
    unchanged): the same write again, or specreg's write of this same draft (source and weights,
    `draft_identity`) for the same engine release; copied weights are never replaced by links."""
    if {k: v for k, v in doc.items() if k not in STAMPS} == manifest:
        return True
    same = ("written_by", "engine", "vllm_version", "sglang_version", "identity")
    return (
        manifest.get("identity") is not None
        and all(doc.get(k) == manifest.get(k) for k in same)
        and (doc.get("weights") != "copy" or manifest.get("weights") == "copy")
    )


def _not_empty(path: Path, entries: list[str], why: str = "") -> SpecregError:
    shown = ", ".join(entries[:5]) + (", ..." if len(entries) > 5 else "")
    return SpecregError(f"{path} is not empty ({shown}){why}; choose an empty directory or pass --force")


def refuse_before_download(target: Path, force: bool) -> None:
    """`_check_target`'s refusal, made before any weight is fetched where it is certain: DIR holds
    entries and none of them is specreg's (no signed manifest, which a rerun of the same write may match,
    and nothing named like a killed write's leftovers, which the write under DIR's lock recovers first).
    A look without the lock, which decides nothing else: the check under the lock still runs."""
    if force:
        return
    try:
        entries = sorted(os.listdir(target))
    except OSError:  # absent, not a directory, unreadable: the write under the lock says what it is
        return
    if not entries or any(dirwrite.looks_like_leftover(n) for n in entries):
        return
    doc, why = judged_manifest(target)
    if why is None:
        return
    raise _not_empty(target, entries, f" ({MANIFEST} there, but {why})" if doc is not None else "")


def _held(doc: dict[str, Any]) -> str:
    """What a trusted manifest says the directory holds, for a refusal: whose draft, weights copied."""
    source = doc.get("source") if isinstance(doc.get("source"), dict) else {}
    name = source.get("source") if isinstance(source.get("source"), str) else None
    if not name:
        return ""
    copied = ", with its weights copied (the only copy, if the source is gone)" if doc.get("weights") == "copy" else ""
    return f": specreg's write of {name}{copied}, not of this draft as it is now"


def _json_bytes(value: Any) -> bytes:
    """UTF-8 JSON; a string that UTF-8 cannot hold (a lone surrogate, which JSON's \\ud800 escape
    can carry) makes the whole file ASCII with escapes, so the value arrives as it was written."""
    text = json.dumps(value, indent=2, ensure_ascii=False) + "\n"
    try:
        return text.encode()
    except UnicodeEncodeError:
        return (json.dumps(value, indent=2, ensure_ascii=True) + "\n").encode()


def materialize(
    spec: "Speculator",
    directory: str | os.PathLike[str],
    *,
    weights: WeightMode = "link",
    force: bool = False,
    progress: Callable[[str], None] | None = None,
    served_beside: Mapping[str, Any] | None = None,
) -> Materialized:
    """Write `spec` as a vLLM-ready draft directory (see the module docstring). `served_beside`: the
    verifier the draft is served beside when it is not the one it names, whether it was checked and
    the check's errors the user overrode (`--force-verifier`), recorded in specreg.json."""
    check_weight_mode(weights)
    if spec.method is None:
        raise SpecregError(
            f"{spec.algorithm} drafts are not served by vLLM's speculators path; nothing to materialize",
            source=spec.origin.source if spec.origin else None,
        )
    if spec.errors:
        raise SpecregError(
            f"not servable as trained by vLLM {spec.vllm_version} "
            f"({', '.join(sorted({f.code for f in spec.errors}))}); nothing was written",
            source=spec.origin.source if spec.origin else None,
        )
    say = progress or (lambda _msg: None)
    target = Path(directory).expanduser().absolute()
    refuse_source_as_target(spec, target)
    refuse_before_download(target, force)
    # Gather every input before writing anything: a failed download leaves DIR untouched.
    sources = weight_sources(spec, weights, say)
    config, changes = plain_path_config(spec)
    if "quantization_config" not in config and (quant := hf_quant_config(spec)) is not None:
        config["quantization_config"] = quant
        changes.append(
            f"quantization_config from {HF_QUANT_CONFIG}: vLLM's get_config reads that file beside a "
            "config.json that has none (older ModelOpt releases wrote it there), and this directory's "
            "config.json is specreg's"
        )
    manifest = {
        "written_by": "specreg",
        "source": spec.origin.to_dict() if spec.origin else None,
        # the source and its weight files: what `serve --dir` holds to be this same draft again
        "identity": draft_identity(spec),
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
    if served_beside is not None:  # only then: a manifest written before it existed stays the same write
        manifest["served_beside"] = dict(served_beside)
    write_locked(target, force, config, sources, weights, manifest, say)
    return Materialized(directory=target, speculator=spec, files=tuple(manifest["files"]), weights=weights)


def refuse_source_as_target(spec: "Speculator", target: Path) -> None:
    """The directory written is never the one the draft was read from (its config.json is the source)."""
    origin = spec.origin
    if origin is not None and origin.repo_id is None and origin.path:
        if os.path.realpath(Path(origin.path).parent) == os.path.realpath(target):
            raise SpecregError(f"{target} is the draft's own directory; write into another one", source=origin.source)


def write_locked(
    target: Path,
    force: bool,
    config: dict[str, Any],
    sources: dict[str, Path],
    weights: str,
    manifest: dict[str, Any],
    say: Callable[[str], None],
) -> None:
    """Write config.json, the weights (linked or copied) and the signed manifest into `target` as one
    write (dirwrite): concurrent writers take turns under DIR's lock, an interrupted earlier write is
    rolled back or finished first, and a failure or a kill at any step leaves the previous draft or the
    new one whole. Files a previous signed manifest listed that this one does not are removed with it."""
    if target.is_symlink():
        raise SpecregError(
            f"{target} is a link (to {os.readlink(target)}): name the directory itself; specreg "
            "writes and replaces files only in a real directory",
            source=str(target),
        )
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
        inode = directory.inode()

        def signed(records: dict[str, dict[str, Any]]) -> bytes:
            doc = {**manifest, FOLDER: {"inode": inode}, WRITTEN: records}
            return _json_bytes({**doc, SIGNATURE: signature(doc)})

        files[MANIFEST] = dirwrite.Later(signed)
        stale = [n for n in previous if n not in manifest["files"]]
        dirwrite.write(directory, files, set_aside=stale, say=say)


_speculator.WRITERS["materialize"] = materialize  # Speculator.materialize() writes through this stage
