"""Fast link extraction from HTML bytes: the crawler's hot path on every page.

lxml's HTML parser (libxml2) reads the page once; the anchors and meta tags are
walked in one ``iter("a", "area", "meta")``, and hrefs are joined to the base with
string operations where the href is already absolute or root-relative (most are),
:func:`urljoin` only for the rest. Measured against Scrapy's LinkExtractor and a Lexbor-based parser
in ``bench/links.py``.

Bounded work (a page may hold any number of links): at most ``max_links`` links are
returned; the anchors after the cap is reached are counted, not resolved, so a page
of 200,000 links costs one parse and a count. libxml2 keeps its nesting-depth and
text-size limits (``huge_tree`` off), and nothing is fetched (``no_network``).

Every URL that comes out (links, ``<base href>``, rel=canonical) is an absolute
http(s) URL with a lower-case scheme; anything else (``javascript:``, an href
:func:`urljoin` cannot parse, a charset Python does not know) is ignored, never
raised.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass, field
from urllib.parse import urljoin, urlsplit

from lxml import etree

# libxml2's nesting limit without huge_tree: it stops reading a page at this depth.
LXML_MAX_DEPTH = 256

_SCHEME = re.compile(r"^([a-zA-Z][a-zA-Z0-9+.-]*):")
_WS = re.compile(r"[\t\n\r]")


@dataclass(frozen=True, slots=True)
class Link:
    """An absolute http(s) URL as the page wrote it (joined, fragment dropped, not canonical)."""

    url: str
    nofollow: bool = False  # every anchor to it had rel="nofollow"


@dataclass
class PageLinks:
    """What one parse of a page gives discovery."""

    links: list[Link] = field(default_factory=list)
    title: str = ""
    canonical: str | None = None  # <link rel="canonical" href>, absolute
    base: str = ""  # the base URL links were joined to (<base href> honoured)
    dropped: int = 0  # anchors with an href after the cap was reached (not resolved)
    # (name, content) of every <meta name=... content=...>, names lower-case, in page
    # order: what the page says about itself (meta robots), from the same parse.
    metas: list[tuple[str, str]] = field(default_factory=list)
    # libxml2 stopped at its nesting limit (:data:`LXML_MAX_DEPTH`): what follows
    # was not read. False means the page nests less deeply than that.
    too_deep: bool = False


def _utf8(encoding: str | None) -> str | None:
    """Python's name of the codec (``utf-8`` for every UTF-8 alias); None if unknown."""
    if not encoding:
        return None
    try:
        name = codecs.lookup(encoding).name
    except (LookupError, ValueError):  # ValueError: a NUL in the name
        return None
    return "utf-8" if name == "utf-8" else name


