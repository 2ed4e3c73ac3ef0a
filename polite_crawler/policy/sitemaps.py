"""Sitemaps and feeds, parsed safely: the URL lists a site publishes for crawlers.

One entry point, :func:`parse_sitemap`, reads every form discovery meets:

- XML sitemaps (``<urlset>``) and sitemap indexes (``<sitemapindex>``, whose
  entries are further sitemaps), per sitemaps.org;
- text sitemaps: one URL a line, UTF-8;
- RSS 2.0 (and RSS 1.0 / RDF) and Atom feeds: each item's link;
- any of these gzipped (``.xml.gz`` served as a file, not as a content coding).

Safety (a sitemap is hostile input): XML is parsed by lxml with entity expansion off
(``resolve_entities=False``: a billion-laughs file stays a few bytes), no DTD
loading, no network, no XInclude, no huge trees (libxml2's depth and text-size
limits stay on), comments and processing instructions dropped. Decompressed
size is capped at 50 MB and a file yields at most 50,000 URLs (the protocol's
limits); the rest is counted, not read.

Encodings: a UTF-8 byte order mark and whitespace before ``<?xml`` are
skipped (libxml2 would otherwise read the misplaced declaration as junk and, in
recovery, drop every ``&amp;``); a UTF-16 file (byte order mark, or ``<?`` in
UTF-16) is read as UTF-16.

A file cut before its end (a download stopped, a size cap reached, a server
that died mid-answer) yields every entry that closed before the cut and none
after it (a half ``<loc>`` would be a wrong URL); ``SitemapResult.truncated``
says so.

Scope (sitemaps.org, "Sitemap file location"): a sitemap lists URLs of its own
host, under its own directory. ``/catalog/sitemap.xml`` may list
``/catalog/shirts`` but not ``/shoes``. A sitemap named in robots.txt speaks for
the whole host (the robots.txt is the proof), so its scope is the host's root;
entries of a sitemap index inherit that. Feeds are held to the host only.
Entries outside the scope are dropped and counted.
"""

from __future__ import annotations

import contextlib
import re
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin

from lxml import etree

from polite_crawler.policy.codings import decode_capped
from polite_crawler.policy.urls import URLError, canonicalize, origin_of

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
_UTF8_BOM = b"\xef\xbb\xbf"
_UTF16_STARTS = (b"\xff\xfe", b"\xfe\xff", b"<\x00?\x00", b"\x00<\x00?")
_XML_DECL = re.compile(r"<\?xml[^>]*\?>")
# The end tag of one entry, and of the document, whatever the namespace prefix.
_ENTRY_END = re.compile(rb"</(?:[\w.-]+:)?(?:url|sitemap|item|entry)\s*>", re.IGNORECASE)
_ENTRY_START = re.compile(rb"<(?:[\w.-]+:)?(?:url|sitemap|item|entry)[\s/>]", re.IGNORECASE)
_LOC_END = re.compile(rb"</(?:[\w.-]+:)?(?:loc|link)\s*>", re.IGNORECASE)
_ROOT_END = re.compile(rb"</(?:[\w.-]+:)?(?:urlset|sitemapindex|rss|rdf|feed)\s*>", re.IGNORECASE)
_TAIL = 64 * 1024


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
    # The file was cut: at the size cap, or it ends inside its document (no end
    # tag). Every entry complete before the cut is listed; callers count it.
    truncated: bool = False
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


# An absolute http(s) URL with no space, control character or ';' anywhere.
_ABSOLUTE = re.compile(r"https?://[^/\s\x00-\x1f\x7f;][^\s\x00-\x1f\x7f;]*\Z", re.IGNORECASE)


def _resolve(base: str, text: str) -> str:
    """``urljoin(base, text)``, or ``text`` where canonicalize reads both the same.

    An absolute URL (most entries) needs no join; one with a ``;`` or a space inside is
    urljoin's to read (it splits path parameters off, and drops an empty ``?`` and
    the space before it).
    """
    if _ABSOLUTE.match(text):
        return text
    return urljoin(base, text)


