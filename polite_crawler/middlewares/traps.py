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
from typing import TYPE_CHECKING, Any

from scrapy.exceptions import IgnoreRequest
from scrapy.http import HtmlResponse
from scrapy.spidermiddlewares.base import BaseSpiderMiddleware

from polite_crawler.analysis import yield_text
from polite_crawler.context import polite_context
from polite_crawler.defaults import POLITE_DEFAULTS as _DEFAULT
from polite_crawler.policy.traps import (
    LOW_YIELD,
    URL_LENGTH,
    TrapLimits,
    YieldLimits,
    YieldMonitor,
    url_trap,
)
from polite_crawler.policy.urls import URLError, canonicalize, origin_of

if TYPE_CHECKING:
    from scrapy import Request
    from scrapy.crawler import Crawler
    from scrapy.http import Response
    from scrapy.settings import BaseSettings

logger = logging.getLogger(__name__)

DEPTH = "polite_depth"
DISCOVERY = "polite_discovery"
_MONITOR = "_polite_yield_monitor"


def _num(settings: BaseSettings, name: str) -> Any:
    return type(_DEFAULT[name])(settings.get(name, _DEFAULT[name]))


def trap_limits(settings: BaseSettings) -> TrapLimits:
    return TrapLimits(
        max_depth=_num(settings, "POLITE_MAX_DEPTH"),
        max_url_length=_num(settings, "POLITE_MAX_URL_LENGTH"),
        max_query_params=_num(settings, "POLITE_MAX_QUERY_PARAMS"),
        max_segment_repeats=_num(settings, "POLITE_MAX_SEGMENT_REPEATS"),
    )


def yield_monitor(crawler: Crawler) -> YieldMonitor:
    """The crawl's one yield monitor (kept on the crawler, shared by both middlewares)."""
    monitor = getattr(crawler, _MONITOR, None)
    if monitor is None:
        s = crawler.settings
        monitor = YieldMonitor(YieldLimits(
            window=_num(s, "POLITE_YIELD_WINDOW"),
            min_share=_num(s, "POLITE_YIELD_MIN_SHARE"),
            min_novelty=_num(s, "POLITE_YIELD_MIN_NOVELTY"),
        ))
        setattr(crawler, _MONITOR, monitor)
    return monitor


def _origin(url: str) -> str | None:
    try:
        return origin_of(url)
    except ValueError:  # a port out of range, a broken IPv6 literal
        return None


def trap_reason(request: Request, depth: int, limits: TrapLimits,
                strip_params: list[str]) -> str | None:
    """Why ``request`` is a trap (see the module docstring), or None."""
    if len(request.url) > limits.max_url_length:
        return URL_LENGTH
    try:
        canonical = canonicalize(request.url, strip_params=strip_params)
    except URLError:
        return "bad_url"
    return url_trap(canonical, depth, limits)


class TrapMiddleware(BaseSpiderMiddleware):
    """Spider middleware: trap rules on every request, yield monitoring on every page."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        self.ctx = polite_context(crawler)
        self.limits = trap_limits(crawler.settings)
        self.strip_params = crawler.settings.getlist("POLITE_STRIP_PARAMS")
        self.monitor = yield_monitor(crawler)

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
        origin = _origin(request.url)
        if origin is None:
            return self._drop(request, "bad_url")
        if self.monitor.stopped(origin):
            return self._drop(request, LOW_YIELD)
        meta = request.meta
        if response is None:
            meta.setdefault(DEPTH, 0)
            return request
        if DEPTH not in meta:
            meta[DEPTH] = int(response.meta.get(DEPTH, 0)) + 1
        if meta.get(DISCOVERY):
            return request
        reason = trap_reason(request, int(meta[DEPTH]), self.limits, self.strip_params)
        if reason is not None:
            return self._drop(request, reason)
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
        if self.monitor.stopped(_origin(request.url) or ""):
            if self.crawler.stats is not None:
                self.crawler.stats.inc_value(f"polite/traps/{LOW_YIELD}")
            raise IgnoreRequest(f"origin stopped ({LOW_YIELD})")
