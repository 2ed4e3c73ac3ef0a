"""Fuzz targets: one per pure parser, each ``target(data: bytes) -> None``.

A target turns the fuzzer's bytes into the parser's input, calls it, and checks
what must hold whatever the input: no exception but the documented ones, and a
few properties of the result (a canonical form is a fixed point, a cap is
respected, a verdict is one of the known ones). A failed check raises, which
libFuzzer (``python -m tests.fuzz``) reports as a crash and hypothesis
(``tests/test_fuzz_properties.py``) as a falsifying example.

The targets need neither atheris nor hypothesis: :class:`Input` reads the bytes
the way atheris's FuzzedDataProvider would.

A parser whose module has not landed yet is listed in :data:`MISSING` with the
reason, and its target is not registered.
"""

from __future__ import annotations

import importlib
import math
from collections.abc import Callable
from typing import Any

Target = Callable[[bytes], None]
TARGETS: dict[str, Target] = {}
MISSING: dict[str, str] = {}
# Modules each target exercises (atheris instruments them for coverage feedback).
MODULES: dict[str, list[str]] = {}


def _module(name: str) -> Any:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def target(name: str, *modules: str) -> Callable[[Target], Target]:
    def register(fn: Target) -> Target:
        missing = [m for m in modules if _module(m) is None]
        if missing:
            MISSING[name] = f"{', '.join(missing)} has not landed"
        else:
            TARGETS[name] = fn
            MODULES[name] = list(modules)
        return fn

    return register