def _netloc(url: str) -> str:
    """Host and port of a URL in canonical form (both ends of the scope test are)."""
    return url.partition("//")[2].partition("/")[0].rpartition("@")[2]


def _in_scope(url: str, scope: str, result: SitemapResult, *, hosts_only: bool,
              scope_netloc: str | None = None) -> bool:
    """``scope_netloc``: :func:`_netloc` of ``scope``, when the caller has it."""
    if _netloc(url) != (_netloc(scope) if scope_netloc is None else scope_netloc):
        result.drop("offsite")
        return False
    # Scheme aside (an https sitemap may list http URLs of its host), the path must
    # lie under the sitemap's directory.
    if not hosts_only and not url.split("://", 1)[1].startswith(scope.split("://", 1)[1]):
        result.drop("outside_path")
        return False
    return True


# The rest of a URL after its origin, when canonicalize leaves it as it is: a path of
# characters it never escapes and no query or fragment (and, checked apart, no dot
# segment and no "(" of an ASP.NET session id).
_CANONICAL_PATH = re.compile(r"/[A-Za-z0-9\-._~/!$&'*+,=:@]*")


def _canonical_prefix(scope: str) -> tuple[str, int] | None:
    """``(scope, length of its origin)`` when entries that start with ``scope`` may skip
    :func:`canonicalize` (see :func:`_add`); None when the scope is not so plain.

    >>> _canonical_prefix("http://example.org:8080/docs/")
    ('http://example.org:8080/docs/', 23)
    >>> _canonical_prefix("http://Example.org/"), _canonical_prefix("http://example.org")
    (None, None)
    """
    start = scope.find("//") + 2
    end = scope.find("/", start)
    if start < 2 or end < 0 or "@" in scope[:end]:
        return None
    origin = scope[:end]
    try:
        if canonicalize(origin + "/") != origin + "/":
            return None
    except URLError:
        return None
    return scope, end


def _add(result: SitemapResult, raw: str | None, lastmod: str | None, base: str, scope: str,
         *, index: bool, hosts_only: bool, max_urls: int,
         scope_netloc: str | None = None, prefix: tuple[str, int] | None = None) -> None:
    """``prefix``: :func:`_canonical_prefix` of ``scope``, when the caller has it."""
    text = raw.strip() if raw else ""
    if not text:
        result.drop("empty")
        return
    if len(result.pages) + len(result.sitemaps) >= max_urls:
        result.drop("over_limit")
        return
    if (prefix is not None and not hosts_only and text.startswith(prefix[0])
            and _CANONICAL_PATH.fullmatch(text, prefix[1]) is not None
            and "/." not in text and "(" not in text):
        # Already canonical (canonicalize would return it as it is) and under the
        # sitemap's own directory, so in scope: most entries of most sitemaps.
        url = text
    else:
        try:
            url = canonicalize(_resolve(base, text))
        except ValueError:  # URLError, or urljoin's own ("http://["): this entry only
            result.drop("invalid")
            return
        if not _in_scope(url, scope, result, hosts_only=hosts_only, scope_netloc=scope_netloc):
            return
    if lastmod:
        lastmod = lastmod.strip() or None
    (result.sitemaps if index else result.pages).append(SitemapEntry(url, lastmod or None))


# Tag -> local name, lower case: a file names the same few tags again and again.
_LOCAL_NAMES: dict[str, str] = {}
_LOCAL_NAMES_MAX = 4096  # a file of ever new tag names does not grow it without end


def _local(tag: object) -> str:
    if not isinstance(tag, str):
        return ""
    name = _LOCAL_NAMES.get(tag)
    if name is None:
        name = tag.rpartition("}")[2].lower()
        if len(_LOCAL_NAMES) < _LOCAL_NAMES_MAX:
            _LOCAL_NAMES[tag] = name
    return name


