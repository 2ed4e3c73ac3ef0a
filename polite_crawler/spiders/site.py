"""The ``site`` spider: ``scrapy crawl site -a url=https://example.org/``.

``-a urls=FILE`` (one URL a line, ``#`` comments) crawls many sites at once.
It stays inside the hosts it was given.

Discovery, per origin: the site's own lists first (/sitemap.xml, the Sitemap: lines
of robots.txt, sitemap indexes, feeds), then links only for what they leave out, within
the host (a sitemap costs the site one request for many pages):

1. The ``Sitemap:`` lines of robots.txt. With polite_crawler's robots.txt
   component the frontier fetches robots.txt before anything else of the
   origin, and the spider reads the lines from the robots book
   (``polite_context(crawler).robots.sitemaps(origin)``) when the origin's
   first answer comes in; without it the spider fetches robots.txt itself
   (a 404 is fine). None declared: ``/sitemap.xml``.
2. Sitemap indexes (nested), gzipped sitemaps, text sitemaps, RSS and Atom
   feeds, parsed by :mod:`polite_crawler.policy.sitemaps` (scope, limits,
   safety). Every listed page is requested, with its ``lastmod``.
3. Links found on pages are held until the origin's sitemaps are all read,
   then followed when they are in-host and not already known: only what the
   sitemaps did not list is spidered.

Pages (listed, or linked) enter the frontier in bulk, as URL rows
(``FrontierScheduler.enqueue_urls``): the URL rules
(:class:`polite_crawler.frontier.admission.UrlRules`, the trap middleware's own)
are applied here and the frontier's checks there, with no Request made and no
trip through the spider middlewares until the frontier dispatches the row.
Robots.txt and sitemap fetches are Requests. Under another scheduler (no
``enqueue_urls``), or with ``bulk_pages = False`` on the spider class, every page
is a Request, judged by the middlewares.

Every fetch goes through the frontier, which gates it. Every duplicate decision
uses the canonical URL (:func:`polite_crawler.policy.urls.canonicalize`), which
is also the URL requested, against one seen set: the frontier's, on disk (the
spider keeps none). ``<link rel="canonical">`` on the same host is the page's
identity (``canonical_url``) and is marked seen, so not fetched again.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urljoin, urlsplit

import scrapy
from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.http import Response, TextResponse
from scrapy.settings import BaseSettings

from polite_crawler.analysis import page_links
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.admission import UrlRules
from polite_crawler.items import PageItem, page_item
from polite_crawler.middlewares.trapmemory import TRAIL, LinkMemory
from polite_crawler.middlewares.traps import DEPTH, DISCOVERY, trap_limits, url_rules
from polite_crawler.policy.sitemaps import parse_sitemap, scope_of
from polite_crawler.policy.traps import LOW_YIELD, TrapLimits
from polite_crawler.policy.urls import URLError, canonicalize, host_of, origin_of

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy.crawler import Crawler
    from twisted.python.failure import Failure

    from polite_crawler.interfaces import FrontierService, RobotsService
    from polite_crawler.policy.links import PageLinks

logger = logging.getLogger(__name__)

SITEMAP_PRIORITY = 100  # sitemaps before pages; pages by depth (see priority())


class UsageError(ValueError):
    """The spider's arguments do not name a site to crawl."""


def read_start_urls(url: str | None = None, urls: str | None = None) -> list[str]:
    """Start URLs from ``-a url=`` and/or ``-a urls=FILE``, validated."""
    found: list[str] = []
    if url:
        found.extend(u.strip() for u in url.split(",") if u.strip())
    if urls:
        path = Path(urls)
        if not path.is_file():
            raise UsageError(f"-a urls={urls}: no such file")
        for raw in path.read_text(encoding="utf-8").splitlines():
            line = raw.split("#", 1)[0].strip()
            if line:
                found.append(line)
    if not found:
        raise UsageError(
            "give a site: scrapy crawl site -a url=https://example.org/ (or -a urls=FILE)")
    for u in found:
        parts = urlsplit(u)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"not an http(s) URL: {u!r}")
    return found


