"""specreg's exception types: every error a user can see derives from SpecregError."""

from __future__ import annotations

import json
from typing import Any, Sequence


def show_value(value: Any, limit: int = 80) -> str:
    """A short, JSON-looking rendering of a value for error messages."""
    try:
        text = json.dumps(value, ensure_ascii=False, allow_nan=True)
    except (TypeError, ValueError):
        try:
            text = repr(value)
        except ValueError:  # an integer too long to print
            text = f"an integer of about {value.bit_length() * 30103 // 100000} digits"
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return text


class SpecregError(Exception):
    """Base class of every error specreg raises on purpose."""

    def __init__(self, message: str, *, source: str | None = None):
        self.source = source
        self.message = message
        super().__init__(self.line())

    def line(self) -> str:
        """One line: ``<source>: <what is wrong>``."""
        return f"{self.source}: {self.message}" if self.source else self.message


class Problem:
    """One thing wrong with one value of a config file."""

    __slots__ = ("path", "message")

    def __init__(self, path: str, message: str):
        self.path = path
        self.message = message

    def __repr__(self) -> str:
        return f"Problem({self.path!r}, {self.message!r})"


class ConfigError(SpecregError, ValueError):
    """Bad input: the config (or the source naming it) is malformed.

    ``path`` is the JSON path of the first problem; ``problems`` holds every problem found,
    so a user fixes a file in one pass rather than one error at a time.
    """

    def __init__(self, problems: Sequence[Problem] | str, path: str = "$", *, source: str | None = None):
        if isinstance(problems, str):
            problems = [Problem(path, problems)]
        if not problems:
            raise TypeError("ConfigError needs at least one problem")
        self.problems = list(problems)
        self.path = self.problems[0].path
        first = self.problems[0].message
        more = len(self.problems) - 1
        message = f"{self.path}: {first}" + (f" (and {more} more problem{'s' * (more > 1)})" if more else "")
        super().__init__(message, source=source)

    def details(self) -> str:
        """Every problem, one per line."""
        prefix = f"{self.source}: " if self.source else ""
        return "\n".join(f"{prefix}{p.path}: {p.message}" for p in self.problems)


class UnknownAlgorithmError(ConfigError):
    """`speculators_model_type` names no registered algorithm."""


class RegistryError(SpecregError):
    """A registration conflict: a name registered twice, or a malformed algorithm module."""


class HubError(SpecregError):
    """The Hugging Face Hub (or the endpoint named by HF_ENDPOINT) did not give us the file.

    Every Hub failure is one: its kinds say which. Raised as itself, the Hub answered and failed
    (HTTP 429/5xx, after retries) or answered something refused (a file over the size cap, an ETag
    that is a path); RepoNotFoundError, GatedRepoError, RevisionNotFoundError and
    FileNotFoundOnHubError are its refusals; OfflineError is every case where no answer came.

    ``transient``: a failure worth retrying (HTTP 408/429/5xx, a dropped connection, a timeout).
    """

    def __init__(
        self, message: str, *, source: str | None = None, transient: bool = False, cache_fallback: bool | None = None
    ):
        self.transient = transient
        #: whether a cached copy may stand in (the Hub failed, rather than refused)
        self.cache_fallback = transient if cache_fallback is None else cache_fallback
        super().__init__(message, source=source)


class RepoNotFoundError(HubError):
    """No such repository, or it is private and no valid token was sent."""


class GatedRepoError(HubError):
    """The repository is gated and the token (if any) has not been granted access."""


class RevisionNotFoundError(HubError):
    """The repository exists but not at that revision."""


class FileNotFoundOnHubError(HubError):
    """The repository exists at that revision but holds no config.json."""


class OfflineError(HubError):
    """The Hub could not be reached, and no cached copy could stand in: offline mode (HF_HUB_OFFLINE)
    with the file not in the cache, or no connection after specreg's retries: refused, reset or cut
    mid-answer, a name that does not resolve, a timeout, no complete answer within
    SPECREG_HUB_DEADLINE."""


#: the bidirectional overrides, which reorder what a terminal shows
_BIDI = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def with_article(word: str) -> str:
    """`word` after "a" or "an", as it is read aloud when it starts with a vowel: "an eagle3 draft"."""
    return ("an " if word[:1].lower() in ("a", "e", "i", "o", "u") else "a ") + word


def printable(text: str) -> str:
    """`text` with every terminal control character escaped (C0 and C1 controls, DEL, ESC, the
    bidirectional overrides, lone surrogates): what a config, a catalog entry or a result file says
    is printed, never interpreted by the terminal. One line in, one line out."""
    out = []
    for ch in text:
        code = ord(ch)
        if code < 0x20 or 0x7F <= code <= 0x9F:
            out.append(f"\\x{code:02x}")
        elif ch in _BIDI or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def clipped(text: str, limit: int = 40) -> str:
    """`text` as a repr to echo in an error, its first `limit` characters when it is longer."""
    return repr(text) if len(text) <= limit else f"{text[:limit]!r}… ({len(text):,} characters)"
