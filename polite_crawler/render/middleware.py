"""Spider middleware for POLITE_RENDER = "auto" (``scrapy crawl site -a render=auto``).

A page whose HTML has no main text of its own but is built by its scripts
(:func:`polite_crawler.policy.render.script_built`) is not stored as it is. The
site's own offers come first (the rule: a site's API or its HTML before a browser):

1. JSON-LD in the page with the text (``polite/render/choice/json_ld``): the page
   is stored with that text, nothing more is fetched;
2. a JSON form the page declares, ``<link rel="alternate" type="application/json">``
   on its own origin (``polite/render/choice/json_alternate``): that URL is fetched
   (a plain request, through the frontier) and the page is stored from its text;
3. the RSS or Atom feed the page declares (``polite/render/choice/feed``), when its
   entry for the page carries the text (``content:encoded``, ``content``,
   ``description``); a feed is fetched once and kept for the crawl's other pages;
4. otherwise, or when the JSON or the feed holds no text for the page, the page is
   read once more, rendered (``polite/render/choice/render``):
   the same request with ``meta["polite_render"] = True``. The shell just read is
   handed to the render handler (held in memory for a short while), so the site
   does not serve it twice.

Sitemaps and feeds are read by the ``site`` spider's discovery before any page
(:mod:`polite_crawler.spiders.site`); a script-built page that a sitemap or feed
listed is counted (``polite/render/listed_by/<source>``).
"""

from __future__ import annotations

import logging
import time
from collections import OrderedDict
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider, NotConfigured
from scrapy.http import HtmlResponse, Request

from polite_crawler.analysis import page_words
from polite_crawler.items import page_item
from polite_crawler.middlewares.traps import DEPTH, DISCOVERY
from polite_crawler.policy.render import (
    feed_alternate,
    feed_entry_text,
    json_alternate,
    json_ld_text,
    json_text,
    script_built,
    text_document,
)
from polite_crawler.render.settings import render_mode

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable, Iterator

    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

ALTERNATE_OF = "polite_render_alternate_of"  # meta: the page a JSON or feed request stands for
FEED = "polite_render_feed"  # meta: that request is for the page's feed
FEEDS_MAX = 8  # feeds held (one feed serves many pages of a site)
AUTO = "polite_render_auto"  # meta: why a page was sent back to be rendered
SHELL_TTL = 600.0  # seconds a shell waits for its render
SHELL_MAX = 64  # shells held at most
SHELL_MAX_BYTES = 16 * 1024 * 1024  # and their bodies' bytes at most
_ATTR = "_polite_render_shells"


