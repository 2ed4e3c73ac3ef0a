"""Rules for rendering a page in a browser: what it may fetch, and when it is needed.

HTML or the site's API before a headless browser (a browser fetches every script,
style and image a page names: many requests where one would do): a browser is the last
resort, for a page whose content is built by its scripts and whose site offers no
data of its own; then it fetches only what builds the content.

* :func:`judge_subrequest`: each request the page's browser would send is let
  through only when it is a document, a script or a data request (XHR/fetch) of
  the page's own origin, by GET or HEAD; images, media, fonts, stylesheets (a
  setting), favicons, pings, beacons, and every request to an analytics or
  tag-manager host (``blocked_hosts.txt`` plus a setting) are blocked before they
  leave. Another origin is blocked too: its requests would not pass its own
  robots.txt and rest, which the frontier keeps per origin.
* :func:`script_built`: a page whose HTML has no main text but an empty
  application root or a ``<noscript>`` asking for JavaScript.
* :func:`json_alternate`, :func:`json_ld_text`, :func:`json_text`: what the page
  offers instead of a render (a declared JSON endpoint, JSON-LD in the page).

No Scrapy or Twisted import (``tests/test_policy_purity.py``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from html import escape
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit

import lxml.html

from polite_crawler.policy.verdicts import Action, Verdict

BLOCKED_HOSTS_FILE = Path(__file__).resolve().parent.parent / "render" / "blocked_hosts.txt"

# Playwright's resource types (Request.resource_type) a page may fetch.
ALLOWED_TYPES = frozenset({"document", "script", "xhr", "fetch"})
STYLESHEET = "stylesheet"
READ_METHODS = frozenset({"GET", "HEAD"})


def load_blocked_hosts(path: Path = BLOCKED_HOSTS_FILE) -> frozenset[str]:
    """Host names from a data file: one a line, ``#`` comments."""
    hosts = set()
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.split("#", 1)[0].strip().lower().rstrip(".")
        if line:
            hosts.add(line)
    return frozenset(hosts)


@dataclass(frozen=True)
class SubrequestRules:
    """What a rendered page may fetch (``POLITE_RENDER_*`` settings)."""

    blocked_hosts: frozenset[str] = field(default_factory=frozenset)
    block_stylesheets: bool = True


def host_blocked(host: str, blocked: frozenset[str]) -> bool:
    """The host or one of its parent domains is listed.

    >>> host_blocked("www.google-analytics.com", frozenset({"google-analytics.com"}))
    True
    >>> host_blocked("notgoogle-analytics.com", frozenset({"google-analytics.com"}))
    False
    """
    host = host.lower().rstrip(".")
    while host:
        if host in blocked:
            return True
        _, dot, host = host.partition(".")
        if not dot:
            return False
    return False


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    try:
        port = parts.port
    except ValueError:
        port = -1
    default = {"http": 80, "https": 443}.get(scheme)
    return scheme, (parts.hostname or "").lower(), port if port is not None else default


def judge_subrequest(
    url: str, resource_type: str, method: str, page_url: str, rules: SubrequestRules,
) -> str | None:
    """Why the page's browser must not send this request (None: it may).

    >>> r = SubrequestRules(frozenset({"googletagmanager.com"}))
    >>> page = "https://example.org/a"
    >>> judge_subrequest("https://example.org/app.js", "script", "GET", page, r) is None
    True
    >>> judge_subrequest("https://example.org/logo.png", "image", "GET", page, r)
    'image'
    >>> judge_subrequest("https://www.googletagmanager.com/gtm.js", "script", "GET", page, r)
    'analytics'
    >>> judge_subrequest("https://cdn.example.net/lib.js", "script", "GET", page, r)
    'other_origin'
    >>> judge_subrequest("https://example.org/favicon.ico", "other", "GET", page, r)
    'favicon'
    >>> judge_subrequest("https://example.org/api/hit", "fetch", "POST", page, r)
    'method'
    """
    parts = urlsplit(url)
    if parts.scheme.lower() not in ("http", "https"):
        # data: and blob: never reach the network and are not routed; anything else
        # (ws:, ftp:, file:) is not for a crawler.
        return "scheme"
    if host_blocked(parts.hostname or "", rules.blocked_hosts):
        return "analytics"
    path = parts.path.lower()
    if path.endswith(".ico") or resource_type == "manifest":
        return "favicon"
    if resource_type == STYLESHEET:
        if rules.block_stylesheets:
            return "stylesheet"
    elif resource_type not in ALLOWED_TYPES:
        return resource_type or "other"  # image, media, font, ping, eventsource, websocket ...
    if _origin(url) != _origin(page_url):
        return "other_origin"
    if method.upper() not in READ_METHODS:
        return "method"
    return None


