"""The serve plan and the vLLM-ready directory as Python values: what `specreg serve` and `specreg
materialize` print, for a program to use (`specreg.serve_plan`, `specreg.materialize`)."""

from __future__ import annotations

import os
import shlex
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import attrs
from packaging.version import Version

from specreg.errors import ConfigError, SpecregError
from specreg.normalization.speculator import Finding, Speculator, as_tuple, thaw
from specreg.vllm.flags import OWNED, SPEC_FLAGS_SINCE, named, settings, spelling

#: the catalog's [serving] hints (each a vLLM setting of the same name)
HINTS = ("tensor_parallel_size", "max_model_len", "quantization")
#: the speculative_config keys the --spec-* flags carry
SPEC_FLAG_KEYS = {"model", "method", "num_speculative_tokens"}


class NotServable(SpecregError):
    """The draft is not served as trained by the targeted vLLM, or (`gpu` set) no attention backend
    serves it on the GPU asked for: `findings` holds the error findings that say why."""

    def __init__(
        self, message: str, *, findings: Sequence[Finding] = (), gpu: str | None = None, source: str | None = None
    ):
        super().__init__(message, source=source)
        self.findings = tuple(findings)
        self.gpu = gpu


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    from types import MappingProxyType

    return MappingProxyType(dict(value))


@attrs.frozen
class ServePlan:
    """The `vllm serve` command that serves a draft as trained, and how it was made."""

    argv: tuple[str, ...] = attrs.field(converter=as_tuple)
    env: Mapping[str, str] = attrs.field(converter=_frozen_mapping)
    #: the directory the draft is served from when specreg materializes it (written, or with
    #: write=False the one that would be), else None: vLLM reads the source itself
    directory: str | None
    written: bool
    verifier: str
    findings: tuple[Finding, ...] = attrs.field(converter=as_tuple)
    #: what specreg decided on the way (a catalog hint overridden, why it materialized, the GPU fit)
    notes: tuple[str, ...] = attrs.field(converter=as_tuple)

    def shell_line(self) -> str:
        """The environment, then the command, each word quoted for a POSIX shell."""
        return serve_line(self.env, list(self.argv))

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, value_serializer=_plain)


@attrs.frozen
class Materialization:
    """A vLLM-ready draft directory written by `materialize`, and how to serve it."""

    directory: str
    files: tuple[str, ...] = attrs.field(converter=as_tuple)
    weights: str
    verifier: str
    llm_kwargs: Mapping[str, Any] = attrs.field(converter=_frozen_mapping)
    env: Mapping[str, str] = attrs.field(converter=_frozen_mapping)
    findings: tuple[Finding, ...] = attrs.field(converter=as_tuple)

    def to_dict(self) -> dict[str, Any]:
        return attrs.asdict(self, value_serializer=_plain)


def _plain(_inst: Any, _field: Any, value: Any) -> Any:
    """JSON-ready values for attrs.asdict: read-only mappings as dicts (nested ones too)."""
    return thaw(value) if isinstance(value, Mapping) else value


def serve_line(env: Mapping[str, str], argv: Sequence[str]) -> str:
    """A shell line: the environment, then the command, each word quoted."""
    return " ".join([*(f"{k}={shlex.quote(v)}" for k, v in env.items()), *(shlex.quote(a) for a in argv)])


def serve_argv(kwargs: Mapping[str, Any], flags: Sequence[str] = (), *, spec_flags: bool = False) -> list[str]:
    """`vllm serve` for `llm_kwargs`-shaped arguments, then any further vLLM flags. `spec_flags`: the
    draft as vLLM's --spec-model/--spec-method/--spec-tokens (the caller checks they say all of it)."""
    import json

    sc = kwargs["speculative_config"]
    if spec_flags:
        draft = [
            "--spec-model",
            str(sc["model"]),
            "--spec-method",
            str(sc["method"]),
            "--spec-tokens",
            str(sc["num_speculative_tokens"]),
        ]
    else:
        draft = ["--speculative-config", json.dumps(sc)]
    return ["vllm", "serve", kwargs["model"], *draft, *flags]


