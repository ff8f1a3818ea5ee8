"""The algorithms specreg normalizes, keyed by the exact `speculators_model_type` string.

A built-in algorithm is one file in `algos/` (the package `specreg.algos`), named after the type it
registers: `algos/dflash.py` registers "dflash". They are found by listing that folder, so adding
one is adding its file, and listing them or importing specreg imports none; a module is imported
the first time its algorithm is needed. The types recognized but not served are one table,
`REFUSED` of the package itself, each registered with its reason on first use. Other packages add algorithms through the entry-point
group ``specreg.algorithms`` (``name = "package.module"``). A plugin is a guest: whatever its import
raises (SystemExit and KeyboardInterrupt included), or a built-in or another plugin's algorithm it
replaces, is one logged line naming its package, it is rolled back (what it registered is
unregistered) and `broken_plugins()` reports it. Its function is held to the contract: a plugin's
function that returns anything but a `Plan`, or tries to end the process, fails naming the plugin.
"""

from __future__ import annotations

import functools
import importlib
import os
import re
import threading
from typing import Any, Callable

import attrs
from packaging.version import Version

from specreg.errors import RegistryError, UnknownAlgorithmError

ENTRY_POINT_GROUP = "specreg.algorithms"

#: the package whose modules are the built-in algorithms, one file each
BUILTIN_PACKAGE = "specreg.algos"
#: what an algorithm may be named, built-in (its file's name) or plugin: the speculators_model_type
#: string, lower case; checked at registration, so a name never carries a space or a control character
NAME = re.compile(r"^[a-z][a-z0-9_-]*\Z")
_builtin: dict[str, str] | None = None


def builtin() -> dict[str, str]:
    """speculators_model_type -> module of every built-in algorithm: the files of `algos/`, listed
    (not imported) once, and the package's REFUSED types (the package itself)."""
    global _builtin
    if _builtin is None:
        # the package's folder, listed: importing the package runs none of its modules (and
        # importlib.resources would import zipfile, tempfile and shutil to list one folder)
        folder = importlib.import_module(BUILTIN_PACKAGE).__path__
        modules = {
            entry[:-3]: f"{BUILTIN_PACKAGE}.{entry[:-3]}"
            for entry in sorted({name for path in folder for name in os.listdir(path)})
            if entry.endswith(".py") and NAME.match(entry[:-3])
        }
        for name in _refused():
            if name in modules:
                raise RegistryError(
                    f"built-in algorithm {name!r} is both the module {modules[name]} and an "
                    f"entry of {BUILTIN_PACKAGE}.REFUSED"
                )
            modules[name] = BUILTIN_PACKAGE
        _builtin = dict(sorted(modules.items()))
    return _builtin


def _refused() -> dict[str, str]:
    return dict(getattr(importlib.import_module(BUILTIN_PACKAGE), "REFUSED", {}))


@attrs.frozen
class FieldDoc:
    """One row of an algorithm's docstring table."""

    name: str
    type: str
    requirement: str
    why: str