# --- is a render needed? ----------------------------------------------------------------

# Ids and attributes the common client-side frameworks mount their application on.
_APP_ROOT_IDS = frozenset({"root", "app", "__next", "__nuxt", "svelte", "application", "main-app"})
_APP_ROOT_ATTRS = ("data-reactroot", "ng-app", "ng-version", "data-server-rendered", "x-data")
_NEEDS_JS = re.compile(r"java\s*script|enable\s+js|\bjs\b", re.IGNORECASE)
SHELL_MAX_WORDS = 20  # main text words below which a page counts as having none


def ends_render(verdict: Verdict) -> bool:
    """Whether a sub-request's answer speaks for the origin, so that the render stops
    sending and its exchange answers the gate with it: a stop (402, 403, a challenge
    page, whatever its status) or a wait the site asked for (429, 503). The verdict is
    :func:`polite_crawler.policy.verdicts.classify_response`'s, as the gate's is.

    >>> from polite_crawler.policy.verdicts import classify_response
    >>> [ends_render(classify_response(s, {}, b"", 0.0)) for s in (200, 403, 404, 429, 500, 503)]
    [False, True, False, True, False, True]
    >>> ends_render(classify_response(200, {"cf-mitigated": "challenge"}, b"", 0.0))
    True
    """
    if verdict.action is Action.STOP_ORIGIN:
        return True
    return verdict.action is Action.RETRY_LATER and (verdict.rate_limited
                                                     or verdict.label == "retry_later:503")


def _parse(body: bytes, encoding: str | None) -> Any:
    if not body.strip():
        return None
    try:
        parser = lxml.html.HTMLParser(encoding=encoding or "utf-8", remove_comments=True)
        return lxml.html.document_fromstring(body, parser=parser)
    except (ValueError, lxml.etree.ParserError):
        return None


def script_built(body: bytes, main_words: int, encoding: str | None = "utf-8") -> str | None:
    """Why the page looks built by its scripts, with no main text of its own (None: not).

    ``main_words``: the words of its main text as the crawl extracted it.

    >>> script_built(b"<html><body><div id='root'></div><script src='a.js'></script>", 0)
    'empty_app_root'
    >>> script_built(b"<html><body><noscript>Please enable JavaScript</noscript></body>", 0)
    'noscript'
    >>> script_built(b"<html><body><p>Hello</p></body></html>", 1) is None
    True
    """
    if main_words >= SHELL_MAX_WORDS:
        return None
    doc = _parse(body, encoding)
    if doc is None:
        return None
    for el in doc.iter("noscript"):
        if _NEEDS_JS.search(el.text_content() or ""):
            return "noscript"
    if not doc.xpath("//script"):
        return None
    for el in doc.iter("div", "main", "section", "app-root"):
        mounted = (el.get("id") or "").lower() in _APP_ROOT_IDS or el.tag == "app-root" \
            or any(el.get(a) is not None for a in _APP_ROOT_ATTRS)
        if mounted and not (el.text_content() or "").strip():
            return "empty_app_root"
    return None


FEED_TYPES = frozenset({"application/rss+xml", "application/atom+xml", "application/feed+json"})