def _with_host(url: str | None) -> str | None:
    """``url`` if it parses and names a host (checked for the one base and canonical)."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises ValueError on a port that is no number
    except ValueError:
        return None
    return url if parts.hostname else None


def _rel_tokens(value: str | None) -> list[str]:
    return value.lower().split() if value else []


class _Joiner:
    """urljoin with fast paths for the common href shapes; None for all but http(s)."""

    def __init__(self, base: str) -> None:
        self.base = base
        scheme, _, rest = base.partition("://")
        self.scheme = scheme.lower()
        self.root = f"{self.scheme}://{rest.split('/', 1)[0].split('?', 1)[0].split('#', 1)[0]}"
        # The base's directory segments, for joining relative paths without urljoin
        # (None: a base this shortcut does not handle).
        self.dir: list[str] | None = None
        try:
            parts = urlsplit(base)
        except ValueError:
            return
        if (parts.scheme.lower() == self.scheme and f"{self.scheme}://{parts.netloc}" == self.root
                and parts.path.startswith("/") and ";" not in parts.path):
            self.dir = parts.path.split("/")[:-1]

    def __call__(self, href: str) -> str | None:
        if "\t" in href or "\n" in href or "\r" in href:
            href = _WS.sub("", href)
        if "#" in href:  # a fragment never reaches the server
            href = href.split("#", 1)[0]
        if not href:
            return None
        if href[0] == "/":
            if href.startswith("//"):
                return f"{self.scheme}:{href}"
            return self.root + href
        m = _SCHEME.match(href)
        if m is not None:
            scheme = m.group(1).lower()
            if scheme not in ("http", "https"):
                return None  # mailto:, javascript:, tel:, data: ...
            if href.startswith("//", m.end()):
                return scheme + href[m.end() - 1 :]
            # "http:x" without "//" is relative to a base of the same scheme
            # (RFC 3986 section 5.2.2, the non-strict reading browsers follow).
        return self._join(href)

    def _join(self, href: str) -> str | None:
        # urlsplit strips leading controls and spaces ("\x01//host" is no relative path).
        if (self.dir is not None and href[0] > " " and href[0] not in "?;"
                and ";" not in href and ":" not in href):
            return self._relative(href)
        try:
            joined = urljoin(self.base, href)
        except ValueError:  # "//[oops" and the like: no URL at all
            return None
        # urljoin hands back what it cannot resolve as it came ("\x01javascript:x",
        # "https:x" under an http base): only an absolute http(s) URL is a link.
        return joined if joined.startswith(("http://", "https://")) else None

    def _relative(self, href: str) -> str:
        """A relative-path reference joined as :func:`urljoin` does (a test holds them equal)."""
        assert self.dir is not None
        path, _, query = href.partition("?")
        segments = [*self.dir, *path.split("/")]
        # urljoin drops empty segments between the first and the last.
        segments[1:-1] = [seg for seg in segments[1:-1] if seg]
        resolved: list[str] = []
        for seg in segments:
            if seg == "..":
                if resolved:
                    resolved.pop()
            elif seg != ".":
                resolved.append(seg)
        if segments[-1] in (".", ".."):
            resolved.append("")
        joined = "/".join(resolved)
        if not joined.startswith("/"):
            joined = "/" + joined
        return f"{self.root}{joined}?{query}" if query else f"{self.root}{joined}"


def extract_links(
    body: bytes,
    url: str,
    encoding: str | None = None,
    *,
    max_links: int,
) -> PageLinks:
    """The links, title and rel=canonical of an HTML page served at ``url``.

    Links are unique by URL, in page order; ``nofollow`` is true when every
    anchor to the URL (up to the cap) says ``rel="nofollow"``. At most
    ``max_links`` links; from the first anchor after that, anchors are only
    counted in ``dropped``. Never raises on bad HTML.

    >>> page = b'''<html><head><title> Hi </title><link rel="canonical" href="/c">
    ... </head><body><a href="b?x=1#f">b</a> <a href="//cdn.example/i" rel="nofollow">i</a>
    ... <a href="mailto:x@y">m</a> <a href="#top">t</a> <area href="/map"></body></html>'''
    >>> got = extract_links(page, "http://example.org/dir/page", max_links=5000)
    >>> got.title, got.canonical
    ('Hi', 'http://example.org/c')
    >>> for link in got.links: print(link.url, link.nofollow)
    http://example.org/dir/b?x=1 False
    http://cdn.example/i True
    http://example.org/map False
    """
    result = PageLinks(base=url)
    if not body or not body.strip():
        return result
    root, result.too_deep = _parse_html(body, encoding)
    if root is None:
        return result
    join = _read_head(root, url, result)
    _read_anchors_and_metas(root, join, result, max_links)
    return result


def _parse_html(body: bytes, encoding: str | None) -> tuple[etree._Element | None, bool]:
    """The page's tree (None: nothing lxml can read), and whether it hit libxml2's depth
    limit."""
    encoding = _utf8(encoding)
    if encoding is not None and encoding != "utf-8":
        # libxml2 knows fewer codec names than Python: transcode here.
        try:
            body = body.decode(encoding, "replace").encode("utf-8")
            encoding = "utf-8"
        except (LookupError, UnicodeError):
            # Not a text encoding ("zlib", "rot13"), or one that refuses "replace"
            # ("idna"): as if no charset were declared.
            encoding = None
    parser = etree.HTMLParser(
        encoding=encoding,
        no_network=True,
        huge_tree=False,
        remove_comments=True,
        remove_pis=True,
        remove_blank_text=False,
        compact=True,
        collect_ids=False,
    )
    try:
        root = etree.fromstring(body, parser)
    except (etree.LxmlError, ValueError):
        return None, False
    last = parser.error_log.last_error
    # The depth limit is fatal: when it is hit, it is the last thing libxml2 says.
    return root, last is not None and last.type_name == "ERR_RESOURCE_LIMIT"


def _read_head(root: etree._Element, url: str, result: PageLinks) -> _Joiner:
    """The base URL (``<base href>``), the title and rel=canonical, from the head (or
    the whole page when it has none); returns the joiner of the page's links."""
    head = root.find("head")
    scope = head if head is not None else root
    base_el = scope.find(".//base[@href]")
    if base_el is not None:
        base = _with_host(_Joiner(url)((base_el.get("href") or "").strip()))
        if base is not None:
            result.base = base
    join = _Joiner(result.base)
    title = scope.find(".//title")
    if title is not None:
        result.title = " ".join(str(title.xpath("string()")).split())
    for link_el in scope.iter("link"):
        if "canonical" in _rel_tokens(link_el.get("rel")) and link_el.get("href"):
            result.canonical = _with_host(join((link_el.get("href") or "").strip()))
            break
    return join


def _read_anchors_and_metas(root: etree._Element, join: _Joiner, result: PageLinks,
                            max_links: int) -> None:
    """The links of ``<a>`` and ``<area>`` (unique by URL, in page order, at most
    ``max_links``, the rest counted) and the ``<meta name content>`` pairs."""
    metas = result.metas
    found: dict[str, bool] = {}
    # A page links the same page many times (anchors to its sections): each
    # distinct href, fragment dropped, is joined once.
    joined: dict[str, str | None] = {}
    # One walk of the tree for anchors and meta tags (each walk of a whole page
    # costs about as much as reading the anchors it finds).
    for el in root.iter("a", "area", "meta"):
        if el.tag == "meta":
            name, content = el.get("name"), el.get("content")
            if name is not None and content is not None:
                metas.append((name.strip().lower(), content))
            continue
        href = el.get("href")
        if not href:
            continue
        if len(found) >= max_links:
            # The cap is reached: count the rest, resolve none of them.
            result.dropped += 1
            continue
        href = href.partition("#")[0]
        if href in joined:
            target = joined[href]
        else:
            target = joined[href] = join(href.strip())
        if target is None:
            continue
        nofollow = "nofollow" in _rel_tokens(el.get("rel"))
        seen = found.get(target)
        if seen is None:
            found[target] = nofollow
        elif seen and not nofollow:
            found[target] = False
    result.links = [Link(u, nf) for u, nf in found.items()]
