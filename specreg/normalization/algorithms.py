"""The algorithms specreg normalizes, keyed by the exact `speculators_model_type` string.

A built-in algorithm is one file in `algos/` (the package `specreg.algos`), named after the type it
registers: `algos/dflash.py` registers "dflash". They are found by listing that folder, so adding
one is adding its file, and listing them or importing specreg imports none; a module is imported
the first time its algorithm is needed. Other packages add algorithms through the entry-point
group ``specreg.algorithms`` (``name = "package.module"``); a plugin that fails to load is reported
by `broken_plugins()` and skipped.
"""

from __future__ import annotations

import difflib
import importlib
import logging
import re
import threading
from typing import Any, Callable

import attrs
from packaging.version import Version

from specreg.errors import RegistryError, UnknownAlgorithmError

log = logging.getLogger("specreg")

ENTRY_POINT_GROUP = "specreg.algorithms"

#: the package whose modules are the built-in algorithms, one file each
BUILTIN_PACKAGE = "specreg.algos"
_NAME = re.compile(r"^[a-z][a-z0-9_]*\Z")
_builtin: dict[str, str] | None = None


def builtin() -> dict[str, str]:
    """speculators_model_type -> module of every built-in algorithm: the files of `algos/`, listed
    (not imported) once."""
    global _builtin
    if _builtin is None:
        from importlib.resources import files

        names = sorted(entry.name[:-3] for entry in files(BUILTIN_PACKAGE).iterdir()
                       if entry.name.endswith(".py") and _NAME.match(entry.name[:-3]))
        _builtin = {name: f"{BUILTIN_PACKAGE}.{name}" for name in names}
    return _builtin


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

    @property
    def module(self) -> str:
        return self.origin.split(":")[0]

    def fields(self) -> list[FieldDoc]:
        """The docstring's table of fields read (rows of ``| field | type | required/default | why |``)."""
        return parse_fields_table(self.function.__doc__ or "")

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": self.method,
            "vllm_min": str(self.vllm_min) if self.vllm_min else None,
            "summary": self.summary,
            "unservable": self.unservable,
            "module": self.module,
        }


@attrs.frozen
class BrokenPlugin:
    entry_point: str
    value: str
    error: str


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


_lock = threading.RLock()
_registered: dict[str, Algorithm] = {}
_broken: list[BrokenPlugin] = []
_plugins_loaded = False


def register_speculator(
    name: str,
    *,
    method: str | None = None,
    vllm_min: str | None = None,
    summary: str = "",
    unservable: str | None = None,
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Register the decorated function as the normalizer for ``speculators_model_type == name``.

    method: the vLLM speculative method it is served as (None when vLLM cannot serve it);
    vllm_min: the first vLLM version whose speculators path accepts it;
    unservable: why vLLM cannot serve it, for types that are recognized but not served.
    """
    if not isinstance(name, str) or not name:
        raise RegistryError(f"an algorithm name must be a non-empty string, got {name!r}")
    if (method is None) == (unservable is None):
        raise RegistryError(f"algorithm {name!r}: give exactly one of method= or unservable=")

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        origin = f"{fn.__module__}:{fn.__qualname__}"
        with _lock:
            existing = _registered.get(name)
            if existing is not None and existing.origin != origin:
                raise RegistryError(
                    f"speculator algorithm {name!r} is registered twice: "
                    f"first by {existing.origin}, again by {origin}"
                )
            own = builtin().get(name)
            if existing is None and own is not None and fn.__module__ != own:
                raise RegistryError(
                    f"speculator algorithm {name!r} is registered twice: "
                    f"first by the built-in {own}, again by {origin}"
                )
            _registered[name] = Algorithm(
                name=name,
                function=fn,
                method=method,
                vllm_min=Version(vllm_min) if vllm_min else None,
                summary=summary or (fn.__doc__ or "").strip().split("\n")[0],
                unservable=unservable,
                origin=origin,
            )
        return fn

    return decorate


def _import_builtin(name: str) -> Algorithm:
    module = builtin()[name]
    importlib.import_module(module)
    try:
        return _registered[name]
    except KeyError:
        raise RegistryError(f"built-in module {module} did not register algorithm {name!r} (a built-in "
                            "registers the type its file is named after)") from None


def load_plugins() -> None:
    """Import every ``specreg.algorithms`` entry point once; report and skip the broken ones."""
    global _plugins_loaded
    with _lock:
        if _plugins_loaded:
            return
        _plugins_loaded = True
        import importlib.metadata  # 30 ms of imports: only when plugins are looked for

        for ep in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            try:
                ep.load()
            except Exception as exc:  # a plugin's failure must never take specreg down
                broken = BrokenPlugin(ep.name, ep.value, f"{type(exc).__name__}: {exc}")
                _broken.append(broken)
                log.warning("specreg: skipped broken algorithm plugin %s (%s): %s", ep.name, ep.value, broken.error)


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