@attrs.frozen
class Algorithm:
    """A registered algorithm: the function that normalizes its configs, and what vLLM does with it."""

    name: str
    function: Callable[..., Any] = attrs.field(repr=False)
    method: str | None
    vllm_min: Version | None
    summary: str
    unservable: str | None
    origin: str
    #: the dated rule naming the vLLM releases whose speculators path serves it (None: from vllm_min on)
    rule: str | None = None
    #: its traits for its family's shared rules (a `dflash_family.Variant` or `eagle_family.Variant`;
    #: None for a type with no family, a plugin's own or a refused one): code outside algos/ asks these,
    #: never the name
    variant: Any = attrs.field(default=None, repr=False)
    #: False: no vLLM release maps the type itself; vLLM serves it only through specreg (its plugin
    #: active, or the directory `materialize` writes)
    vllm_maps: bool = True

    @property
    def module(self) -> str:
        return self.origin.split(":")[0]

    def served_by(self, version: Version) -> bool:
        """Whether vLLM `version`'s speculators path serves this algorithm."""
        if self.rule is not None:
            from specreg import facts

            return facts.holds(self.rule, version)
        return self.vllm_min is not None and version >= self.vllm_min

    def last_served_before(self, version: Version) -> str | None:
        """The last known release before `version` that serves it, where `version` does not (a release
        that removed it); None where no earlier release served it, or where no rule says so."""
        if self.rule is None:
            return None
        from specreg import facts

        release = f"{version.major}.{version.minor}"
        served = [r for r in facts.known() if Version(r) <= Version(release) and facts.holds(self.rule, r)]
        return served[-1] if served else None

    def fields(self) -> list[FieldDoc]:
        """The docstring's table of fields read (rows of ``| field | type | required/default | why |``)."""
        return parse_fields_table(self.function.__doc__ or "")

    @property
    def since(self) -> str:
        """The first vLLM release that serves it, as listed ("not mapped" for a type no vLLM release maps
        itself, served through specreg; "not served" for a refused one: both as wide as the column)."""
        if self.vllm_min is not None:
            return str(self.vllm_min)
        return "not mapped" if self.method is not None and not self.vllm_maps else "not served"

    @property
    def family(self) -> str | None:
        """The family whose shared rules normalize it (its variant's `FAMILY`), None without one."""
        return getattr(self.variant, "FAMILY", None)

    def to_dict(self) -> dict[str, Any]:
        fields = attrs.asdict(
            self,
            filter=attrs.filters.exclude("function", "origin", "variant", "vllm_maps"),
            value_serializer=lambda _, __, v: str(v) if isinstance(v, Version) else v,
        )
        # the trait is listed where it says something (the answers of the algorithms that vLLM maps
        # stay as they were)
        return {**fields, "module": self.module, **({} if self.vllm_maps else {"vllm_maps": False})}


@attrs.frozen
class BrokenPlugin:
    """An entry point of the group that failed to load, and was rolled back."""

    entry_point: str
    value: str
    error: str
    package: str = "?"

    def line(self) -> str:
        return (
            f"specreg: the algorithm plugin {self.entry_point} = {self.value} (package {self.package}) "
            f"failed: {self.error}; it is skipped"
        )


_ROW = re.compile(r"^\s*\|(.+)\|\s*$")


def parse_fields_table(doc: str) -> list[FieldDoc]:
    rows: list[FieldDoc] = []
    for line in doc.splitlines():
        m = _ROW.match(line)
        if not m:
            continue
        cells = [c.strip() for c in m.group(1).split("|")]
        if len(cells) != 4 or set(cells[0]) <= {"-", ":", " "} or cells[0].lower() == "field":
            continue
        rows.append(FieldDoc(cells[0].strip("`"), cells[1].strip("`"), cells[2], cells[3]))
    return rows