def _alternate(body: bytes, page_url: str, encoding: str | None, want: Any) -> str | None:
    doc = _parse(body, encoding)
    if doc is None:
        return None
    for link in doc.iter("link"):
        rels = (link.get("rel") or "").lower().split()
        ctype = (link.get("type") or "").lower().split(";")[0].strip()
        href = (link.get("href") or "").strip()
        if "alternate" in rels and href and want(ctype):
            url: str = urljoin(page_url, href)
            if _origin(url) == _origin(page_url):
                return url
    return None


def json_alternate(body: bytes, page_url: str, encoding: str | None = "utf-8") -> str | None:
    """The page's declared JSON form (``<link rel="alternate" type="application/json">``),
    on the page's own origin; None when it declares none.

    >>> json_alternate(b'<link rel="alternate" type="application/json" href="/a.json">',
    ...                "http://example.org/a")
    'http://example.org/a.json'
    """
    return _alternate(body, page_url, encoding,
                      lambda t: t == "application/json" or
                      (t.endswith("+json") and t not in FEED_TYPES))


def feed_alternate(body: bytes, page_url: str, encoding: str | None = "utf-8") -> str | None:
    """The RSS or Atom feed the page declares, on its own origin (None: none).

    >>> feed_alternate(b'<link rel="alternate" type="application/rss+xml" href="/feed">',
    ...                "http://example.org/a")
    'http://example.org/feed'
    """
    return _alternate(body, page_url, encoding,
                      lambda t: t in ("application/rss+xml", "application/atom+xml"))


_ATOM = "{http://www.w3.org/2005/Atom}"
_CONTENT = "{http://purl.org/rss/1.0/modules/content/}encoded"


def _same_page(a: str, b: str) -> bool:
    pa, pb = urlsplit(a), urlsplit(b)
    return _origin(a) == _origin(b) and (pa.path.rstrip("/") or "/") == \
        (pb.path.rstrip("/") or "/") and pa.query == pb.query


def _html_paragraphs(fragment: str) -> list[str]:
    try:
        root = lxml.html.fragment_fromstring(fragment, create_parent="div")
    except (ValueError, lxml.etree.ParserError):
        return [fragment.strip()] if fragment.strip() else []
    blocks = [" ".join(el.text_content().split()) for el in root.iter("p", "li", "h2", "h3")]
    blocks = [b for b in blocks if b]
    if not blocks:
        text = " ".join(root.text_content().split())
        blocks = [text] if text else []
    return blocks


def feed_entry_text(body: bytes, page_url: str, feed_url: str | None = None,
                    min_words: int = SHELL_MAX_WORDS) -> JsonText | None:
    """The text a feed carries for one page: the RSS item or Atom entry linking to it
    (``content:encoded``, ``content``, else ``description``/``summary``), when it holds
    at least ``min_words`` words; None otherwise. Relative links are read against
    ``feed_url`` (default: the page's URL)."""
    base = feed_url or page_url
    parser = lxml.etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False,
                                  huge_tree=False, recover=True)
    try:
        root = lxml.etree.fromstring(body, parser=parser)
    except (lxml.etree.LxmlError, ValueError):
        return None
    if root is None:
        return None
    for entry in root.iter("item", f"{_ATOM}entry"):
        links = [(el.text or "").strip() for el in entry.iter("link") if el.text]
        links += [el.get("href") or "" for el in entry.iter(f"{_ATOM}link")
                  if (el.get("rel") or "alternate") == "alternate"]
        if not any(link and _same_page(urljoin(base, link), page_url) for link in links):
            continue
        title = None
        for el in entry.iter("title", f"{_ATOM}title"):
            title = " ".join((el.text or "").split()) or None
            break
        for names in ((_CONTENT, f"{_ATOM}content"), ("description", f"{_ATOM}summary")):
            for el in entry.iter(*names):
                paragraphs = _html_paragraphs(el.text or "")
                found = JsonText(title, tuple(dict.fromkeys(paragraphs)))
                if found.words >= min_words:
                    return found
        return None
    return None


