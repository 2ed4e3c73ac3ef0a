"""Crawler traps: URL rules checked before a request is queued, and yield monitoring.

The trap defences: the per-origin budget (the frontier's), maximum depth, a path
segment repeated, URL length, parameter counting, and yield monitoring (a site can
generate URLs without end; each rule bounds one way it does).
Each rule here is pure and gives a *reason* (``depth``, ``repeated_segment``,
``url_length``, ``query_params``, ``low_yield``) that the glue counts as
``polite/traps/<reason>``.

Trap memory
-----------
What a crawl judged a trap is remembered per origin (:class:`TrapMemory`; kept
durably by :mod:`polite_crawler.store.traps`) until it expires
(POLITE_TRAP_MEMORY), so the next crawl does not walk it again. A trap's pages
are found by *trails*: a link from a page to a URL of the same path with
another query (a calendar, a facet) or to a longer path under it (an
ever-growing path, a loop) continues the page's trail (:func:`extend_trail`);
any other link starts none. When a URL rule refuses a link, the pages of its
trail after the first (the trap's entry, reached by an ordinary link, stays a
page like any other) and the refused URL are the trap (:func:`trap_pages`).

Session tokens in paths
-----------------------
A site that mints a new session token in every link's path
(``/s/3f9c0a17be42d865/page-3``) has no end of URLs, and no URL comes back: a
memory of URLs never helps a recrawl. A path segment that looks like a token
(:func:`is_token`: 12 or more hex digits, or 16 or more base64 characters,
mixing letters and digits, of high entropy) is generalised in the URL's
*template* (:func:`token_split`: ``http://e.org/s/{id}/``, everything under the
token). :class:`SessionTokens` judges the trap: a page fetched under one token
whose rest of the path (``page-3``) was fetched under another, and which
brings no new text (the yield monitor's novelty, against the template's own
recent pages), shows that the token does not name the page. Only then is the
template remembered (:meth:`TrapMemory.add_template`), and every URL under it is
a remembered trap page, whatever its token. Ordinary paths with a hash or a
date in them (``/commit/<sha>``, ``/2024/05/01/post``) are never generalised
unless their pages were judged so: a commit page is its own resource (the hash
ends the path, so nothing "comes back" under another), and pages of distinct
text are new content.

Query variants (faceted navigation)
-----------------------------------
:class:`QueryVariants`: the distinct query strings fetched per origin and path,
and how many of them brought new text (the yield monitor's novelty, against the
path's own recent pages). Once ``max_variants`` are fetched, a path whose query
pages are mostly not new (a productive share below ``min_share``) gets no new
query string fetched (``query_variants``): listings that differ only in their
filters stop there, while a catalogue whose query pages are genuinely distinct
is crawled on.

Yield monitoring, the measure
-----------------------------
A page's *novelty* is the share of its text that this origin has not served
recently: the word 4-grams (shingles) of its text (the main text, when the page
has enough of it), sampled consistently (a shingle is kept when its hash is 0
modulo 8, so two pages keep the same shingles of the text they share), compared
with the shingles of the origin's last ``memory_pages`` pages. A page is
*productive* when its novelty is at least ``min_novelty`` (default 0.2: a
fifth of its text is new). An exact repeat scores 0, a near-duplicate (a
calendar month that differs in its date, a faceted listing of products already
seen) scores little, a new article scores near 1. A page with too little text
to sample counts as productive only when its whole text is new.

The origin's *yield* is the share of productive pages among its last
``window`` pages (default 30). When the window is full and the yield is below
``min_share`` (default 0.1: fewer than 3 of the last 30 pages brought new
content), the origin is stopped for the run: it is serving a trap, whatever
its URLs look like.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from polite_crawler.policy.simhash import shingle_hashes
from polite_crawler.policy.text import Words, read_words

DEPTH = "depth"
REPEATED_SEGMENT = "repeated_segment"
URL_LENGTH = "url_length"
QUERY_PARAMS = "query_params"
LOW_YIELD = "low_yield"
QUERY_VARIANTS = "query_variants"
SESSION_TOKEN = "session_token"


@dataclass(frozen=True)
class TrapLimits:
    """The URL rules' numbers (settings POLITE_MAX_DEPTH, POLITE_MAX_URL_LENGTH,
    POLITE_MAX_QUERY_PARAMS, POLITE_MAX_SEGMENT_REPEATS)."""

    max_depth: int
    max_url_length: int
    max_query_params: int
    max_segment_repeats: int  # a segment seen this many times in one path is a loop


def url_trap(url: str, depth: int, limits: TrapLimits) -> str | None:
    """Why ``url`` at ``depth`` links from a start page looks like a trap, or None.

    >>> lim = TrapLimits(max_depth=10, max_url_length=2000, max_query_params=5,
    ...                  max_segment_repeats=3)
    >>> url_trap("http://e.org/a/b/a/b/a/x", 1, lim)
    'repeated_segment'
    >>> url_trap("http://e.org/shop?a=1&b=2&c=3&d=4&e=5&f=6", 1, lim)
    'query_params'
    >>> url_trap("http://e.org/page", 11, lim), url_trap("http://e.org/page", 10, lim)
    ('depth', None)
    """
    if depth > limits.max_depth:
        return DEPTH
    if len(url) > limits.max_url_length:
        return URL_LENGTH
    try:
        path, query = path_and_query(url)
    except ValueError:
        return None  # not ours to judge: the canonical form refuses it
    if query and sum(1 for p in query.split("&") if p) > limits.max_query_params:
        return QUERY_PARAMS
    segments = [s for s in path.split("/") if s]
    if len(segments) >= limits.max_segment_repeats:
        if limits.max_segment_repeats > 1 and len(set(segments)) == len(segments):
            return None  # no segment twice (most paths): no Counter to build
        counts = Counter(segments)
        if counts.most_common(1)[0][1] >= limits.max_segment_repeats:
            return REPEATED_SEGMENT
    return None


def path_and_query(url: str) -> tuple[str, str]:
    """``urlsplit(url)``'s path and query; read off the text for a plain http(s) URL.

    >>> path_and_query("http://e.org:8080/a/b?x=1&y=2"), path_and_query("https://e.org?q")
    (('/a/b', 'x=1&y=2'), ('', 'q'))
    """
    plain = _split_plain(url)
    if plain is not None:
        return plain[2], plain[3]
    parts = urlsplit(url)
    return parts.path, parts.query


def _split_plain(url: str) -> tuple[str, str, str, str] | None:
    """``urlsplit(url)``'s scheme, netloc, path and query, read off the text, for a plain
    http(s) URL (no fragment, white space, control character, bracket or non-ASCII
    character before the path: nothing urlsplit would strip, refuse or check); else None."""
    scheme, sep, rest = url.partition("://")
    if sep and scheme in ("http", "https") and "#" not in rest and rest.isprintable() \
            and " " not in rest:
        q, slash = rest.find("?"), rest.find("/")
        cut = min(i for i in (q, slash, len(rest)) if i >= 0)
        netloc = rest[:cut]
        if netloc.isascii() and "[" not in netloc and "]" not in netloc:
            path, _, query = rest[cut:].partition("?")
            return scheme, netloc, path, query
    return None


# --- yield monitoring ---------------------------------------------------------

_TAGS = re.compile(
    rb"<(script|style|noscript|template)\b.*?</\1\s*>|<!--.*?-->|<[^>]*>", re.DOTALL | re.IGNORECASE
)
_ENTITY = re.compile(rb"&#?[a-zA-Z0-9]+;")
_SHINGLE = 4
# The yield monitor judges a page's main text, unless it has this many words or
# fewer (an extractor that found no main content, a page that is all navigation):
# then the whole page's text.
MIN_MAIN_WORDS = 20
_SAMPLE = 8  # keep shingles whose hash is 0 modulo this
_MAX_WORDS = 20_000  # a page's first words are plenty to judge it (and bound the memory)


def html_text(body: bytes, encoding: str = "utf-8", max_bytes: int = 2 * 1024 * 1024) -> str:
    """The visible text of an HTML page, roughly and fast (tags, scripts, styles out)."""
    stripped = _ENTITY.sub(b" ", _TAGS.sub(b" ", body[:max_bytes]))
    return stripped.decode(encoding, "replace")


def shingles(text: str, read: Words | None = None) -> tuple[npt.NDArray[np.uint64], int]:
    """The sampled shingle hashes of ``text`` (distinct, sorted) and a hash of its whole
    word sequence.

    Words as the SimHash reads them (:func:`polite_crawler.policy.text.read_words`,
    passed as ``read`` when they are at hand) but as written, digits kept: a page
    that differs from the others only in its numbers (a data table, a report per
    postcode) is new content here.
    """
    if read is None or read.text is not text:
        read = read_words(text)
    tokens = read.raw[:_MAX_WORDS]
    whole = hash(tokens.tobytes())
    if tokens.size < _SHINGLE:
        return np.zeros(0, dtype=np.uint64), whole
    hashed = shingle_hashes(tokens, _SHINGLE, distinct=False)
    return np.unique(hashed[hashed % _SAMPLE == 0]), whole


@dataclass(frozen=True)
class YieldLimits:
    """The yield monitor's numbers (settings POLITE_YIELD_WINDOW, POLITE_YIELD_MIN_SHARE,
    POLITE_YIELD_MIN_NOVELTY) and its memory's bounds."""

    window: int
    min_share: float
    min_novelty: float
    memory_pages: int = 100  # pages whose text counts as "seen"
    max_origins: int = 5000  # origins tracked at once (least recent forgotten)


