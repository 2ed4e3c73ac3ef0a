"""One canonical form for every URL: every duplicate decision and the stored identity.

The canonical form is also the URL the crawler requests, so it stays equivalent
under RFC 3986 to what the page linked. It applies the syntax-based
normalisations of RFC 3986 section 6.2.2 and the scheme-based ones of 6.2.3,
and nothing else beyond the transforms the crawler needs:

- scheme and host lower-case (6.2.2.1), a trailing dot of the host dropped, an
  IDN host in its A-label form (3.2.2) by UTS #46 non-transitional processing, as
  browsers do (``faß.de`` is ``xn--fa-hia.de``, not ``fass.de``; policy.idn); an
  ASCII host as written (the URL standard checks no ``xn--`` label of one), an IPv6
  literal as RFC 5952 writes it (dotted for an IPv4-mapped address, section 5);
- percent-escapes with upper-case hex (6.2.2.1); an escape of an unreserved
  character decoded (6.2.2.2), every other escape kept as written; characters a
  component may not hold raw (space, non-ASCII, ``"<>[]^`{|}``, a ``%`` that
  starts no escape) percent-encoded as UTF-8; characters it may hold (``:/?@``,
  ``!$&'()*+,;=``) kept raw, but for ``'`` in the query, which is ``%27`` there
  as browsers and Scrapy's ``Request`` send it;
- dot segments resolved (6.2.2.3), an empty path is ``/`` and the default
  port (``:80`` for http, ``:443`` for https) or an empty one dropped (6.2.3);
- the fragment dropped; it never reaches the server;
- query parameters (``&``-separated pieces) sorted by name, then by the rest
  of the piece; empty pieces dropped; a bare name (``?a``) stays bare and is
  not ``?a=``; ``;`` is no separator;
- tracking parameters stripped (``utm_*``, ``fbclid``, ``gclid``, ``msclkid``,
  ``mc_eid`` and the like, plus ``strip_params`` from POLITE_STRIP_PARAMS);
- session identifiers stripped, from the query (``PHPSESSID``, ``sid``,
  ``sessionid`` …), from path parameters (``;jsessionid=…``) and ASP.NET's
  cookieless ``/(S(…))/`` segments;
- the trailing-slash policy: any non-empty path keeps the slash as written.
  ``/docs`` and ``/docs/`` are different resources by RFC 3986 and a server
  that treats them as one redirects one to the other, which the crawler
  follows; stripping the slash would send the crawler to the redirecting form
  and then drop the target as a duplicate of itself.

As a browser does (WHATWG URL), tabs and newlines are removed, leading and
trailing spaces and control characters stripped, and ``\\`` before the query
read as ``/``.

Only http and https URLs with a host have a canonical form; anything else
raises :class:`URLError` (a :class:`ValueError`).
"""

from __future__ import annotations

import contextlib
import functools
import re
from ipaddress import AddressValueError, IPv6Address
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from polite_crawler.policy.idn import IDNAError, to_ascii

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

# RFC 3986 section 2.3 and appendix A.
_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_SUB_DELIMS = "!$&'()*+,;="
_HEX = frozenset("0123456789abcdefABCDEF")


def _escapes(raw: str) -> re.Pattern[str]:
    """A valid escape, a run of characters the component may not hold raw, or a lone "%"."""
    allowed = re.escape("".join(sorted(_UNRESERVED)) + raw + "%")
    return re.compile(r"%[0-9A-Fa-f]{2}|[^" + allowed + r"]+|%")


