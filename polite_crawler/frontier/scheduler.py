"""The Scrapy scheduler on top of the frontier: ``SCHEDULER = FrontierScheduler``.

``next_request`` and ``enqueue_request`` are synchronous and cost O(log origins)
plus an indexed SQLite statement. Requests are keyed by their own URL's origin,
never by ``meta["download_slot"]`` (a redirect keeps the old slot); the scheduler
sets ``download_slot`` to the origin on every request it hands out, so the
downloader keeps exactly one slot per origin.

One job a module; the scheduler wires them:

- :mod:`polite_crawler.frontier.admission`: the frontier's checks a Request and a URL
  row pass alike (:class:`~polite_crawler.frontier.admission.FrontierChecks`);
- :mod:`polite_crawler.frontier.seen`: the seen set as admission asks it, and the
  memo of its "seen" answers;
- :mod:`polite_crawler.frontier.url_rows`: URL rows queued in bulk and the Request
  made from one;
- :mod:`polite_crawler.frontier.service`: what the gate, the handlers, the
  middlewares and the spider call on the scheduler (``polite_context(crawler)
  .frontier``, :class:`polite_crawler.interfaces.FrontierService`);
- :mod:`polite_crawler.frontier.wake`: the timer that wakes the engine when the next
  origin becomes eligible;
- the driver :func:`polite_crawler.backend.backend_of` names, which opens the
  frontier's stores (:class:`polite_crawler.frontier.embedded.EmbeddedDriver`: SQLite
  and ``JOBDIR``; :class:`polite_crawler.frontier.redis_scheduler.ClusterDriver`:
  Redis).
"""

from __future__ import annotations

import gc
import logging
import random
from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import create_looping_call
from scrapy.utils.misc import load_object

from polite_crawler.backend import backend_of
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.addresses import AddressBook
from polite_crawler.frontier.admission import FrontierChecks
from polite_crawler.frontier.core import (
    CONTENT,
    NOT_BEFORE,
    ROBOTS,
    Dispatch,
    Frontier,
    FrontierConfig,
)
from polite_crawler.frontier.dupefilter import CanonicalDupeFilter, canonical_fingerprint
from polite_crawler.frontier.seen import SeenSet
from polite_crawler.frontier.serialize import RequestCodec
from polite_crawler.frontier.service import DISPATCH_KEYS, HELD, FrontierServiceMixin
from polite_crawler.frontier.url_rows import URL_ROW, UrlRows
from polite_crawler.frontier.wake import EngineWake
from polite_crawler.interfaces import DriverHooks
from polite_crawler.policy.network import parse_networks
from polite_crawler.policy.rest import RestParams
from polite_crawler.policy.urls import origin_of

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.utils.asyncio import AsyncioLoopingCall
    from twisted.internet.task import LoopingCall

    from polite_crawler.interfaces import FrontierDriver

logger = logging.getLogger(__name__)


def rest_params(settings: BaseSettings) -> RestParams:
    return RestParams(
        rest_page=settings.getfloat("POLITE_REST_PAGE"),
        rest_api=settings.getfloat("POLITE_REST_API"),
        duration_factor=settings.getfloat("POLITE_REST_DURATION_FACTOR"),
        duration_max=settings.getfloat("POLITE_REST_DURATION_MAX"),
        crawl_delay_max=settings.getfloat("POLITE_CRAWL_DELAY_MAX"),
        jitter=max(settings.getfloat("POLITE_JITTER"), 0.0),
        baseline_n=max(settings.getint("POLITE_LATENCY_BASELINE_N"), 1),
        window_n=max(settings.getint("POLITE_LATENCY_WINDOW_N"), 1),
        latency_min_rise=max(settings.getfloat("POLITE_LATENCY_MIN_RISE"), 0.0),
    )