@dataclass(frozen=True)
class YieldVerdict:
    novelty: float
    productive: bool
    share: float  # productive share of the window so far
    stopped: bool  # the origin is (now or already) stopped


_NO_HASHES = np.zeros(0, dtype=np.uint64)


def _page_type(memory_pages: int) -> type[np.unsignedinteger[Any]]:
    """The smallest unsigned integer type that holds a number below two memories."""
    for kind in (np.uint8, np.uint16, np.uint32):
        if 2 * memory_pages <= np.iinfo(kind).max + 1:
            return kind
    return np.uint64


class _OriginYield:
    """What an origin served recently, kept compact (a site of a few pages costs a few KB).

    Each sampled shingle hash once, sorted (``hashes``), with the number of the last page
    that had it (``last``, pages numbered from 0 in the order observed, less ``base``);
    likewise each page's whole-text hash (``wholes``). Page ``n`` is judged against pages
    ``n - memory_pages`` to ``n - 1``: a hash is seen when its last page is among them,
    the same answer as counting the hashes of those pages, without keeping each page's
    sample. Hashes whose last page has left the memory are dropped every ``memory_pages``
    pages, so the arrays hold at most two memories' worth, and ``base`` moves up to the
    oldest page remembered: ``last`` stays below two memories, 1 byte a hash for the
    default memory of 100 pages (a 3-page site: about 300 hashes). The window's outcomes are bits of
    an int (the newest lowest), ``judged`` of them.
    """

    __slots__ = ("base", "hashes", "judged", "last", "memory", "outcomes", "pages", "wholes")

    def __init__(self, memory_pages: int) -> None:
        self.memory = memory_pages
        self.pages = 0  # pages observed
        self.base = 0  # the page number ``last`` counts from
        self.hashes: npt.NDArray[np.uint64] = _NO_HASHES
        # last page - base < 2 * memory_pages (the forgetting in take)
        self.last: npt.NDArray[np.unsignedinteger[Any]] = np.zeros(
            0, dtype=_page_type(memory_pages))
        self.wholes: dict[int, int] = {}  # whole-text hash -> its last page
        self.outcomes = 0
        self.judged = 0

    @property
    def recent(self) -> range:
        """The numbers of the pages whose text counts as seen for the next page."""
        return range(max(0, self.pages - self.memory), self.pages)

    @property
    def seen(self) -> npt.NDArray[np.uint64]:
        """The sampled hashes of the remembered pages (distinct, sorted)."""
        return self.hashes[self.last >= self.pages - self.memory - self.base]

    def take(self, sample: npt.NDArray[np.uint64], whole: int) -> float:
        """Record the next page (its sample, distinct and sorted, and its whole-text hash);
        its novelty: the share of the sample the remembered pages did not have, or without
        a sample 1.0 when the whole text is new, else 0.0."""
        n, hashes = self.pages, self.hashes
        oldest = n - self.memory
        if not sample.size:
            novelty = 0.0 if self.wholes.get(whole, oldest - 1) >= oldest else 1.0
        elif not hashes.size:
            novelty = 1.0
            self.hashes = sample.copy()
            self.last = np.full(sample.size, n - self.base, dtype=self.last.dtype)
        else:
            last = self.last
            at = np.searchsorted(hashes, sample)
            near = np.minimum(at, hashes.size - 1)
            known = hashes[near] == sample
            recent = last[near] >= oldest - self.base
            novelty = 1.0 - int(np.count_nonzero(known & recent)) / sample.size
            last[near[known]] = n - self.base
            if not known.all():  # new hashes into their places, in one pass
                fresh = ~known
                k = int(np.count_nonzero(fresh))
                places = at[fresh] + np.arange(k)
                old = np.ones(hashes.size + k, dtype=bool)
                old[places] = False
                self.hashes = np.empty(hashes.size + k, dtype=np.uint64)
                self.hashes[places], self.hashes[old] = sample[fresh], hashes
                self.last = np.empty(hashes.size + k, dtype=last.dtype)
                self.last[places], self.last[old] = n - self.base, last
        self.wholes[whole] = n
        self.pages = n = n + 1
        if n % self.memory == 0:  # forget what no later page is judged against
            oldest = n - self.memory
            keep = self.last >= oldest - self.base
            if not keep.all():
                self.hashes, self.last = self.hashes[keep], self.last[keep]
            self.last -= oldest - self.base  # every one kept is at least that
            self.base = oldest
            self.wholes = {w: p for w, p in self.wholes.items() if p >= oldest}
        return novelty

    def judge(self, productive: bool, window: int) -> float:
        """Add an outcome to the window (its oldest out when full); the productive share."""
        if self.judged >= window:
            self.outcomes &= ~(1 << (window - 1))
        else:
            self.judged += 1
        self.outcomes = (self.outcomes << 1) | productive
        return self.outcomes.bit_count() / self.judged