# path-abempty: pchar and "/"; query: pchar, "/" and "?"; userinfo: no "@" or "/".
_PATH_FIX = _escapes(_SUB_DELIMS + ":@/")
# "'" is a sub-delim, but browsers send it as %27 in an http(s) query (WHATWG URL,
# special-query percent-encode set) and so does Scrapy's Request (safe_url_string):
# the canonical form spells it as it goes on the wire.
_QUERY_FIX = _escapes(_SUB_DELIMS.replace("'", "") + ":@/?")
_USERINFO_FIX = _escapes(_SUB_DELIMS + ":")
_ZONE_FIX = _escapes("")
# A host is a reg-name (unreserved and sub-delims) once decoded and IDNA-encoded.
_HOST_OK = frozenset(_UNRESERVED | set(_SUB_DELIMS))
# Leading and trailing C0 controls and space go (WHATWG URL "basic URL parser").
_STRIP = "".join(chr(c) for c in range(0x21))
_TAB_NEWLINE = re.compile(r"[\t\n\r]")

_NONE: frozenset[str] = frozenset()


class URLError(ValueError):
    """The text is not an http(s) URL with a host; it has no canonical form."""


def _fix(match: re.Match[str]) -> str:
    text = match.group()
    if text[0] == "%" and len(text) == 3 and text[1] in _HEX and text[2] in _HEX:
        char = chr(int(text[1:], 16))
        # RFC 3986 6.2.2.2: only an escaped unreserved character is decoded.
        return char if char in _UNRESERVED else text.upper()
    # A "%" that starts no escape stands for itself, hence "%25".
    return "".join(f"%{byte:02X}" for byte in text.encode("utf-8", "surrogatepass"))


def _component(text: str, fix: re.Pattern[str]) -> str:
    return fix.sub(_fix, text) if text else text


def _remove_dot_segments(path: str) -> str:
    """RFC 3986 5.2.4 for a path that starts with "/"."""
    if "." not in path:
        return path
    segments = path.split("/")
    out: list[str] = []
    for seg in segments[1:-1]:
        if seg == "..":
            if out:
                out.pop()
        elif seg != ".":
            out.append(seg)
    last = segments[-1]
    if last == "..":
        if out:
            out.pop()
        out.append("")
    elif last == ".":
        out.append("")
    else:
        out.append(last)
    return "/" + "/".join(out)


def _ipv6(literal: str) -> str:
    """``[...]`` as RFC 5952 writes it; the zone (RFC 6874 ``%25``) kept."""
    inner = literal[1:-1]
    address, sep, zone = inner.partition("%25")
    if "%" in address or (sep and not zone):
        raise URLError(f"bad IPv6 literal {literal!r}")
    try:
        ip = IPv6Address(address)
    except (AddressValueError, ValueError) as exc:
        # IPvFuture ("[v1.x]") included: no resolver knows it.
        raise URLError(f"bad IPv6 literal {literal!r}") from exc
    # RFC 5952 section 5: an IPv4-mapped address keeps its dotted quad.
    text = f"::ffff:{ip.ipv4_mapped}" if ip.ipv4_mapped is not None else str(ip)
    return f"[{text}" + (f"%25{_component(zone, _ZONE_FIX)}" if sep else "") + "]"


def _decode_host(host: str) -> str:
    """Percent-escapes of a reg-name decoded as UTF-8 (RFC 3986 3.2.2)."""
    raw = bytearray()
    i = 0
    while i < len(host):
        char = host[i]
        if char == "%":
            pair = host[i + 1 : i + 3]
            if len(pair) != 2 or not set(pair) <= _HEX:
                raise URLError(f"bad percent-escape in host {host!r}")
            raw.append(int(pair, 16))
            i += 3
        else:
            raw += char.encode("utf-8", "surrogatepass")
            i += 1
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise URLError(f"host {host!r} is not UTF-8 once decoded") from exc


def _host(host: str) -> str:
    """The host as the canonical form spells it; :class:`URLError` if it has none."""
    if host.startswith("["):
        if not host.endswith("]"):
            raise URLError(f"bad IPv6 literal {host!r}")
        return _ipv6(host.lower())
    if "%" in host:
        # RFC 3986 3.2.2: escapes in a reg-name are UTF-8 octets, and a name for
        # DNS is IDNA-encoded before lookup; a browser does the same (WHATWG URL
        # "host parser"), so this is the host the link leads to.
        host = _decode_host(host)
    if not host.isascii():
        # UTS #46 non-transitional, as browsers (policy.idn); its own case mapping,
        # so before any lower-casing here.
        try:
            host = to_ascii(host)
        except IDNAError as exc:
            raise URLError(str(exc)) from exc
    host = host.lower().rstrip(".")
    if not host:
        raise URLError("no host")
    if not _HOST_OK.issuperset(host):
        raise URLError(f"host {host!r} has characters no host name holds")
    return host


