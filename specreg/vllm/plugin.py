"""vLLM plugin: with specreg installed, a plain `vllm serve DRAFT` serves the draft as it was trained.

vLLM runs every `vllm.general_plugins` entry point in each of its processes before it reads the
model (`EngineArgs.__post_init__` -> `vllm.plugins.load_general_plugins`). `register` then
replaces two things in vLLM's speculators mapping (`vllm/transformers_utils/configs/speculators`):

- each algorithm's entry of `algos.SUPPORTED_SPECULATORS_TYPES`, the function that turns the
  speculators file into the draft's HF config: specreg's `draft_config` for the installed vLLM
  (trained masks, ids, anchor rule, architecture) replaces what vLLM's own function writes;
- `base.SpeculatorsConfig.build_vllm_speculative_config`: the method and draft length come from
  specreg's plan (vLLM's result is kept for everything specreg does not set).

Which types are planned comes from specreg's registry, not a list here: every algorithm with a vLLM
method, built-in or plugin. `base.SpeculatorsConfig.extract_transformers_pre_trained_config` (which
refuses a type its table lacks) is wrapped so that a type vLLM's table does not have yet (a new
`algos/` file, a plugin's) is added to the table the first time its config is read.

A draft that vLLM would not serve as it was trained is refused at startup, before any weight is
loaded, with specreg's error and fix (`Refusal`, a ValueError; `SPECREG_VLLM_PLUGIN=0` is the way
out): a plan with errors, a file specreg's rules call invalid (a ConfigError), and a draft that does
not fit the verifier vLLM runs it with (aux layer ids out of its range, aux id 0 where its class does
not capture the embedding output, another hidden size), or a num_speculative_tokens past what the draft
can produce (past what it was trained for is logged). specreg's findings are logged once through vLLM's logger. Safe by
construction: idempotent; a vLLM version outside `TESTED` gets one log line and no change;
`SPECREG_VLLM_PLUGIN=0` turns it off; a non-speculators model never reaches the mapping, and a
named draft is read only when it is a speculators draft or a native layout specreg plans, at the
revision vLLM loads. Nothing else raised in specreg's code reaches vLLM, whatever the config holds:
a failure of specreg itself is one log line and vLLM's own mapping, and so is a SystemExit or
KeyboardInterrupt raised by an algorithm plugin's module.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable

from packaging.version import Version

from specreg import facts

#: vLLM releases whose two patch points the conformance tier exercises (tests/conformance) and, for
#: the newest, the vLLM tier through vLLM's own plugin loader: the first and any patch of the last
#: release the facts mark plugin_tested.
TESTED = (Version(facts.plugin_tested()[0]), Version(facts.plugin_tested()[-1] + ".99"))
SWITCH = "SPECREG_VLLM_PLUGIN"
_MARK = "_specreg_plugin"
#: the drafts the speculators mapping planned while vLLM built one speculative config (per thread)
_planned = threading.local()

_logged: set[tuple[str, str, str]] = set()


class Refusal(ValueError):
    """specreg stops vLLM at startup: the draft would not be served as it was trained."""


def _refusal(lines: list[str], explain: str = "`specreg show` explains") -> Refusal:
    return Refusal(
        "specreg: this draft cannot be served as it was trained by this vLLM:\n  "
        + "\n  ".join(lines)
        + f"\n({explain}; {SWITCH}=0 serves it with vLLM's own mapping anyway)"
    )


def _guarded(what: str, fn: Callable[..., Any], *args: Any) -> Any:
    """fn(*args); a failure of specreg's code (anything but a Refusal) is one log line and None, so
    vLLM decides as it would have without the plugin."""
    try:
        return fn(*args)
    except Refusal:
        raise
    except Exception as exc:  # noqa: BLE001 - the plugin must never stop vLLM by failing
        _once(
            f"guarded:{what}:{type(exc).__name__}:{exc}",
            f"specreg could not {what} ({type(exc).__name__}: {exc}); vLLM decides as it would without specreg",
            logging.WARNING,
        )
        return None


def _planned_type(name: Any) -> bool:
    """Whether specreg plans speculators drafts of type `name`: an algorithm of the registry with a vLLM
    method (one the installed vLLM is too old for is refused by its plan's vllm-unsupported-algorithm
    error). A built-in type, or no type, imports no plugin; plugins are looked for only for another name."""
    from specreg.errors import UnknownAlgorithmError
    from specreg.normalization import algorithms

    if not isinstance(name, str) or not algorithms.NAME.match(name):
        return False
    try:
        return algorithms.get(name).method is not None
    except UnknownAlgorithmError:
        return False


def _native_methods() -> set[str]:
    """The vLLM methods of the built-in algorithms: a native layout (specreg.sources.native) is planned
    as a built-in, so a draft vLLM builds with any other method (an independent draft_model, MTP,
    n-gram) is never read."""
    from specreg.normalization import algorithms

    return {m for name in algorithms.builtin() if (m := algorithms.get(name).method) is not None}


def _logger() -> logging.Logger:
    """vLLM's logger (vllm.logger configures the "vllm" handlers when imported), else a plain one."""
    try:
        from vllm.logger import init_logger

        return init_logger("vllm.specreg")
    except ImportError:  # no vLLM: log through the standard library
        return logging.getLogger("vllm.specreg")


