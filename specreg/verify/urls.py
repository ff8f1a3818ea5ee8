"""URLs as results may record them (below both the engines and the run, which both print one)."""

from __future__ import annotations


def redact(url: str) -> str:
    """A URL as it may be recorded and published: a password in it is replaced by ***."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparsable URL)"
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return urlunsplit(parts._replace(netloc=netloc))
