"""The Scrapy scheduler on top of the frontier: ``SCHEDULER = FrontierScheduler``.

The engine asks the scheduler for work after each download, after each enqueue, and
otherwise only on a 5 s heartbeat. An origin that becomes eligible in 0.2 s must not
wait for the heartbeat, so the scheduler wakes the engine itself at that moment:
a timer on the event loop that calls ``engine._slot.nextcall.schedule()``. That is a
private hook with no public alternative in Scrapy 2.19 (the version is pinned, and
``tests/test_scheduler_frontier.py`` fails if the hook moves).

``next_request`` and ``enqueue_request`` are synchronous and cost O(log origins)
plus an indexed SQLite statement. Requests are keyed by their own URL's origin,
never by ``meta["download_slot"]`` (a redirect keeps the old slot); the scheduler
sets ``download_slot`` to the origin on every request it hands out, so the
downloader keeps exactly one slot per origin.

The gate middleware (:mod:`polite_crawler.middlewares.gate`) reaches the scheduler
through ``polite_context(crawler).frontier`` to settle, release, retry and stop.

One scheduler for both backends: it opens its frontier with the driver
:func:`polite_crawler.backend.backend_of` names (:class:`EmbeddedDriver`: SQLite and
``JOBDIR``; :class:`polite_crawler.frontier.redis_scheduler.ClusterDriver`: Redis).
"""

from __future__ import annotations

import contextlib
import gc
import logging
import math
import os
import pickle
import random
import tempfile
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from scrapy import Request
from scrapy.http.request import NO_CALLBACK
from scrapy.utils.asyncio import call_later, create_looping_call
from scrapy.utils.job import job_dir
from scrapy.utils.misc import load_object

from polite_crawler.backend import backend_of
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.addresses import AddressBook
from polite_crawler.frontier.core import (
    CONTENT,
    NOT_BEFORE,
    ROBOTS,
    Dispatch,
    Frontier,
    FrontierConfig,
)
from polite_crawler.frontier.dupefilter import (
    CanonicalDupeFilter,
    canonical_fingerprint,
    url_fingerprint,
)
from polite_crawler.frontier.serialize import RequestCodec
from polite_crawler.frontier.store import (
    HOST_TABLE,
    OWNER_TABLE,
    OriginStore,
    QueueStore,
    process_owner,
)
from polite_crawler.interfaces import DriverHooks
from polite_crawler.policy.network import is_test_host, parse_networks
from polite_crawler.policy.rest import Rest, RestParams
from polite_crawler.policy.urls import origin_of
from polite_crawler.store.jobfiles import QUEUE_DB
from polite_crawler.store.paths import origins_db_path, state_dir

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    from scrapy import Spider
    from scrapy.crawler import Crawler
    from scrapy.settings import BaseSettings
    from scrapy.utils.asyncio import AsyncioLoopingCall, CallLaterResult
    from twisted.internet.task import LoopingCall

    from polite_crawler.interfaces import FrontierDriver
    from polite_crawler.policy.verdicts import FailureState

logger = logging.getLogger(__name__)

# Meta flag of a request held back before the network (FrontierScheduler.hold_back).
HELD = "polite_held"

# Meta keys the frontier sets on a request it hands out; a copy of the request
# (a redirect, a retry) carries them back in and they are cleared there.
DISPATCH_KEYS = ("polite_origin", "polite_token", "polite_row", "polite_dispatched",
                 "polite_start", "download_slot")

# The data of a URL row (queued by enqueue_urls, no Request stored) starts with this
# byte; a stored Request is a pickle, which starts with 0x80. Then the id of its
# template (frontier_template: callback and errback names and the meta many rows
# share, pickled once) in decimal, and what is the row's own: nothing; b"\0" and its
# lastmod (UTF-8); or b"\1" and a pickled dict of meta.
URL_ROW = b"u"
_LASTMOD = "polite_lastmod"

# Canonical URLs the seen set answered "seen" for, kept in memory at most (then
# forgotten all at once): see FrontierScheduler._seen_urls.
SEEN_URLS_KEPT = 65_536

# An admission refusal -> its stats key (the same on both ways in).
_REFUSED = {
    "duplicate": "polite/frontier/duplicate",
    "stopped": "polite/frontier/stopped",
    "budget_exhausted": "polite/frontier/budget_exhausted",
    "disallowed": "polite/robots/disallowed",
}


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