def register() -> None:
    """The `vllm.general_plugins` entry point (vLLM calls it once or more per process)."""
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        _once(
            "off",
            f"specreg plugin off ({SWITCH}=0): vLLM maps speculators configs itself, and may serve "
            "drafts with masks, ids or lengths other than trained",
            logging.WARNING,
        )
        return
    try:
        from specreg.normalization.capabilities import installed_vllm

        version = installed_vllm()
        if version is None or not TESTED[0] <= version <= TESTED[1]:
            _once(
                "untested",
                f"specreg plugin: vLLM {version} is outside the tested range "
                f"{TESTED[0]}-{facts.plugin_tested()[-1]}; leaving vLLM's speculators mapping as it is",
                logging.WARNING,
            )
            return
        from vllm.engine.arg_utils import EngineArgs
        from vllm.transformers_utils.configs.speculators import algos, base

        install(algos, base.SpeculatorsConfig, version)
        watch_native_drafts(EngineArgs, version)
    except Exception as exc:  # noqa: BLE001 - the plugin must never stop vLLM from starting
        _once(
            "failed",
            f"specreg plugin not installed ({type(exc).__name__}: {exc}); vLLM maps speculators configs itself",
            logging.WARNING,
        )


def install(algos: Any, config_class: Any, version: Version | str) -> list[str]:
    """Wrap vLLM's mapping in `algos` (its module) and `config_class` (its SpeculatorsConfig) so that
    specreg plans every speculators draft for vLLM `version`. Returns the algorithms wrapped: the
    built-in types of vLLM's table (another type is wrapped, or added, when its config is first read)."""
    from specreg.normalization.algorithms import builtin

    table = algos.SUPPORTED_SPECULATORS_TYPES
    wrapped = [name for name in list(table) if name in builtin() and _admit(table, name, str(version))]
    build = config_class.__dict__.get("build_vllm_speculative_config")
    if build is not None and not getattr(build.__func__, _MARK, False):
        config_class.build_vllm_speculative_config = classmethod(_builder(build.__func__, str(version)))
    extract = config_class.__dict__.get("extract_transformers_pre_trained_config")
    if extract is not None and not getattr(extract.__func__, _MARK, False):
        config_class.extract_transformers_pre_trained_config = classmethod(
            _extractor(extract.__func__, table, str(version))
        )
    return wrapped


def _admit(table: dict, name: Any, version: str) -> bool:
    """Make `table[name]` specreg's updater when specreg plans the type: vLLM's function wrapped, or
    added where vLLM has none. True when it changed the table."""
    if not _planned_type(name):
        return False
    original = table.get(name)
    if getattr(original, _MARK, False):
        return False
    table[name] = _updater(original, version)
    return True


