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

With ``POLITE_FRONTIER=redis://...`` the list is in Redis
(:mod:`polite_crawler.store.redis_optout`), for every worker on every machine. The
request path then reads nothing: every POLITE_OPTOUT_POLL a thread renews the job's
heartbeat, sends its acknowledgement and reads the version (one round trip), and the
list when the version moved; the reactor applies the answer. A request finds the list
confirmed within half the heartbeat's TTL, and registered under the frontier's current
worker id (a worker that lost its lease comes back under a new one), or the list is
read there and then (one round trip, only after a stall or a lease loss); if Redis does
not answer, the request goes on the list held (``polite/optout/unconfirmed``).
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import create_looping_call
from twisted.internet.threads import deferToThread

from polite_crawler.backend import backend_of
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.store import QueueStore, process_owner
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.optout import OptOutList
from polite_crawler.store.paths import origins_db_path
from polite_crawler.store.redis_start import when_redis_answers

if TYPE_CHECKING:
    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from polite_crawler.interfaces import FrontierService, FrontierView
    from polite_crawler.store.redis_optout import RedisOptOutList

logger = logging.getLogger(__name__)

# At most this often (seconds) the request path reads the list's version.
CHECK_INTERVAL = 0.005
STOP_REASON = "opted_out"


def request_origin(request: Request) -> str:
    """The origin a request was queued under (or its URL's; "" for none)."""
    origin = request.meta.get("polite_origin")
    if origin:
        return str(origin)
    try:
        return origin_of(request.url)
    except ValueError:
        return ""


class OptOutMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.clock = self.ctx.clock
        settings = polite_settings(crawler.settings)
        self.poll = max(settings.getfloat("POLITE_OPTOUT_POLL"), 0.01)
        backend = backend_of(settings)
        self.redis: RedisOptOutList | None = backend.cluster_optout(settings)
        self.list: OptOutList | None = None
        if self.redis is not None:
            self.crawl_name = settings.get("POLITE_CRAWL") or "default"
            # As long as the frontier's lease, and many polls: a live job is never
            # taken for gone by forget because one poll was late.
            self.alive_ttl = max(settings.getfloat("POLITE_REDIS_LEASE_TTL"),
                                 20 * self.poll, 1.0)
            self.version, self.refused = when_redis_answers(self.redis.snapshot,
                                                            backend.frontier_url)
        else:
            self.list = OptOutList(origins_db_path(settings))
            self.version, self.refused = self.list.snapshot()
        self.acked = self.version
        self._polling = False
        self._confirmed = time.monotonic()  # the list last read (Redis)
        self._sync_tried = 0.0
        self._registered = ""  # the frontier worker id the job is registered under
        self._acked_at = 0.0
        self._job: dict[str, Any] = {}  # the job's record in Redis
        self._down = False
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
        frontier = self._frontier()
        # This job's queue file, registered for forget (the embedded queue alone has one).
        queue = frontier.queue if frontier is not None else None
        path = queue.path if isinstance(queue, QueueStore) else None
        keep_days = polite_settings(self.crawler.settings).getfloat("POLITE_ACCESS_LOG_KEEP_DAYS")
        keep = (keep_days if keep_days > 0 else 36500) * 86400
        self.spider_name = spider.name
        if self.redis is not None:
            self._registered = self._worker()
            self._acked_at = self.clock()
            self._job = self.redis.job_record(spider.name, self.crawl_name, self._registered,
                                              self._acked_at)
            self.redis.forget_closed(self.clock(), keep)
            self.redis.register(self.owner, spider.name, self.crawl_name, self._registered,
                                version=self.version, now=self._acked_at,
                                alive_ttl=self.alive_ttl)
            self._confirmed = time.monotonic()
        else:
            assert self.list is not None
            self.list.register(self.owner, spider.name, str(path) if path else None,
                               self.version, self.clock(), keep=keep)
        self._loop = create_looping_call(self._tick if self.redis is None else self._tick_redis)
        self._loop.start(self.poll, now=False)
        if self.refused:
            logger.info("%(n)d origins are on the opt-out list and get no request",
                        {"n": len(self.refused)})

    def spider_closed(self, spider: Spider) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.redis is not None:
            try:
                self.redis.closed(self.owner, self.clock())
            except self.redis.errors as exc:  # its heartbeat runs out: forget stops waiting
                logger.warning("Could not mark this job closed on the opt-out list in "
                               "Redis: %(e)s", {"e": exc})
            self.redis.close()
            return
        assert self.list is not None
        self.list.closed(self.owner, self.clock())
        self.list.close()

    # --- the list ----------------------------------------------------------------
    def _refresh(self) -> None:
        assert self.list is not None
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
        if self._busy():
            return  # the exchange ends (settled or released) before the next tick
        assert self.list is not None
        self.list.ack(self.owner, self.version, self.clock())
        self.acked = self.version

    def _busy(self) -> bool:
        """Whether a refused origin has a request in flight in this job's frontier."""
        frontier = self._frontier()
        if frontier is None:
            return False
        return any(o in self.refused for o in frontier.in_flight_origins())

    def _apply(self, version: int, refused: frozenset[str] | None) -> None:
        if refused is None or version <= self.version:
            return
        new = refused - self.refused
        self.version, self.refused = version, refused
        for origin in sorted(new):
            self._stop(origin)
        logger.info("Opt-out list version %(v)d: %(n)d origins refused (%(new)d new)",
                    {"v": version, "n": len(refused), "new": len(new)})

    # --- the list in Redis ---------------------------------------------------------
    def _worker(self) -> str:
        scheduler: FrontierService | None = self.ctx.frontier
        shared = scheduler.shared if scheduler is not None else None
        return str(shared.worker) if shared is not None else ""

    def _ack_due(self) -> tuple[int, float]:
        """The acknowledgement to send: the list's version once nothing of a refused
        origin is in flight, else the last one (sent again: it keeps the record whole)."""
        if self.acked < self.version and not self._busy():
            return self.version, self.clock()
        return self.acked, self._acked_at

    def _poll_io(self, known: int, ack: tuple[int, float],
                 register: str | None) -> tuple[int, frozenset[str] | None]:
        """One poll (on a thread): heartbeat, acknowledgement, version; the list if moved."""
        assert self.redis is not None
        if register is not None:
            self._job = {**self._job, "worker": register}
            self.redis.register(self.owner, self.spider_name, self.crawl_name, register,
                                version=ack[0], now=ack[1], alive_ttl=self.alive_ttl)
        version = self.redis.poll(self.owner, self.alive_ttl, ack, self._job)
        if version == known:
            return version, None
        return self.redis.snapshot()

    def _tick_redis(self) -> None:
        if self._polling or self.redis is None:
            return
        self._polling = True
        worker = self._worker()
        ack = self._ack_due()
        sent = time.monotonic()
        d = deferToThread(self._poll_io, self.version, ack,
                          worker if worker != self._registered else None)
        d.addCallbacks(self._polled, self._poll_failed, callbackArgs=(ack, worker, sent))

    def _polled(self, result: tuple[int, frozenset[str] | None],
                ack: tuple[int, float], worker: str, sent: float) -> None:
        self._polling = False
        self._answered(result, ack, worker, sent)

    def _answered(self, result: tuple[int, frozenset[str] | None],
                  ack: tuple[int, float], worker: str, sent: float) -> None:
        self._confirmed = max(self._confirmed, sent)
        self._registered = worker
        if ack[0] > self.acked:
            self.acked, self._acked_at = ack
        if self._down:
            self._down = False
            logger.info("The opt-out list in Redis answers again")
        self._apply(*result)

    def _poll_failed(self, failure: Any) -> None:
        self._polling = False
        self._failed(failure.getErrorMessage())

    def _failed(self, error: str) -> None:
        self._inc("polite/optout/poll_failed")
        if not self._down:
            self._down = True
            logger.warning("The opt-out list in Redis does not answer (%(e)s); asking again "
                           "every %(poll).1f s", {"e": error, "poll": self.poll})

    def _confirm(self) -> None:
        """Before a request: the list read lately, under the current worker id (Redis)."""
        now = time.monotonic()
        worker = self._worker()
        if worker == self._registered and now - self._confirmed < self.alive_ttl / 2:
            return
        if now - self._sync_tried < 1.0:
            self._inc("polite/optout/unconfirmed")
            return
        self._sync_tried = now
        assert self.redis is not None
        ack = self._ack_due()
        try:
            result = self._poll_io(self.version, ack,
                                   worker if worker != self._registered else None)
        except self.redis.errors as exc:
            self._inc("polite/optout/unconfirmed")
            self._failed(str(exc))
            return
        self._answered(result, ack, worker, now)

    def _frontier(self) -> FrontierView | None:
        """This job's frontier core while the crawl is open."""
        scheduler: FrontierService | None = self.ctx.frontier
        return scheduler.frontier if scheduler is not None else None

    def _stop(self, origin: str) -> None:
        scheduler: FrontierService | None = self.ctx.frontier
        if scheduler is None:
            return
        frontier = scheduler.frontier
        if frontier is not None and origin in frontier.stopped:
            return
        scheduler.stop(origin, STOP_REASON)

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    # --- requests ----------------------------------------------------------------
    def _origin(self, request: Request) -> str:
        return request_origin(request)

    def process_request(self, request: Request) -> None:
        if self.redis is not None:
            self._confirm()
        else:
            now = time.monotonic()
            if now - self._checked >= CHECK_INTERVAL:
                self._checked = now
                self._refresh()
        origin = self._origin(request)
        if origin not in self.refused:
            return
        self._inc("polite/optout/dropped")
        scheduler: FrontierService | None = self.ctx.frontier
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


__all__ = ["OptOutMiddleware", "request_origin"]