class YieldMonitor:
    """New content per fetch, per origin; stops an origin that serves no new content.

    An origin's memory (its pages' sampled hashes, its window) is kept while pages of it
    may come, and let go (:meth:`release`) when its crawl is over: it has nothing queued,
    in flight or held, or it is stopped (the stop is kept). An origin released, or
    pushed out by ``max_origins`` others, that serves pages again starts afresh: its next
    pages are judged against each other, as a new origin's are. Only an origin with
    nothing queued, in flight or held is released, so a trap (every page links new ones)
    is never: its memory is kept while its links wait.
    """

    def __init__(self, limits: YieldLimits) -> None:
        self.limits = limits
        self._origins: OrderedDict[str, _OriginYield] = OrderedDict()
        self._stopped: set[str] = set()

    def stopped(self, origin: str) -> bool:
        return origin in self._stopped

    def remembers(self, origin: str) -> bool:
        """Whether the monitor holds a memory of ``origin``'s pages."""
        return origin in self._origins

    def origins(self) -> list[str]:
        """The origins whose pages the monitor remembers (least recent first)."""
        return list(self._origins)

    def release(self, origin: str) -> bool:
        """The origin's crawl is over: its memory goes (a stop stays). True if it held one."""
        return self._origins.pop(origin, None) is not None

    def observe(self, origin: str, text: str, read: Words | None = None) -> YieldVerdict:
        """Record one fetched page of ``origin`` (its text) and judge the origin."""
        return self.observe_sample(origin, *shingles(text, read))

    def observe_sample(self, origin: str, sample: npt.NDArray[np.uint64],
                       whole: int) -> YieldVerdict:
        """:meth:`observe` for a text already sampled (:func:`shingles`)."""
        lim = self.limits
        state = self._origins.pop(origin, None) or _OriginYield(lim.memory_pages)
        self._origins[origin] = state
        if len(self._origins) > lim.max_origins:
            self._origins.popitem(last=False)
        novelty = state.take(sample, whole)
        productive = novelty >= lim.min_novelty
        share = state.judge(productive, lim.window)
        if state.judged >= lim.window and share < lim.min_share:
            self._stopped.add(origin)
        return YieldVerdict(novelty, productive, share, origin in self._stopped)


