"""Prometheus metrics: each worker serves ``/metrics`` (OpenMetrics text) from the reactor.

On when POLITE_METRICS_PORT is set (the ``[metrics]`` extra, ``prometheus-client``), on
POLITE_METRICS_HOST (loopback by default). Every family is named ``polite_*``, with its
unit in the name and ``_total`` on counters, and labelled with the crawl (``crawl``:
POLITE_CRAWL, else the spider's name) and the worker (``worker``: the Redis frontier's
worker id, else ``host:pid``). docs/METRICS.md lists them, one line a family.

Nearly everything is computed when Prometheus scrapes, from what the crawl keeps anyway:
Scrapy's stats (``polite/*``, ``downloader/*``), the frontier's snapshot
(:func:`polite_crawler.frontier.core.frontier_snapshot`, read only, as the progress line
reads it) and the page store's queue. The request path pays only for what exists nowhere
else, in :class:`Recorder` (a few integer additions per exchange, no lock, no allocation):
the gate reports each settled exchange (its verdict, status, the rest it set and the
origin's latency-watch factor) and the store pipeline each page write's latency.

With the frontier on Redis, the crawl-wide figures (URLs queued everywhere, origins with
work, origins without an owner, workers alive) come from one worker at a time: the one
holding the lock key ``<prefix>:metrics:<crawl>``, read and renewed every
POLITE_METRICS_CLUSTER_INTERVAL on a thread (never during a scrape). Every worker times
one Redis round trip (a PING) in the same refresh.
"""

from __future__ import annotations

import logging
import os
import socket
import time
import weakref
from bisect import bisect_left
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from twisted.internet.error import CannotListenError
from twisted.web.resource import Resource
from twisted.web.server import Request

from polite_crawler.backend import redis_lease_ttl
from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.core import Frontier, frontier_snapshot, server_snapshot

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from scrapy import Spider
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierView

logger = logging.getLogger(__name__)

REST_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0,
                300.0, 600.0, 1800.0, 3600.0)
FACTOR_BUCKETS = (1.0, 1.5, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0)
WRITE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

