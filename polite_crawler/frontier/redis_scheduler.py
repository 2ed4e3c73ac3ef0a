"""The frontier scheduler's cluster backend (``POLITE_FRONTIER=redis://...``).

:class:`~polite_crawler.frontier.scheduler.FrontierScheduler` is the one scheduler;
with the frontier on Redis (:func:`polite_crawler.backend.backend_of`) it runs this
driver. Everything the scheduler does (admission, URL rows, the gate's side, waking
the engine) is the same; what the driver adds:

- the frontier's stores are a :class:`~polite_crawler.frontier.redis_frontier.RedisQueue`
  and :class:`~polite_crawler.frontier.redis_frontier.LocalLeases`, kept in step with
  Redis by a batch (:class:`~polite_crawler.frontier.redis_frontier.RedisFrontier`)
  every ``POLITE_REDIS_SYNC_INTERVAL`` seconds, its I/O on a thread;
- every worker offers its start URLs; the seen set in Redis takes each once, and the
  first worker to have put its whole list in marks the crawl seeded;
- an idle worker stays until the crawl is over everywhere (Scrapy's
  ``DontCloseSpider``), then the engine closes with reason ``finished``.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import DontCloseSpider
from scrapy.utils.asyncio import create_looping_call
from twisted.internet.threads import deferToThread

from polite_crawler.backend import backend_of, redis_lease_ttl
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.dupefilter import url_fingerprint
from polite_crawler.frontier.redis_frontier import (
    Outcome,
    Plan,
    RedisFrontier,
    execute,
    worker_id,
)
from polite_crawler.frontier.redis_shared import RedisShared
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.redis_start import when_redis_answers

if TYPE_CHECKING:
    from scrapy import Spider

    from polite_crawler.frontier.core import Frontier
    from polite_crawler.frontier.scheduler import FrontierScheduler

logger = logging.getLogger(__name__)


class ClusterDriver:
    """The cluster backend of :class:`FrontierScheduler` (see the module doc;
    :class:`polite_crawler.interfaces.FrontierDriver`)."""

    # Redis's seen set is the crawl's, not this job's: other workers add to it, Redis
    # decides at push time, and a Redis that restarts may have lost what it held.
    seen_set_only_grows = False

    def __init__(self, scheduler: FrontierScheduler) -> None:
        self.scheduler = scheduler
        s = polite_settings(scheduler.crawler.settings)
        self.url = backend_of(s).frontier_url
        self.crawl_name = s.get("POLITE_CRAWL") or "default"
        self.ttl = redis_lease_ttl(s)
        self.interval = min(max(s.getfloat("POLITE_REDIS_SYNC_INTERVAL"), 0.02),
                            self.ttl / 4)
        self.clock_skew = max(s.getfloat("POLITE_CLOCK_SKEW"), 0.0)
        # The download handler ends every exchange within the download timeout.
        self.exchange_timeout = s.getfloat("DOWNLOAD_TIMEOUT", 180.0) + 1.0
        self.seeder = False
        self._busy = False
        self._sync_loop: Any = None
        self.shared: RedisShared | None = None
        self.sync: RedisFrontier | None = None

    def open(self, spider: Spider) -> Frontier:
        sched = self.scheduler
        shared = self.shared = RedisShared(self.url, self.crawl_name, worker_id())
        now = self._register(shared)
        sync = self.sync = RedisFrontier(
            shared, sched.config, clock=sched.clock, ttl=self.ttl, interval=self.interval,
            exchange_timeout=self.exchange_timeout, clock_skew=self.clock_skew,
            rng=sched.rng, robots=lambda: sched.ctx.robots, count=sched.hooks.count,
            address_of=sched.addresses.address,
        )
        sync.origin_store.valid_until = now + self.ttl - sync.margin
        keep = getattr(spider, "polite_keep_origin", None)  # the site spider's discovery
        if callable(keep):
            sync.keep = lambda origin: bool(keep(origin))
        logger.info("Redis frontier %(url)s, crawl %(crawl)s, worker %(w)s%(seed)s",
                    {"url": self.url, "crawl": self.crawl_name, "w": shared.worker,
                     "seed": " (the first of the crawl)" if self.seeder else ""})
        sched.crawler.signals.connect(self._idle, signal=signals.spider_idle)
        self._sync_loop = create_looping_call(self._tick)
        self._sync_loop.start(self.interval, now=True)
        return sync.frontier

    def _register(self, shared: RedisShared) -> float:
        """Register this worker (and claim the seeding, only named in the log), waiting
        for a Redis that does not answer yet (store.redis_start)."""
        def register() -> float:
            now = self.scheduler.clock()
            shared.register(now, self.ttl)
            self.seeder = shared.claim_seeding()
            return now

        return when_redis_answers(register, self.url)

    def close(self, finished: bool) -> None:
        if self._sync_loop is not None and self._sync_loop.running:
            self._sync_loop.stop()
        sync = self.sync
        if sync is None:
            return
        try:
            sync.close(finished=finished)
        except Exception as exc:  # Redis gone: the leases run out, others take over
            logger.error("Could not give the origins back to Redis (%(e)s); other workers "
                         "take them over when this worker's lease runs out", {"e": exc})
        finally:
            sync.shared.close()
            self.sync = None

    def outbox(self) -> int:
        return self.sync.outbox if self.sync is not None else 0

    def mark_seen(self, canonical: str) -> None:
        if self.sync is not None:
            self.sync.queue.mark_seen(origin_of(canonical), url_fingerprint(canonical))

    def may_send(self, origin: str) -> bool:
        """The worker still owns the origin and its lease as last confirmed has not run out
        (:meth:`RedisFrontier.holds`, by the frontier's clock)."""
        return self.sync is not None and self.sync.holds(origin)

    # --- batches ---------------------------------------------------------------------
    def _tick(self) -> None:
        sync = self.sync
        if sync is None or self._busy:
            return
        self._busy = True
        plan = sync.plan()
        d = deferToThread(execute, sync.shared, plan, self.ttl)
        d.addCallbacks(self._applied, self._failed, callbackArgs=(time.monotonic(),),
                       errbackArgs=(plan,))

    def _applied(self, outcome: Outcome, sent: float) -> None:
        self._busy = False
        # The batch's round trip as the reactor sees it (sent to applied), summed in
        # microseconds: over polite/redis/batches, the mean latency of this worker's batches.
        self.scheduler.hooks.count("polite/redis/batch_us",
                                   round((time.monotonic() - sent) * 1e6))
        if self.sync is not None:
            self.sync.apply(outcome)
            self.scheduler.hooks.rearm()

    def _failed(self, failure: Any, plan: Plan) -> None:
        self._busy = False
        self.scheduler.hooks.count("polite/redis/batch_failed", 1)
        logger.error("A Redis frontier batch failed (the next one carries it again; no "
                     "dispatch once this worker's lease runs out): %(e)s",
                     {"e": failure.getErrorMessage()})
        if self.sync is not None:
            self.sync.unplan(plan)

    # --- idle: over when the crawl is over everywhere ---------------------------------
    def _idle(self, spider: Spider) -> None:
        sync = self.sync
        if sync is None:
            return
        if self._busy:
            raise DontCloseSpider
        try:
            sync.run_batch()  # at idle only: the outbox goes out, the active count comes back
            # The engine is idle only once its start URLs are all through: with this
            # batch, they are in Redis (the same list in every worker).
            if not sync.shared.seeded():
                sync.shared.mark_seeded()
        except Exception as exc:  # Redis down: the crawl is not known to be over; stay
            self.scheduler.hooks.count("polite/redis/batch_failed", 1)
            logger.warning("Redis does not answer the idle check (%(e)s); waiting",
                           {"e": exc})
            raise DontCloseSpider from exc
        f = sync.frontier
        if f.pending or sync.outbox or f.in_flight_origins() or sync.active > 0 \
                or not sync.shared.seeded():
            raise DontCloseSpider
        logger.info("The crawl %(crawl)s is over: nothing queued or in flight anywhere",
                    {"crawl": self.crawl_name})
