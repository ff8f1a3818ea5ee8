"""URLs as results and commands may show them (below both the engines and the run, which both print
one; `specreg env` prints the Hub endpoint through the same helper)."""

from __future__ import annotations

#: query parameters whose value is a credential (an API key or a signed URL's signature)
_SECRET_PARAMS = ("token", "key", "password", "secret", "signature", "sig", "auth")


def redact(url: str) -> str:
    """A URL as it may be recorded and published: a password in it (or a user name standing alone,
    which is how a token rides in a URL: https://TOKEN@host) and a credential in its query are
    replaced by ***."""
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparsable URL)"
    userinfo, at, host = parts.netloc.rpartition("@")
    if at:
        user = f"{userinfo.partition(':')[0]}:***" if ":" in userinfo else "***"
        parts = parts._replace(netloc=f"{user}@{host}")
    if parts.query:
        pairs = parse_qsl(parts.query, keep_blank_values=True)
        if any(any(s in k.lower() for s in _SECRET_PARAMS) for k, _v in pairs):
            shown = [(k, "***" if any(s in k.lower() for s in _SECRET_PARAMS) else v) for k, v in pairs]
            parts = parts._replace(query=urlencode(shown, safe="*"))
    return urlunsplit(parts)