# --- trap memory and trails ------------------------------------------------------

_MAX_TRAIL = 64  # pages of one trail kept (a depth-limited crawl never gets near)


# _path_query's answers by URL (it reads the string only): a page's links are asked
# whether they continue its trail on every page that links them (a site's navigation),
# and the page itself once for each of its links. Bounded.
@functools.lru_cache(maxsize=8192)
def _path_query(url: str) -> tuple[str, str, str] | None:
    plain = _split_plain(url)
    if plain is not None:
        scheme, netloc, path, query = plain
        return f"{scheme}://{netloc}", path or "/", query
    try:
        parts = urlsplit(url)
    except ValueError:
        return None
    return f"{parts.scheme}://{parts.netloc}", parts.path or "/", parts.query


def continues_trail(parent: str, child: str) -> bool:
    """Whether a link from ``parent`` to ``child`` stays in one URL pattern.

    The same path with another query (calendars, facets, sort orders), or a
    longer path under the parent's (ever-growing paths, loops).

    >>> continues_trail("http://e.org/cal?m=1", "http://e.org/cal?m=2")
    True
    >>> continues_trail("http://e.org/grow/x", "http://e.org/grow/x-yyy")
    True
    >>> continues_trail("http://e.org/", "http://e.org/about")
    False
    >>> continues_trail("http://e.org/a?x=1", "http://f.org/a?x=2")
    False
    """
    return _continues(_path_query(parent), parent, child)


