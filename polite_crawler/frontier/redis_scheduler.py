"""The frontier scheduler with its frontier on Redis (``POLITE_FRONTIER=redis://...``).

The add-on installs it instead of :class:`FrontierScheduler` when the setting names a
Redis URL. Everything the embedded scheduler does (admission, URL rows, the gate's
side, waking the engine) is inherited; what differs:

- the frontier is a :class:`~polite_crawler.frontier.redis_frontier.RedisFrontier`,
  kept in step with Redis by a batch every ``POLITE_REDIS_SYNC_INTERVAL`` seconds, its
  I/O on a thread;
- every worker offers its start URLs; the seen set in Redis takes each once, and the
  first worker to have put its whole list in marks the crawl seeded;
- an idle worker stays until the crawl is over everywhere (Scrapy's
  ``DontCloseSpider``), then the engine closes with reason ``finished``.
"""

from __future__ import annotations

import gc
import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import create_looping_call
from twisted.internet.threads import deferToThread

from polite_crawler.frontier.dupefilter import CanonicalDupeFilter, url_fingerprint
from polite_crawler.frontier.redis_frontier import (
    Outcome,
    Plan,
    RedisFrontier,
    execute,
    worker_id,
)
from polite_crawler.frontier.redis_shared import RedisShared
from polite_crawler.frontier.scheduler import FrontierScheduler
from polite_crawler.frontier.serialize import RequestCodec
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.redis_start import when_redis_answers

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class RedisFrontierScheduler(FrontierScheduler):
    """:class:`FrontierScheduler` over a Redis frontier shared by many workers."""

    frontier: RedisFrontier | None

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(crawler)
        s = crawler.settings
        self.url = s.get("POLITE_FRONTIER", "")
        self.crawl_name = s.get("POLITE_CRAWL", "") or "default"
        self.ttl = max(s.getfloat("POLITE_REDIS_LEASE_TTL", 15.0), 1.0)
        self.interval = min(max(s.getfloat("POLITE_REDIS_SYNC_INTERVAL", 0.5), 0.02),
                            self.ttl / 4)
        self.clock_skew = max(s.getfloat("POLITE_CLOCK_SKEW", 1.0), 0.0)
        # The download handler ends every exchange within the download timeout.
        self.exchange_timeout = s.getfloat("DOWNLOAD_TIMEOUT", 180.0) + 1.0
        self.seeder = False
        self._busy = False
        self._sync_loop: Any = None
        self.shared: RedisShared | None = None

    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.codec = RequestCodec(spider)
        shared = self.shared = RedisShared(self.url, self.crawl_name, worker_id())
        now = self._register(shared)
        f = self.frontier = RedisFrontier(
            shared, self.config, clock=self.clock, ttl=self.ttl, interval=self.interval,
            exchange_timeout=self.exchange_timeout, clock_skew=self.clock_skew, rng=self.rng,
            robots=lambda: self.ctx.robots, count=self._count,
        )
        f.origin_store.valid_until = now + self.ttl - f.margin
        keep = getattr(spider, "polite_keep_origin", None)  # the site spider's discovery
        if callable(keep):
            f.keep = lambda origin: bool(keep(origin))
        self.dupefilter = CanonicalDupeFilter(f.queue)  # type: ignore[arg-type]
        logger.info("Redis frontier %(url)s, crawl %(crawl)s, worker %(w)s%(seed)s",
                    {"url": self.url, "crawl": self.crawl_name, "w": shared.worker,
                     "seed": " (the first of the crawl)" if self.seeder else ""})
        self.crawler.signals.connect(self._idle, signal=signals.spider_idle)
        self._loop = create_looping_call(self._checkpoint)
        self._loop.start(self.checkpoint_interval, now=False)
        self._sync_loop = create_looping_call(self._tick)
        self._sync_loop.start(self.interval, now=True)
        gc.collect()
        gc.freeze()

    def _register(self, shared: RedisShared) -> float:
        """Register this worker (and claim the seeding, only named in the log), waiting
        for a Redis that does not answer yet (store.redis_start)."""
        def register() -> float:
            now = self.clock()
            shared.register(now, self.ttl)
            self.seeder = shared.claim_seeding()
            return now

        return when_redis_answers(register, self.url)

    def close(self, reason: str) -> None:
        gc.unfreeze()
        for loop in (self._loop, self._sync_loop):
            if loop is not None and loop.running:
                loop.stop()
        self._cancel_timer()
        f = self.frontier
        if f is None:
            return
        try:
            f.close(finished=reason == "finished")
        except Exception as exc:  # Redis gone: the leases run out, others take over
            logger.error("Could not give the origins back to Redis (%(e)s); other workers "
                         "take them over when this worker's lease runs out", {"e": exc})
        finally:
            f.shared.close()
            self.frontier = None

    # --- batches ---------------------------------------------------------------------
    def _tick(self) -> None:
        f = self.frontier
        if f is None or self._busy:
            return
        self._busy = True
        plan = f.plan()
        d = deferToThread(execute, f.shared, plan, self.ttl)
        d.addCallbacks(self._applied, self._failed, errbackArgs=(plan,))

    def _applied(self, outcome: Outcome) -> None:
        self._busy = False
        if self.frontier is not None:
            self.frontier.apply(outcome)
            self._arm()

    def _failed(self, failure: Any, plan: Plan) -> None:
        self._busy = False
        self._count("polite/redis/batch_failed", 1)
        logger.error("A Redis frontier batch failed (the next one carries it again; no "
                     "dispatch once this worker's lease runs out): %(e)s",
                     {"e": failure.getErrorMessage()})
        if self.frontier is not None:
            self.frontier.unplan(plan)

    # --- idle: over when the crawl is over everywhere ---------------------------------
    def has_pending_requests(self) -> bool:
        f = self.frontier
        return f is not None and (f.pending > 0 or f.outbox > 0)

    def __len__(self) -> int:
        f = self.frontier
        return f.pending + f.outbox if f is not None else 0

    def _idle(self, spider: Spider) -> None:
        f = self.frontier
        if f is None:
            return
        if self._busy:
            raise DontCloseSpider
        try:
            f.run_batch()  # at idle only: the outbox goes out, the active count comes back
            # The engine is idle only once its start URLs are all through: with this
            # batch, they are in Redis (the same list in every worker).
            if not f.shared.seeded():
                f.shared.mark_seeded()
        except Exception as exc:  # Redis down: the crawl is not known to be over; stay
            self._count("polite/redis/batch_failed", 1)
            logger.warning("Redis does not answer the idle check (%(e)s); waiting",
                           {"e": exc})
            raise DontCloseSpider from exc
        if f.pending or f.outbox or f.in_flight_origins() or f.active > 0 \
                or not f.shared.seeded():
            raise DontCloseSpider
        logger.info("The crawl %(crawl)s is over: nothing queued or in flight anywhere",
                    {"crawl": self.crawl_name})

    # --- enqueue ---------------------------------------------------------------------
    def mark_seen(self, canonical: str) -> None:
        f = self.frontier
        if f is not None:
            f.queue.mark_seen(origin_of(canonical), url_fingerprint(canonical))