class ShellCache:
    """Shells read by the trigger, waiting for their render (by URL, few, short-lived)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self.clock = clock
        self._items: OrderedDict[str, tuple[float, Response]] = OrderedDict()
        self.size = 0

    def put(self, url: str, response: Response) -> None:
        self.take(url)
        if len(response.body) > SHELL_MAX_BYTES // 4:
            return  # a big shell is asked for again rather than held
        self._items[url] = (self.clock(), response)
        self.size += len(response.body)
        while len(self._items) > SHELL_MAX or self.size > SHELL_MAX_BYTES:
            _, (_, old) = self._items.popitem(last=False)
            self.size -= len(old.body)

    def take(self, url: str) -> Response | None:
        found = self._items.pop(url, None)
        if found is None:
            return None
        self.size -= len(found[1].body)
        return found[1] if self.clock() - found[0] <= SHELL_TTL else None


def shell_cache(crawler: Crawler) -> ShellCache:
    cache = getattr(crawler, _ATTR, None)
    if cache is None:
        cache = ShellCache()
        setattr(crawler, _ATTR, cache)
    return cache


class RenderTriggerMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        if render_mode(crawler.settings, crawler.spider) != "auto":
            raise NotConfigured("POLITE_RENDER is not 'auto'")
        self.shells = shell_cache(crawler)
        self.feeds: OrderedDict[str, bytes] = OrderedDict()  # feed URL -> body, this crawl
        # feed URL asked for -> pages waiting for it (request, page URL)
        self.waiting: dict[str, list[tuple[Request, str]]] = {}
        # page URL -> its request, while its JSON form or feed is asked for
        self.pending: dict[str, Request] = {}
        crawler.signals.connect(self._idle, signal=signals.spider_idle)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> RenderTriggerMiddleware:
        return cls(crawler)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        yield from self._process(response, list(result))

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        outs = [out async for out in result]  # a page yields a few items and requests
        for out in self._process(response, outs):
            yield out

    def _process(self, response: Response, outs: list[Any]) -> Iterator[Any]:
        meta = response.meta
        if meta.get(ALTERNATE_OF):
            yield from self._from_alternate(response, outs)
            return
        reason = None
        if isinstance(response, HtmlResponse) and not meta.get("polite_render") \
                and not meta.get(DISCOVERY) and response.status == 200:
            reason = script_built(response.body, int(page_words(response).raw.size),
                                  response.encoding)
        if reason is None or not isinstance(response, HtmlResponse):
            yield from outs
            return
        self._inc(f"polite/render/script_built/{reason}")
        source = meta.get("polite_source")
        if source in ("sitemap", "feed"):
            self._inc(f"polite/render/listed_by/{source}")
        for out in outs:
            if isinstance(out, Request):
                yield out
            else:
                self._inc("polite/render/shell_dropped")  # the shell's item: not stored
        yield from self._instead(response, reason)

    def _instead(self, response: HtmlResponse, reason: str) -> list[Any]:
        """What stands for the shell: its JSON-LD text, its JSON form, its feed entry, or a
        render of the page, in that order."""
        found = json_ld_text(response.body, response.encoding)
        if found is not None:
            self._inc("polite/render/choice/json_ld")
            return [self._item(response, text_document(found))]
        request = response.request
        assert request is not None
        self.shells.put(response.url, response)  # for the render, whichever way it comes
        alternate = json_alternate(response.body, response.url, response.encoding)
        feed = None if alternate is not None else \
            feed_alternate(response.body, response.url, response.encoding)
        if feed is not None and feed in self.feeds:
            entry = feed_entry_text(self.feeds[feed], response.url, feed)
            if entry is not None:
                self._inc("polite/render/choice/feed")
                self.shells.take(response.url)
                return [self._item(response, text_document(entry))]
            feed = None  # the feed, read already, does not carry this page
        if feed is not None and feed in self.waiting:
            # The feed is asked for already: this page waits for it.
            self._inc("polite/render/choice/feed")
            self.waiting[feed].append((request, response.url))
            return []
        if alternate is not None or feed is not None:
            self._inc(f"polite/render/choice/{'json_alternate' if alternate else 'feed'}")
            meta = {k: v for k, v in request.meta.items() if not k.startswith(("polite_", "_"))}
            meta.update({ALTERNATE_OF: response.url, FEED: feed is not None,
                         "polite_link": False, DEPTH: request.meta.get(DEPTH, 0)})
            if feed is not None:
                self.waiting[feed] = []
            self.pending[response.url] = request
            return [request.replace(url=alternate or feed, meta=meta, dont_filter=True)]
        return [self._render_request(request, response.url, reason)]

    def _render_request(self, request: Request, url: str, reason: str) -> Request:
        self._inc("polite/render/choice/render")
        logger.debug("%(url)s is built by its scripts (%(why)s): rendering it",
                     {"url": url, "why": reason})
        meta = {k: v for k, v in request.meta.items()
                if not k.startswith(("polite_start", "polite_end", "_", ALTERNATE_OF, FEED))}
        meta.update({"polite_render": True, AUTO: reason})
        return request.replace(url=url, meta=meta, dont_filter=True)

    def _idle(self) -> None:
        """Nothing left to do, and pages still wait for a JSON form or a feed that never
        came (it failed, or an error answer never reached the spider): render them."""
        if not (self.waiting or self.pending) or self.crawler.engine is None:
            return
        pages = list(self.pending.items())
        for waiting in self.waiting.values():
            pages.extend((url, request) for request, url in waiting)
        self.waiting, self.pending = {}, {}
        logger.info("%(n)d pages waited for their JSON form or feed in vain: rendering them",
                    {"n": len(pages)})
        for url, request in pages:
            self._inc("polite/render/alternate_failed")
            self.crawler.engine.crawl(self._render_request(request, url, "alternate_failed"))
        raise DontCloseSpider

    def _item(self, response: Response, body: bytes, url: str | None = None) -> Any:
        request = response.request
        assert request is not None
        page_url = url or response.url
        synthetic = HtmlResponse(url=page_url, body=body, encoding="utf-8", status=200,
                                 request=request.replace(url=page_url))
        spider = self.crawler.spider
        build = getattr(spider, "build_item", None)
        return build(synthetic) if callable(build) else page_item(synthetic)

    def _from_alternate(self, response: Response, outs: list[Any]) -> Iterator[Any]:
        page_url = str(response.meta[ALTERNATE_OF])
        feed = bool(response.meta.get(FEED))
        # What the spider made of the JSON or feed answer itself is not the page;
        # its requests stay.
        yield from (out for out in outs if isinstance(out, Request))
        found = None
        self.pending.pop(page_url, None)
        waiting = self.waiting.pop(response.url, []) if feed else []
        if response.status == 200 and feed:
            self.feeds[response.url] = response.body
            while len(self.feeds) > FEEDS_MAX:
                self.feeds.popitem(last=False)
            found = feed_entry_text(response.body, page_url, response.url)
        elif response.status == 200:
            found = json_text(response.body)
        for request, url in waiting:
            entry = feed_entry_text(response.body, url, response.url) \
                if response.status == 200 else None
            if entry is None:
                yield self._render_request(request, url, "feed_without_text")
            else:
                self._inc("polite/render/feed/read")
                self.shells.take(url)
                yield self._item(response, text_document(entry), url=url)
        kind = "feed" if feed else "json_alternate"
        if found is None:
            self._inc(f"polite/render/{kind}/no_text")
            logger.info("The %(kind)s of %(url)s (%(alt)s) does not hold its text: rendering it",
                        {"kind": kind.replace("_", " "), "url": page_url, "alt": response.url})
            assert response.request is not None
            yield self._render_request(response.request, page_url, f"{kind}_without_text")
            return
        self._inc(f"polite/render/{kind}/read")
        self.shells.take(page_url)
        yield self._item(response, text_document(found), url=page_url)
