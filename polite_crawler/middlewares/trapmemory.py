"""Trap memory and query variants: a trap judged once is not walked again.

Spider middleware (order 75, so it sees every request a callback yields before
the trap rules of :class:`polite_crawler.middlewares.traps.TrapMiddleware`, 70):

- every link carries its *trail* (``meta["polite_trap_trail"]``,
  :func:`polite_crawler.policy.traps.extend_trail`): the pages before it in one
  URL pattern. When the URL rules refuse a link on a trail (a repeated segment,
  a URL too long, too many parameters, a depth reached along one path's
  queries) or a query variant is refused, the trail's pages after its entry and
  the refused URL are remembered as trap pages of the origin
  (:mod:`polite_crawler.store.traps`, POLITE_TRAP_MEMORY);
- a URL remembered as a trap page is dropped (``polite/traps/remembered/<reason>``);
  the conditional-request middleware refuses it too, for requests that did not
  come from a callback (start URLs);
- session tokens in paths (:class:`polite_crawler.policy.traps.SessionTokens`):
  every page under a token-like path segment that reaches a callback is observed;
  one fetched again under another token (the same rest of the path) that brings no
  new text reveals the trap, and its template (``http://host/s/{id}/``) is
  remembered: every URL under it, whatever its token, is then a remembered trap
  page (``polite/traps/remembered/session_token``), here, in the ``site`` spider's
  bulk link check and in the conditional-request middleware alike;
- query variants (:class:`polite_crawler.policy.traps.QueryVariants`): every
  query page that reaches a callback is observed (its novelty for its path);
  the conditional-request middleware asks :func:`query_variants` before a
  request goes out: once POLITE_MAX_QUERY_VARIANTS query pages of one path are
  fetched, a new query string of it is not requested unless at least
  POLITE_QUERY_VARIANTS_MIN_SHARE of them brought new text
  (``polite/traps/query_variants``); its trail is remembered as a trap.

Stats: ``polite/traps/learned/<reason>`` (trap pages, or a template, remembered).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from polite_crawler.analysis import yield_text
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.middlewares.traps import DEPTH, DISCOVERY, url_rules
from polite_crawler.policy.traps import (
    DEPTH as DEPTH_RULE,
)
from polite_crawler.policy.traps import (
    SESSION_TOKEN,
    QueryLimits,
    QueryVariants,
    SessionTokens,
    Trails,
    token_split,
    trap_pages,
)
from polite_crawler.policy.urls import URLError, canonicalize
from polite_crawler.store.traps import trap_book

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

TRAIL = "polite_trap_trail"
_QUERIES = "_polite_query_variants"
_TOKENS = "_polite_session_tokens"
# Rules whose refusal on a trail reveals a trap (depth only along one path's queries:
# a deep hierarchy of real pages is not a trap).
_LEARN = frozenset({"repeated_segment", "url_length", "query_params"})


def _same_path(urls: tuple[str, ...] | list[str], url: str) -> bool:
    path = url.split("?", 1)[0]
    return all(u.split("?", 1)[0] == path for u in urls)


def query_variants(crawler: Crawler) -> QueryVariants:
    """The crawl's query-variant counts (one per crawler)."""
    found = getattr(crawler, _QUERIES, None)
    if found is None:
        s = polite_settings(crawler.settings)
        found = QueryVariants(QueryLimits(
            max_variants=s.getint("POLITE_MAX_QUERY_VARIANTS"),
            min_share=s.getfloat("POLITE_QUERY_VARIANTS_MIN_SHARE"),
            min_novelty=s.getfloat("POLITE_YIELD_MIN_NOVELTY"),
        ))
        setattr(crawler, _QUERIES, found)
    queries: QueryVariants = found
    return queries


def session_tokens(crawler: Crawler) -> SessionTokens:
    """The crawl's session-token judge (one per crawler)."""
    found = getattr(crawler, _TOKENS, None)
    if found is None:
        found = SessionTokens(min_novelty=polite_settings(crawler.settings).getfloat(
            "POLITE_YIELD_MIN_NOVELTY"))
        setattr(crawler, _TOKENS, found)
    tokens: SessionTokens = found
    return tokens


def learn(crawler: Crawler, trail: tuple[str, ...] | list[str], refused: str, reason: str,
          now: float) -> None:
    """Remember the trap a refused URL on ``trail`` reveals (its pages after the entry)."""
    pages = trap_pages(tuple(trail), refused)
    trap_book(crawler).remember(pages, reason, now)
    if crawler.stats is not None:
        crawler.stats.inc_value(f"polite/traps/learned/{reason}")
    logger.debug("Trap (%(reason)s): %(n)d URLs remembered, from %(first)s",
                 {"reason": reason, "n": len(pages), "first": pages[0]})