# Counters read from one stats key: family -> (key, help, unit).
STAT_COUNTERS: dict[str, tuple[str, str, str]] = {
    "polite_urls_enqueued": ("scheduler/enqueued",
                             "URLs admitted to the frontier's queue (new to the seen set)", ""),
    "polite_received_bytes": ("downloader/response_bytes", "Response bytes received", "bytes"),
    "polite_saved_bytes": ("polite/conditional/bytes_saved",
                           "Body bytes 304 answers spared (the stored copies' sizes)", "bytes"),
    "polite_pages_not_modified": ("polite/pages/not_modified",
                                  "Pages a 304 confirmed (the visit recorded, no body)", ""),
    "polite_retries": ("polite/gate/retry/count", "Requests re-queued behind a wait", ""),
    "polite_retries_exhausted": ("polite/gate/retry/exhausted",
                                 "Requests given up after POLITE_RETRY_TIMES retries", ""),
    "polite_frontier_late_dispatches": (
        "polite/frontier/late_dispatch",
        "Origins dispatched well after their rest ended (the process did not keep up)", ""),
    "polite_latency_doublings": ("polite/frontier/latency_doubled",
                                 "Rests doubled by the latency watch", ""),
    "polite_latency_easings": ("polite/frontier/latency_eased",
                               "Rests halved again by the latency watch", ""),
    "polite_redis_lease_renewals": ("polite/redis/batches",
                                    "Redis batches that renewed this worker's lease", ""),
    "polite_redis_batch_seconds": ("polite/redis/batch_us",
                                   "Seconds of this worker's Redis batches, sent to applied "
                                   "(over polite_redis_lease_renewals: the mean round trip)",
                                   "seconds"),
    "polite_redis_batch_failures": ("polite/redis/batch_failed",
                                    "Redis batches that failed (retried with the next)", ""),
    "polite_redis_leases_lost": ("polite/redis/lease_lost",
                                 "Times this worker's lease ran out (it lost its origins)", ""),
    "polite_redis_origins_taken": ("polite/redis/origin_taken",
                                   "Origins this worker took (free or from a dead worker)", ""),
    "polite_redis_takeovers": ("polite/redis/origin_taken_over",
                               "Origins taken from a worker whose lease was gone", ""),
    "polite_redis_origins_lost": ("polite/redis/origin_lost",
                                  "Origins another worker owned when this one synced", ""),
    "polite_redis_origins_given_back": ("polite/redis/origin_given_back",
                                        "Origins given back (shares balanced, or idle)", ""),
    "polite_redis_held_at_gate": ("polite/redis/held_at_gate",
                                  "Requests handed out but not sent: the worker no longer "
                                  "held their origin with a valid lease", ""),
}
# Counters with one label, read from every stats key under a prefix:
# family -> (prefix, label, help, label values always exported).
STAT_LABELLED: dict[str, tuple[str, str, str, tuple[str, ...]]] = {
    "polite_verdict_reasons": ("polite/verdicts/", "reason",
                               "Exchanges by the verdict's reason (status, challenge, error)",
                               ("429", "503")),
    "polite_origins_stopped": ("polite/origin/stopped/", "reason",
                               "Origins stopped for the run, by reason (402, 403, challenge, "
                               "breaker, parked, ...)", ("402", "403", "breaker")),
    "polite_pages_stored": ("polite/pages/stored/", "outcome",
                            "Pages written to the page store, by outcome",
                            ("new", "changed", "unchanged")),
}
# robots.txt outcomes: stats key -> label.
ROBOTS_OUTCOMES = {
    "polite/robots/outcome/parse": "ok",
    "polite/robots/outcome/allow_all": "unavailable",
    "polite/robots/outcome/unreachable": "unreachable",
    "polite/robots/outage_with_copy": "stale_used",
}
# URLs the frontier refused at admission: stats key -> reason.
URL_REFUSALS = {
    "polite/frontier/duplicate": "duplicate",
    "polite/frontier/stopped": "stopped",
    "polite/frontier/budget_exhausted": "budget_exhausted",
    "polite/robots/disallowed": "disallowed",
}
ORIGIN_STATES = ("in_flight", "resting", "server_wait", "ready")
# Servers (addresses) exported one series each: the busiest by our load share only, so
# a crawl of a million addresses exports as many series as one of twenty.
TOP_SERVERS = 20
SEEDED_REQUESTS = (("ok", "2xx"), ("not_modified", "3xx"), ("retry_later", "4xx"),
                   ("retry_later", "5xx"), ("retry_later", "none"), ("stop_origin", "4xx"))


class Histogram:
    """Counts of observations per bucket (``le`` bounds), their sum and number."""

    __slots__ = ("bounds", "counts", "n", "total")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # the last: above every bound (+Inf)
        self.total = 0.0
        self.n = 0

    def observe(self, value: float) -> None:
        self.counts[bisect_left(self.bounds, value)] += 1
        self.total += value
        self.n += 1

    def cumulative(self) -> list[tuple[str, float]]:
        out, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts, strict=True):
            running += count
            out.append(("+Inf" if bound == float("inf") else repr(bound), float(running)))
        return out


def status_class(status: int | None) -> str:
    """``2xx`` ... ``5xx``; ``none`` for an exchange that ended without a status.

    >>> [status_class(s) for s in (200, 304, 429, None)]
    ['2xx', '3xx', '4xx', 'none']
    """
    return f"{status // 100}xx" if status is not None and 100 <= status < 600 else "none"