class Input:
    """Structured values read from raw fuzzer bytes (never runs out: zeros after the end)."""

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        b = self.data[self.pos]
        self.pos += 1
        return b

    def int(self, lo: int, hi: int) -> int:
        span = hi - lo + 1
        value = 0
        for _ in range(max(1, (span.bit_length() + 7) // 8)):
            value = (value << 8) | self.byte()
        return lo + value % span

    def pick(self, options: list[Any] | tuple[Any, ...]) -> Any:
        return options[self.int(0, len(options) - 1)]

    def bytes(self, max_len: int) -> bytes:
        n = self.int(0, max_len)
        out = self.data[self.pos : self.pos + n]
        self.pos += len(out)
        return out

    def rest(self) -> bytes:
        out = self.data[self.pos :]
        self.pos = len(self.data)
        return out

    def text(self, max_len: int) -> str:
        return self.bytes(max_len).decode("utf-8", "replace")


# --- addresses ---------------------------------------------------------------------


@target("addresses", "polite_crawler.policy.addresses")
def addresses(data: bytes) -> None:
    from polite_crawler.policy.addresses import AddressPolicy, parse_host

    inp = Input(data)
    text = inp.text(300)
    host = parse_host(text)
    if not host.invalid:
        again = parse_host(host.text)
        assert again.text == host.text and again.ip == host.ip, (text, host, again)
    policy = AddressPolicy(start_urls=["http://127.0.0.1:8080/"], max_url_length=2000)
    for url in (text, f"http://{text}/", f"https://{text}:8080/x"):
        reason = policy.check_url(url)
        assert reason is None or (isinstance(reason, str) and reason), url
    reason = policy.check_address(text, "x.example", 80)
    assert reason is None or reason.startswith("dns-")


# --- URL canonical form ------------------------------------------------------------------

_URL_PARTS = ("http://", "https://", "HTTP://", "//", "%", "%2e", "..", "/./", "?", "&", "=",
              "#", ";jsessionid=", "utm_source=", "@", ":80", ":443", "[", "]", "\\", " ",
              "xn--", "ü", "\x00", ".", "/(S(abc))/")


@target("urls", "polite_crawler.policy.urls")
def urls(data: bytes) -> None:
    from polite_crawler.policy.urls import URLError, canonicalize, host_of, origin_of

    inp = Input(data)
    pieces = [inp.pick(_URL_PARTS) if inp.byte() % 2 else inp.text(20)
              for _ in range(inp.int(0, 12))]
    url = "http://" + "".join(pieces) if inp.byte() % 4 else "".join(pieces)
    host_of(url)
    try:
        canon = canonicalize(url)
    except URLError:
        return
    assert canonicalize(canon) == canon, (url, canon, canonicalize(canon))
    assert canon.startswith(("http://", "https://")), canon
    assert origin_of(canon).startswith(canon.split("://", 1)[0]), canon


# --- robots.txt ----------------------------------------------------------------------------

_ROBOTS_LINES = ("User-agent: *\n", "User-agent: PoliteCrawler\n", "Disallow: /\n",
                 "Allow: /a\n", "Disallow: /a*b$\n", "Crawl-delay: 5\n", "Crawl-delay: 1e999\n",
                 "Crawl-delay: -3\n", "Sitemap: http://e.org/s.xml\n",
                 "Content-Signal: ai-train=no\n", "# comment\n", "\ufeff",
                 "Disallow: /%E2%82%AC\n", "Allow: /$\n")


@target("robots", "polite_crawler.policy.robots")
def robots(data: bytes) -> None:
    from polite_crawler.policy.robots import RobotsRules, decode_robots

    inp = Input(data)
    if inp.byte() % 2:
        body = "".join(inp.pick(_ROBOTS_LINES) if inp.byte() % 3 else inp.text(40)
                       for _ in range(inp.int(0, 20))).encode("utf-8", "replace")
        if inp.byte() % 5 == 0:
            body = body.decode("utf-8", "replace").encode("utf-16")
    else:
        body = inp.rest()
    text, cut = decode_robots(body, max_bytes=4096)
    assert isinstance(text, str) and isinstance(cut, bool)
    rules = RobotsRules.parse(body, "PoliteCrawler", max_bytes=4096)
    path = inp.text(40)
    assert rules.allowed(f"http://e.org/{path}") in (True, False)
    delay = rules.crawl_delay
    assert delay is None or (math.isfinite(delay) and delay >= 0), delay
    rules.signals(f"http://e.org/{path}")


# --- sitemaps and feeds, and XML safety ----------------------------------------------------

_XML_PIECES = (b'<?xml version="1.0"?>', b"<urlset>", b"</urlset>", b"<url><loc>",
               b"</loc></url>", b"http://example.org/dir/a", b"http://other.example/b",
               b"/dir/rel", b"<sitemapindex>", b"<sitemap><loc>", b"</loc></sitemap>",
               b"<lastmod>2026-01-01</lastmod>", b"<rss><channel><item><link>",
               b"</link></item>", b"<feed><entry><link href=\"", b"\"/></entry>",
               b"<!DOCTYPE x [<!ENTITY a \"aaaa\">]>", b"&a;", b"<!DOCTYPE x SYSTEM",
               b"<xi:include href=\"file:///etc/passwd\"/>", b"\x1f\x8b", b"\n", b"&#0;",
               b"]]>")


@target("sitemaps", "polite_crawler.policy.sitemaps")
def sitemaps(data: bytes) -> None:
    from polite_crawler.policy.sitemaps import parse_sitemap

    inp = Input(data)
    if inp.byte() % 2:
        body = b"".join(inp.pick(_XML_PIECES) if inp.byte() % 3 else inp.bytes(30)
                        for _ in range(inp.int(0, 30)))
    else:
        body = inp.rest()
    result = parse_sitemap(body, "http://example.org/dir/sitemap.xml", max_urls=100)
    assert result.count <= 100
    # Sitemaps list URLs under their own directory; feeds are held to the host.
    scope = "example.org/" if result.kind in ("rss", "atom") else "example.org/dir/"
    for entry in [*result.pages, *result.sitemaps]:
        assert entry.url.split("://", 1)[1].startswith(scope), entry
    assert b"root:" not in repr(result).encode()  # nothing of /etc/passwd came in


# --- charsets and mislabelled text ------------------------------------------------------------

_CHARSETS = ("utf-8", "UTF8", "latin-1", "iso-8859-1", "windows-1252", "utf-16", "utf-16-le",
             "utf-32", "shift_jis", "iso-2022-jp", "gb18030", "koi8-r", "x-no-such-charset",
             "", "utf-7", "unicode-1-1-utf-7", "cp1252;", "\x00", "ébc")


@target("charset", "polite_crawler.policy.links", "polite_crawler.policy.traps")
def charset(data: bytes) -> None:
    from w3lib.encoding import html_to_unicode

    from polite_crawler.policy.charset import strip_unusable_charset
    from polite_crawler.policy.links import extract_links
    from polite_crawler.policy.traps import html_text

    inp = Input(data)
    declared = inp.pick(_CHARSETS) if inp.byte() % 4 else inp.text(12)
    ctype = f"text/html; charset={declared}"
    body = inp.rest()
    # What the crawler does first (middlewares/charset.py): drop a label that
    # cannot decode text, then let w3lib decode.
    ctype = strip_unusable_charset(ctype) or ctype
    encoding, text = html_to_unicode(ctype, body)
    assert isinstance(text, str) and isinstance(encoding, str)
    html_text(body, "utf-8")
    links = extract_links(body, "http://example.org/p", declared, max_links=50)
    assert len(links.links) <= 50
    for link in links.links:
        assert link.url.startswith(("http://", "https://")), link


@target("links", "polite_crawler.policy.links")
def links(data: bytes) -> None:
    from polite_crawler.policy.links import extract_links

    inp = Input(data)
    pieces = (b"<a href=\"", b"\">", b"</a>", b"<base href=\"", b"<link rel=canonical href=",
              b"javascript:x", b"//", b"http://h/", b"#", b"<title>", b"</title>", b"<area href=",
              b" rel=\"nofollow\"", b"\x00", b"<!--", b"<script>", b"&amp;", b"%zz")
    body = b"".join(inp.pick(pieces) if inp.byte() % 2 else inp.bytes(20)
                    for _ in range(inp.int(0, 60)))
    got = extract_links(body, "http://example.org/dir/page", None, max_links=20)
    assert len(got.links) <= 20
    assert got.canonical is None or got.canonical.startswith(("http://", "https://"))


# --- content codings -------------------------------------------------------------------------


@target("codings", "polite_crawler.policy.codings")
def codings(data: bytes) -> None:
    import gzip
    import zlib

    from polite_crawler.policy.codings import decode_capped

    inp = Input(data)
    cap = inp.int(1, 5000)
    names = [inp.pick((b"gzip", b"deflate", b"br", b"zstd", b"x-gzip", b"identity", b"bogus"))
             for _ in range(inp.int(0, 3))]
    raw = inp.rest()
    for body in (raw, gzip.compress(raw * 50), zlib.compress(raw * 50)):
        out, left, cut = decode_capped(body, names, cap)
        assert len(out) <= max(cap, len(body)), (len(out), cap)
        assert isinstance(left, list) and isinstance(cut, bool)


# --- response verdicts: Retry-After, challenge pages -----------------------------------------


@target("retry_after", "polite_crawler.policy.verdicts")
def retry_after(data: bytes) -> None:
    from polite_crawler.policy.verdicts import parse_retry_after

    inp = Input(data)
    forms = ("120", "0", "-5", "1e9", "nan", "inf", "Thu, 01 Jan 1970 00:02:00 GMT",
             "Sunday, 06-Nov-94 08:49:37 GMT", "Sun Nov  6 08:49:37 1994", "9" * 400)
    value: str | bytes = inp.pick(forms) + inp.text(10) if inp.byte() % 2 else inp.bytes(60)
    now = float(inp.int(0, 2**40))
    wait = parse_retry_after(value, now)
    assert wait is None or (math.isfinite(wait) and wait > 0), (value, wait)


@target("challenges", "polite_crawler.policy.challenges", "polite_crawler.policy.verdicts")
def challenges(data: bytes) -> None:
    from polite_crawler.policy.challenges import CHALLENGE_RULES, detect_challenge
    from polite_crawler.policy.verdicts import Action, classify_response

    inp = Input(data)
    status = inp.pick((200, 403, 429, 503, 402, 301, 500, 999, 0))
    names = ("server", "cf-mitigated", "content-encoding", "retry-after", "x-datadome",
             "content-type", "set-cookie")
    # As verdicts.text_headers builds them from the wire: bytes read as latin-1.
    headers = {inp.pick(names): inp.bytes(30).decode("latin-1") for _ in range(inp.int(0, 4))}
    body = inp.rest()
    name = detect_challenge(status, headers, body)
    assert name is None or name in {r.name for r in CHALLENGE_RULES}
    verdict = classify_response(status, headers, body, 1.0e9)
    assert isinstance(verdict.action, Action) and verdict.reason
    assert verdict.wait is None or (math.isfinite(verdict.wait) and verdict.wait >= 0)


# --- Cache-Control and revisit intervals -------------------------------------------------------


@target("cache_control", "polite_crawler.policy.revisit")
def cache_control(data: bytes) -> None:
    from polite_crawler.policy.revisit import (
        freshness,
        parse_cache_control,
        parse_http_date,
        parse_lastmod,
    )

    inp = Input(data)
    forms = ("max-age=60", "no-store", "no-cache", 'no-cache="x"', "max-age=", "max-age=-1",
             "max-age=\u00b2", "public", ",", '"', "max-age=" + "9" * 5000, "s-maxage=5")
    cc = ", ".join(inp.pick(forms) if inp.byte() % 2 else inp.text(20)
                   for _ in range(inp.int(0, 5)))
    directives = parse_cache_control(cc)
    assert all(name == name.lower() for name in directives)
    dates = ("Thu, 01 Jan 1970 00:02:00 GMT", "0", "Fri, 31 Dec 9999 23:59:59 -2359",
             "Mon, 01 Jan 0001 00:00:00 +2359", "garbage")
    headers = {"cache-control": cc}
    for name in ("date", "expires", "age"):
        if inp.byte() % 2:
            headers[name] = inp.pick(dates) if inp.byte() % 2 else inp.text(30)
    fetched = float(inp.int(0, 2**33))
    fresh = freshness(headers, fetched)
    assert fresh.fresh_until is None or (math.isfinite(fresh.fresh_until)
                                         and fresh.fresh_until > fetched)
    when = parse_http_date(inp.text(40))
    assert when is None or math.isfinite(when)
    lastmod = parse_lastmod(inp.text(40))
    assert lastmod is None or math.isfinite(lastmod)


__all__ = ["MISSING", "MODULES", "TARGETS", "Input"]