class FrontierScheduler:
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
        self._test_origins: dict[str, bool] = {}
        self._memory: dict[int, Request] = {}  # rows whose request cannot be serialised
        self._template_ids: dict[bytes, int] = {}  # URL row templates, by their bytes
        self._template_by_id: dict[int, tuple[str, str | None, dict[str, Any]]] = {}
        self._unserializable_warned = False
        # Canonical URLs the seen set is known to hold (None: not kept; see open()).
        self._seen_urls: set[str] | None = None
        self._timer: CallLaterResult | None = None
        self._timer_at = math.inf
        self._loop: AsyncioLoopingCall | LoopingCall | None = None
        self.driver: FrontierDriver | None = None
        # What the driver may call back here (its stats and the engine's wake-up).
        self.hooks = DriverHooks(count=self._count, rearm=self._arm)
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
        self._seen_urls = set() if self.driver.seen_set_only_grows else None
        self._loop = create_looping_call(self._checkpoint)
        self._loop.start(self.checkpoint_interval, now=False)
        self._arm()
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
        self._cancel_timer()
        if self.frontier is None or self.driver is None:
            return
        try:
            self.driver.close(finished=reason == "finished")
        finally:
            self.frontier = None

    @property
    def shared(self) -> Any:
        """The cluster's shared state (None on the embedded backend)."""
        return self.driver.shared if self.driver is not None else None

    def _checkpoint(self) -> None:
        if self.frontier is not None:
            self.frontier.checkpoint()
            self._arm()

    def _address_known(self, name: str) -> None:
        if self.frontier is not None:
            self.frontier.address_known(name)
            self._arm()

    def _count(self, key: str, n: int) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key, n)

    # --- waking the engine -----------------------------------------------------
    def _arm(self) -> None:
        f = self.frontier
        at = f.next_eligible() if f is not None else None
        if at is None or (self._timer is not None and self._timer_at <= at):
            return
        self._cancel_timer()
        self._timer_at = at
        # A millisecond late rather than early: an early wake finds nothing eligible.
        self._timer = call_later(max(at - self.clock(), 0.0) + 0.001, self._wake)

    def _cancel_timer(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf

    def _wake(self) -> None:
        self._timer, self._timer_at = None, math.inf
        wake_engine(self.crawler)
        self._arm()

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
            self._arm()

    def _admit(self, candidates: list[tuple[str, str, bytes | None]]) -> list[str | None]:
        """The frontier's checks for ``(origin, url, fingerprint)``: a refusal or None each.

        One function for a Request and for a batch of URL rows
        (:mod:`polite_crawler.frontier.admission`): the seen set (no fingerprint:
        not checked), the origin's stop, its budget, and its robots.txt when the
        copy is known already. Refusals are counted.
        """
        fps = [fp for _o, _u, fp in candidates if fp is not None]
        fresh = self._add_seen(fps)
        if len(fps) < len(candidates):  # a Request with dont_filter: not in the seen set
            it = iter(fresh)
            fresh = [fp is None or next(it) for _o, _u, fp in candidates]
        return self._admit_many([o for o, _u, _fp in candidates],
                                [u for _o, u, _fp in candidates], fresh)

    def _add_seen(self, fps: list[bytes]) -> list[bool]:
        f = self.frontier
        assert f is not None
        return f.queue.add_seen_many(fps) if fps else []

    def _admit_many(self, origins: list[str], urls: list[str],
                    fresh: list[bool]) -> list[str | None]:
        """:meth:`_admit` of URLs whose seen-set answers are in: ``fresh`` (False: seen)."""
        # origin -> (f.admit(origin), its robots.txt rules or None when they let every
        # URL through now), worked out once a batch, for an origin with a new URL only
        checks: dict[str, tuple[str | None, Any]] = {}
        out: list[str | None] = []
        refused: Counter[str] = Counter()
        last_origin = "\0"
        reason: str | None = None
        rules: Any = None
        found: tuple[str | None, Any] | None
        for origin, url, new in zip(origins, urls, fresh, strict=True):
            if not new:
                out.append("duplicate")
                refused["duplicate"] += 1
                continue
            if origin != last_origin:
                found = checks.get(origin)
                if found is None:
                    found = checks[origin] = self._origin_checks(origin)
                last_origin, (reason, rules) = origin, found
            if reason is not None:
                refused[reason] += 1
                out.append(reason)
            elif rules is not None and not rules.allowed(url):
                refused["disallowed"] += 1
                out.append("disallowed")
            else:
                out.append(None)
        for why, n in refused.items():
            self._count(_REFUSED[why], n)
        if refused["disallowed"] and logger.isEnabledFor(logging.DEBUG):
            for url, verdict in zip(urls, out, strict=True):
                if verdict == "disallowed":
                    logger.debug("Forbidden by robots.txt: %(url)s", {"url": url})
        return out

    def _origin_checks(self, origin: str) -> tuple[str | None, Any]:
        """``(f.admit(origin), rules)``: ``rules`` is the origin's robots.txt copy in use
        now, None where none is (not known yet, a 4xx allow-all, not read here) or where
        it lets every URL through."""
        f = self.frontier
        assert f is not None
        reason = f.admit(origin)
        robots = self.ctx.robots
        if reason is not None or robots is None:
            return reason, None
        if robots.remote and not robots.cached(origin):
            # Not read here (a round trip on the reactor): the owner's take batch reads
            # it, and the dispatch judges the URL.
            return reason, None
        rules = robots.rules(origin) if robots.ready(origin) else None
        return reason, None if rules is None or rules.allows_all else rules

    def _enqueue(self, request: Request, origin: str) -> bool:
        f = self.frontier
        assert f is not None
        fp = None if request.dont_filter else canonical_fingerprint(request)
        if self._admit([(origin, request.url, fp)])[0] is not None:
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
        here the frontier's own checks run (:meth:`_admit`), counted as for a
        Request. ``callback`` and ``errback`` are names of the spider's methods;
        the request is ``Request(url, callback, errback, meta=meta | extra,
        priority=priority(url))``. Returns how many were queued.
        """
        f = self.frontier
        assert f is not None, "the scheduler is not open"
        batch = urls if isinstance(urls, list) else list(urls)
        if not batch:
            return 0
        url_list = [url for url, _origin, _extra in batch]
        verdicts = self._admit_many([origin for _url, origin, _extra in batch], url_list,
                                    self._new_urls(url_list))
        plain = URL_ROW + str(self._template(callback, errback, meta)).encode("ascii")
        with_lastmod = plain + b"\0"
        fixed = priority if isinstance(priority, int) else 0
        prio_of: Callable[[str], int] = (
            priority if not isinstance(priority, int) else lambda _url: fixed)
        rows: list[tuple[str, int, str, bytes]] = []
        append = rows.append
        for (url, origin, extra), refused in zip(batch, verdicts, strict=True):
            if refused is not None:
                continue
            if not extra:
                data = plain
            elif len(extra) == 1 and isinstance(extra.get(_LASTMOD), str):
                data = with_lastmod + extra[_LASTMOD].encode("utf-8")
            else:
                data = plain + b"\1" + pickle.dumps(dict(extra), protocol=5)
            append((origin, prio_of(url), url, data))
        if rows:
            f.push_many(rows)
            self._count("scheduler/enqueued", len(rows))
            self._count("polite/frontier/bulk_enqueued", len(rows))
            self._arm()
        return len(rows)

    def _new_urls(self, urls: list[str]) -> list[bool]:
        """The seen set's answer for each canonical URL (True: new, added now), as
        :meth:`_add_seen` of their fingerprints gives it; a URL the seen set answered
        "seen" for before is answered from memory (see :meth:`open`)."""
        known = self._seen_urls
        if known is None:
            return self._add_seen([url_fingerprint(u) for u in urls])
        asked = [u for u in urls if u not in known]
        if not asked:
            return [False] * len(urls)
        answers = self._add_seen([url_fingerprint(u) for u in asked])
        if len(asked) == len(urls):
            fresh = answers
        else:
            it = iter(answers)  # in order: a URL asked twice is new the first time only
            fresh = [u not in known and next(it) for u in urls]
        if len(known) + len(asked) > SEEN_URLS_KEPT:
            known.clear()
        known.update(u for u, new in zip(asked, answers, strict=True) if not new)
        return fresh

    def mark_seen(self, canonical: str) -> None:
        """A canonical URL known without a fetch of its own (a page's rel=canonical)."""
        if self.driver is not None:
            self.driver.mark_seen(canonical)

    def next_request(self) -> Request | None:
        f = self.frontier
        if f is None:
            return None
        while True:
            d = f.pop()
            if d is None:
                self._arm()
                return None
            request = self._materialize(d)
            if request is not None:
                self._count("scheduler/dequeued", 1)
                self._arm()
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
                        request = self._from_url_row(d.row.url, d.row.prio, d.row.data)
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

    def _template(self, callback: str, errback: str | None,
                  meta: Mapping[str, Any] | None) -> int:
        data = pickle.dumps((callback, errback, dict(meta or {})), protocol=5)
        found = self._template_ids.get(data)
        if found is None:
            assert self.frontier is not None
            found = self._template_ids[data] = self.frontier.queue.template_id(data)
        return found

    def _from_url_row(self, url: str, prio: int, data: bytes) -> Request:
        body = data[1:]
        digits = len(body) - len(body.lstrip(b"0123456789"))
        template_id = int(body[:digits])
        template = self._template_by_id.get(template_id)
        if template is None:
            assert self.frontier is not None
            stored = self.frontier.queue.template(template_id)
            if stored is None:
                raise ValueError(f"URL row template {template_id} is missing")
            template = self._template_by_id[template_id] = pickle.loads(stored)
        callback, errback, base = template
        meta = dict(base)
        kind, own = body[digits:digits + 1], body[digits + 1:]
        if kind == b"\0":
            meta[_LASTMOD] = own.decode("utf-8")
        elif kind == b"\1":
            meta.update(pickle.loads(own))
        spider = self.spider
        return Request(
            url, callback=getattr(spider, callback), priority=prio, meta=meta,
            errback=getattr(spider, errback) if errback else None,
        )

    # --- the gate's side ---------------------------------------------------------
    def may_send(self, request: Request) -> bool:
        """Whether a request the frontier handed out may still go to the network now.

        On a cluster, a worker may have been frozen (SIGSTOP, a long pause) between the
        frontier handing a request out and the request reaching the socket; by then its
        lease may have run out and another worker may own the origin. The gate asks this
        before the request goes on and the download handler again as it starts the
        exchange (its timeout starts in the same call). False: this worker no longer
        holds the request's origin with a valid lease (by the frontier's clock), and the
        request must not be sent; :meth:`hold_back` undoes its dispatch. The embedded
        backend answers True. A request not handed out by the frontier (no origin in its
        meta) is not this check's business: True.
        """
        origin = request.meta.get("polite_origin")
        if origin is None or self.driver is None:
            return True
        return self.driver.may_send(origin)

    @staticmethod
    def hold_back(request: Request) -> Request:
        """The request failed :meth:`may_send`: returned by a downloader middleware, it
        comes back to :meth:`enqueue_request`, which puts its dispatch back (the row to
        the head of its origin's queue here, or to Redis's queue for the origin's owner;
        the origin freed with no rest; nothing done, nothing fetched). No errback runs and
        no middleware below sees a failure."""
        request.meta[HELD] = True
        return request

    def _put_back(self, request: Request) -> None:
        f = self.frontier
        assert f is not None
        meta = request.meta
        origin, token, row = meta.get("polite_origin", ""), meta.get("polite_token"), \
            meta.get("polite_row")
        for key in DISPATCH_KEYS:
            meta.pop(key, None)
        if not f.put_back(origin, token, obj=request) and row is not None:
            self._memory.pop(row, None)
        self._arm()

    def owns(self, request: Request) -> bool:
        """Whether the request is the one the frontier handed out for its origin."""
        f = self.frontier
        meta = request.meta
        origin, token = meta.get("polite_origin", ""), meta.get("polite_token")
        return f is not None and f.in_flight(origin, token)

    def is_test_origin(self, origin: str) -> bool:
        """Loopback or in POLITE_TEST_NETWORKS: lower numbers than the public floor apply."""
        known = self._test_origins.get(origin)
        if known is None:
            known = self._test_origins[origin] = self._is_test_host(origin)
        return known

    def _is_test_host(self, origin: str) -> bool:
        return is_test_host(urlsplit(origin).hostname or "", self.test_networks)

    def failure(self, origin: str) -> FailureState:
        assert self.frontier is not None
        return self.frontier.state(origin).failure

    def settle(
        self, request: Request, *, start: float, end: float, failure: FailureState | None,
        observe: bool,
    ) -> Rest | None:
        f = self.frontier
        if f is None:
            return None
        meta = request.meta
        rest = f.settle(
            meta.get("polite_origin", ""), meta.get("polite_token", -1), start=start, end=end,
            api=bool(meta.get("polite_api")), failure=failure, observe=observe,
        )
        self._arm()
        return rest

    def release(self, request: Request) -> None:
        """The request left without reaching the network: no rest."""
        if self.frontier is not None:
            self.frontier.release(request.meta.get("polite_origin", ""),
                                  request.meta.get("polite_token"))
            self._arm()

    def done(self, request: Request) -> None:
        """The spider is finished with the request (see :meth:`Frontier.done`)."""
        row = request.meta.get("polite_row")
        if self.frontier is not None and row is not None:
            self._memory.pop(row, None)
            self.frontier.done(row)
            request.meta.pop("polite_row", None)

    def hold(self, request: Request, key: str) -> None:
        """The spider keeps part of what it made of the request's response in memory
        until ``key`` is released: the row stays (see :meth:`Frontier.hold`)."""
        row = request.meta.get("polite_row")
        if self.frontier is not None and row is not None:
            self._memory.pop(row, None)
            self.frontier.hold(row, key)
            request.meta.pop("polite_row", None)

    def release_held(self, key: str) -> None:
        if self.frontier is not None:
            self.frontier.release_held(key)

    def stop(self, origin: str, reason: str) -> None:
        if self.frontier is not None:
            self.frontier.stop(origin, reason)


class EmbeddedDriver:
    """The embedded backend: this job's queue in ``JOBDIR`` (a temporary file in the state
    directory without one), origin state and leases in the state directory's origin
    store, shared by the jobs of one machine (:class:`polite_crawler.interfaces.FrontierDriver`)."""

    shared = None
    # This job's SQLite file: nothing else adds to it or takes from it while the job
    # runs (forget edits the file of no live job; a crash loses the scheduler's memory
    # of it with the rest).
    seen_set_only_grows = True

    def __init__(self, scheduler: FrontierScheduler) -> None:
        self.scheduler = scheduler
        self.frontier: Frontier | None = None
        self._temp_path: Path | None = None

    def _queue_path(self) -> Path:
        settings = self.scheduler.crawler.settings
        jobdir = job_dir(settings)
        if jobdir:
            return Path(jobdir) / QUEUE_DB
        fd, name = tempfile.mkstemp(prefix="frontier-", suffix=".sqlite3",
                                    dir=state_dir(settings))
        os.close(fd)
        self._temp_path = Path(name)
        return self._temp_path

    def open(self, spider: Spider) -> Frontier:
        s = self.scheduler
        queue = QueueStore(self._queue_path())
        owner = process_owner()
        path = origins_db_path(s.crawler.settings)
        origins = OriginStore(path, owner, queue.run_id)
        hosts = OriginStore(path, owner, queue.run_id, table=HOST_TABLE)
        owners = OriginStore(path, owner, queue.run_id, table=OWNER_TABLE)
        f = self.frontier = Frontier(
            queue, origins, s.config, clock=s.clock, rng=s.rng,
            robots=lambda: s.ctx.robots, count=s.hooks.count, hosts=hosts,
            address_of=s.addresses.address, owners=owners,
        )
        requeued = f.restore()
        if f.pending:
            logger.info(
                "Resuming crawl: %(n)d requests queued (%(r)d marked in flight), "
                "every origin resumes after its saved rest",
                {"n": f.pending, "r": requeued},
            )
        return f

    def close(self, finished: bool) -> None:
        f = self.frontier
        if f is None:
            return
        f.close(finished=finished)
        f.queue.close()
        f.origin_store.close()
        for store in (f.host_store, f.owner_store):
            if store is not None:
                store.close()
        self.frontier = None
        if self._temp_path is not None:
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    Path(f"{self._temp_path}{suffix}").unlink()

    def outbox(self) -> int:
        return 0

    def mark_seen(self, canonical: str) -> None:
        if self.scheduler.dupefilter is not None:
            self.scheduler.dupefilter.seen_url(canonical)

    def may_send(self, origin: str) -> bool:
        return True  # one process: its leases of the origin store are renewed as it runs


def wake_engine(crawler: Crawler) -> bool:
    """Make the engine ask the scheduler for work now (False if there is no engine slot).

    Scrapy 2.19 has no public call for this; ``engine._slot.nextcall`` is the
    engine's own "run the scheduling loop soon" handle.
    """
    engine: Any = crawler.engine
    slot = getattr(engine, "_slot", None)
    if slot is None:
        return False
    slot.nextcall.schedule()
    return True
