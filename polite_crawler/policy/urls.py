"""One canonical form for every URL: every duplicate decision and the stored identity.

Built on :func:`w3lib.url.canonicalize_url` (safe characters, percent-encoding
normalised to upper-case escapes of non-unreserved bytes, query sorted by key
then value, dot segments resolved, fragment dropped, IDN host to punycode) and
completed with what it leaves out:

- scheme and host lower-case, a trailing dot of the host dropped;
- the default port stripped (``:80`` for http, ``:443`` for https);
- tracking parameters stripped (``utm_*``, ``fbclid``, ``gclid``, ``msclkid``,
  ``mc_eid`` and the like, plus ``strip_params`` from POLITE_STRIP_PARAMS);
- session identifiers stripped, from the query (``PHPSESSID``, ``sid``,
  ``sessionid`` …), from path parameters (``;jsessionid=…``) and ASP.NET's
  cookieless ``/(S(…))/`` segments;
- the trailing-slash policy: an empty path is ``/``; any other path keeps
  the slash as written. ``/docs`` and ``/docs/`` are different resources by
  RFC 3986 and a server that treats them as one redirects one to the other,
  which the crawler follows; stripping the slash would send the crawler to the
  redirecting form and then drop the target as a duplicate of itself.

Only http and https URLs have a canonical form; anything else raises
:class:`URLError` (a :class:`ValueError`).
"""

from __future__ import annotations

import contextlib
import re
from ipaddress import IPv6Address, ip_address
from typing import TYPE_CHECKING
from urllib.parse import urlsplit, urlunsplit

from w3lib.url import canonicalize_url

if TYPE_CHECKING:
    from collections.abc import Iterable

_DEFAULT_PORTS = {"http": 80, "https": 443}

# Parameters that only say where a click came from. Compared lower-case.
TRACKING_PARAMS = frozenset({
    "fbclid", "gclid", "gclsrc", "dclid", "gbraid", "wbraid", "msclkid", "mc_eid", "mc_cid",
    "yclid", "ysclid", "twclid", "ttclid", "li_fat_id", "igshid", "igsh", "epik", "srsltid",
    "_ga", "_gl", "_hsenc", "_hsmi", "__hstc", "__hssc", "__hsfp", "hsctatracking",
    "mkt_tok", "oly_anon_id", "oly_enc_id", "vero_id", "vero_conv", "_openstat", "s_kwcid",
    "ef_id", "rb_clickid", "wickedid", "irclickid", "ncid", "cmpid", "spm", "_branch_match_id",
})
TRACKING_PREFIXES = ("utm_", "pk_", "mtm_", "matomo_", "hsa_")

# Session identifiers a server puts in URLs when it cannot set a cookie.
SESSION_PARAMS = frozenset({
    "jsessionid", "phpsessid", "sid", "sessionid", "session_id", "sessid", "session",
    "aspsessionid", "cfid", "cftoken", "zenid", "oscsid", "xtcsid", "s_sid",
})

_PATH_SESSION = re.compile(
    r";(?:" + "|".join(sorted(SESSION_PARAMS)) + r")=[^/;]*", re.IGNORECASE
)
# ASP.NET cookieless session segment: /(S(lit3py55t21z5v55vlm25s55))/page.aspx
_ASPNET_SESSION = re.compile(r"/\((?:[A-Za-z]\([^()/]*\))+\)(?=/|$)")


_NONE: frozenset[str] = frozenset()


class URLError(ValueError):
    """The text is not an http(s) URL with a host; it has no canonical form."""


def _host_port(scheme: str, netloc: str) -> str:
    userinfo, at, hostport = netloc.rpartition("@")
    if hostport.startswith("["):
        end = hostport.find("]")
        host, port = hostport[: end + 1], hostport[end + 1 :].removeprefix(":")
    else:
        host, _, port = hostport.partition(":")
    host = host.lower().rstrip(".")
    if not host or host == "[]":
        raise URLError("no host")
    if not host.isascii():
        # w3lib leaves a host it cannot IDNA-encode as written ("ü.." has an empty
        # label); with the dots gone it may encode, and then it must, or a second
        # pass would give another form. One that still cannot has no DNS name.
        try:
            host = host.encode("idna").decode("ascii")
        except UnicodeError as exc:
            raise URLError(f"host {host!r} has no IDNA form") from exc
    if port:
        if not port.isdigit() or int(port) > 65535:
            raise URLError(f"bad port {port!r}")
        port = str(int(port))
        if int(port) == _DEFAULT_PORTS[scheme]:
            port = ""
    return f"{userinfo}{at}{host}" + (f":{port}" if port else "")


def _keep_param(pair: str, strip: frozenset[str]) -> bool:
    name = pair.split("=", 1)[0].lower()
    return not (
        name in TRACKING_PARAMS
        or name in SESSION_PARAMS
        or name in strip
        or name.startswith(TRACKING_PREFIXES)
    )


# URLs already in the shape canonicalize_url produces, minus sorting and
# stripping: they skip w3lib (links on real pages mostly look like this).
_SIMPLE = re.compile(
    r"(https?)://([a-z0-9-]+(?:\.[a-z0-9-]+)*)(?::([0-9]{1,5}))?"
    r"(/[A-Za-z0-9\-._~/!$'*,=:@]*)?(?:\?([A-Za-z0-9\-._~=&]*))?"
)