def vllm_settings(vllm_args: Sequence[str]) -> dict[str, str | None]:
    """The vLLM settings that flags for `vllm serve` give (setting -> value), read as vLLM reads them
    (specreg.vllm.flags: any alias or abbreviation, `_` or `-`, `=`). A flag for what specreg writes
    itself (the model, the speculative config) is refused."""
    extra = list(vllm_args)
    names = named(extra)
    given, _how = settings(extra)
    owned = sorted(OWNED & (set(given) | set(names)))
    if owned:
        user, full = names.get(owned[0], (spelling(owned[0]),) * 2)
        read = "" if user.split(".", 1)[0] == full else f"vLLM reads it as {full}; "
        raise SpecregError(
            f"{user} after --: {read}specreg writes the model and the speculative config itself; "
            "pass vLLM's other flags there"
        )
    return given


def serving_verifier(spec: Speculator, verifier: str | None = None) -> str:
    """The verifier to serve the draft beside: `verifier` if given, else the one its config names.
    A local path recorded at training (a `verifier-local-path` finding) is used where it exists as a
    directory here; elsewhere it must be given. Raises NotServable for a draft the targeted vLLM does
    not serve as trained."""
    mismatch = [f for f in (spec.checks.found if spec.checks is not None else ()) if f.severity == "error"]
    if mismatch and spec.method is not None and set(spec.errors) == set(mismatch):
        given = spec.checks.verifier.id
        raise NotServable(
            f"does not match the verifier {given} (see the errors above): it would not be served as trained "
            f"beside it; name the verifier it was trained with, or pass --force-verifier to serve it beside "
            f"{given} anyway",
            findings=mismatch,
            source=spec.origin.source if spec.origin else None,
        )
    if not spec.servable:
        raise NotServable(
            f"not servable as trained by vLLM {spec.vllm_version} (see the errors above)",
            findings=spec.errors,
            source=spec.origin.source if spec.origin else None,
        )
    if verifier:
        return verifier
    local = any(f.code == "verifier-local-path" for f in spec.findings)
    if spec.verifier and (not local or Path(spec.verifier).expanduser().is_dir()):
        return spec.verifier
    raise ConfigError(
        "the config names no usable verifier; pass --verifier ORG/NAME",
        "$.speculators_config.verifier.name_or_path",
        source=spec.origin.file_label() if spec.origin else None,
    )


def _load(
    draft: Speculator | str | os.PathLike[str],
    revision: str | None,
    vllm: str | Version | None,
    verifier: str | None,
    force_verifier: bool,
    skip_verifier_check: bool = False,
) -> Speculator:
    """The draft, checked against a given verifier other than the one it names (its errors warnings
    with force_verifier; a check that cannot run refused unless skip_verifier_check); one refused
    already is not checked further."""
    from specreg.vllm.preflight import accept_verifier, against_verifier

    from specreg.api import validation
    from specreg.api.verifier import require_verifier_check

    validation.flag("force_verifier", force_verifier)
    validation.flag("skip_verifier_check", skip_verifier_check)
    if isinstance(draft, Speculator):
        spec = draft
    else:
        from specreg.api import load

        spec = load(draft, revision=revision, vllm=vllm, verifier=verifier, check_verifier=False)
    if spec.servable:
        spec = require_verifier_check(against_verifier(spec, verifier), skip_verifier_check)
    return accept_verifier(spec) if force_verifier else spec


def _write(spec: Speculator, target: Any, verifier: str, weights: str, force: bool, progress: Any) -> Any:
    from specreg.vllm.materialize import materialize as write

    from specreg.api.verifier import served_beside

    return write(
        spec, target, weights=weights, force=force, progress=progress, served_beside=served_beside(spec, verifier)
    )