def _child_text(elem: etree._Element, *names: str) -> str | None:
    for child in elem:
        if _local(child.tag) in names and child.text:
            return str(child.text)
    return None


def _locs_of(elem: etree._Element) -> list[tuple[str | None, str | None]]:
    """The ``(loc, lastmod)`` pairs of one ``<url>`` or ``<sitemap>``.

    Normally one. An entry whose end tag was forgotten between two entries
    (``<sitemap><loc>a</loc><loc>b</loc></sitemap>``) holds several: each
    ``<loc>`` is an entry of its own, with the ``<lastmod>`` that follows it (as
    crawler-commons reads such files). A ``<lastmod>`` before the first ``<loc>``
    is that one's.
    """
    pairs: list[tuple[str | None, str | None]] = []
    pending: str | None = None
    local, names = _local, _LOCAL_NAMES
    for child in elem:
        tag = child.tag
        name = names.get(tag) if isinstance(tag, str) else None
        if name is None:
            name = local(tag)
        if name == "loc":
            pairs.append((str(child.text) if child.text else None, pending))
            pending = None
        elif name == "lastmod" and child.text:
            if pairs and pairs[-1][1] is None:
                pairs[-1] = (pairs[-1][0], str(child.text))
            elif not pairs:
                pending = str(child.text)
    if not pairs and elem.text and elem.text.strip():
        # No <loc> at all, the URL written as the entry's own text (met in the
        # wild; crawler-commons reads it too).
        return [(str(elem.text), pending)]
    return pairs or [(None, None)]


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


# The entries' element names, in any namespace: with these as iterparse's ``tag``, only
# the entries' end events reach Python (not their <loc> and <lastmod>). lxml matches a
# name's case as written, so a file with an upper-case letter in any tag name is read
# with every event. To find one fast, every byte but "<", ">", XML white space and
# A-Z is deleted (C speed): a name's upper-case letters then follow its "<" at once,
# and nothing else can (text and attribute values follow a ">" or a space).
_ENTRY_TAGS = ("{*}url", "{*}sitemap", "{*}item", "{*}entry")
_TAG_CASE_KEEP = frozenset(b"<> \t\r\n" + bytes(range(ord("A"), ord("Z") + 1)))
_TAG_CASE_DELETE = bytes(c for c in range(256) if c not in _TAG_CASE_KEEP)
_UPPER_AFTER_LT = re.compile(rb"<[A-Z]")


def _upper_case_tag(body: bytes) -> bool:
    """Whether some tag name in ``body`` may hold an upper-case ASCII letter (or a
    ``<`` is followed by one for another reason: a CDATA section, a DOCTYPE).

    >>> _upper_case_tag(b'<urlset a="B"><url><loc>http://e.org/A</loc></url></urlset>')
    False
    >>> _upper_case_tag(b"<urlset><URL><loc>x</loc></URL>"), _upper_case_tag(b"<s:uRl>")
    (True, True)
    """
    return _UPPER_AFTER_LT.search(body.translate(None, _TAG_CASE_DELETE)) is not None


# One pull parser a thread and filter, used again for every file (lxml: a feed parser
# may be fed a new document after close). A parser made for one file and dropped is
# left in a reference cycle whenever it filters by tag or stops before the end (its
# tag matcher keeps the last document, which keeps its parser): garbage that waits for
# a full collection, one parser's worth a sitemap, which a crawl's collector settings
# make rare.
_PARSERS = threading.local()
_FEED = 64 * 1024


