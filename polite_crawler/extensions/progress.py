"""Where a long crawl stands: one log line (and stats) every POLITE_PROGRESS_INTERVAL.

How many sites are active, in flight, resting, waiting on the server (Retry-After or
backoff), waiting to ask for robots.txt again after it could not be read, and ready
but not yet dispatched; how many are stopped; how many URLs are
queued; the polite rate ceiling (the sum of 1/rest over the active sites: what the
rules allow right now) against the rate actually reached. Sites ready but not
dispatched mean the machine (or the network) is the limit; none mean politeness is.

The figures come from the frontier through :func:`polite_crawler.frontier.core.frontier_snapshot`
(read only). Stats: ``polite/progress/<figure>``, the values of the last line (the
scheduler is closed before ``spider_closed``, so there is no snapshot after it).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.frontier.core import Frontier, frontier_snapshot

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierService

logger = logging.getLogger(__name__)


def robots_waits(frontier: Frontier, now: float) -> int:
    """Active origins with nothing else holding them back that wait to ask for their
    robots.txt again (an outage's backoff, RFC 9309 2.3.1.3): ``frontier_snapshot``
    counts them as ready, but neither the machine nor the network holds them."""
    book = frontier.robots_book()
    if book is None:
        return 0
    return sum(1 for origin in frontier.ready_origins(now)
               if not book.ready(origin) and book.retry_at(origin) > now)


def progress_line(snap: dict[str, float], rate: float | None) -> str:
    """The log line for a snapshot and the rate reached since the last one.

    >>> progress_line({"active": 3, "in_flight": 1, "resting": 2, "server_wait": 0, "ready": 0,
    ...                "stopped": 1, "queued": 40, "rate_ceiling": 1.0}, 0.9)
    'Sites: 3 active (1 in flight, 2 resting, 0 waiting on the server, 0 ready), 1 stopped; \
40 URLs queued; polite ceiling 1.00 req/s, reached 0.90 req/s: limited by politeness'
    """
    n = {k: int(v) for k, v in snap.items() if k != "rate_ceiling"}
    ceiling = snap["rate_ceiling"]
    robots = n.get("robots_wait", 0)
    if n["ready"]:
        bound = f"{n['ready']} sites ready and waiting: limited by the machine or the network"
    elif robots:
        bound = (f"{robots} sites wait to ask for robots.txt again after it could not be "
                 "read (POLITE_ROBOTS_RETRY_MIN, doubling): limited by those sites")
    elif n["active"]:
        bound = "limited by politeness"
    else:
        bound = "nothing to do"
    reached = f", reached {rate:.2f} req/s" if rate is not None else ""
    return (f"Sites: {n['active']} active ({n['in_flight']} in flight, {n['resting']} resting, "
            f"{n['server_wait']} waiting on the server"
            + (f", {robots} waiting for robots.txt" if robots else "")
            + f", {n['ready']} ready), {n['stopped']} "
            f"stopped; {n['queued']} URLs queued; polite ceiling {ceiling:.2f} req/s"
            f"{reached}: {bound}")


class Progress:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.interval = polite_settings(crawler.settings).getfloat("POLITE_PROGRESS_INTERVAL")
        if self.interval <= 0:
            raise NotConfigured  # switched off: not worth a warning
        self._loop: Any = None
        self._last: tuple[float, int] | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> Progress:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        self._loop = create_looping_call(self.log)
        self._loop.start(self.interval, now=False)

    def spider_closed(self, spider: Spider) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()

    def snapshot(self) -> dict[str, float] | None:
        scheduler: FrontierService | None = self.ctx.frontier
        frontier = scheduler.frontier if scheduler is not None else None
        if not isinstance(frontier, Frontier):  # closed (None), or not the core's
            return None
        now = self.ctx.clock()
        snap = frontier_snapshot(frontier, now)
        robots = robots_waits(frontier, now)
        snap["robots_wait"] = float(robots)
        snap["ready"] = max(snap["ready"] - robots, 0.0)
        stats = self.crawler.stats
        if stats is not None:
            for key, value in snap.items():
                stats.set_value(f"polite/progress/{key}",
                                round(value, 3) if key == "rate_ceiling" else int(value))
        return snap

    def log(self) -> None:
        snap = self.snapshot()
        if snap is None:
            return
        now = self.ctx.clock()
        stats = self.crawler.stats
        count = int(stats.get_value("downloader/request_count", 0) or 0) if stats else 0
        rate = None
        if self._last is not None and now > self._last[0]:
            rate = (count - self._last[1]) / (now - self._last[0])
        self._last = (now, count)
        logger.info(progress_line(snap, rate))