def serve_plan(
    draft: Speculator | str | os.PathLike[str],
    *,
    revision: str | None = None,
    vllm: str | Version | None = None,
    verifier: str | None = None,
    vllm_args: Sequence[str] = (),
    directory: str | os.PathLike[str] | None = None,
    force: bool = False,
    config_only: bool = False,
    gpu: str | None = None,
    spec_flags: bool = False,
    write: bool = True,
    force_verifier: bool = False,
    skip_verifier_check: bool = False,
    progress: Callable[[str], None] | None = None,
) -> ServePlan:
    """The `vllm serve` line that serves a draft as trained (`specreg serve`).

    draft: a source as for `specreg.load` (revision, vllm and verifier as there), or a loaded
    Speculator. vllm_args: further flags for `vllm serve`; the catalog's [serving] hints are added
    where they give none. Where the unmodified file would be served differently from its training
    (or `directory` is given), the draft is materialized (`directory`, else one under specreg's
    cache; weights linked, none with config_only; write=False computes the plan without writing).
    gpu: fit the draft's attention to that GPU (`serve --gpu`); spec_flags: --spec-model/
    --spec-method/--spec-tokens instead of --speculative-config. `progress` receives each note as it
    is made (and the materialize steps). A `verifier` other than the one the draft names is checked
    first (as `specreg check` does): an error there raises NotServable, unless force_verifier (then
    each is a warning in `findings`); a verifier whose config cannot be read (offline) is a
    SpecregError unless skip_verifier_check serves the draft beside it unchecked. Raises NotServable,
    ConfigError, SpecregError."""
    from specreg.vllm.manifest import default_directory

    from specreg.api import validation

    vllm_args = validation.flags("vllm_args", vllm_args)
    gpu = validation.gpu(gpu)
    if directory is not None:
        validation.directory("directory", directory)
    for name, value in (("force", force), ("config_only", config_only), ("spec_flags", spec_flags), ("write", write)):
        validation.flag(name, value)
    say = progress or (lambda _msg: None)
    notes: list[str] = []

    def note(text: str) -> None:
        notes.append(text)
        say(text)

    given = vllm_settings(vllm_args)
    spec = _load(draft, revision, vllm, verifier, force_verifier, skip_verifier_check)
    chosen = serving_verifier(spec, verifier)
    flags = list(vllm_args) + _hint_flags(spec, chosen, given, note)
    reason = spec.materialize_reason
    served_from, written = None, False
    if reason is None and not directory:
        kwargs = spec.llm_kwargs(verifier=chosen)
    else:
        target = Path(directory).expanduser() if directory else default_directory(spec)
        if write:
            # written again without force where it holds exactly what specreg wrote of this same draft
            weights = "none" if config_only else "link"
            done = _write(spec, target, chosen, weights, force, say)
            target, written = done.directory, True
        else:
            target = target.absolute()
        if reason:
            note(f"{reason}: serving the materialized directory {target}")
        served_from = str(target)
        kwargs = spec.llm_kwargs(draft=served_from, verifier=chosen)
    if gpu:
        kwargs = _fit_gpu(spec, gpu, kwargs, given, note)
    if spec_flags:
        _spec_flags_allowed(spec, kwargs)
    argv = serve_argv(kwargs, flags, spec_flags=spec_flags)
    return ServePlan(
        argv=argv,
        env=spec.serve_env,
        directory=served_from,
        written=written,
        verifier=chosen,
        findings=spec.findings,
        notes=notes,
    )


def _hint_flags(
    spec: Speculator, verifier: str, given: Mapping[str, str | None], note: Callable[[str], None]
) -> list[str]:
    """The catalog's [serving] hints the flags do not give in any spelling (a differing value is the
    user's, with a note). They are the entry's verifier's: beside another verifier none is added."""
    serving = getattr(spec.catalog, "serving", None) if spec.catalog is not None else None
    hints = {f: h for f in HINTS if (h := getattr(serving, f, None)) is not None}
    entry_verifier = getattr(getattr(spec.catalog, "verifier", None), "id", None)
    if hints and entry_verifier is not None and verifier != entry_verifier:
        note(
            f"note: the catalog's serving hints are for {entry_verifier}; beside {verifier} none is added "
            "(pass vLLM's flags after --)"
        )
        return []
    added: list[str] = []
    for field, hint in hints.items():
        if field not in given:
            added += [spelling(field), str(hint)]
        elif given[field] != str(hint):
            note(
                f"note: the catalog entry serves this draft with {spelling(field)} {hint}; you asked for {given[field]}"
            )
    return added