def watch_native_drafts(engine_args_class: Any, version: Version | str) -> None:
    """Wrap `EngineArgs.create_speculative_config`, which every route to a draft goes through.

    Before it: a speculators draft named beside the verifier (`--speculative-config '{"model": D}'`,
    `--spec-model D`) without a method is given its trained method, and its trained length when none
    is given (`_fill_named_draft`). After it: a speculators draft vLLM was told to serve with another
    method than trained is logged; native drafts (z-lab DFlash, DeepSpec DSpark, SpecForge EAGLE-3)
    never reach the speculators mapping, so what vLLM built is compared with specreg's plan of the
    same file and, where they differ, what to run instead is logged (nothing is changed)."""
    original = engine_args_class.__dict__.get("create_speculative_config")
    if original is None or getattr(original, _MARK, False):
        return

    def create_speculative_config(self: Any, target_model_config: Any, target_parallel_config: Any) -> Any:
        _guarded("plan the named draft", _fill_named_draft, self, str(version))
        _planned.specs = []
        try:
            sc = original(self, target_model_config, target_parallel_config)
        finally:
            planned, _planned.specs = _planned.specs, None
        if planned:
            _guarded("compare the draft with what vLLM was told", _check_method, sc, planned[-1])
            _guarded("check the draft against its verifier", _check_verifier, planned[-1], target_model_config)
            _guarded("check the draft length vLLM was given", _check_tokens, sc, planned[-1])
        else:
            _guarded("check the native draft", _compare_native, sc, str(version))
        return sc

    create_speculative_config.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(create_speculative_config, _MARK, True)
    engine_args_class.create_speculative_config = create_speculative_config


def _read(model: str, revision: Any) -> Any:
    """The draft's config.json as vLLM loads it: at `revision` from the Hub (vLLM ignores a revision
    for a local directory). vLLM's code_revision names only the repository code of auto_map
    (transformers' `AutoConfig.from_pretrained(code_revision=...)`), which specreg never reads."""
    from specreg.sources.files import read_source

    local = Path(model).expanduser().exists()
    return read_source(model, revision=None if local or not isinstance(revision, str) else revision)


def _fill_named_draft(args: Any, version: str) -> None:
    """A speculators draft given beside the verifier: vLLM (from 0.26, vllm/config/speculative.py
    `SpeculativeConfig.__post_init__`) guesses the method from the draft's *path* ("eagle3", "dflash",
    "dspark" in the name, else "draft_model", an independent model), with no length given refuses to
    start, and reads nothing else of the draft's plan: a P-EAGLE named with its method or none is
    served as EAGLE-3 without parallel drafting. The draft's file says it all: fill what the user left
    out of specreg's plan (method, length, parallel drafting), each through the setting the user used
    (vLLM refuses a key given both as --spec-* and in the dict; keys with no flag go in the dict).
    Read only with no method, or the method of a built-in algorithm; with another method (or a
    parallel_drafting other than trained) the user's choice stays and `_check_method` logs it."""
    config = args.speculative_config if isinstance(getattr(args, "speculative_config", None), dict) else None
    model = (config or {}).get("model") or getattr(args, "spec_model", None)
    if not isinstance(model, str) or not model:
        return

    def given(key: str) -> Any:
        return (config or {}).get(key, (config or {}).get(key.replace("_", "-")))

    flags = {"method": "spec_method", "num_speculative_tokens": "spec_tokens"}
    chosen = {key: given(key) if given(key) is not None else getattr(args, flag, None) for key, flag in flags.items()}
    if chosen["method"] is not None and chosen["method"] not in _native_methods():
        return
    read = _read(model, given("revision"))
    if not _planned_type(read.config.get("speculators_model_type")):
        return  # not a speculators draft specreg plans: vLLM's own rules
    # findings are left to the speculators mapping, which reads this file next; a file specreg's
    # rules call invalid is refused here, as the mapping would
    spec = _normalized(read.config, version, source=model, origin=read.origin, manifest=read.manifest)
    if chosen["method"] is not None and chosen["method"] != spec.method:
        return
    filled = {}
    for key, value in spec.speculative_config_dict().items():
        if (chosen[key] if key in flags else given(key)) is None:
            filled[key] = value
    if not filled:
        return
    for key, value in filled.items():
        if key in flags and not (config is not None and "model" in config):
            setattr(args, flags[key], value)
        else:
            if args.speculative_config is None:
                args.speculative_config = {}
            args.speculative_config[key] = value
    _once(
        f"named-planned:{model}",
        f"specreg plugin: the draft {model} is a speculators {spec.algorithm} draft; "
        f"serving it with its trained {', '.join(f'{k}={v!r}' for k, v in filled.items())} (vLLM "
        f"{'guesses the method from the path' if 'method' in filled else 'leaves these out'} otherwise); "
        f"{SWITCH}=0 turns this off",
    )