@dataclass
class _Discovery:
    """One origin's sitemap phase."""

    started: bool = False
    done: bool = False
    pending: int = 0  # sitemap files asked for and not answered yet
    sitemaps: set[str] = field(default_factory=set)  # canonical URLs of files asked for
    held: dict[str, int] = field(default_factory=dict)  # links waiting: canonical URL -> depth


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, url: str | None = None, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.polite_start_urls = read_start_urls(url, urls)
        self.allowed_hosts = {host_of(u) for u in self.polite_start_urls}
        self._discovery: dict[str, _Discovery] = {}
        self._rules: UrlRules | None = None
        # The declared defaults for a spider built without a crawler (tests, scrapy
        # check); from_crawler reads the crawl's settings.
        self._read_settings(BaseSettings())

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> SiteSpider:
        spider: SiteSpider = super().from_crawler(crawler, *args, **kwargs)
        spider._read_settings(crawler.settings)
        spider._rules = url_rules(crawler)
        crawler.signals.connect(spider._on_idle, signal=signals.spider_idle)
        return spider

    def _read_settings(self, settings: BaseSettings) -> None:
        s = polite_settings(settings)
        self.strip_params: list[str] = s.getlist("POLITE_STRIP_PARAMS")
        self.max_links: int = s.getint("POLITE_MAX_LINKS_PER_PAGE")
        self.sitemap_max_bytes: int = s.getint("POLITE_SITEMAP_MAX_BYTES")
        self.sitemap_max_urls: int = s.getint("POLITE_SITEMAP_MAX_URLS")
        self.trap_limits: TrapLimits = trap_limits(s)

    # Pages go to the frontier in bulk, as URL rows; False: every page is a Request the
    # callback yields, judged by the spider middlewares (as another spider's would be).
    bulk_pages: bool = True
    _queued_on_finish: int = 0  # pages the last _finish_discovery calls queued in bulk

    # --- helpers ---------------------------------------------------------------
    def _inc(self, key: str, n: int = 1) -> None:
        stats = self.crawler.stats if hasattr(self, "crawler") else None
        if stats is not None and n:
            stats.inc_value(key, n)

    def _robots_book(self) -> RobotsService | None:
        if not hasattr(self, "crawler"):
            return None
        book: RobotsService | None = polite_context(self.crawler).robots
        return book

    def polite_keep_origin(self, origin: str) -> bool:
        """Whether this spider holds links of the origin until its sitemaps are read
        (the Redis frontier keeps such an origin with this worker until then)."""
        disc = self._discovery.get(origin)
        return disc is not None and not disc.done and (disc.started or bool(disc.held))

    def _bulk(self) -> FrontierService | None:
        """The frontier scheduler, when pages can go to it in bulk (else None: another
        scheduler sets no frontier on the context)."""
        if not hasattr(self, "crawler"):
            return None
        frontier: FrontierService | None = polite_context(self.crawler).frontier
        return frontier

    def _mark_seen(self, canonical: str) -> None:
        frontier = self._bulk()
        if frontier is not None:
            frontier.mark_seen(canonical)

    def in_scope(self, url: str) -> bool:
        return host_of(url) in self.allowed_hosts

    def _in_scope_under(self, urls: Iterable[str], base: str) -> Iterator[bool]:
        """:meth:`in_scope` of each URL; those under ``base``'s origin answered from it."""
        try:
            own = origin_of(base) + "/"
        except ValueError:
            own = "\0"
        own_ok = self.in_scope(base)
        in_scope = self.in_scope
        for url in urls:
            yield own_ok if url.startswith(own) else in_scope(url)

    def canonical(self, url: str) -> str | None:
        try:
            return canonicalize(url, strip_params=self.strip_params)
        except URLError:
            return None

    def page_request(self, url: str, *, depth: int, source: str,
                     lastmod: str | None = None,
                     canonical: str | None = None) -> scrapy.Request | None:
        """A request for a page (its canonical URL), or None if it has none.

        ``canonical``: the URL's canonical form, when the caller has it already.
        Duplicates are the scheduler's to refuse (the frontier's seen set).
        """
        canon = canonical or self.canonical(url)
        if canon is None:
            self._inc("polite/discovery/invalid_url")
            return None
        meta = self._page_meta(depth, source)
        if lastmod:
            meta["polite_lastmod"] = lastmod
        return scrapy.Request(canon, callback=self.parse, errback=self.page_failed, meta=meta,
                              priority=self.priority(canon, depth))

    @staticmethod
    def _page_meta(depth: int, source: str) -> dict[str, Any]:
        meta: dict[str, Any] = {DEPTH: depth, "polite_source": source}
        if source != "link":
            meta["polite_link"] = False  # listed by the site, not a link of a page
        return meta

    def queue_pages(self, found: Iterable[tuple[str, str | None]], *, depth: int, source: str,
                    held: dict[str, int] | None = None, canonical_form: bool = False,
                    parent: Response | None = None) -> tuple[list[scrapy.Request], int]:
        """Pages ``(url, lastmod)`` found at ``depth``: into the frontier in bulk.

        Returns the Requests to yield instead (only without a bulk frontier) and
        how many pages were queued or made requests. With ``held``, URLs that pass
        the URL rules are kept there (canonical -> depth) instead of queued.
        ``canonical_form``: the URLs are canonical already (a sitemap's entries).
        ``parent``: the page they are links of; the trap memory judges them then
        (:func:`polite_crawler.middlewares.trapmemory.link_memory`, as it judges a
        Request a page's callback yields).
        """
        frontier = self._bulk() if self.bulk_pages else None
        if frontier is None:
            if held is not None:
                for url, _lastmod in found:
                    canon = self.canonical(url)
                    if canon is not None:
                        held.setdefault(canon, depth)
                return [], 0
            requests = [r for url, lastmod in found
                        if (r := self.page_request(url, depth=depth, source=source,
                                                   lastmod=lastmod)) is not None]
            return requests, len(requests)
        rules = self._rules or UrlRules(self.trap_limits, self.strip_params)
        refused: Counter[str] = Counter()
        rows: list[tuple[str, str, dict[str, Any] | None]] = []
        memory = (LinkMemory(self.crawler, parent.url, parent.meta.get(TRAIL))
                  if parent is not None and hasattr(self, "crawler") and held is None else None)
        if canonical_form and memory is None:
            # A sitemap's entries (or held links): judged in one pass, as judge would.
            found = found if isinstance(found, list) else list(found)
            reasons, origins = rules.judge_canonical([url for url, _lastmod in found], depth)
            for (url, lastmod), reason, origin in zip(found, reasons, origins, strict=True):
                if reason is not None:
                    refused[reason] += 1
                elif held is not None:
                    held.setdefault(url, depth)
                else:
                    rows.append((url, origin, {"polite_lastmod": lastmod} if lastmod else None))
            found = ()
        for url, lastmod in found:
            judged = rules.judge(url, depth, canonical_form=canonical_form)
            extra: dict[str, Any] | None = {"polite_lastmod": lastmod} if lastmod else None
            if memory is not None and judged.canonical:
                rule = judged.reason if judged.reason != LOW_YIELD else rules.page_reason(
                    url, depth)
                dropped, trail = memory(judged.canonical, rule)
                if dropped is not None:
                    refused[dropped] += 1
                    continue
                if trail:
                    extra = {**(extra or {}), TRAIL: trail}
            if judged.reason is not None:
                refused[judged.reason] += 1
            elif held is not None:
                held.setdefault(judged.canonical, depth)
            else:
                rows.append((judged.canonical, judged.origin, extra))
        for reason, n in refused.items():
            self._inc(f"polite/traps/{reason}", n)
        if not rows:
            return [], 0
        priority = self.priority
        if type(self).priority is SiteSpider.priority:
            plain = -4 * depth  # what priority() gives a URL with no query

            def prio(u: str) -> int:
                return plain if "?" not in u else priority(u, depth)
        else:
            def prio(u: str) -> int:
                return priority(u, depth)
        queued = frontier.enqueue_urls(
            rows, callback="parse", errback="page_failed", meta=self._page_meta(depth, source),
            priority=prio,
        )
        return [], int(queued)

    @staticmethod
    def priority(canonical_url: str, depth: int) -> int:
        """Shallow pages first; at one depth, plain paths before parameterised URLs.

        Faceted navigation, calendars and session variants live in query strings;
        the pages they list mostly do not. Fetching the plain ones first means an
        origin stopped for low yield has already given its real pages.
        """
        query = canonical_url.partition("?")[2]
        params = query.count("&") + 1 if query else 0
        return -4 * depth - min(params, 3)

    # --- start -----------------------------------------------------------------
    async def start(self) -> AsyncIterator[Any]:
        for url in self.polite_start_urls:
            origin = origin_of(url)
            if origin not in self._discovery:
                self._discovery[origin] = _Discovery()
                if self._robots_book() is None:
                    # No robots book to read Sitemap lines from: ask robots.txt ourselves.
                    self._discovery[origin].started = True
                    self._discovery[origin].pending = 1
                    yield scrapy.Request(
                        f"{origin}/robots.txt", callback=self.parse_robots,
                        errback=self.robots_failed, dont_filter=True,
                        priority=SITEMAP_PRIORITY + 1,
                        meta={DISCOVERY: "robots", "polite_link": False, DEPTH: 0},
                    )
            # A start page is a Request: the operator's choice, judged as one.
            request = self.page_request(url, depth=0, source="start")
            if request is not None:
                yield request

    # --- discovery -------------------------------------------------------------
    def _disc(self, url: str) -> _Discovery:
        origin = origin_of(url)
        disc = self._discovery.get(origin)
        if disc is None:
            disc = self._discovery[origin] = _Discovery()
        return disc

    def _start_discovery(self, origin: str, declared: Iterable[str] | None = None,
                         ) -> list[scrapy.Request]:
        disc = self._discovery.setdefault(origin, _Discovery())
        if declared is None:
            book = self._robots_book()
            declared = book.sitemaps(origin) if book is not None else []
        disc.started = True
        out = []
        listed = [urljoin(origin + "/", u.strip()) for u in declared if u and u.strip()]
        for url in listed:
            scope = self._scope(url, from_robots=True)
            if scope is None or host_of(url) != host_of(origin):
                self._inc("polite/discovery/sitemap_offsite")
                continue
            request = self._sitemap_request(disc, url, scope)
            if request is not None:
                out.append(request)
        if not listed:
            self._inc("polite/discovery/sitemap_default")
            request = self._sitemap_request(disc, f"{origin}/sitemap.xml",
                                            self._scope(f"{origin}/sitemap.xml") or origin)
            if request is not None:
                out.append(request)
        if disc.pending == 0:
            out.extend(self._finish_discovery(origin))
        return out

    @staticmethod
    def _scope(url: str, *, from_robots: bool = False) -> str | None:
        try:
            return scope_of(url, from_robots=from_robots)
        except URLError:
            return None

    def _sitemap_request(self, disc: _Discovery, url: str, scope: str) -> scrapy.Request | None:
        canon = self.canonical(url)
        if canon is None or canon in disc.sitemaps:
            return None
        disc.sitemaps.add(canon)
        disc.pending += 1
        return scrapy.Request(
            # Filtered like any URL: a resumed job (same JOBDIR) does not read its
            # sitemaps again; what they listed is in its queue already.
            canon, callback=self.parse_sitemap, errback=self.sitemap_failed,
            priority=SITEMAP_PRIORITY,
            meta={DISCOVERY: "sitemap", "polite_sitemap_scope": scope, "polite_link": False,
                  "polite_max_bytes": self.sitemap_max_bytes, DEPTH: 0},
        )

    def _finish_discovery(self, origin: str) -> list[scrapy.Request]:
        """The origin's sitemaps are read: follow the links held until now."""
        disc = self._discovery.setdefault(origin, _Discovery())
        if disc.done:
            return []
        disc.done = True
        # A held link a sitemap listed later left the dict then (it is a listed page).
        held, disc.held = disc.held, {}
        logger.debug("Discovery of %(origin)s done: %(n)d sitemap files, %(h)d held links",
                     {"origin": origin, "n": len(disc.sitemaps), "h": len(held)})
        out: list[scrapy.Request] = []
        by_depth: dict[int, list[tuple[str, str | None]]] = {}
        for canon, depth in held.items():
            by_depth.setdefault(depth, []).append((canon, None))
        for depth, found in sorted(by_depth.items()):
            requests, queued = self.queue_pages(found, depth=depth, source="link",
                                                canonical_form=True)
            out.extend(requests)
            self._queued_on_finish += queued
        # The held links are in the frontier now (in bulk: ``out`` is empty then): the
        # pages they came from may leave the queue (FrontierDoneMiddleware held them).
        frontier = self._bulk()
        if frontier is not None:
            frontier.release_held(origin)
        return out

    def _sitemap_answered(self, url: str) -> list[scrapy.Request]:
        origin = origin_of(url)
        disc = self._discovery.setdefault(origin, _Discovery())
        disc.pending = max(0, disc.pending - 1)
        if disc.pending == 0:
            return self._finish_discovery(origin)
        return []

    def parse_robots(self, response: Response) -> Iterator[Any]:
        origin = origin_of(response.url)
        declared = []
        for line in response.body.splitlines():
            key, _, value = line.partition(b":")
            if key.strip().lower() in (b"sitemap", b"site-map") and value.strip():
                declared.append(value.strip().decode("utf-8", "replace"))
        self._discovery.setdefault(origin, _Discovery()).pending -= 1
        yield from self._start_discovery(origin, declared)

    def robots_failed(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        origin = origin_of(request.url)
        self._discovery.setdefault(origin, _Discovery()).pending -= 1
        yield from self._start_discovery(origin, [])

    def parse_sitemap(self, response: Response) -> Iterator[Any]:
        scope = response.meta.get("polite_sitemap_scope")
        result = parse_sitemap(response.body, response.url, scope=scope,
                               max_urls=self.sitemap_max_urls, max_bytes=self.sitemap_max_bytes)
        self._inc(f"polite/discovery/sitemap/{result.kind}")
        if result.truncated:  # cut off: its complete entries are still read
            self._inc("polite/discovery/sitemap/truncated")
        for reason, n in result.dropped.items():
            self._inc(f"polite/discovery/dropped/{reason}", n)
        if result.error:
            logger.info("Sitemap %(url)s: %(error)s", {"url": response.url, "error": result.error})
        disc = self._disc(response.url)
        for child in result.sitemaps:
            # An index named in robots.txt speaks for the host, and so do its children.
            root = isinstance(scope, str) and scope == origin_of(scope) + "/"
            child_scope = scope if root else self._scope(child.url)
            request = self._sitemap_request(disc, child.url, child_scope or child.url)
            if request is not None:
                yield request
        found: list[tuple[str, str | None]] = []
        offsite = 0
        held = disc.held
        # Entries are canonical (policy.sitemaps): with no parameters to strip, an
        # entry is its own canonical URL (canonicalize is idempotent).
        recanonical = bool(self.strip_params)
        for entry, ok in zip(result.pages,
                             self._in_scope_under([e.url for e in result.pages], response.url),
                             strict=True):
            if not ok:
                offsite += 1
                continue
            url = entry.url
            if held:
                # Linked before the sitemap listed it: it is a listed page after all.
                held.pop((self.canonical(url) or url) if recanonical else url, None)
            found.append((url, entry.lastmod))
        self._inc("polite/discovery/dropped/offsite", offsite)
        # policy.sitemaps gives every entry in canonical form.
        requests, listed = self.queue_pages(found, depth=0, source="sitemap",
                                            canonical_form=True)
        yield from requests
        self._inc("polite/discovery/listed", listed)
        yield from self._sitemap_answered(response.url)

    def sitemap_failed(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        self._inc("polite/discovery/sitemap/failed")
        yield from self._sitemap_answered(request.url)

    # --- pages -----------------------------------------------------------------
    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        origin = origin_of(response.url)
        disc = self._disc(response.url)
        for hop in response.meta.get("redirect_urls") or ():
            # An origin that redirects its pages elsewhere (http -> https) has its
            # sitemaps there too: nothing to discover under the old one.
            moved = self._discovery.get(origin_of(hop))
            if origin_of(hop) != origin and moved is not None and not moved.started:
                moved.started = moved.done = True
        if not disc.started:
            yield from self._start_discovery(origin)
        if response.meta.get("redirect_urls"):
            # A redirect's target is known now, under its own canonical URL.
            final = self.canonical(response.url)
            if final is not None:
                self._mark_seen(final)
        if not self.in_scope(response.url):
            if response.meta.get("polite_source") == "start" and response.meta.get("redirect_urls"):
                # The site the operator named lives elsewhere (example.org -> www.example.org).
                self.allowed_hosts.add(host_of(response.url))
            else:
                self._inc("polite/discovery/offsite_response")
                return
        if not isinstance(response, TextResponse):
            return
        page = page_links(response, self.max_links)
        if page.dropped:
            self._inc("polite/discovery/links_over_cap", page.dropped)
        yield self.build_item(response, page)
        if response.meta.get("polite_nofollow"):
            return  # the page's meta robots / X-Robots-Tag said nofollow
        depth = int(response.meta.get(DEPTH, 0)) + 1
        skipped: Counter[str] = Counter()
        found: list[tuple[str, str | None]] = []
        for link, ok in zip(page.links,
                            self._in_scope_under((k.url for k in page.links), response.url),
                            strict=True):
            if link.nofollow:
                skipped["rel_nofollow"] += 1
            elif not ok:
                skipped["offsite"] += 1
            else:
                found.append((link.url, None))
        for reason, n in skipped.items():
            self._inc(f"polite/discovery/{reason}", n)
        # The frontier's seen set refuses the links already known, in one look-up.
        requests, _queued = self.queue_pages(found, depth=depth, source="link",
                                             held=None if disc.done else disc.held,
                                             parent=response)
        yield from requests

    def page_failed(self, failure: Failure) -> Iterator[Any]:
        request = failure.request  # type: ignore[attr-defined]
        disc = self._disc(request.url)
        if not disc.started:
            yield from self._start_discovery(origin_of(request.url))

    def page_identity(self, response: Response, page: PageLinks | None) -> str:
        """The page's canonical URL: its own, or its same-host ``rel=canonical``."""
        own = self.canonical(response.url) or response.url
        if page is not None and page.canonical:
            declared = self.canonical(page.canonical)
            if declared is not None and host_of(declared) == host_of(own):
                if declared != own:
                    self._inc("polite/discovery/rel_canonical")
                    self._mark_seen(declared)  # the same page: never fetched again under it
                return declared
        return own

    def build_item(self, response: Response, page: PageLinks | None = None) -> PageItem:
        """The stored item for one page (:class:`polite_crawler.items.PageItem`).

        Extend it (call super) to add fields; the pipelines give it its
        fingerprints, decide duplicates and store it.
        """
        if page is None and isinstance(response, TextResponse):
            page = page_links(response, self.max_links)
        return page_item(
            response,
            canonical_url=self.page_identity(response, page),
            title=page.title if page is not None and page.title else None,
            links=len(page.links) if page is not None else 0,
        )

    # --- the end -----------------------------------------------------------------
    def _on_idle(self) -> None:
        """Nothing queued: finish any origin whose discovery stalled.

        A sitemap request can vanish without an answer (a scheduler that drops
        it, robots.txt that disallows it). Discovery must not wait for it forever.
        """
        engine = self.crawler.engine
        assert engine is not None
        self._queued_on_finish = 0
        scheduled = 0
        rules = self._rules or UrlRules(self.trap_limits, self.strip_params)
        for origin, disc in list(self._discovery.items()):
            if disc.done:
                continue
            if not disc.started:
                requests = self._start_discovery(origin)
            else:
                disc.pending = 0
                requests = self._finish_discovery(origin)
            for request in requests:
                # Not through the spider middlewares: the URL rules apply here.
                judged = rules.judge(request.url, int(request.meta.get(DEPTH, 0)),
                                     discovery=bool(request.meta.get(DISCOVERY)))
                if judged.reason is not None:
                    self._inc(f"polite/traps/{judged.reason}")
                    continue
                engine.crawl(request)
                scheduled += 1
        if scheduled or self._queued_on_finish:
            raise DontCloseSpider
