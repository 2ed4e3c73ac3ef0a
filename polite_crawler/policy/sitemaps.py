"""Sitemaps and feeds, parsed safely: the URL lists a site publishes for crawlers.

One entry point, :func:`parse_sitemap`, reads every form discovery meets:

- XML sitemaps (``<urlset>``) and sitemap indexes (``<sitemapindex>``, whose
  entries are further sitemaps), per sitemaps.org;
- text sitemaps: one URL a line, UTF-8;
- RSS 2.0 (and RSS 1.0 / RDF) and Atom feeds: each item's link;
- any of these gzipped (``.xml.gz`` served as a file, not as a content coding).

Safety (issue 10): XML is parsed by lxml with entity expansion off
(``resolve_entities=False``: a billion-laughs file stays a few bytes), no DTD
loading, no network, no XInclude, no huge trees (libxml2's depth and text-size
limits stay on), comments and processing instructions dropped. Decompressed
size is capped at 50 MB and a file yields at most 50,000 URLs (the protocol's
limits); the rest is counted, not read.

Scope (sitemaps.org, "Sitemap file location"): a sitemap lists URLs of its own
host, under its own directory. ``/catalog/sitemap.xml`` may list
``/catalog/shirts`` but not ``/shoes``. A sitemap named in robots.txt speaks for
the whole host (the robots.txt is the proof), so its scope is the host's root;
entries of a sitemap index inherit that. Feeds are held to the host only.
Entries outside the scope are dropped and counted.
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import urljoin, urlsplit

from lxml import etree

from polite_crawler.policy.codings import decode_capped
from polite_crawler.policy.urls import URLError, canonicalize, host_of, origin_of

if TYPE_CHECKING:
    from collections.abc import Iterator

MAX_URLS = 50_000  # sitemaps.org: per file
MAX_BYTES = 50 * 1024 * 1024  # sitemaps.org: 50 MB uncompressed

URLSET, INDEX, TEXT, RSS, ATOM, UNKNOWN = "urlset", "sitemapindex", "text", "rss", "atom", "unknown"
_GZIP_MAGIC = b"\x1f\x8b"
_LINE = re.compile(rb"[^\r\n]+")
_DOCTYPE = re.compile(rb"<!DOCTYPE", re.IGNORECASE)
_DOCTYPE_END = re.compile(rb"[>\[]")
_ENTITY_DECL = re.compile(rb"<!ENTITY", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class SitemapEntry:
    """One listed URL (absolute, canonical) and its ``lastmod`` as written, if any."""

    url: str
    lastmod: str | None = None


@dataclass
class SitemapResult:
    """What one sitemap or feed file listed, and what was dropped and why."""

    kind: str = UNKNOWN
    pages: list[SitemapEntry] = field(default_factory=list)
    sitemaps: list[SitemapEntry] = field(default_factory=list)  # an index's children
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> count
    truncated: bool = False  # decompressed size reached the cap
    error: str | None = None

    def drop(self, reason: str, n: int = 1) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + n

    @property
    def count(self) -> int:
        return len(self.pages) + len(self.sitemaps)


def scope_of(sitemap_url: str, *, from_robots: bool = False) -> str:
    """The canonical URL prefix a sitemap's entries must start with.

    >>> scope_of("http://Example.org/catalog/sitemap.xml")
    'http://example.org/catalog/'
    >>> scope_of("http://example.org/catalog/sitemap.xml", from_robots=True)
    'http://example.org/'
    """
    canon = canonicalize(sitemap_url)
    if from_robots:
        return origin_of(canon) + "/"
    path_end = canon.split("?", 1)[0].rfind("/")
    return canon[: path_end + 1]


def _netloc(url: str) -> str:
    return f"{host_of(url)}:{urlsplit(url).port or ''}"


def _in_scope(url: str, scope: str, result: SitemapResult, *, hosts_only: bool) -> bool:
    if _netloc(url) != _netloc(scope):
        result.drop("offsite")
        return False
    # Scheme aside (an https sitemap may list http URLs of its host), the path must
    # lie under the sitemap's directory.
    if not hosts_only and not url.split("://", 1)[1].startswith(scope.split("://", 1)[1]):
        result.drop("outside_path")
        return False
    return True


def _add(result: SitemapResult, raw: str | None, lastmod: str | None, base: str, scope: str,
         *, index: bool, hosts_only: bool, max_urls: int) -> None:
    if not raw or not raw.strip():
        result.drop("empty")
        return
    if result.count >= max_urls:
        result.drop("over_limit")
        return
    try:
        url = canonicalize(urljoin(base, raw.strip()))
    except ValueError:  # URLError, or urljoin's own ("http://["): this entry only
        result.drop("invalid")
        return
    if not _in_scope(url, scope, result, hosts_only=hosts_only):
        return
    entry = SitemapEntry(url, lastmod.strip() if lastmod and lastmod.strip() else None)
    (result.sitemaps if index else result.pages).append(entry)


def _local(tag: object) -> str:
    if not isinstance(tag, str):
        return ""
    return tag.rpartition("}")[2].lower()


def _child_text(elem: etree._Element, *names: str) -> str | None:
    for child in elem:
        if _local(child.tag) in names and child.text:
            return str(child.text)
    return None


def _declares_dtd(body: bytes) -> bool:
    """Whether the file declares entities or opens an internal DTD subset.

    Linear in the body whatever it holds: a regex search for ``<!DOCTYPE
    [^>[]*[`` restarting at every ``<!DOCTYPE`` is quadratic on a file of
    them. The first ``>`` or ``[`` after a ``<!DOCTYPE`` is also the first after
    every later ``<!DOCTYPE`` before it, so the scan resumes there. Quotes are
    not read (a recovering parser may not honour them either); a ``<!ENTITY``
    anywhere refuses the file, so a ``>`` inside a quoted system identifier
    hides nothing.
    """
    if _ENTITY_DECL.search(body) is not None:
        return True
    pos = 0
    while (decl := _DOCTYPE.search(body, pos)) is not None:
        end = _DOCTYPE_END.search(body, decl.end())
        if end is None:
            return False
        if end.group() == b"[":
            return True
        pos = end.end()
    return False


def _xml_events(body: bytes) -> Iterator[tuple[str, etree._Element]]:
    # resolve_entities=False: entity references stay references (no billion laughs,
    # no external file or URL read); load_dtd/no_network: nothing is fetched.
    return etree.iterparse(  # type: ignore[no-any-return]
        io.BytesIO(body),
        events=("start", "end"),
        resolve_entities=False,
        load_dtd=False,
        no_network=True,
        dtd_validation=False,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        collect_ids=False,
        recover=True,
    )


def _parse_xml(body: bytes, base: str, scope: str, result: SitemapResult, max_urls: int) -> None:
    root_kind: str | None = None
    for event, elem in _xml_events(body):
        name = _local(elem.tag)
        if event == "start":
            if root_kind is None:
                root_kind = {"urlset": URLSET, "sitemapindex": INDEX, "rss": RSS, "rdf": RSS,
                             "feed": ATOM}.get(name, UNKNOWN)
                result.kind = root_kind
                if root_kind == UNKNOWN:
                    return
            continue
        if root_kind in (URLSET, INDEX) and name in ("url", "sitemap"):
            _add(result, _child_text(elem, "loc"), _child_text(elem, "lastmod"), base, scope,
                 index=(name == "sitemap"), hosts_only=False, max_urls=max_urls)
        elif root_kind == RSS and name == "item":
            link = _child_text(elem, "link")
            if link is None:  # RSS 2.0: a guid that is a permalink stands for the link
                guid = next((c for c in elem if _local(c.tag) == "guid"), None)
                if guid is not None and guid.get("isPermaLink", "true") != "false":
                    link = guid.text
            _add(result, link, _child_text(elem, "pubdate", "date", "updated"), base, scope,
                 index=False, hosts_only=True, max_urls=max_urls)
        elif root_kind == ATOM and name == "entry":
            href = None
            for child in elem:
                if _local(child.tag) == "link" and child.get("rel", "alternate") == "alternate":
                    href = child.get("href")
                    break
            _add(result, href, _child_text(elem, "updated", "published"), base, scope,
                 index=False, hosts_only=True, max_urls=max_urls)
        else:
            continue
        # Entries are read: free them so a 50 MB file never becomes a 50 MB tree.
        elem.clear()
        parent = elem.getparent()
        if parent is not None:
            while elem.getprevious() is not None:
                del parent[0]


def _parse_text(body: bytes, base: str, scope: str, result: SitemapResult, max_urls: int) -> None:
    result.kind = TEXT
    for match in _LINE.finditer(body):
        line = match.group().strip().removeprefix(b"\xef\xbb\xbf")
        if not line or line.startswith(b"#"):
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError:
            result.drop("invalid")
            continue
        if not text.lower().startswith(("http://", "https://")):  # full URLs only
            result.drop("invalid")
            continue
        _add(result, text, None, base, scope, index=False, hosts_only=False, max_urls=max_urls)


def parse_sitemap(
    body: bytes,
    url: str,
    *,
    scope: str | None = None,
    max_urls: int = MAX_URLS,
    max_bytes: int = MAX_BYTES,
) -> SitemapResult:
    """Parse a sitemap, sitemap index, text sitemap or feed served at ``url``.

    ``scope`` is the prefix listed URLs must start with (:func:`scope_of`;
    default: the sitemap's own directory). Never raises on a malformed body:
    what could be read is returned, and ``error`` says what went wrong.

    >>> r = parse_sitemap(b'''<?xml version="1.0"?>
    ... <urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">
    ...  <url><loc>http://example.org/a?utm_source=x</loc><lastmod>2026-01-02</lastmod></url>
    ...  <url><loc>http://other.example/b</loc></url>
    ... </urlset>''', "http://example.org/sitemap.xml")
    >>> r.kind, r.pages, r.dropped
    ('urlset', [SitemapEntry(url='http://example.org/a', lastmod='2026-01-02')], {'offsite': 1})
    """
    result = SitemapResult()
    try:
        base = canonicalize(url)
        scope = scope or scope_of(base)
    except URLError as exc:
        result.error = str(exc)
        return result
    if body[:2] == _GZIP_MAGIC:
        body, left, cut = decode_capped(body, [b"gzip"], max_bytes)
        if left:
            result.error = "not a readable gzip file"
            return result
        result.truncated = cut
    elif len(body) > max_bytes:
        body, result.truncated = body[:max_bytes], True
    head = body[:512].lstrip(b"\xef\xbb\xbf \t\r\n")
    if head.startswith(b"<") and _declares_dtd(body):
        # Entity declarations have no place in a sitemap or feed; they are how
        # billion-laughs and external-entity files are built. Refuse the file.
        result.error = "internal DTD subset (entity declarations) refused"
        result.drop("dtd_refused")
        return result
    try:
        if head.startswith(b"<"):
            _parse_xml(body, base, scope, result, max_urls)
        else:
            _parse_text(body, base, scope, result, max_urls)
    except (etree.LxmlError, ValueError, RecursionError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result