def _normalized(config: Any, version: str, **where: Any) -> Any:
    """specreg's plan of a file vLLM is serving; a file specreg's rules call invalid is refused."""
    from specreg.errors import ConfigError
    from specreg.normalization.core import normalize

    try:
        return normalize(config, vllm=version, **where)
    except ConfigError as exc:
        raise _refusal([exc.details()], "specreg check explains") from None


def _check_method(sc: Any, spec: Any) -> None:
    """Log (once) a speculators draft that vLLM was told to serve with another method, or another
    parallel drafting, than trained."""
    method = getattr(sc, "method", None)
    if method is not None and method != spec.method:
        _once(
            f"method:{sc.model}",
            f"specreg: the draft {sc.model} was trained as {spec.method!r}; vLLM is told to serve it as {method!r}",
            logging.WARNING,
        )
    trained = bool(spec.speculative_config.get("parallel_drafting", False))
    served = getattr(sc, "parallel_drafting", None)
    if method == spec.method and served is not None and bool(served) != trained:
        _once(
            f"parallel:{sc.model}",
            f"specreg: the draft {sc.model} was trained with parallel_drafting={trained}; vLLM is told "
            f"to serve it with parallel_drafting={bool(served)}",
            logging.WARNING,
        )


#: what the draft's file and the verifier vLLM runs cannot both be right about (verifier_check)
VERIFIER_REFUSALS = frozenset(
    {
        "verifier-layer-out-of-range",
        "verifier-hidden-size-mismatch",
        "verifier-vocab-too-small",
        "mask-token-out-of-vocab",
        "verifier-no-layer-zero-capture",
    }
)