def _continues(p: tuple[str, str, str] | None, parent: str, child: str) -> bool:
    """:func:`continues_trail`, the parent read already (``p``: its ``_path_query``)."""
    c = _path_query(child)
    if p is None or c is None or p[0] != c[0] or parent == child:
        return False
    if p[1] == c[1]:
        return bool(c[2]) and p[2] != c[2]
    return p[1] != "/" and c[1].startswith(p[1]) and len(c[1]) > len(p[1])


def extend_trail(parent: str, parent_trail: tuple[str, ...] | None,
                 child: str) -> tuple[str, ...]:
    """The trail a link from ``parent`` (on its trail) to ``child`` gives the child.

    >>> extend_trail("http://e.org/c?m=1", None, "http://e.org/c?m=2")
    ('http://e.org/c?m=1',)
    >>> extend_trail("http://e.org/c?m=2", ("http://e.org/c?m=1",), "http://e.org/c?m=3")
    ('http://e.org/c?m=1', 'http://e.org/c?m=2')
    >>> extend_trail("http://e.org/c?m=2", ("http://e.org/c?m=1",), "http://e.org/about")
    ()
    """
    return Trails(parent, parent_trail).of(child)


class Trails:
    """:func:`extend_trail` for the links of one page: the page is read once, and every
    link that continues its trail gets the same trail (a tuple)."""

    __slots__ = ("_longer", "_p", "parent")

    def __init__(self, parent: str, parent_trail: tuple[str, ...] | None) -> None:
        self.parent = parent
        self._p = _path_query(parent)
        self._longer = (*(parent_trail or ())[-(_MAX_TRAIL - 1):], parent)

    def of(self, child: str) -> tuple[str, ...]:
        """The trail the link to ``child`` gives it (empty: it starts no trail)."""
        return self._longer if _continues(self._p, self.parent, child) else ()