def shared_rows(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Fill the rows several algorithms share into `fn`'s docstring table: a line ``{NAME}`` becomes the
    rows NAME holds, defined once beside the code that reads those fields (fields.LAYER_CONFIG_ROW and
    VOCAB_ROWS, shape.LAYER_SHAPE_ROWS)."""
    from specreg.normalization import fields, shape

    groups = {
        "LAYER_CONFIG_ROW": (fields.LAYER_CONFIG_ROW,),
        "VOCAB_ROWS": fields.VOCAB_ROWS,
        "LAYER_SHAPE_ROWS": shape.LAYER_SHAPE_ROWS,
    }
    lines = []
    for line in (fn.__doc__ or "").split("\n"):
        name = line.strip()[1:-1] if line.strip().startswith("{") and line.strip().endswith("}") else None
        if name is not None and name not in groups:
            raise RegistryError(f"{fn.__qualname__}'s docstring names {{{name}}}: the shared rows are {sorted(groups)}")
        indent = line[: len(line) - len(line.lstrip())]
        lines += [indent + row for row in groups[name]] if name is not None else [line]
    fn.__doc__ = "\n".join(lines)
    return fn


_lock = threading.RLock()
_registered: dict[str, Algorithm] = {}
_broken: list[BrokenPlugin] = []
_plugins_loaded = False
#: held while the entry points load; reentrant, as a plugin may look algorithms up while it loads
_plugin_lock = threading.RLock()
_loading = False
#: the names registered by the plugin loading in this thread (None when no plugin is loading)
_guest = threading.local()


def _defined_in(fn: Callable[..., Any]) -> str:
    """The module a function was written in (its globals' __name__: __module__ can be set to anything)."""
    return str(getattr(fn, "__globals__", {}).get("__name__", getattr(fn, "__module__", "?")))


def register_speculator(
    name: str,
    *,
    method: str | None = None,
    vllm_min: str | None = None,
    summary: str = "",
    unservable: str | None = None,
    rule: str | None = None,
    variant: Any = None,
    vllm_maps: bool = True,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the normalizer for ``speculators_model_type == name``.

    method: the vLLM speculative method it is served as (None when vLLM cannot serve it);
    vllm_min: the first vLLM version whose speculators path accepts it (a plugin's; a built-in names
    its `rule` instead, whose releases come from the per-release facts);
    unservable: why vLLM cannot serve it, for types that are recognized but not served;
    rule: the dated rule (specreg/vllm/facts/rules.json) naming the releases that serve it, for an
    algorithm a release may remove (vllm_min is then the first release of its first run);
    variant: its traits for its family's shared rules (the `Variant` its function passes to the
    family's `normalize`): what readback, the SGLang export, the plugin and the family rules ask;
    vllm_maps: False for a type no vLLM release maps itself (served only through specreg's plugin or a
    materialized directory); it then has no vllm_min and no rule.
    """
    if not isinstance(name, str) or not NAME.match(name):
        raise RegistryError(
            f"algorithm name {name!r}: a name is the speculators_model_type string, lower-case "
            "letters, digits, '_' and '-', starting with a letter"
        )
    if (method is None) == (unservable is None):
        raise RegistryError(f"algorithm {name!r}: give exactly one of method= or unservable=")
    if not vllm_maps and (vllm_min is not None or rule is not None or method is None):
        raise RegistryError(
            f"algorithm {name!r}: vllm_maps=False says no vLLM release maps it, so it takes a method= and "
            f"no vllm_min= or rule= (got vllm_min={vllm_min!r}, rule={rule!r}, method={method!r})"
        )

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        origin = f"{fn.__module__}:{fn.__qualname__}"
        own = builtin().get(name)
        with _lock:
            existing = _registered.get(name)
            if existing is not None and existing.origin != origin:
                raise RegistryError(
                    f"speculator algorithm {name!r} is registered twice: first by {existing.origin}, again by {origin}"
                )
            if own is not None and _defined_in(fn) != own:
                raise RegistryError(
                    f"speculator algorithm {name!r} is registered twice: first by the built-in {own}, again by {origin}"
                )
            _registered[name] = Algorithm(
                name=name,
                function=fn if own is not None else _guarded(fn),
                method=method,
                vllm_min=_first_served(rule) if rule else (Version(vllm_min) if vllm_min else None),
                summary=summary or (fn.__doc__ or "").strip().split("\n")[0],
                unservable=unservable,
                origin=origin,
                rule=rule,
                variant=variant,
                vllm_maps=vllm_maps,
            )
            added = getattr(_guest, "added", None)
            if added is not None:
                added.append(name)
        return fn

    return decorate


def _first_served(rule: str) -> Version:
    """The first vLLM version that serves an algorithm whose releases `rule` names."""
    from specreg import facts

    typed = facts.metadata()[rule].get("since")
    runs = facts.rule_spans(rule)
    return Version(typed) if typed else Version(runs[0][0]) if runs else facts.newest()


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A plugin's function, held to the contract: it returns a Plan and never ends the process (the
    caller reports either failure as the plugin's, naming it)."""

    @functools.wraps(fn)
    def run(cfg: Any, ctx: Any) -> Any:
        from specreg.normalization.plan import Plan

        try:
            plan = fn(cfg, ctx)
        except (SystemExit, KeyboardInterrupt) as exc:
            raise RuntimeError(
                f"it raised {type(exc).__name__}({_exit_args(exc)}), which would have ended the process"
            ) from exc
        if not isinstance(plan, Plan):
            raise TypeError(f"it returned {type(plan).__name__} {_short(plan)}, not a specreg.Plan")
        return plan

    return run


def guest_modules() -> set[str]:
    """The modules of other packages whose functions are registered (a plugin's code, in a traceback)."""
    with _lock:
        algos = list(_registered.values())
    return {
        where
        for a in algos
        if (where := _defined_in(getattr(a.function, "__wrapped__", a.function))) != builtin().get(a.name)
    }


def _exit_args(exc: BaseException) -> str:
    return ", ".join(repr(a) for a in exc.args)


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _import_builtin(name: str) -> Algorithm:
    module = builtin()[name]
    imported = importlib.import_module(module)
    if module == BUILTIN_PACKAGE and name not in _registered:  # a REFUSED type
        register_speculator(name, unservable=_refused()[name])(imported.refused)
    try:
        return _registered[name]
    except KeyError:
        raise RegistryError(
            f"built-in module {module} did not register algorithm {name!r} (a built-in "
            "registers the type its file is named after)"
        ) from None


def load_plugins() -> None:
    """Import every ``specreg.algorithms`` entry point once, each as a guest (`_load_guest`)."""
    global _plugins_loaded, _loading
    if _plugins_loaded:
        return
    with _plugin_lock:
        if _plugins_loaded or _loading:
            return
        _loading = True
        try:
            for name in builtin():  # every built-in first, so that a plugin replacing one is seen
                get(name)
            import importlib.metadata  # 30 ms of imports: only when plugins are looked for

            for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
                _load_guest(ep)
            _plugins_loaded = True
        finally:
            _loading = False


def _load_guest(ep: Any) -> None:
    """Import one entry point; on any failure, or when it replaced an algorithm registered before it,
    put the registry back as it was and report the plugin."""
    with _lock:
        before = dict(_registered)
    _guest.added = []
    try:
        ep.load()
        error = _replaced(before)
    except BaseException as exc:  # noqa: BLE001 - sys.exit or Ctrl-C at a plugin's import is the plugin's failure
        error = (
            f"SystemExit: it called sys.exit({_exit_args(exc)})"
            if isinstance(exc, SystemExit)
            else (f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__)
        )
    finally:
        added, _guest.added = _guest.added, None
    if error is None:
        return
    with _lock:
        for name in added:
            if name not in before:
                _registered.pop(name, None)
        _registered.update(before)
    dist = getattr(ep, "dist", None)
    package = f"{dist.name} {dist.version}" if dist is not None else ep.value.split(":")[0].split(".")[0]
    broken = BrokenPlugin(ep.name, ep.value, error, package)
    _broken.append(broken)
    import logging

    from specreg.errors import printable  # the one escaper of terminal controls

    logging.getLogger("specreg").warning("%s", printable(broken.line()))


def _replaced(before: dict[str, Algorithm]) -> str | None:
    """What a plugin's import changed of the algorithms registered before it (None: nothing)."""
    with _lock:
        changed = [name for name, algo in before.items() if _registered.get(name) is not algo]
    if not changed:
        return None
    name = changed[0]
    now = _registered.get(name)
    kind = "built-in " if name in builtin() else ""
    return f"it replaced the {kind}algorithm {name!r} of {before[name].origin}" + (
        f" with {now.origin}" if now is not None else " (removed it)"
    )


def broken_plugins() -> list[BrokenPlugin]:
    load_plugins()
    return list(_broken)


def get(name: str, *, source: str | None = None) -> Algorithm:
    """The algorithm registered for `name`, importing its module on first use."""
    with _lock:
        if name in _registered:
            return _registered[name]
        if name in builtin():
            return _import_builtin(name)
    load_plugins()
    with _lock:
        if name in _registered:
            return _registered[name]
    import difflib

    known = sorted(set(builtin()) | set(_registered))
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise UnknownAlgorithmError(
        f"unknown speculators_model_type {name!r}{hint} Known: {', '.join(known)}. "
        "A newer specreg (pip install -U specreg) or the plugin package that provides it may know it.",
        "$.speculators_model_type",
        source=source,
    )


def algorithms() -> list[Algorithm]:
    """Every registered algorithm, built-ins and plugins, sorted by name."""
    for name in builtin():
        get(name)
    load_plugins()
    with _lock:
        return sorted(_registered.values(), key=lambda a: a.name)