def _spec_flags_allowed(spec: Speculator, kwargs: Mapping[str, Any]) -> None:
    if Version(spec.vllm_version) < Version(SPEC_FLAGS_SINCE):
        raise SpecregError(
            f"--spec-flags: vLLM {spec.vllm_version} has no --spec-model/--spec-method/--spec-tokens "
            f"(they arrive in {SPEC_FLAGS_SINCE}); drop --spec-flags"
        )
    extra = sorted(set(kwargs["speculative_config"]) - SPEC_FLAG_KEYS)
    if extra:
        raise SpecregError(
            "--spec-flags: this draft's speculative config also sets "
            + ", ".join(extra)
            + ", which the --spec-* flags cannot say; serve it with --speculative-config (drop "
            "--spec-flags)"
        )


def _fit_gpu(
    spec: Speculator, gpu: str, kwargs: Mapping[str, Any], given: Mapping[str, str | None], note: Callable[[str], None]
) -> dict[str, Any]:
    """The draft's attention on `gpu` (specreg.vllm.gpu_plan.serve_fit), with the flags given; older than
    the attention facts, nothing of the GPU is known: no GPU settings, and a note says so."""
    from specreg.vllm.attention import AttentionError
    from specreg.vllm.gpu_plan import serve_fit
    from specreg.vllm.preflight import gpu_facts_unknown

    from specreg import facts

    # a release without Model Runner V1 (the model_runner_v1 rule) always runs V2
    v2 = (
        not facts.holds("model_runner_v1", spec.vllm_version)
        or "VLLM_USE_V2_MODEL_RUNNER" in spec.serve_env
        or os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "") in ("1", "true")
    )
    unknown = gpu_facts_unknown(spec, gpu)
    if unknown is not None:
        note(f"gpu: {unknown.message}; nothing for this GPU is written")
        return dict(kwargs)
    try:
        written, notes, errors = serve_fit(
            spec,
            gpu,
            server_kv_cache_dtype=given.get("kv_cache_dtype"),
            server_dtype=given.get("dtype"),
            server_backend=given.get("attention_backend"),
            v2_runner=v2,
        )
    except AttentionError as exc:
        raise SpecregError(f"--gpu {gpu}: {exc}") from None
    if errors:
        raise NotServable(
            f"no attention backend serves the draft on {gpu} (see above)",
            findings=errors,
            gpu=gpu,
            source=spec.origin.source if spec.origin else None,
        )
    for text in notes:
        note(f"gpu: {text}")
    return {**kwargs, "speculative_config": {**kwargs["speculative_config"], **written}}


def materialize(
    draft: Speculator | str | os.PathLike[str],
    directory: str | os.PathLike[str],
    *,
    revision: str | None = None,
    vllm: str | Version | None = None,
    verifier: str | None = None,
    weights: str = "link",
    force: bool = False,
    force_verifier: bool = False,
    skip_verifier_check: bool = False,
    progress: Callable[[str], None] | None = None,
) -> Materialization:
    """Write a vLLM-ready draft directory (`specreg materialize`): config.json as trained in the form
    vLLM loads as it is, the weights linked, copied or left out (weights="link" | "copy" | "none"),
    and a signed specreg.json. The verifier is chosen, and checked, as for `serve_plan`."""
    from specreg.api import validation

    validation.directory("directory", directory)
    validation.flag("force", force)
    spec = _load(draft, revision, vllm, verifier, force_verifier, skip_verifier_check)
    chosen = serving_verifier(spec, verifier)
    done = _write(spec, directory, chosen, weights, force, progress)
    kwargs = done.llm_kwargs(verifier=chosen)
    return Materialization(
        directory=str(done.directory),
        files=done.files,
        weights=done.weights,
        verifier=chosen,
        llm_kwargs=kwargs,
        env=kwargs.env,
        findings=spec.findings,
    )