def trap_pages(trail: tuple[str, ...], refused: str) -> list[str]:
    """The trap a refused URL reveals: its trail after the entry, and itself."""
    return [*trail[1:], refused]


def query_path(url: str) -> str | None:
    """The key of a URL's path among query variants (``scheme://host/path?``), or None.

    >>> query_path("http://e.org/shop?color=red"), query_path("http://e.org/shop")
    ('http://e.org/shop?', None)
    """
    pq = _path_query(url)
    return f"{pq[0]}{pq[1]}?" if pq is not None and pq[2] else None


# --- session tokens in paths ---------------------------------------------------------

TOKEN_PLACEHOLDER = "{id}"
_HEX_TOKEN = re.compile(r"[0-9a-fA-F]{12,}")
_B64_TOKEN = re.compile(r"[A-Za-z0-9+_-]{16,}={0,2}")
_MIN_TOKEN_ENTROPY = 2.5  # bits per character; a random 12-hex token has about 3.1


def _entropy(text: str) -> float:
    n = len(text)
    return -sum(c / n * math.log2(c / n) for c in Counter(text).values())


def is_token(segment: str) -> bool:
    """Whether a path segment looks like a minted token (a session id, a hash).

    12 or more hex digits with letters and digits among them, or 16 or more
    base64 characters with upper case, lower case and digits; of high entropy
    either way. Words, slugs, dates and plain numbers are not.

    >>> [is_token(s) for s in ("3f9c0a17be42d865", "a3F9kQ2mZ7xW4pL0", "2024-05-01")]
    [True, True, False]
    >>> [is_token(s) for s in ("123456789012345", "my-first-post-2024", "aaaaaaaaaaa1")]
    [False, False, False]
    """
    if _HEX_TOKEN.fullmatch(segment):
        mixed = not segment.isdigit() and any(c.isdigit() for c in segment)
    elif _B64_TOKEN.fullmatch(segment):
        mixed = (any(c.isdigit() for c in segment) and any(c.islower() for c in segment)
                 and any(c.isupper() for c in segment))
    else:
        return False
    return mixed and _entropy(segment.rstrip("=")) >= _MIN_TOKEN_ENTROPY


def token_split(url: str) -> tuple[str, str, str] | None:
    """``(template, token, rest)`` of a URL with a token segment in its path, else None.

    The template is the origin and the path up to the first token segment, the
    token replaced by :data:`TOKEN_PLACEHOLDER`; ``rest`` is what follows it (path
    and query), the page as the site names it under that token.

    >>> token_split("http://e.org/s/3f9c0a17be42d865/page-3?x=1")
    ('http://e.org/s/{id}/', '3f9c0a17be42d865', 'page-3?x=1')
    >>> token_split("http://e.org/2024/05/01/post") is None
    True
    """
    try:
        path, query = path_and_query(url)
    except ValueError:
        return None
    if len(path) < 13:  # "/" and the shortest token
        return None
    segments = path.split("/")
    for i, segment in enumerate(segments):
        if len(segment) >= 12 and is_token(segment):
            head = url[: url.find("/", url.find("://") + 3)] if "://" in url else ""
            template = f"{head}{'/'.join(segments[:i])}/{TOKEN_PLACEHOLDER}/"
            rest = "/".join(segments[i + 1:]) + (f"?{query}" if query else "")
            return template, segment, rest
    return None