class Recorder:
    """What the request path reports (``polite_context(crawler).metrics``); read at scrape."""

    def __init__(self) -> None:
        self.rests = Histogram(REST_BUCKETS)
        self.factors = Histogram(FACTOR_BUCKETS)
        self.writes = Histogram(WRITE_BUCKETS)
        # The common pairs exist from the start, so rate() sees their first increase.
        self.requests: dict[tuple[str, str], int] = dict.fromkeys(SEEDED_REQUESTS, 0)
        self.retry_after: dict[str, int] = {"429": 0, "503": 0}

    def settled(self, action: str, status: int | None, retry_after: bool,
                rest: float | None, factor: float | None) -> None:
        """One exchange the gate settled: its verdict's action, status, whether a 429 or
        503 carried a Retry-After, the rest set after it and the origin's latency factor."""
        key = (action, status_class(status))
        self.requests[key] = self.requests.get(key, 0) + 1
        if retry_after and status in (429, 503):
            self.retry_after[str(status)] += 1
        if rest is not None:
            self.rests.observe(rest)
        if factor is not None:
            self.factors.observe(factor)

    def page_written(self, seconds: float) -> None:
        self.writes.observe(seconds)


def _cluster_lock_key(prefix: str, crawl: str) -> str:
    return f"{prefix}:metrics:{crawl}"


class ClusterFigures:
    """The crawl-wide figures of a Redis frontier, read on a thread by the lock holder."""

    def __init__(self, shared: Any, ttl: float, clock: Callable[[], float]) -> None:
        self.shared = shared
        self.ttl = ttl
        self.clock = clock
        self.holder = False
        self.values: dict[str, float] = {}
        self.ping: float | None = None  # seconds, the last Redis round trip

    def refresh(self, lock_ttl: float) -> None:
        """One refresh (blocking; runs on a thread): time a PING, hold or take the lock,
        and when held read the cluster's figures."""
        r, sh = self.shared.r, self.shared
        t0 = time.perf_counter()
        r.ping()
        self.ping = time.perf_counter() - t0
        key = _cluster_lock_key(sh.p, sh.crawl)
        me = sh.worker
        px = int(lock_ttl * 1000)
        holder = r.get(key)
        if holder is not None and bytes(holder).decode() == me:
            r.pexpire(key, px)
            held = True
        else:
            held = bool(r.set(key, me, px=px, nx=True))
        self.holder = held
        if not held:
            self.values = {}
            return
        now = self.clock()
        pipe = r.pipeline(transaction=False)
        pipe.scard(sh.active_key)
        pipe.scard(sh.free_key)
        pipe.zcount(sh.workers_key, now - self.ttl, "+inf")
        active, free, workers = pipe.execute()
        queued = 0
        batch: list[str] = []
        for raw in r.sscan_iter(sh.active_key, count=1000):
            batch.append(raw.decode() if isinstance(raw, bytes) else str(raw))
            if len(batch) >= 1000:
                queued += self._queued(batch)
                batch = []
        if batch:
            queued += self._queued(batch)
        self.values = {"origins_active": float(active), "origins_unowned": float(free),
                       "workers_alive": float(workers), "urls_queued": float(queued)}

    def _queued(self, origins: list[str]) -> int:
        pipe = self.shared.r.pipeline(transaction=False)
        for origin in origins:
            pipe.zcard(self.shared.qkey(origin))
            pipe.hlen(self.shared.fkey(origin))
        return int(sum(int(n) for n in pipe.execute()))

    def resign(self) -> None:
        """Give the lock up (closing), so another worker exports at once."""
        if self.holder:
            key = _cluster_lock_key(self.shared.p, self.shared.crawl)
            holder = self.shared.r.get(key)
            if holder is not None and bytes(holder).decode() == self.shared.worker:
                self.shared.r.delete(key)
            self.holder = False


