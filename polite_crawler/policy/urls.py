"""One canonical form for every URL (issue 6 owns the full rules).

First version: w3lib's canonical form plus lower-case host and no default port.
"""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` with the default port dropped.

    >>> origin_of("HTTP://Example.ORG:80/a?b")
    'http://example.org'
    >>> origin_of("https://127.0.0.2:8443/x")
    'https://127.0.0.2:8443'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def canonicalize(url: str) -> str:
    parts = urlsplit(canonicalize_url(url))
    return urlunsplit((parts.scheme, origin_of(url).split("://", 1)[1], parts.path or "/", parts.query, ""))
