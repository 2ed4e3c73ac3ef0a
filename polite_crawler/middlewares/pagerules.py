"""Page-level robots rules and content signals, for every spider.

A spider middleware (order 60, next to the engine, so its output side sees
what every other spider middleware yields too). Before the callback it reads
what the page says about itself and writes it on ``response.meta``; on the
way out it enforces it and marks every item.

Sources, combined (any "no" wins):

* ``<meta name="robots">`` and ``<meta name="<token>">`` (the bot's product token);
* ``X-Robots-Tag``, including token-scoped values (``PoliteCrawler: nofollow``);
* content signals: the robots.txt ``Content-Signal`` (Cloudflare) and
  ``Content-Usage`` (IETF AIPREF) rules that apply to the URL, and the
  ``Content-Usage`` / ``Content-Signal`` response headers.

Meta keys, set on ``response.meta`` before the callback (a callback reads them
there: ``response.meta["polite_noindex"]``); the same names are item fields, set only
on items that ask for them: a ``scrapy.Item`` declaring the fields
(:class:`polite_crawler.items.PageRulesItem`, which :class:`~polite_crawler.items.PageItem`
extends). Any other item (a dict, an Item without them) leaves as its spider yielded
it, unchanged and without a warning:

``polite_noindex`` (bool)
    The page asked not to be indexed. Decision: the page is *kept as a marker,
    not dropped*. Its items that declare the fields keep their URL and metadata but
    lose their text fields (:data:`NOINDEX_TEXT_FIELDS`); the store keeps the marker (so a
    revisit can be conditional and a page that becomes indexable later is
    noticed) and no export carries it as content.
``polite_nofollow`` (bool)
    No link of the page is followed: every request the callback (or a spider
    middleware) yields from it is dropped, except those marked
    ``meta["polite_link"] = False`` (not a link of the page, e.g. a sitemap
    named in robots.txt). Links marked ``rel="nofollow"`` are dropped on any
    page, unless the same URL is also linked without it.
``polite_signals`` (dict)
    ``{"search": ..., "ai_input": ..., "ai_train": ...}``, each True (allowed),
    False (refused) or None (nothing said).
``polite_ai_input`` (bool)
    False when the site refused AI input: the page is kept, but its text must
    be held back from any AI-input export. (``ai_train`` is only recorded: the
    crawler trains no model.)

A response to a discovery request (``meta["polite_discovery"]``: a sitemap the
spider reads) is no page: it is not counted, and its own X-Robots-Tag does not
judge what its callback yields (pages the sitemap lists, and links the spider
held back until the sitemaps were read, judged by their own page's rules).

Stats: ``polite/robots/page/noindex``, ``polite/robots/page/nofollow``,
``polite/robots/page/ai_input_refused``, ``polite/robots/nofollow_dropped``,
``polite/robots/rel_nofollow_dropped``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import scrapy
from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from polite_crawler.analysis import page_links
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.middlewares.traps import DISCOVERY
from polite_crawler.policy.robots import NO_SIGNALS, ContentSignals, PageRules, page_rules
from polite_crawler.policy.urls import canonicalize

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from polite_crawler.interfaces import RobotsService
    from polite_crawler.policy.links import PageLinks

logger = logging.getLogger(__name__)

NOINDEX = "polite_noindex"
NOFOLLOW = "polite_nofollow"
SIGNALS = "polite_signals"
AI_INPUT = "polite_ai_input"
_RULES = "_polite_page_rules"  # the parsed PageRules, cached on the response meta
_NOFOLLOW_ONLY = "_polite_rel_nofollow"

# Fields an item of a noindex page loses (the page is kept as a marker only).
NOINDEX_TEXT_FIELDS = ("text", "body", "html", "content", "title", "description",
                       "summary", "snippet", "markdown")


def _header_values(response: Response, name: bytes) -> list[str]:
    return [v.decode("latin-1") for v in response.headers.getlist(name)]


class PageRulesMiddleware(BaseSpiderMiddleware):
    """Spider middleware for meta robots, X-Robots-Tag and content signals."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.ctx = polite_context(crawler)
        settings = polite_settings(crawler.settings)
        self.token = settings.get("POLITE_BOT_NAME")
        self.max_links = settings.getint("POLITE_MAX_LINKS_PER_PAGE")

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    # --- reading the page -----------------------------------------------------
    def rules_for(self, response: Response) -> PageRules:
        """The page's rules (computed once, kept on ``response.meta``)."""
        meta = response.meta
        cached = meta.get(_RULES)
        if isinstance(cached, PageRules):
            return cached
        headers = {
            "x-robots-tag": _header_values(response, b"X-Robots-Tag"),
            "content-usage": _header_values(response, b"Content-Usage"),
            "content-signal": _header_values(response, b"Content-Signal"),
        }
        metas: list[tuple[str, str]] = []
        if isinstance(response, HtmlResponse):
            metas = self._page(response).metas
        robots: RobotsService | None = self.ctx.robots
        from_robots: ContentSignals = NO_SIGNALS
        if robots is not None:
            from_robots = robots.signals(response.url)
        rules = page_rules(headers, metas, self.token, from_robots)
        meta[_RULES] = rules
        meta[NOINDEX] = rules.noindex
        meta[NOFOLLOW] = rules.nofollow
        meta[SIGNALS] = rules.signals.as_dict()
        meta[AI_INPUT] = rules.signals.ai_input_allowed
        if meta.get(DISCOVERY):
            return rules  # a sitemap (or robots.txt) the spider read: not a page
        if rules.noindex:
            self._inc("polite/robots/page/noindex")
        if rules.nofollow:
            self._inc("polite/robots/page/nofollow")
        if not rules.signals.ai_input_allowed:
            self._inc("polite/robots/page/ai_input_refused")
        return rules

    def _page(self, response: Response) -> PageLinks:
        """The page's one link parse, shared with the spider (:mod:`polite_crawler.analysis`)."""
        cap = getattr(self.crawler.spider, "max_links", self.max_links)
        return page_links(response, cap if isinstance(cap, int) else self.max_links)

    def _rel_nofollow_only(self, response: Response) -> frozenset[str]:
        """Canonical URLs the page links only with ``rel="nofollow"``."""
        cached = response.meta.get(_NOFOLLOW_ONLY)
        if isinstance(cached, frozenset):
            return cached
        nofollow: set[str] = set()
        followable: set[str] = set()
        if isinstance(response, HtmlResponse):
            links = self._page(response).links
            if any(link.nofollow for link in links):
                for link in links:
                    try:
                        url = canonicalize(link.url)
                    except ValueError:
                        continue
                    (nofollow if link.nofollow else followable).add(url)
        result = frozenset(nofollow - followable)
        response.meta[_NOFOLLOW_ONLY] = result
        return result

    # --- spider middleware hooks ------------------------------------------------
    def process_spider_input(self, response: Response) -> None:
        self.rules_for(response)

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        if response is None or request.meta.get("polite_link") is False:
            return request
        if response.meta.get(DISCOVERY):
            # What a sitemap's callback yields is listed by the site, or a link held
            # back until the sitemaps were read and judged by the rules of the page
            # it came from: the sitemap's own X-Robots-Tag is not that page's rule.
            return request
        rules = self.rules_for(response)
        if rules.nofollow:
            self._inc("polite/robots/nofollow_dropped")
            logger.debug("Not following %(url)s: %(page)s is nofollow",
                         {"url": request.url, "page": response.url})
            return None
        nofollow_only = self._rel_nofollow_only(response)
        if nofollow_only:
            try:
                url = canonicalize(request.url)
            except ValueError:
                return request
            if url in nofollow_only:
                self._inc("polite/robots/rel_nofollow_dropped")
                logger.debug("Not following %(url)s: linked rel=nofollow on %(page)s",
                             {"url": request.url, "page": response.url})
                return None
        return request

    def get_processed_item(self, item: Any, response: Response | None) -> Any:
        # The author's items are the author's: only an item that asks for the page's
        # rules (a scrapy.Item declaring the fields, as PageRulesItem and PageItem do)
        # gets them; every other item leaves as it was yielded (the findings are on
        # response.meta, and in the page store for the site spider's pages).
        if response is None or not isinstance(item, scrapy.Item) or NOINDEX not in item.fields:
            return item
        rules = self.rules_for(response)
        marks = {
            NOINDEX: rules.noindex,
            NOFOLLOW: rules.nofollow,
            SIGNALS: rules.signals.as_dict(),
            AI_INPUT: rules.signals.ai_input_allowed,
        }
        for key, value in marks.items():
            if key in item.fields:
                item[key] = value
        if rules.noindex:
            for name in NOINDEX_TEXT_FIELDS:
                if name in item:
                    del item[name]
        return item


__all__ = [
    "AI_INPUT",
    "NOFOLLOW",
    "NOINDEX",
    "NOINDEX_TEXT_FIELDS",
    "SIGNALS",
    "PageRulesMiddleware",
]