def link_memory(crawler: Crawler, canon: str, rule: str | None, parent: str,
                parent_trail: tuple[str, ...] | None) -> tuple[str | None, tuple[str, ...]]:
    """The trap memory's judgement of a link (canonical URL) from page ``parent``.

    ``rule``: the page rules' answer for it (``UrlRules.page_reason``). Returns the reason to
    drop it (``remembered/<reason>``, counted by the caller) or None, and its trail.
    A refusal by the rules along a trail is learnt here (the caller counts the rule).
    One function for a Request (:class:`TrapMemoryMiddleware`) and for the ``site``
    spider's URLs queued in bulk (:class:`LinkMemory`, once a page).
    """
    return LinkMemory(crawler, parent, parent_trail)(canon, rule)


class LinkMemory:
    """:func:`link_memory` for the links of one page: the crawl's trap book and clock
    and the page's trail are looked up once, not once a link."""

    __slots__ = ("book", "clock", "crawler", "trails")

    def __init__(self, crawler: Crawler, parent: str,
                 parent_trail: tuple[str, ...] | None) -> None:
        self.crawler = crawler
        self.clock = polite_context(crawler).clock
        self.book = trap_book(crawler)
        self.trails = Trails(parent, parent_trail)

    def __call__(self, canon: str, rule: str | None) -> tuple[str | None, tuple[str, ...]]:
        now = self.clock()
        remembered = self.book.remembered(canon, now)
        if remembered is not None:
            return f"remembered/{remembered}", ()
        trail = self.trails.of(canon)
        if trail and (rule in _LEARN or (rule == DEPTH_RULE and _same_path(trail, canon))):
            learn(self.crawler, trail, canon, str(rule), now)
        return None, trail


class TrapMemoryMiddleware(BaseSpiderMiddleware):
    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        s = crawler.settings
        self.ctx = polite_context(crawler)
        self.rules = url_rules(crawler)  # the crawl's one set, not one built per link
        self.strip_params = s.getlist("POLITE_STRIP_PARAMS")
        self.book = trap_book(crawler)
        self.queries = query_variants(crawler)
        self.tokens = session_tokens(crawler)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    def _canonical(self, url: str) -> str | None:
        try:
            return canonicalize(url, strip_params=self.strip_params)
        except URLError:
            return None

    def process_spider_input(self, response: Response) -> None:
        if response.meta.get(DISCOVERY) or not isinstance(response, HtmlResponse):
            return
        query = "?" in response.url
        if not query and token_split(response.url) is None:
            return
        canon = self._canonical(response.url)
        if canon is None:
            return
        if query:
            self.queries.observe(canon, *yield_text(response))
        template = self.tokens.observe(canon, *yield_text(response))
        if template is not None:
            self.book.remember_template(template, SESSION_TOKEN, self.ctx.clock())
            self._inc(f"polite/traps/learned/{SESSION_TOKEN}")
            logger.info("Trap (%(reason)s): %(url)s came again under another token with "
                        "nothing new; every URL of %(template)s is remembered as a trap",
                        {"reason": SESSION_TOKEN, "url": canon, "template": template})

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        if response is None or request.meta.get(DISCOVERY):
            return request
        # The site spider requests canonical URLs already; another spider's URL that is
        # not canonical misses here and is caught by the conditional middleware, which
        # canonicalises every request once anyway. Links are many: no second parse here.
        depth = int(request.meta.get(DEPTH, int(response.meta.get(DEPTH, 0)) + 1))
        rule = self.rules.page_reason(request.url, depth)
        dropped, trail = link_memory(self.crawler, request.url, rule, response.url,
                                     response.meta.get(TRAIL))
        if dropped is not None:
            return self._drop(request, dropped)
        if trail:
            request.meta[TRAIL] = trail
        return request

    def _drop(self, request: Request, reason: str) -> Request | None:
        self._inc(f"polite/traps/{reason}")
        logger.debug("Trap rule %(reason)s: dropped %(url)s",
                     {"reason": reason, "url": request.url})
        return None

    @classmethod
    def from_crawler(cls, crawler: Crawler, *args: Any, **kwargs: Any) -> TrapMemoryMiddleware:
        return cls(crawler)