class Metrics:
    """The extension: the endpoint, the recorder, and the families built at scrape time."""

    def __init__(self, crawler: Crawler) -> None:
        settings = polite_settings(crawler.settings)
        port = settings.get("POLITE_METRICS_PORT")
        if port in (None, ""):
            raise NotConfigured("POLITE_METRICS_PORT is not set")
        try:
            self.port = int(port)
        except (TypeError, ValueError):
            raise ValueError(f"POLITE_METRICS_PORT must be a TCP port number, not {port!r}") \
                from None
        if not 0 <= self.port <= 65535:
            raise ValueError(f"POLITE_METRICS_PORT must be a TCP port number, not {port!r}")
        try:
            import prometheus_client  # noqa: F401
        except ImportError:
            raise RuntimeError("POLITE_METRICS_PORT is set but prometheus-client is missing: "
                               "pip install 'polite-crawler[metrics]'") from None
        self.crawler = crawler
        self.settings = settings
        self.ctx = polite_context(crawler)
        self.host = settings.get("POLITE_METRICS_HOST")
        if not self.host:
            # An empty address would listen on every interface: the endpoint is opened
            # beyond loopback only by naming the address.
            raise ValueError("POLITE_METRICS_HOST is empty: name the address to listen on "
                             "(127.0.0.1: this machine only)")
        self.cluster_interval = max(settings.getfloat("POLITE_METRICS_CLUSTER_INTERVAL"), 0.1)
        self.recorder = Recorder()
        self.ctx.metrics = self.recorder
        self.scrapes = 0  # scrapes served (tests, the bench)
        # CPU seconds of the reactor thread serving them (request read to response written)
        self.scrape_cpu = 0.0
        self.last_scrape: float | None = None  # ctx.clock() at the last one
        self.listening: Any = None
        self._channels: weakref.WeakSet[Any] = weakref.WeakSet()
        self.cluster: ClusterFigures | None = None
        self._cluster_loop: Any = None
        self._refreshing = False
        self._host_pid = f"{socket.gethostname()}:{os.getpid()}"
        from prometheus_client import CollectorRegistry

        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.engine_stopped, signal=signals.engine_stopped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Metrics:
        return cls(crawler)

    # --- the endpoint -------------------------------------------------------------
    def spider_opened(self, spider: Spider) -> None:
        from twisted.internet import reactor
        from twisted.web.http import HTTPChannel
        from twisted.web.server import Site as WebSite

        root: Any = Resource()  # type: ignore[no-untyped-call]
        root.putChild(b"metrics", _MetricsPage(self))
        site: Any = WebSite(root)  # type: ignore[no-untyped-call]
        site.noisy = False
        site.protocol = HTTPChannel  # HTTP/1.1 (Prometheus's), no HTTP/2 negotiation
        site.requestFactory = _TimedRequest
        site.polite_metrics = self
        # The connections Prometheus keeps open are closed with the endpoint.
        build = site.buildProtocol

        def build_protocol(addr: Any) -> Any:
            channel = build(addr)
            self._channels.add(channel)
            return channel

        site.buildProtocol = build_protocol
        tcp: Any = reactor
        try:
            self.listening = tcp.listenTCP(self.port, site, interface=self.host)
        except CannotListenError as exc:
            # The crawl goes on (its politeness does not depend on being watched).
            logger.error("Metrics: cannot listen on %(host)s:%(port)d (%(why)s); this crawl "
                         "serves no metrics", {"host": self.host, "port": self.port,
                                               "why": getattr(exc.socketError, "strerror",
                                                              None) or exc.socketError})
            self._inc("polite/metrics/listen_failed")
            return
        self.port = self.listening.getHost().port
        logger.info("Metrics: http://%(host)s:%(port)d/metrics",
                    {"host": self.host, "port": self.port})
        shared = self._shared()
        if shared is not None:
            # A worker is alive for as long as its lease lasts, the driver's own TTL.
            ttl = redis_lease_ttl(self.crawler.settings)
            self.cluster = ClusterFigures(shared, ttl, self.ctx.clock)
            from scrapy.utils.asyncio import create_looping_call

            self._cluster_loop = create_looping_call(self._refresh_cluster)
            self._cluster_loop.start(self.cluster_interval, now=True)

    def _refresh_cluster(self) -> Any:
        if self._refreshing or self.cluster is None \
                or self._core() is None:  # closed
            return None
        from twisted.internet.threads import deferToThread

        self._refreshing = True
        d = deferToThread(self.cluster.refresh, 3 * self.cluster_interval)

        def done(result: Any) -> None:
            self._refreshing = False
            if hasattr(result, "getErrorMessage"):
                logger.warning("Metrics: the cluster's figures could not be read from Redis "
                               "(%(err)s)", {"err": result.getErrorMessage()})
                if self.cluster is not None:
                    self.cluster.holder = False
                    self.cluster.values = {}
                self._inc("polite/metrics/cluster_failed")

        d.addBoth(done)
        return None

    def _inc(self, key: str) -> None:
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)

    async def engine_stopped(self) -> None:
        if self._cluster_loop is not None and self._cluster_loop.running:
            self._cluster_loop.stop()
        if self.cluster is not None:
            from scrapy.utils.asyncio import run_in_thread

            try:
                await run_in_thread(self.cluster.resign)
            except Exception:  # Redis gone: the lock's TTL ends it
                logger.debug("Metrics: could not give the cluster lock up", exc_info=True)
        if self.listening is not None:
            listening, self.listening = self.listening, None
            from scrapy.utils.defer import maybe_deferred_to_future

            await maybe_deferred_to_future(listening.stopListening())
            for channel in list(self._channels):  # a kept-alive scrape connection
                if getattr(channel, "transport", None) is not None:
                    channel.transport.loseConnection()

    def render(self) -> bytes:
        """The exposition, OpenMetrics text (what ``/metrics`` serves)."""
        from prometheus_client.openmetrics.exposition import generate_latest

        body = generate_latest(self.registry)  # type: ignore[no-untyped-call]
        self.scrapes += 1
        self.last_scrape = self.ctx.clock()
        return bytes(body)

    # --- the families (prometheus_client's collector interface) -------------------------
    def labels(self) -> tuple[str, str]:
        crawl = (self.settings.get("POLITE_CRAWL") or getattr(self.crawler.spider, "name", "")
                 or "crawl")
        shared = self._shared()
        worker = (shared.worker if shared is not None else None) or self._host_pid
        return str(crawl), str(worker)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        crawl, worker = self.labels()
        base = ["crawl", "worker"]
        ids = [crawl, worker]
        stats: dict[str, Any] = self.crawler.stats.get_stats() if self.crawler.stats else {}

        def counter(name: str, doc: str, value: float, unit: str = "") -> Any:
            fam = CounterMetricFamily(name, doc, labels=base, unit=unit)
            fam.add_metric(ids, value)
            return fam

        rec = self.recorder
        fam = CounterMetricFamily("polite_requests", "Exchanges settled by the gate, by "
                                  "verdict and status class", labels=[*base, "verdict",
                                                                       "status_class"])
        for (verdict, cls), n in sorted(rec.requests.items()):
            fam.add_metric([*ids, verdict, cls], n)
        yield fam
        fam = CounterMetricFamily("polite_retry_after", "429 and 503 answers that carried a "
                                  "Retry-After", labels=[*base, "status"])
        for status, n in sorted(rec.retry_after.items()):
            fam.add_metric([*ids, status], n)
        yield fam
        redis = self._shared() is not None
        for name, (key, doc, unit) in STAT_COUNTERS.items():
            if redis or not name.startswith("polite_redis_"):  # the Redis frontier's own
                value = float(stats.get(key, 0) or 0)
                yield counter(name, doc, value / 1e6 if key.endswith("_us") else value, unit)
        yield from self._stats_families(ids, base, stats)
        for name, doc, hist, unit in (
                ("polite_rest_seconds", "Rests given: the seconds an origin rests after an "
                 "exchange", rec.rests, "seconds"),
                ("polite_latency_watch_factor", "The latency watch's factor on the rest, "
                 "after each exchange (1: no slowdown seen)", rec.factors, ""),
                ("polite_page_store_write_seconds", "Page store writes: seconds from the "
                 "pipeline's request to the store thread's answer", rec.writes, "seconds")):
            h = HistogramMetricFamily(name, doc, labels=base, unit=unit)
            h.add_metric(ids, hist.cumulative(), hist.total)
            yield h
        cpu = time.process_time()
        yield counter("polite_cpu_seconds", "CPU seconds of the worker process (all threads)",
                      cpu, "seconds")
        yield counter("polite_metrics_scrape_cpu_seconds", "CPU seconds this endpoint spent "
                      "serving scrapes (the reactor thread, request to response)",
                      self.scrape_cpu, "seconds")
        sent = sum(rec.requests.values())
        g = GaugeMetricFamily("polite_cpu_seconds_per_request", "CPU seconds per exchange "
                              "settled, since the crawl began", labels=base)
        g.add_metric(ids, cpu / sent if sent else 0.0)
        yield g
        yield from self._frontier_families(ids, base)
        yield from self._store_families(ids, base)
        yield from self._redis_families(ids, base)

    def _stats_families(self, ids: list[str], base: list[str],
                        stats: dict[str, Any]) -> Iterator[Any]:
        """The families summed from the crawl's stats by key prefix: the labelled
        counters, robots.txt fetches by outcome, URLs refused at admission."""
        from prometheus_client.core import CounterMetricFamily

        labelled = {name: dict.fromkeys(seed, 0.0)
                    for name, (_p, _l, _d, seed) in STAT_LABELLED.items()}
        robots = dict.fromkeys(ROBOTS_OUTCOMES.values(), 0.0)
        refused = dict.fromkeys(URL_REFUSALS.values(), 0.0)
        for key, value in stats.items():
            if not key.startswith("polite/") or not isinstance(value, (int, float)):
                continue
            if key in ROBOTS_OUTCOMES:
                robots[ROBOTS_OUTCOMES[key]] += value
            elif key in URL_REFUSALS:
                refused[URL_REFUSALS[key]] += value
            for name, (prefix, _l, _d, _s) in STAT_LABELLED.items():
                if key.startswith(prefix):
                    labelled[name][key[len(prefix):]] = float(value)
        for name, (_p, label, doc, _s) in STAT_LABELLED.items():
            fam = CounterMetricFamily(name, doc, labels=[*base, label])
            for label_value, total in sorted(labelled[name].items()):
                fam.add_metric([*ids, label_value], total)
            yield fam
        fam = CounterMetricFamily("polite_robots_txt", "robots.txt fetches by outcome: ok, "
                                  "unavailable (4xx: no restrictions), unreachable (disallow "
                                  "all), stale_used (an outage, the last copy kept)",
                                  labels=[*base, "outcome"])
        for outcome, count in robots.items():
            fam.add_metric([*ids, outcome], count)
        yield fam
        fam = CounterMetricFamily("polite_urls_refused", "URLs the frontier refused at "
                                  "admission, by reason (duplicate: seen before)",
                                  labels=[*base, "reason"])
        for reason, count in refused.items():
            fam.add_metric([*ids, reason], count)
        yield fam

    def _frontier_families(self, ids: list[str], base: list[str]) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        frontier = self._core()
        if not isinstance(frontier, Frontier):  # not open yet, or closed
            return
        snap = frontier_snapshot(frontier, self.ctx.clock())
        g = GaugeMetricFamily("polite_origins", "Origins with work by state (in_flight, "
                              "resting, server_wait, ready) and origins stopped",
                              labels=[*base, "state"])
        for state in (*ORIGIN_STATES, "stopped"):
            g.add_metric([*ids, state], snap[state])
        yield g
        for name, doc, value in (
                ("polite_origins_active", "Origins with work, not stopped", snap["active"]),
                ("polite_urls_queued", "URLs queued in this worker's frontier", snap["queued"]),
                ("polite_rate_ceiling_requests_per_second", "The polite rate ceiling: the sum "
                 "of 1/rest over the active origins", snap["rate_ceiling"])):
            g = GaugeMetricFamily(name, doc, labels=base)
            g.add_metric(ids, value)
            yield g
        servers = server_snapshot(frontier, self.ctx.clock(), TOP_SERVERS)
        for name, doc, pick in (
                ("polite_server_load_share", "Our share of one of the server's workers "
                 "(seconds of our exchanges over seconds elapsed), the busiest servers",
                 lambda v: v.share),
                ("polite_server_in_flight", "Our requests open on the server",
                 lambda v: float(v.in_flight)),
                ("polite_server_concurrency_limit", "How many of our requests may be open "
                 "on the server at once (grows while its latency stays flat)",
                 lambda v: float(v.limit)),
                ("polite_server_latency_seconds", "The server's latency: the median of its "
                 "latest answers", lambda v: v.latency),
                ("polite_server_hosts", "Host names on the server known to this worker",
                 lambda v: float(len(v.hosts)))):
            g = GaugeMetricFamily(name, doc, labels=[*base, "server"])
            for view in servers:
                value = pick(view)
                if value is not None:
                    g.add_metric([*ids, view.address], value)
            yield g

    def _store_families(self, ids: list[str], base: list[str]) -> Iterator[Any]:
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        store = self.ctx.pages
        if store is None:
            return
        g = GaugeMetricFamily("polite_page_store_queue_length", "Page store jobs waiting for "
                              "the store thread", labels=base)
        g.add_metric(ids, float(store.waiting))
        yield g
        c = CounterMetricFamily("polite_page_store_commits", "Page store writes committed",
                                labels=base)
        c.add_metric(ids, float(store.committed))
        yield c

    def _shared(self) -> Any:
        """The cluster's shared state (RedisShared), None on the embedded backend."""
        scheduler = self.ctx.frontier
        return scheduler.shared if scheduler is not None else None

    def _core(self) -> FrontierView | None:
        """The frontier's core while the crawl is open."""
        scheduler = self.ctx.frontier
        return scheduler.frontier if scheduler is not None else None

    def _lease_valid_until(self) -> float | None:
        """This worker's lease as last confirmed, less the margin (a cluster only)."""
        core = self._core()
        if self._shared() is None or not isinstance(core, Frontier):
            return None
        from polite_crawler.frontier.redis_frontier import LocalLeases

        leases = core.origin_store
        return leases.valid_until if isinstance(leases, LocalLeases) else None

    def _redis_families(self, ids: list[str], base: list[str]) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        valid_until = self._lease_valid_until()
        if valid_until is not None:
            g = GaugeMetricFamily("polite_redis_lease_remaining_seconds", "Seconds left on "
                                  "this worker's lease as last confirmed, less the margin "
                                  "(negative: it stopped renewing)", labels=base, unit="seconds")
            g.add_metric(ids, float(valid_until) - self.ctx.clock())
            yield g
        cluster = self.cluster
        if cluster is None:
            return
        if cluster.ping is not None:
            g = GaugeMetricFamily("polite_redis_ping_seconds", "Seconds of this worker's "
                                  "last Redis round trip (a PING every "
                                  "POLITE_METRICS_CLUSTER_INTERVAL)", labels=base, unit="seconds")
            g.add_metric(ids, cluster.ping)
            yield g
        if not cluster.holder or not cluster.values:
            return
        for key, doc in (("urls_queued", "URLs queued or claimed in Redis, every worker"),
                         ("origins_active", "Origins with work in the crawl"),
                         ("origins_unowned", "Origins with work and no owner (the free set)"),
                         ("workers_alive", "Workers whose heartbeat is within the lease TTL")):
            g = GaugeMetricFamily(f"polite_cluster_{key}", f"{doc} (exported by one worker)",
                                  labels=["crawl"])
            g.add_metric(ids[:1], cluster.values[key])
            yield g


class _MetricsPage(Resource):
    isLeaf = True

    def __init__(self, metrics: Metrics) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.metrics = metrics

    def render_GET(self, request: Any) -> bytes:  # Twisted's name
        from prometheus_client.openmetrics.exposition import CONTENT_TYPE_LATEST

        body = self.metrics.render()
        request.setHeader(b"Content-Type", CONTENT_TYPE_LATEST.encode())
        return body


class _TimedRequest(Request):
    """A request to the endpoint that adds the reactor thread's CPU time it took (from
    the request read to the response written) to :attr:`Metrics.scrape_cpu`."""

    def process(self) -> None:
        began = time.thread_time()
        # Read first: a finished request lets go of its channel.
        metrics = getattr(getattr(self.channel, "site", None), "polite_metrics", None)
        try:
            super().process()  # type: ignore[no-untyped-call]
        finally:
            if metrics is not None:
                metrics.scrape_cpu += time.thread_time() - began