def _authority(scheme: str, authority: str) -> str:
    userinfo, at, hostport = authority.rpartition("@")
    if hostport.startswith("["):
        end = hostport.find("]")
        if end < 0:
            raise URLError(f"bad IPv6 literal in {authority!r}")
        host, port = hostport[: end + 1], hostport[end + 1 :]
        if port and not port.startswith(":"):
            raise URLError(f"bad port {port!r}")
        port = port[1:]
    else:
        host, _, port = hostport.partition(":")
    host = _host(host)
    if port:
        if not port.isdigit() or not port.isascii() or int(port) > 65535:
            raise URLError(f"bad port {port!r}")
        port = "" if int(port) == _DEFAULT_PORTS[scheme] else f":{int(port)}"
    if at:
        userinfo = _component(userinfo, _USERINFO_FIX) + "@"
    return f"{userinfo}{host}{port}"


def _keep_param(pair: str, strip: frozenset[str]) -> bool:
    name = pair.split("=", 1)[0].lower()
    return not (
        name in TRACKING_PARAMS
        or name in SESSION_PARAMS
        or name in strip
        or name.startswith(TRACKING_PREFIXES)
    )


def _param_order(piece: str) -> tuple[str, str]:
    # By name, then by the whole piece: "b" < "b=" < "b=1" (a bare name and an
    # empty value are different requests and both are kept).
    return piece.split("=", 1)[0], piece


def _query(query: str, strip: frozenset[str]) -> str:
    pieces = [p for p in query.split("&") if p and _keep_param(p, strip)]
    if len(pieces) > 1:
        pieces.sort(key=_param_order)
    return "&".join(pieces)


# URLs already in canonical shape apart from host case, port, parameter order,
# stripping and fragment: they skip the general path (links on real pages
# mostly look like this). No "%", no dot segment, no path parameter, no
# character to escape.
_SIMPLE = re.compile(
    r"(https?)://([A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*)(?::([0-9]{1,5}))?"
    r"(/[A-Za-z0-9\-._~/!$&'()*+,=:@]*)?(?:\?([A-Za-z0-9\-._~!$&()*+,;=:@/?]*))?(?:#.*)?"
)


def _fast(url: str, strip: frozenset[str]) -> str | None:
    m = _SIMPLE.fullmatch(url)
    if m is None:
        return None
    scheme, host, port, path, query = m.groups()
    if path is None:
        path = "/"
    elif "/." in path or ("(" in path and _ASPNET_SESSION.search(path)):
        return None
    if port is not None:
        number = int(port)
        if number > 65535:
            return None
        port = "" if number == _DEFAULT_PORTS[scheme] else f":{number}"
    if query:
        query = _query(query, strip)
    return f"{scheme}://{host.lower()}{port or ''}{path}" + (f"?{query}" if query else "")