# JSON keys whose string values are the content, best first; and the title's.
_TEXT_KEYS = ("articleBody", "text", "body", "content", "paragraphs", "description", "summary",
              "abstract")
_PROSE_WORDS = 8  # without a content key: strings of this many words are the text
_TITLE_KEYS = ("headline", "title", "name")
_MAX_DEPTH = 8


@dataclass(frozen=True)
class JsonText:
    """Title and text paragraphs found in a JSON document."""

    title: str | None
    paragraphs: tuple[str, ...]

    @property
    def words(self) -> int:
        return sum(len(p.split()) for p in self.paragraphs)


def _strings(value: Any, depth: int = 0) -> list[str]:
    if depth > _MAX_DEPTH:
        return []
    if isinstance(value, str):
        return [value.strip()] if value.strip() else []
    if isinstance(value, list):
        return [s for v in value for s in _strings(v, depth + 1)]
    if isinstance(value, dict):
        return [s for k in _TEXT_KEYS if k in value for s in _strings(value[k], depth + 1)]
    return []


def _walk(obj: Any, depth: int = 0) -> tuple[str | None, list[str]]:
    """Title and text strings under the content keys, depth first."""
    if depth > _MAX_DEPTH:
        return None, []
    title: str | None = None
    texts: list[str] = []
    if isinstance(obj, dict):
        for key in _TITLE_KEYS:
            if isinstance(obj.get(key), str) and obj[key].strip():
                title = obj[key].strip()
                break
        for key in _TEXT_KEYS:
            if key in obj:
                texts.extend(_strings(obj[key], depth + 1))
        for key, value in obj.items():
            if key in _TEXT_KEYS or not isinstance(value, (dict, list)):
                continue
            sub_title, sub = _walk(value, depth + 1)
            title = title or sub_title
            texts.extend(sub)
    elif isinstance(obj, list):
        for value in obj:
            sub_title, sub = _walk(value, depth + 1)
            title = title or sub_title
            texts.extend(sub)
    return title, texts


def _all_strings(obj: Any, depth: int = 0) -> list[str]:
    if depth > _MAX_DEPTH:
        return []
    if isinstance(obj, str):
        return [obj.strip()]
    values = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, list) else ()
    return [s for v in values for s in _all_strings(v, depth + 1)]


def json_text(data: bytes | str) -> JsonText | None:
    """Title and paragraphs of a JSON document (None: not JSON, or no text in it).

    >>> json_text(b'{"title": "T", "body": ["One.", "Two."]}')
    JsonText(title='T', paragraphs=('One.', 'Two.'))
    >>> json_text(b'{"name": "T", "x": {"y": "a sentence that is long enough to be prose"}}')
    JsonText(title='T', paragraphs=('a sentence that is long enough to be prose',))
    """
    try:
        obj = json.loads(data)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    title, texts = _walk(obj)
    if not texts:
        texts = [t for t in _all_strings(obj) if len(t.split()) >= _PROSE_WORDS]
    paragraphs = tuple(dict.fromkeys(texts))  # in order, each once
    if not paragraphs:
        return None
    return JsonText(title, paragraphs)


def json_ld_text(body: bytes, encoding: str | None = "utf-8",
                 min_words: int = SHELL_MAX_WORDS) -> JsonText | None:
    """The page's text from its JSON-LD (``<script type="application/ld+json">``),
    when it holds at least ``min_words`` words of it."""
    doc = _parse(body, encoding)
    if doc is None:
        return None
    best: JsonText | None = None
    for el in doc.xpath('//script[@type="application/ld+json"]'):
        found = json_text(el.text or "")
        if found is not None and (best is None or found.words > best.words):
            best = found
    return best if best is not None and best.words >= min_words else None


def text_document(found: JsonText) -> bytes:
    """A plain HTML page carrying the text, for the crawl's main-text extraction."""
    title = escape(found.title or "")
    paras = "".join(f"<p>{escape(p)}</p>" for p in found.paragraphs)
    return (f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
            f"<body><main><article><h1>{title}</h1>{paras}</article></main></body></html>"
            ).encode()
