"""The catalog's entries (the data lives in the top-level `registry/` folder): their schema, rule
checks, lookup and pinning. Not named `catalog`, which is the public function `specreg.catalog()`."""

from specreg.entries.check import CheckReport, check
from specreg.entries.lookup import (
    MAX_ENTRY_BYTES,
    Catalog,
    catalog,
    default_registry,
    entry_path,
    lookup,
    read_catalog,
    read_entry_text,
    writable_root,
)
from specreg.entries.pin import Pinned, pin
from specreg.entries.rules import parse_entry, problems, warnings
from specreg.entries.schema import (
    SNAPSHOT_SUFFIX,
    Baseline,
    CatalogError,
    Entry,
    Harness,
    Metric,
    Metrics,
    PerPosition,
    PromptFormat,
    Serving,
    Verifier,
)

__all__ = [
    "MAX_ENTRY_BYTES",
    "SNAPSHOT_SUFFIX",
    "Baseline",
    "Catalog",
    "CatalogError",
    "CheckReport",
    "Entry",
    "Harness",
    "Metric",
    "Metrics",
    "PerPosition",
    "Pinned",
    "PromptFormat",
    "Serving",
    "Verifier",
    "catalog",
    "check",
    "default_registry",
    "entry_path",
    "lookup",
    "parse_entry",
    "pin",
    "problems",
    "read_catalog",
    "read_entry_text",
    "warnings",
    "writable_root",
]