def canonicalize(url: str, *, strip_params: Iterable[str] = ()) -> str:
    """The canonical form of an http(s) URL.

    >>> canonicalize("HTTP://Example.ORG:80/a/./b/../c?b=2&a=1&utm_source=x#top")
    'http://example.org/a/c?a=1&b=2'
    >>> canonicalize("https://bücher.example:443/shop;jsessionid=0AF3?PHPSESSID=9&q=%7e")
    'https://xn--bcher-kva.example/shop?q=~'
    >>> canonicalize("http://example.org/show?b&a=1&/category/3&r=http://x.example/?q=tl;dr")
    'http://example.org/show?/category/3&a=1&b&r=http://x.example/?q=tl;dr'
    >>> canonicalize("http://example.org/%2a/%7e/90%+of/a b")
    'http://example.org/%2A/~/90%25+of/a%20b'
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
    strip = frozenset(p.lower() for p in strip_params) if strip_params else _NONE
    fast = _fast(url, strip)
    if fast is not None:
        return fast
    text = url.strip(_STRIP)
    if "\t" in text or "\n" in text or "\r" in text:
        text = _TAB_NEWLINE.sub("", text)
    scheme = text.split(":", 1)[0].lower() if ":" in text else ""
    if scheme not in _DEFAULT_PORTS or not text[len(scheme) + 1 :].startswith("//"):
        raise URLError(f"not an http(s) URL: {url!r}")
    return _canonicalize_slow(url, text, scheme, strip)


def _canonicalize_slow(url: str, text: str, scheme: str, strip: frozenset[str]) -> str:
    rest = text[len(scheme) + 3 :].split("#", 1)[0]
    before, q, query = rest.partition("?")
    # WHATWG URL: in an http(s) URL a "\" before the query is a "/".
    before = before.replace("\\", "/")
    slash = before.find("/")
    authority, path = (before, "") if slash < 0 else (before[:slash], before[slash:])
    if not authority:
        raise URLError(f"no host in {url!r}")
    netloc = _authority(scheme, authority)
    if path:
        path = _component(path, _PATH_FIX)
        if ";" in path or "(" in path:
            path = _ASPNET_SESSION.sub("", _PATH_SESSION.sub("", path))
        path = _remove_dot_segments(path) if path else "/"
    else:
        path = "/"
    if q and query:
        query = _query(_component(query, _QUERY_FIX), strip)
    return f"{scheme}://{netloc}{path}" + (f"?{query}" if query else "")


# host_of's answers by URL, as origin_of's below: a page's links to other sites (its
# navigation's, the same on every page of a site) are asked for their host on every
# page that links them. Bounded.
@functools.lru_cache(maxsize=8192)
def host_of(url: str) -> str:
    """The host of ``url`` as :func:`canonicalize` spells it (no port); ``""`` if none.

    >>> host_of("http://WWW.Example.org.:8080/")
    'www.example.org'
    >>> host_of("http://[::FFFF:127.0.0.1]/")
    '[::ffff:127.0.0.1]'
    """
    return _host_of(url)


def _host_of(url: str) -> str:
    try:
        netloc = urlsplit(url).netloc
    except ValueError:
        return ""
    hostport = netloc.rpartition("@")[2]
    if hostport.startswith("["):
        host = hostport[: hostport.find("]") + 1]
    else:
        host = hostport.partition(":")[0]
    if not host:
        return ""
    try:
        return _host(host)
    except URLError:
        pass
    # No canonical form: the host as written, lower-case, for a log or a key.
    if not host.isascii():
        with contextlib.suppress(IDNAError):
            host = to_ascii(host)
    return host.lower().rstrip(".")


def host_of_origin(origin: str) -> str:
    """The host name of an origin as :func:`origin_of` spells it: no scheme, no port.

    One host is one name across its schemes and ports (``http://a:8080`` and
    ``https://a`` are both ``a``): the key of the frontier's one-request-in-flight rule.

    >>> host_of_origin("https://Example.org:8443")
    'example.org'
    >>> host_of_origin("http://[::1]:8080")
    '[::1]'
    """
    authority = origin.partition("://")[2] or origin
    if authority.startswith("["):
        return authority[: authority.find("]") + 1].lower()
    return authority.partition(":")[0].lower()


# origin_of's answers by URL: one request's URL is asked for its origin by the
# robots.txt check, the access log, the trap rules, the spider... (nine times a request
# on the small-site bench), and the answer only depends on the string. Bounded (a crawl
# asks about the same few URLs at a time).
@functools.lru_cache(maxsize=8192)
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
    port = parts.port  # a ValueError (bad port) is raised every time: never cached
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        origin = f"{scheme}://{host}"
    else:
        origin = f"{scheme}://{host}:{port}"
    return origin