def _pull_parser(tag: tuple[str, ...] | None) -> etree.XMLPullParser:
    parsers: dict[tuple[str, ...] | None, etree.XMLPullParser] | None = getattr(
        _PARSERS, "by_tag", None)
    if parsers is None:
        parsers = _PARSERS.by_tag = {}
    parser = parsers.get(tag)
    if parser is None:
        # resolve_entities=False: entity references stay references (no billion laughs,
        # no external file or URL read); load_dtd/no_network: nothing is fetched.
        # End events only: an element is read once it is complete; the root element (the
        # first event's tree's root) says what kind of file it is.
        parser = parsers[tag] = etree.XMLPullParser(
            events=("end",),
            tag=tag,
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
    return parser


def _xml_events(body: bytes, tag: tuple[str, ...] | None = None
                ) -> Iterator[tuple[str, Any]]:
    """The file's end events (``tag``: those elements' alone), read as it is fed."""
    parser = _pull_parser(tag)
    finished = False
    try:
        view = memoryview(body)
        for start in range(0, len(body), _FEED):
            parser.feed(bytes(view[start:start + _FEED]))
            yield from parser.read_events()
        parser.close()
        finished = True
        yield from parser.read_events()
    finally:
        # Stopped early or by an error: the parser made ready for the next file (its
        # document ended, no event of this one left to read).
        if not finished:
            with contextlib.suppress(etree.LxmlError):
                parser.close()
        for _ in parser.read_events():
            pass


_FREE_EVERY = 256  # entries read between two frees of the tree
_ROOT_KINDS = {"urlset": URLSET, "sitemapindex": INDEX, "rss": RSS, "rdf": RSS, "feed": ATOM}


# The first element's name, for a file cut before any element of it ended (no end event
# to read the root from).
_FIRST_ELEMENT = re.compile(rb"<([A-Za-z_][^\s>/]*)")


def _parse_xml(body: bytes, base: str, scope: str, result: SitemapResult, max_urls: int) -> None:
    # Entries' end events only, unless an entry's name is spelt in another case. A file
    # with no entry at all (no event then) is read again with every event: its root is
    # read from the first element that ends, as ever.
    if not _upper_case_tag(body) and _parse_xml_events(
            body, base, scope, result, max_urls, only=_ENTRY_TAGS):
        return
    _parse_xml_events(body, base, scope, result, max_urls, only=None)


def _parse_xml_events(body: bytes, base: str, scope: str, result: SitemapResult,
                      max_urls: int, *, only: tuple[str, ...] | None) -> bool:
    """Read the file's entries from its end events (``only``: those elements' alone);
    False when, with ``only``, no event came (nor an error after one)."""
    root_kind: str | None = None
    unfreed = 0
    scope_netloc = _netloc(scope)
    prefix = _canonical_prefix(scope)
    local, names = _local, _LOCAL_NAMES
    pages, children, canonical_path = result.pages, result.sitemaps, _CANONICAL_PATH.fullmatch
    first = _FIRST_ELEMENT.search(body)
    if first is not None:  # read again from the tree once an element ends
        name = first.group(1).rpartition(b":")[2].decode("ascii", "replace").lower()
        result.kind = _ROOT_KINDS.get(name, UNKNOWN)
    events = _xml_events(body, only)
    while True:
        try:
            _event, elem = next(events)
        except StopIteration:
            break
        except (etree.LxmlError, ValueError, RecursionError):
            if only is not None and root_kind is None:
                return False  # read again with every event: it may end before the error
            raise
        if root_kind is None:
            root_kind = _ROOT_KINDS.get(local(elem.getroottree().getroot().tag), UNKNOWN)
            result.kind = root_kind
            if root_kind == UNKNOWN:
                return True
        tag = elem.tag
        name = names.get(tag) if isinstance(tag, str) else None
        if name is None:
            name = local(tag)
        if root_kind in (URLSET, INDEX) and name in ("url", "sitemap"):
            pairs = _locs_of(elem)
            loc, lastmod = pairs[0] if len(pairs) == 1 else (None, None)
            if loc and prefix is not None:
                # _add's way for an entry in canonical form under the scope, inline
                text = loc.strip()
                if (text.startswith(prefix[0]) and canonical_path(text, prefix[1]) is not None
                        and "/." not in text and "(" not in text
                        and len(pages) + len(children) < max_urls):
                    if lastmod:
                        lastmod = lastmod.strip() or None
                    (children if name == "sitemap" else pages).append(
                        SitemapEntry(text, lastmod or None))
                    pairs = []
            for loc, lastmod in pairs:
                _add(result, loc, lastmod, base, scope, index=(name == "sitemap"),
                     hosts_only=False, max_urls=max_urls, scope_netloc=scope_netloc,
                     prefix=prefix)
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
        # Entries are read: free them so a 50 MB file never becomes a 50 MB tree; in
        # batches (freeing one entry at a time cost more than reading it).
        unfreed += 1
        if unfreed >= _FREE_EVERY:
            unfreed = 0
            parent = elem.getparent()
            if parent is None:
                elem.clear()
            else:
                del parent[:parent.index(elem)]  # every entry before this one
    return root_kind is not None


def _start_of_document(body: bytes) -> bytes:
    """``body`` as UTF-8 (or its declared 8-bit encoding) with nothing before its first byte.

    A UTF-8 byte order mark and leading whitespace go; UTF-16 becomes UTF-8
    with its declaration saying so.
    """
    if body.startswith(_UTF16_STARTS):
        text = body.decode("utf-16" if body[:2] in _UTF16_STARTS[:2] else
                           "utf-16-le" if body[1:2] == b"\x00" else "utf-16-be", "replace")
        text = text.lstrip("\ufeff \t\r\n")
        if text.startswith("<?xml"):
            text = _XML_DECL.sub('<?xml version="1.0" encoding="UTF-8"?>', text, count=1)
        return text.encode("utf-8")
    return body.removeprefix(_UTF8_BOM).lstrip(b" \t\r\n")


def _last_entry_end(body: bytes) -> re.Match[bytes] | None:
    # Searched backwards in growing windows: the end of a big file is read, not all of it.
    size = _TAIL
    while True:
        start = max(0, len(body) - size)
        last = None
        for last in _ENTRY_END.finditer(body, start):  # noqa: B007 (the last one is wanted)
            pass
        if last is not None or start == 0:
            return last
        size *= 4


def _cut_to_complete_entries(body: bytes) -> tuple[bytes, bool]:
    """An XML body up to the start of its first incomplete entry, and whether it was cut.

    Whole when the document's end tag follows its last complete entry. Cut at
    the start tag after that entry, so the document's own start stays even
    when no entry is complete.
    """
    last = _last_entry_end(body)
    after = last.end() if last is not None else 0
    if _ROOT_END.search(body, after) is not None:
        return body, False
    start = _ENTRY_START.search(body, after)
    if start is None:
        return body[: after if last else len(body)], True
    # An entry whose <loc> (or RSS <link>) closed before the cut has a whole URL:
    # kept, with whatever else of it closed before its <loc> did.
    loc_end = _LOC_END.search(body, start.end())
    return body[: loc_end.end() if loc_end is not None else start.start()], True


def _parse_text(body: bytes, base: str, scope: str, result: SitemapResult, max_urls: int) -> None:
    result.kind = TEXT
    if result.truncated and not body.endswith((b"\n", b"\r")):
        # Cut at the size cap: the last line may be half a URL.
        body = body[: max(body.rfind(b"\n"), body.rfind(b"\r")) + 1]
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
    body = _start_of_document(body)
    head = body[:512]
    if head.startswith(b"<") and _declares_dtd(body):
        # Entity declarations have no place in a sitemap or feed; they are how
        # billion-laughs and external-entity files are built. Refuse the file.
        result.error = "internal DTD subset (entity declarations) refused"
        result.drop("dtd_refused")
        return result
    try:
        if head.startswith(b"<"):
            body, cut = _cut_to_complete_entries(body)
            _parse_xml(body, base, scope, result, max_urls)
            result.truncated = result.truncated or (cut and result.kind != UNKNOWN)
        else:
            _parse_text(body, base, scope, result, max_urls)
    except (etree.LxmlError, ValueError, RecursionError) as exc:
        result.error = f"{type(exc).__name__}: {exc}"
    return result