@dataclass
class _TemplatePages:
    tokens: dict[str, set[str]] = field(default_factory=dict)  # rest -> tokens it came under


class SessionTokens:
    """Judges session-token traps from the pages fetched (see the module's notes).

    >>> st = SessionTokens(min_novelty=0.2)
    >>> text = "the same catalogue page with the same products listed in the same order"
    >>> st.observe("http://e.org/s/3f9c0a17be42d865/page-1", text) is None
    True
    >>> st.observe("http://e.org/s/77ab01c9e3d2f456/page-1", text)
    'http://e.org/s/{id}/'
    """

    _MAX_TOKENS = 4  # tokens kept per rest: two already tell
    _MAX_RESTS = 256  # rests kept per template

    def __init__(self, min_novelty: float, max_templates: int = 10_000) -> None:
        self.max_templates = max_templates
        self._templates: OrderedDict[str, _TemplatePages] = OrderedDict()
        self._yield = YieldMonitor(YieldLimits(window=1 << 30, min_share=0.0,
                                               min_novelty=min_novelty,
                                               max_origins=max_templates))

    def observe(self, url: str, text: str, read: Words | None = None) -> str | None:
        """Record a fetched page; the template to remember as a trap, or None."""
        split = token_split(url)
        if split is None:
            return None
        template, token, rest = split
        state = self._templates.pop(template, None) or _TemplatePages()
        self._templates[template] = state
        if len(self._templates) > self.max_templates:
            self._templates.popitem(last=False)
        verdict = self._yield.observe(template, text, read)
        if not rest:
            return None  # the token ends the path: it names the resource (a commit, a file)
        seen = state.tokens.get(rest)
        if seen is None:
            if len(state.tokens) >= self._MAX_RESTS:
                state.tokens.pop(next(iter(state.tokens)))
            seen = state.tokens[rest] = set()
        again = bool(seen - {token})
        if len(seen) < self._MAX_TOKENS:
            seen.add(token)
        return template if again and not verdict.productive else None


@dataclass
class TrapMemory:
    """URLs judged trap pages, per origin, each with its reason and its expiry; paths
    whose query strings were judged a trap (:func:`query_path` keys): of those, only
    URLs the store already knows are revisited; and templates of session-token traps
    (:func:`token_split` keys): every URL under one is a trap page."""

    ttl: float  # seconds a judgement is remembered (POLITE_TRAP_MEMORY)
    _urls: dict[str, tuple[str, float]] = field(default_factory=dict)
    _paths: dict[str, tuple[str, float]] = field(default_factory=dict)
    _templates: dict[str, tuple[str, float]] = field(default_factory=dict)

    def add_template(self, key: str, reason: str, now: float,
                     expires_at: float | None = None) -> bool:
        """Remember a session-token template; False when it was already remembered."""
        return self._put(self._templates, key, reason, now, expires_at)

    def template_remembered(self, url: str, now: float) -> str | None:
        """The reason ``url``'s session-token template was judged a trap, or None."""
        if not self._templates:
            return None
        split = token_split(url)
        return None if split is None else self._look(self._templates, split[0], now)

    def path_remembered(self, url: str, now: float) -> str | None:
        """The reason new query strings of ``url``'s path were judged a trap, or None."""
        key = query_path(url)
        return None if key is None else self._look(self._paths, key, now)

    def add_path(self, key: str, reason: str, now: float, expires_at: float | None = None) -> bool:
        return self._put(self._paths, key, reason, now, expires_at)

    def remembered(self, url: str, now: float) -> str | None:
        """The reason ``url`` was judged a trap (itself, or its session-token template),
        while that is remembered, else None."""
        return self._look(self._urls, url, now) or self.template_remembered(url, now)

    def add(self, url: str, reason: str, now: float, expires_at: float | None = None) -> bool:
        """Remember one trap page; False when it was already remembered."""
        return self._put(self._urls, url, reason, now, expires_at)

    @staticmethod
    def _look(table: dict[str, tuple[str, float]], key: str, now: float) -> str | None:
        got = table.get(key)
        if got is None:
            return None
        if now >= got[1]:  # expired: forgotten
            del table[key]
            return None
        return got[0]

    def _put(self, table: dict[str, tuple[str, float]], key: str, reason: str, now: float,
             expires_at: float | None) -> bool:
        known = table.get(key)
        table[key] = (reason, now + self.ttl if expires_at is None else expires_at)
        return known is None or known[1] <= now

    def __len__(self) -> int:
        return len(self._urls)