def _fast(url: str, strip: frozenset[str]) -> str | None:
    m = _SIMPLE.fullmatch(url)
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    path = path or "/"
    if "/." in path or "//" in path or host.startswith("xn--") or ".xn--" in host:
        return None
    if port is not None:
        if int(port) > 65535:
            return None
        port = "" if int(port) == _DEFAULT_PORTS[scheme] else f":{int(port)}"
    if query:
        pairs = [p.split("=", 1) for p in query.split("&") if p]
        # w3lib escapes an "=" inside a value ("?a==" -> "?a=%3D"): its path does that.
        if any(len(kv) != 2 or "=" in kv[1] for kv in pairs):
            return None
        kept = sorted((k, v) for k, v in pairs if _keep_param(k, strip))
        query = "&".join(f"{k}={v}" for k, v in kept)
    return f"{scheme}://{host}{port or ''}{path}" + (f"?{query}" if query else "")


def canonicalize(url: str, *, strip_params: Iterable[str] = ()) -> str:
    """The canonical form of an http(s) URL.

    >>> canonicalize("HTTP://Example.ORG:80/a/./b/../c?b=2&a=1&utm_source=x#top")
    'http://example.org/a/c?a=1&b=2'
    >>> canonicalize("https://bücher.example:443/shop;jsessionid=0AF3?PHPSESSID=9&q=%7e")
    'https://xn--bcher-kva.example/shop?q=~'
    >>> canonicalize("http://example.org")
    'http://example.org/'
    >>> canonicalize("http://example.org/x?ref=1", strip_params=["ref"])
    'http://example.org/x'
    >>> canonicalize("mailto:someone@example.org")  # doctest: +IGNORE_EXCEPTION_DETAIL
    Traceback (most recent call last):
    ...
    polite_crawler.policy.urls.URLError: not an http(s) URL: 'mailto:someone@example.org'
    """
    if not isinstance(url, str):
        raise URLError(f"not a string: {type(url).__name__}")
    text = url.strip()
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme not in _DEFAULT_PORTS or not text[len(scheme) + 1 :].startswith("//"):
        raise URLError(f"not an http(s) URL: {url!r}")
    strip = frozenset(p.lower() for p in strip_params) if strip_params else _NONE
    fast = _fast(text, strip)
    if fast is not None:
        return fast
    return _canonicalize_slow(url, text, scheme, strip)


def _canonicalize_slow(url: str, text: str, scheme: str, strip: frozenset[str]) -> str:
    try:
        first = canonicalize_url(text)
        parts = urlsplit(first)
        netloc = _host_port(scheme, parts.netloc)
        path = parts.path
        if ";" in path or "(" in path:
            path = _ASPNET_SESSION.sub("", _PATH_SESSION.sub("", path)) or "/"
        query = parts.query
        if query:
            query = "&".join(p for p in query.split("&") if p and _keep_param(p, strip))
        out = urlunsplit((scheme, netloc, path, query, ""))
        if path != parts.path or query != parts.query or "@" in netloc:
            # What was cut may leave escapes or segments that w3lib resolves on a
            # second pass; one more pass makes the result a fixed point.
            again = urlsplit(canonicalize_url(out))
            if again.netloc != netloc:  # userinfo oddities w3lib re-encodes
                netloc = _host_port(scheme, again.netloc)
            out = urlunsplit((scheme, netloc, again.path, again.query, ""))
    except URLError:
        raise
    except (ValueError, UnicodeError) as exc:
        raise URLError(f"unparseable URL {url!r}: {exc}") from exc
    return out


def host_of(url: str) -> str:
    """The host of ``url`` as :func:`canonicalize` spells it (no port); ``""`` if none.

    >>> host_of("http://WWW.Example.org.:8080/")
    'www.example.org'
    >>> host_of("http://[::FFFF:127.0.0.1]/") == host_of(canonicalize("http://[::FFFF:127.0.0.1]/"))
    True
    """
    try:
        host = (urlsplit(url).hostname or "").lower().rstrip(".")
    except ValueError:
        return ""
    if host and not host.isascii():
        with contextlib.suppress(UnicodeError):
            host = host.encode("idna").decode("ascii")
    if ":" in host:
        # An IPv6 literal in the form w3lib gives it ("::FFFF:1.2.3.4" -> "::ffff:102:304").
        with contextlib.suppress(ValueError):
            address = ip_address(host)
            if isinstance(address, IPv6Address):
                host = str(address)
        return f"[{host}]"
    return host


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` with the default port dropped.

    The host is lower-case, punycode for an IDN, without a trailing dot: the
    same host as :func:`canonicalize` gives.

    >>> origin_of("HTTP://Example.ORG:80/a?b")
    'http://example.org'
    >>> origin_of("https://127.0.0.2:8443/x")
    'https://127.0.0.2:8443'
    >>> origin_of("http://Bücher.example./")
    'http://xn--bcher-kva.example'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = host_of(url)
    port = parts.port
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"