class FrontierScheduler(FrontierServiceMixin):
    """Scrapy scheduler that owns every request's timing (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = polite_settings(crawler.settings)
        self.ctx = polite_context(crawler)
        self.clock = self.ctx.clock
        self.test_networks = parse_networks(settings.getlist("POLITE_TEST_NETWORKS"))
        timeout = settings.getfloat("DOWNLOAD_TIMEOUT", 180.0)
        self.config = FrontierConfig(
            params=rest_params(settings),
            test_networks=self.test_networks,
            budget=settings.getint("POLITE_HOST_BUDGET"),
            lease_ttl=max(settings.getfloat("POLITE_LEASE_TTL"), 1.0),
            in_flight_timeout=max(2 * timeout + 60.0, 120.0),
            dispatch_lead=min(max(settings.getfloat("POLITE_DISPATCH_LEAD"), 0.0), 2.0),
            owner_concurrency=max(settings.getint("POLITE_OWNER_CONCURRENCY"), 0),
        )
        self.checkpoint_interval = max(settings.getfloat("POLITE_CHECKPOINT_INTERVAL"), 0.05)
        self.rng = random.Random()
        self.frontier: Frontier | None = None
        self.dupefilter: CanonicalDupeFilter | None = None
        self.spider: Spider | None = None
        self.codec = RequestCodec(None)
        self.seen = SeenSet()  # its memo kept where the driver allows (see open)
        self.checks = FrontierChecks(self.seen, self.ctx, self._count)
        self.url_rows = UrlRows()
        self._test_origins: dict[str, bool] = {}
        self._memory: dict[int, Request] = {}  # rows whose request cannot be serialised
        self._unserializable_warned = False
        self.wake = EngineWake(crawler, self.clock, self._next_eligible)
        self._loop: AsyncioLoopingCall | LoopingCall | None = None
        self.driver: FrontierDriver | None = None
        # What the driver may call back here (its stats and the engine's wake-up).
        self.hooks = DriverHooks(count=self._count, rearm=self.wake.arm)
        # Which server each host is (the frontier's server bound, policy.servers).
        self.addresses = AddressBook(crawler, self.clock, self._address_known)
        self.ctx.frontier = self

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierScheduler:
        return cls(crawler)

    # --- lifecycle -------------------------------------------------------------
    def open(self, spider: Spider) -> None:
        self.spider = spider
        self.codec = RequestCodec(spider)
        self.driver = load_object(backend_of(self.crawler.settings).frontier_driver)(self)
        f = self.frontier = self.driver.open(spider)
        self.dupefilter = CanonicalDupeFilter(f.queue)
        # Where the seen set only grows while this job holds it (the driver says so:
        # FrontierDriver.seen_set_only_grows), a URL it answered "seen" for is seen for
        # the rest of the run: a site's navigation links, on every page of it, are not
        # looked up again.
        self.seen.keep(self.driver.seen_set_only_grows)
        self._loop = create_looping_call(self._checkpoint)
        self._loop.start(self.checkpoint_interval, now=False)
        self.wake.arm()
        # Everything built so far (modules, components, settings) lives as long as the
        # crawl: out of the collector's sight, a full collection no longer walks it
        # again and again while pages and URL rows come and go (a tenth of the CPU of
        # queuing a sitemap's entries, measured by bench.bulk_enqueue).
        gc.collect()
        gc.freeze()

    def close(self, reason: str) -> None:
        gc.unfreeze()  # back in sight: a process that runs another crawl collects them
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.wake.cancel()
        if self.frontier is None or self.driver is None:
            return
        try:
            self.driver.close(finished=reason == "finished")
        finally:
            self.frontier = None

    def _checkpoint(self) -> None:
        if self.frontier is not None:
            self.frontier.checkpoint()
            self.wake.arm()

    def _address_known(self, name: str) -> None:
        if self.frontier is not None:
            self.frontier.address_known(name)
            self.wake.arm()

    def _count(self, key: str, n: int) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, n)

    def _next_eligible(self) -> float | None:
        f = self.frontier
        return f.next_eligible() if f is not None else None

    # --- the scheduler interface -------------------------------------------------
    def has_pending_requests(self) -> bool:
        f = self.frontier
        return f is not None and self.driver is not None and (
            f.pending > 0 or self.driver.outbox() > 0)

    def __len__(self) -> int:
        f = self.frontier
        return f.pending + self.driver.outbox() if f is not None and self.driver else 0

    def enqueue_request(self, request: Request) -> bool:
        f = self.frontier
        assert f is not None, "the scheduler is not open"
        meta = request.meta
        if meta.pop(HELD, False):
            # Handed out, then held back at the gate (see may_send): not a new request.
            self._put_back(request)
            return True
        old_origin, old_token = meta.get("polite_origin"), meta.get("polite_token")
        old_row, dispatched = meta.get("polite_row"), meta.get("polite_dispatched")
        for key in DISPATCH_KEYS:
            meta.pop(key, None)
        if old_origin is not None and not dispatched:
            # A middleware below the gate replaced the request before the network.
            f.release(old_origin, old_token)
        origin = origin_of(request.url)
        try:
            if meta.get("polite_robots"):
                # A robots.txt fetch redirected here: gated by this origin, but it does
                # not wait for this origin's own robots.txt.
                f.push_transient(origin, request)
                return True
            return self._enqueue(request, origin)
        finally:
            if old_row is not None:
                self._memory.pop(old_row, None)
                f.done(old_row)
            self.wake.arm()

    def _enqueue(self, request: Request, origin: str) -> bool:
        f = self.frontier
        assert f is not None
        fp = None if request.dont_filter else canonical_fingerprint(request)
        if self.checks.admit(f, [(origin, request.url, fp)])[0] is not None:
            return False
        try:
            data = self.codec.dumps(request)
        except Exception as exc:  # a lambda callback, an object in cb_kwargs ...
            if not self._unserializable_warned:
                self._unserializable_warned = True
                logger.warning(
                    "Request %(request)s cannot be stored on disk (%(exc)s); requests like it "
                    "are queued in memory and lost if the crawl is interrupted",
                    {"request": request, "exc": exc},
                )
            self._count("polite/frontier/unserializable", 1)
            row = f.push(origin, request.priority, request.url, b"")
            self._memory[row] = request
        else:
            f.push(origin, request.priority, request.url, data)
        self._count("scheduler/enqueued", 1)
        return True

    def enqueue_urls(
        self,
        urls: Iterable[tuple[str, str, Mapping[str, Any] | None]],
        *,
        callback: str,
        errback: str | None = None,
        meta: Mapping[str, Any] | None = None,
        priority: Callable[[str], int] | int = 0,
    ) -> int:
        """Queue URLs as rows, in bulk: no Request until the frontier dispatches each.

        ``urls``: ``(canonical URL, its origin, extra meta or None)``, every URL
        rule already applied (:class:`polite_crawler.frontier.admission.UrlRules`);
        here the frontier's own checks run
        (:class:`polite_crawler.frontier.admission.FrontierChecks`), counted as for a
        Request. ``callback`` and ``errback`` are names of the spider's methods;
        the request is ``Request(url, callback, errback, meta=meta | extra,
        priority=priority(url))`` (:mod:`polite_crawler.frontier.url_rows`). Returns
        how many were queued.
        """
        f = self.frontier
        assert f is not None, "the scheduler is not open"
        batch = urls if isinstance(urls, list) else list(urls)
        if not batch:
            return 0
        url_list = [url for url, _origin, _extra in batch]
        verdicts = self.checks.admit_many(f, [origin for _url, origin, _extra in batch],
                                          url_list, self.seen.new_urls(f.queue, url_list))
        rows = self.url_rows.encode(f.queue, batch, verdicts, callback=callback,
                                    errback=errback, meta=meta, priority=priority)
        if rows:
            f.push_many(rows)
            self._count("scheduler/enqueued", len(rows))
            self._count("polite/frontier/bulk_enqueued", len(rows))
            self.wake.arm()
        return len(rows)

    def next_request(self) -> Request | None:
        f = self.frontier
        if f is None:
            return None
        while True:
            d = f.pop()
            if d is None:
                self.wake.arm()
                return None
            request = self._materialize(d)
            if request is not None:
                self._count("scheduler/dequeued", 1)
                self.wake.arm()
                return request

    def _materialize(self, d: Dispatch) -> Request | None:
        f = self.frontier
        assert f is not None
        request: Request
        if d.kind == CONTENT:
            assert d.row is not None
            # Kept until the row is done (or held): a request held back at the gate
            # (put_back) is handed out again from here.
            kept = self._memory.get(d.row.id)
            if kept is not None:
                request = kept
            else:
                try:
                    if d.row.data[:1] == URL_ROW:
                        request = self.url_rows.request(f.queue, self.spider, d.row.url,
                                                        d.row.prio, d.row.data)
                    else:
                        request = self.codec.loads(d.row.data)
                except Exception as exc:
                    logger.warning("Dropping a queued request that cannot be restored "
                                   "(%(url)s): %(exc)s", {"url": d.row.url, "exc": exc})
                    f.drop_dispatch(d, "unrestorable")
                    return None
            request.meta["polite_row"] = d.row.id
        elif d.kind == ROBOTS:
            robots = self.ctx.robots
            assert robots is not None, "a robots.txt dispatch without the robots.txt middleware"
            request = Request(
                robots.robots_url(d.origin),
                callback=NO_CALLBACK,
                meta={"polite_robots": True, "polite_robots_origin": d.origin},
                dont_filter=True,
                priority=1000,
            )
        else:
            request = d.obj
        meta = request.meta
        meta["polite_origin"] = d.origin
        meta["polite_token"] = d.token
        meta["download_slot"] = d.origin
        if d.not_before:
            meta[NOT_BEFORE] = d.not_before  # held by the download handler until then
        else:
            meta.pop(NOT_BEFORE, None)
        return request
