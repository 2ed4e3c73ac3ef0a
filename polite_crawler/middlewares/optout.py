"""Origins on the opt-out list get no request at all, not even robots.txt (``scrapy forget``).

Order 45: after the settled-failure middleware (40), before every other one, so a
request of a refused origin is dropped before the address check (50), the
robots.txt middleware (100) or anything that could answer or send it. A dropped
request frees its origin in the frontier with no rest (it never reached the
network), the origin is stopped for the run (its queue dropped), the access log
gets a ``refused:opted_out`` line, and ``polite/optout/dropped`` is counted.

The list (:mod:`polite_crawler.store.optout`) is held in memory. Its version, one
row of the origin store, is read at most every :data:`CHECK_INTERVAL` on the
request path and every POLITE_OPTOUT_POLL seconds by a timer; when it moved the
list is read again and newly refused origins are stopped at once. The job then
*acknowledges* the version in the store, but only once nothing of a refused origin
is in flight in its frontier; ``scrapy forget`` waits for every live job's
acknowledgement before it returns, so after it returns no job sends a request to
the origin. An answer of a refused origin that was in flight when the list changed
never reaches the spider (nothing of it is stored).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import create_looping_call

from polite_crawler.context import polite_context
from polite_crawler.frontier.store import process_owner
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.optout import OptOutList
from polite_crawler.store.paths import origins_db_path

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

logger = logging.getLogger(__name__)

# At most this often (seconds) the request path reads the list's version.
CHECK_INTERVAL = 0.005
STOP_REASON = "opted_out"


class OptOutMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.clock = self.ctx.clock
        settings = crawler.settings
        self.poll = max(settings.getfloat("POLITE_OPTOUT_POLL", 0.2), 0.01)
        self.list = OptOutList(origins_db_path(settings))
        self.version, self.refused = self.list.snapshot()
        self.acked = self.version
        self.owner = process_owner()
        self._checked = time.monotonic()
        self._loop: Any = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> OptOutMiddleware:
        return cls(crawler)

    # --- lifecycle -------------------------------------------------------------
    def spider_opened(self, spider: Spider) -> None:
        frontier = getattr(self.ctx.frontier, "frontier", None)
        queue = getattr(frontier, "queue", None)
        path = getattr(queue, "path", None)
        keep_days = self.crawler.settings.getfloat("POLITE_ACCESS_LOG_KEEP_DAYS", 365.0)
        self.list.register(self.owner, spider.name, str(path) if path else None, self.version,
                           self.clock(), keep=(keep_days if keep_days > 0 else 36500) * 86400)
        self._loop = create_looping_call(self._tick)
        self._loop.start(self.poll, now=False)
        if self.refused:
            logger.info("%(n)d origins are on the opt-out list and get no request",
                        {"n": len(self.refused)})

    def spider_closed(self, spider: Spider) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.list.closed(self.owner, self.clock())
        self.list.close()

    # --- the list ----------------------------------------------------------------
    def _refresh(self) -> None:
        if self.list.version() == self.version:
            return
        version, refused = self.list.snapshot()
        new = refused - self.refused
        self.version, self.refused = version, refused
        for origin in sorted(new):
            self._stop(origin)
        logger.info("Opt-out list version %(v)d: %(n)d origins refused (%(new)d new)",
                    {"v": version, "n": len(refused), "new": len(new)})

    def _tick(self) -> None:
        self._refresh()
        self._try_ack()

    def _try_ack(self) -> None:
        if self.acked == self.version:
            return
        frontier = getattr(self.ctx.frontier, "frontier", None)
        if frontier is not None:
            busy = [o for o in frontier.in_flight_origins() if o in self.refused]
            if busy:
                return  # the exchange ends (settled or released) before the next tick
        self.list.ack(self.owner, self.version, self.clock())
        self.acked = self.version

    def _stop(self, origin: str) -> None:
        scheduler = self.ctx.frontier
        if scheduler is None:
            return
        frontier = getattr(scheduler, "frontier", None)
        if frontier is not None and origin in frontier.stopped:
            return
        scheduler.stop(origin, STOP_REASON)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    # --- requests ----------------------------------------------------------------
    def _origin(self, request: Request) -> str:
        origin = request.meta.get("polite_origin")
        if origin:
            return str(origin)
        try:
            return origin_of(request.url)
        except ValueError:
            return ""

    def process_request(self, request: Request) -> None:
        now = time.monotonic()
        if now - self._checked >= CHECK_INTERVAL:
            self._checked = now
            self._refresh()
        origin = self._origin(request)
        if origin not in self.refused:
            return
        self._inc("polite/optout/dropped")
        scheduler = self.ctx.frontier
        self._stop(origin)
        if scheduler is not None and scheduler.owns(request):
            scheduler.release(request)  # never sent: the origin is free, no rest
            scheduler.done(request)
        if self.ctx.access_log is not None:
            self.ctx.access_log.record(request=request, verdict=f"refused:{STOP_REASON}")
        logger.debug("Opted out, not fetched: %(url)s", {"url": request.url})
        # Not a robots.txt outage: the robots.txt middleware must not record one (it reads
        # this flag in its process_exception, which Scrapy calls for this IgnoreRequest).
        request.meta["polite_robots"] = False
        request.meta["polite_opted_out"] = True
        raise IgnoreRequest(f"{origin} is on the opt-out list")

    def process_response(self, request: Request, response: Response) -> Response:
        if self._origin(request) in self.refused:
            # In flight when the list changed: nothing of it reaches the spider or the store.
            self._inc("polite/optout/dropped_response")
            raise IgnoreRequest(f"{self._origin(request)} is on the opt-out list")
        return response


__all__ = ["OptOutMiddleware"]