def _check_verifier(spec: Any, target_model_config: Any) -> None:
    """Refuse a draft that does not fit the verifier vLLM runs it with (its aux layer ids, hidden
    size, vocabulary, mask token): vLLM would serve it, reading other layers than trained."""
    hf = getattr(target_model_config, "hf_config", None)
    if hf is None:
        return
    from specreg.vllm.verifier_check import facts_of, verifier_findings

    config = hf.to_dict() if hasattr(hf, "to_dict") else dict(vars(hf))
    name = str(getattr(target_model_config, "model", None) or "the verifier")
    wrong = [f for f in verifier_findings(spec, facts_of(config, name)) if f.code in VERIFIER_REFUSALS]
    if wrong:
        raise _refusal(
            [f"{f.code}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "") for f in wrong],
            f"`specreg check DRAFT --verifier {name}` explains",
        )


def _check_tokens(sc: Any, spec: Any) -> None:
    """The num_speculative_tokens vLLM was given (its SpeculativeConfig's, after its own defaults)
    against the draft's limits (agreement.tokens_findings): past what the draft can produce is refused,
    past what it was trained for logged once with the trained length."""
    from specreg.vllm.agreement import tokens_findings

    k = getattr(sc, "num_speculative_tokens", None)
    if not isinstance(k, int) or isinstance(k, bool):
        return
    found = tokens_findings(spec, k, flag="num_speculative_tokens")
    wrong = [f for f in found if f.severity == "error"]
    if wrong:
        raise _refusal([f"{f.code}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "") for f in wrong])
    for f in found:
        _once(f"tokens:{getattr(sc, 'model', None)}:{k}", f"specreg: {f.code}: {f.message}", logging.WARNING)


def _compare_native(sc: Any, version: str) -> None:
    """Log (once) how vLLM's reading of a native draft differs from how it was trained. Only a draft
    vLLM serves with a method of a built-in algorithm is read, and only a native layout is planned."""
    draft = getattr(sc, "draft_model_config", None) if sc is not None else None
    if draft is None or not getattr(sc, "model", None) or getattr(sc, "method", None) not in _native_methods():
        return
    from specreg.normalization import algorithms, dflash_family, readback
    from specreg.normalization.capabilities import parse_version
    from specreg.normalization.core import normalize
    from specreg.normalization.plan import Context
    from specreg.sources import native

    read = _read(sc.model, getattr(sc, "revision", None))  # the file vLLM was given
    if readback.is_manifest(read.manifest) or native.recognize(read.config, source=sc.model) is None:
        return  # specreg's own directory, a speculators file (the mapping's), or no layout specreg plans
    spec = normalize(read.config, vllm=version, source=sc.model, origin=read.origin, manifest=read.manifest)
    hf = draft.hf_config.to_dict() if hasattr(draft.hf_config, "to_dict") else dict(vars(draft.hf_config))
    # errors, and what the native conversion knows vLLM reads differently (ModelOpt's ids one layer early)
    problems = [
        f"{f.code}: {f.message}"
        for f in spec.findings
        if f.severity == "error" or f.code == "served-layer-ids-mismatch"
    ]
    vllm_arch = (getattr(draft, "architectures", None) or [None])[0]
    planned = spec.draft_config.get("architectures", [None])[0]
    if vllm_arch and planned and _registry_class(vllm_arch) != _registry_class(planned):
        problems.append(
            f"vLLM loads {vllm_arch} as {'.'.join(_registry_class(vllm_arch) or ('?',))}, "
            f"the draft was trained as {'.'.join(_registry_class(planned) or (planned,))}"
        )
    variant = algorithms.get(spec.algorithm).variant  # the family's traits: its masks follow the DFlash rules
    if isinstance(variant, dflash_family.Variant) and isinstance(hf.get("num_hidden_layers"), int):
        ctx = Context(vllm=parse_version(version), source=None, envelope=None)
        served = dflash_family.vllm_layer_causal(ctx, variant.top_level, hf, hf["num_hidden_layers"])
        trained = [a.causal for a in spec.attention]
        if served != trained:
            problems.append(f"vLLM serves the layers' masks as {served}, the draft was trained with {trained}")
    if problems:
        _once(
            f"native:{sc.model}",
            f"specreg: vLLM {version} does not serve the native draft {sc.model} as it was "
            f"trained ({'; '.join(problems)}). Run `specreg serve {sc.model}` and serve the directory it prints.",
            logging.WARNING,
        )


def _registry_class(arch: str) -> tuple[str, str] | None:
    from vllm.model_executor.models import ModelRegistry

    entry = ModelRegistry.models.get(arch)
    return (entry.module_name, entry.class_name) if entry is not None else None


def uninstall(algos: Any, config_class: Any) -> None:
    """Put vLLM's own mapping back (for tests, and for a process that wants it)."""
    table = algos.SUPPORTED_SPECULATORS_TYPES
    for name, fn in list(table.items()):
        if getattr(fn, _MARK, False):
            if fn.__wrapped__ is None:
                del table[name]  # a type vLLM's table did not have
            else:
                table[name] = fn.__wrapped__
    for method in ("build_vllm_speculative_config", "extract_transformers_pre_trained_config"):
        patched = config_class.__dict__.get(method)
        if patched is not None and getattr(patched.__func__, _MARK, False):
            setattr(config_class, method, classmethod(patched.__func__.__wrapped__))


def _plan(config_dict: dict, version: str) -> Any:
    """specreg's Speculator for the file, or None when specreg itself failed (then vLLM maps it)."""
    import copy

    from specreg.version import __version__

    try:
        spec = _normalized(copy.deepcopy(config_dict), version)
    except Refusal:
        raise  # specreg's rules call the file invalid: vLLM would serve it otherwise than trained
    except Exception as exc:  # noqa: BLE001 - a failure of specreg itself: vLLM's mapping decides
        _once(
            f"fallback:{exc}",
            f"specreg could not plan this speculators config ({type(exc).__name__}: {exc}); vLLM's own mapping is used",
            logging.WARNING,
        )
        return None
    except (SystemExit, KeyboardInterrupt) as exc:
        guest = _raised_by_guest(exc)
        if guest is None:
            raise  # vLLM's own, or Ctrl-C in specreg: not the plugin's to stop
        _once(
            f"guest:{guest}",
            f"specreg: the algorithm plugin module {guest} raised {type(exc).__name__} while "
            "specreg planned this speculators config; vLLM's own mapping is used",
            logging.WARNING,
        )
        return None
    # logged at first use: vLLM configures its log handlers after the plugins have loaded
    _once(
        "planned",
        f"specreg plugin: this {spec.algorithm} draft is planned by specreg {__version__} for "
        f"vLLM {version} (its trained masks, ids and length); {SWITCH}=0 turns this off",
    )
    specs = getattr(_planned, "specs", None)
    if specs is not None:
        specs.append(spec)
    return spec


def _raised_by_guest(exc: BaseException) -> str | None:
    """The module of an algorithm plugin (another package's registered function) that `exc` was raised
    in, or None."""
    from specreg.normalization.algorithms import guest_modules

    guests = guest_modules()
    tb = exc.__traceback__
    while tb is not None:
        module = tb.tb_frame.f_globals.get("__name__")
        if module in guests:
            return str(module)
        tb = tb.tb_next
    return None


def _refuse_or_log(spec: Any) -> None:
    """Log the findings once; refuse (ValueError, before weights load) a draft that cannot be served as trained."""
    for f in spec.findings:
        if f.code in ("auto-map-ignored",):
            continue
        level = {"error": logging.ERROR, "warning": logging.WARNING}.get(f.severity, logging.INFO)
        where = f" at {f.path}" if f.path else ""
        _once(f"{f.code}:{f.path}:{f.message}", f"specreg: {f.severity} {f.code}{where}: {f.message}", level)
    if getattr(spec, "needs_v2_model_runner", False) and os.environ.get("VLLM_USE_V2_MODEL_RUNNER", "").lower() not in (
        "1",
        "true",
    ):
        _once(
            "v2",
            "specreg: this draft mixes sliding and full-attention layers, which vLLM serves only on its V2 "
            "model runner (qwen3_dflash._resolve_layer_attention raises otherwise): relaunch with "
            "VLLM_USE_V2_MODEL_RUNNER=1",
            logging.WARNING,
        )
    if spec.errors:
        raise _refusal([f"{f.code}: {f.message}" + (f" Fix: {f.fix}" if f.fix else "") for f in spec.errors])


def _updater(original: Callable | None, version: str) -> Callable:
    """specreg's entry of vLLM's table; `original` is vLLM's own function (None: vLLM has none for the type)."""

    def planned(config_dict: dict) -> dict | None:
        spec = _plan(config_dict, version)
        if spec is None:
            return None
        _refuse_or_log(spec)
        return spec.draft_config_dict()

    def update(config_dict: dict, pre_trained_config: dict) -> None:
        draft = _guarded("plan this speculators config", planned, config_dict)
        if draft is None and original is None:
            raise ValueError(
                f"specreg could not plan this {config_dict.get('speculators_model_type')!r} draft (the "
                "reason is logged above), and vLLM has no mapping of its own for the type"
            )
        if draft is None:
            return original(config_dict=config_dict, pre_trained_config=pre_trained_config)
        pre_trained_config.clear()
        pre_trained_config.update(draft)
        return None

    update.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(update, _MARK, True)
    update.__name__ = getattr(original, "__name__", "update")
    return update


def _builder(original: Callable, version: str) -> Callable:
    def planned(config_dict: dict) -> dict | None:
        if not _planned_type(config_dict.get("speculators_model_type")):
            return None
        spec = _plan(config_dict, version)
        if spec is None:
            return None
        _refuse_or_log(spec)
        return spec.speculative_config_dict()

    def build(cls: Any, config_dict: dict) -> dict:
        result = original(cls, config_dict)
        plan = _guarded("plan this speculators config", planned, config_dict)
        return result if plan is None else {**result, **plan}

    build.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(build, _MARK, True)
    return build


def _extractor(original: Callable, table: dict, version: str) -> Callable:
    """vLLM refuses a type its table lacks here: a type specreg plans gets its entry first."""

    def extract(cls: Any, config_dict: dict) -> Any:
        _guarded(
            "read this speculators config's type",
            lambda: _admit(table, config_dict.get("speculators_model_type"), version),
        )
        return original(cls, config_dict)

    extract.__wrapped__ = original  # type: ignore[attr-defined]
    setattr(extract, _MARK, True)
    return extract


def _once(key: str, message: str, level: int = logging.INFO) -> None:
    """Log a message once per process (vLLM may load plugins, and read a config, several times)."""
    if (key, message, str(level)) in _logged:
        return
    _logged.add((key, message, str(level)))
    _logger().log(level, message)