# --- query variants per path (faceted navigation) ---------------------------------


@dataclass(frozen=True)
class QueryLimits:
    """Settings POLITE_MAX_QUERY_VARIANTS, POLITE_QUERY_VARIANTS_MIN_SHARE and
    POLITE_YIELD_MIN_NOVELTY."""

    max_variants: int  # query pages of one path fetched before their yield decides
    min_share: float  # productive share of them for the path to get more
    min_novelty: float


@dataclass
class _PathQueries:
    fetched: set[str] = field(default_factory=set)  # query strings fetched
    productive: int = 0


class QueryVariants:
    """Query pages fetched per origin and path, and how many brought new text.

    Asked when a request is about to be sent (:meth:`allows`), so a listing
    that links hundreds of combinations queues them at no cost to the site and
    only what the path's yield justifies is fetched.
    """

    def __init__(self, limits: QueryLimits, max_paths: int = 100_000) -> None:
        self.limits = limits
        self.max_paths = max_paths
        self._paths: OrderedDict[tuple[str, str], _PathQueries] = OrderedDict()
        self._yield = YieldMonitor(YieldLimits(window=1 << 30, min_share=0.0,
                                               min_novelty=self.limits.min_novelty,
                                               max_origins=max_paths))

    def _state(self, key: tuple[str, str]) -> _PathQueries:
        state = self._paths.pop(key, None) or _PathQueries()
        self._paths[key] = state
        if len(self._paths) > self.max_paths:
            self._paths.popitem(last=False)
        return state

    def allows(self, url: str) -> str | None:
        """None when ``url`` (canonical) may be fetched, else the reason it may not.

        >>> q = QueryVariants(QueryLimits(max_variants=3, min_share=0.5, min_novelty=0.2))
        >>> for i in range(3):
        ...     _ = q.observe(f"http://e.org/shop?c={i}", "the same listing of the same shop")
        >>> q.allows("http://e.org/shop?c=9"), q.allows("http://e.org/shop?c=1")
        ('query_variants', None)
        >>> q.allows("http://e.org/shop"), q.allows("http://e.org/item?id=3")
        (None, None)
        """
        pq = _path_query(url)
        if pq is None or not pq[2]:
            return None
        state = self._paths.get((pq[0], pq[1]))
        if state is None or pq[2] in state.fetched:
            return None
        lim = self.limits
        n = len(state.fetched)
        if n >= lim.max_variants and state.productive < lim.min_share * n:
            return QUERY_VARIANTS
        return None

    def observe(self, url: str, text: str, read: Words | None = None) -> float | None:
        """Record a fetched query page's text; its novelty for its path (None: no query)."""
        pq = _path_query(url)
        if pq is None or not pq[2]:
            return None
        state = self._state((pq[0], pq[1]))
        if pq[2] in state.fetched:
            return None
        verdict = self._yield.observe(f"{pq[0]}{pq[1]}", text, read)
        state.fetched.add(pq[2])
        state.productive += int(verdict.productive)
        return verdict.novelty
