"""Trap defences for every spider: the URL rules on every outgoing request, and yield.

:class:`TrapMiddleware` (spider middleware) judges each request a callback
yields before it reaches the scheduler (:mod:`polite_crawler.policy.traps`):

- depth: ``meta["polite_depth"]`` when the spider set it, else the depth of the
  page it came from plus one (start requests are depth 0). Above
  POLITE_MAX_DEPTH the request is dropped;
- the canonical URL (POLITE_STRIP_PARAMS stripped too): a URL without one is
  dropped (``bad_url``); more than POLITE_MAX_QUERY_PARAMS parameters, a path
  segment repeated POLITE_MAX_SEGMENT_REPEATS times, or a URL longer than
  POLITE_MAX_URL_LENGTH is dropped;
- yield: every HTML page that reaches a callback is observed (its main text's
  novelty for its origin, :func:`polite_crawler.analysis.yield_text`); an
  origin whose yield falls below the threshold is stopped: its further
  requests are dropped here and the frontier drops what it has queued
  (``frontier.stop(origin, "low_yield")``).

Requests the spider marks ``meta["polite_discovery"]`` (robots.txt, sitemaps)
are not pages: they are neither observed nor held to the URL rules, only to
the origin's stop. Start requests (no response) are the operator's choice and
pass the URL rules too.

Stats: ``polite/traps/<reason>`` per dropped request, ``polite/traps/stopped``
per origin stopped for low yield.

:class:`TrapStopMiddleware` (downloader middleware) drops a request of a
stopped origin that was queued before the stop, for schedulers that cannot
drop an origin's queue themselves (Scrapy's own).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from polite_crawler.analysis import yield_text
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.admission import UrlRules, safe_origin
from polite_crawler.policy.traps import (
    LOW_YIELD,
    TrapLimits,
    YieldLimits,
    YieldMonitor,
)
from polite_crawler.policy.urls import origin_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

DEPTH = "polite_depth"
DISCOVERY = "polite_discovery"
_MONITOR = "_polite_yield_monitor"
_RULES = "_polite_url_rules"


def trap_limits(settings: BaseSettings) -> TrapLimits:
    settings = polite_settings(settings)
    return TrapLimits(
        max_depth=settings.getint("POLITE_MAX_DEPTH"),
        max_url_length=settings.getint("POLITE_MAX_URL_LENGTH"),
        max_query_params=settings.getint("POLITE_MAX_QUERY_PARAMS"),
        max_segment_repeats=settings.getint("POLITE_MAX_SEGMENT_REPEATS"),
    )


def yield_monitor(crawler: Crawler) -> YieldMonitor:
    """The crawl's one yield monitor (kept on the crawler, shared by both middlewares)."""
    monitor = getattr(crawler, _MONITOR, None)
    if monitor is None:
        s = polite_settings(crawler.settings)
        monitor = YieldMonitor(YieldLimits(
            window=s.getint("POLITE_YIELD_WINDOW"),
            min_share=s.getfloat("POLITE_YIELD_MIN_SHARE"),
            min_novelty=s.getfloat("POLITE_YIELD_MIN_NOVELTY"),
        ))
        setattr(crawler, _MONITOR, monitor)
    return monitor


def url_rules(crawler: Crawler) -> UrlRules:
    """The crawl's URL rules (:mod:`polite_crawler.frontier.admission`), one for both paths."""
    rules = getattr(crawler, _RULES, None)
    if rules is None:
        rules = UrlRules(trap_limits(crawler.settings),
                         crawler.settings.getlist("POLITE_STRIP_PARAMS"), yield_monitor(crawler))
        setattr(crawler, _RULES, rules)
    return rules


class TrapMiddleware(BaseSpiderMiddleware):
    """Spider middleware: trap rules on every request, yield monitoring on every page."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.ctx = polite_context(crawler)
        self.rules = url_rules(crawler)
        self.monitor = self.rules.monitor or yield_monitor(crawler)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    def process_spider_input(self, response: Response) -> None:
        if response.meta.get(DISCOVERY) or not isinstance(response, HtmlResponse):
            return
        origin = origin_of(response.url)
        if self.monitor.stopped(origin):
            return
        verdict = self.monitor.observe(origin, *yield_text(response))
        if verdict.stopped:
            self._inc(f"polite/traps/stopped/{LOW_YIELD}")
            logger.warning(
                "Stopping %(origin)s: only %(share).0f%% of its last %(n)d pages brought new "
                "content (yield monitoring)",
                {"origin": origin, "share": verdict.share * 100, "n": self.monitor.limits.window},
            )
            frontier = self.ctx.frontier
            if frontier is not None:
                frontier.stop(origin, LOW_YIELD)

    def get_processed_request(self, request: Request, response: Response | None) -> Request | None:
        meta = request.meta
        if response is None:
            meta.setdefault(DEPTH, 0)
        elif DEPTH not in meta:
            meta[DEPTH] = int(response.meta.get(DEPTH, 0)) + 1
        # Start requests (no response) are the operator's choice: the origin's stop only.
        judged = self.rules.judge(request.url, int(meta[DEPTH]),
                                  discovery=response is None or bool(meta.get(DISCOVERY)))
        if judged.reason is not None:
            return self._drop(request, judged.reason)
        return request

    def _drop(self, request: Request, reason: str) -> Request | None:
        self._inc(f"polite/traps/{reason}")
        logger.debug("Trap rule %(reason)s: dropped %(url)s",
                     {"reason": reason, "url": request.url})
        return None


class TrapStopMiddleware:
    """Downloader middleware: nothing is sent to an origin stopped for low yield."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.monitor = yield_monitor(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> TrapStopMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        if request.meta.get("polite_robots"):
            return
        if self.monitor.stopped(safe_origin(request.url) or ""):
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value(f"polite/traps/{LOW_YIELD}")
            raise IgnoreRequest(f"origin stopped ({LOW_YIELD})")
