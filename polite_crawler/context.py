"""The per-crawl objects the politeness components share.

One :class:`PoliteContext` per crawler (kept on the crawler object, never in a
module global): the frontier, the robots.txt book, the page store and the
access log. Components reach it with ``polite_context(crawler)`` and build
nothing of this kind themselves, so every component sees the same state.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import (
        AccessLogSink,
        FrontierService,
        MetricsSink,
        PageStoreView,
        RobotsService,
    )

_ATTR = "_polite_context"


class PoliteContext:
    def __init__(self, crawler: Crawler, clock: Callable[[], float] = time.time) -> None:
        self.crawler = crawler
        self.settings = crawler.settings
        # Wall clock (epoch seconds): persisted next-allowed times must survive restarts.
        self.clock = clock
        # Set by the components that own them when the crawl opens, each behind the
        # interface declared in polite_crawler.interfaces (None: not installed or not open).
        self.frontier: FrontierService | None = None  # the frontier scheduler
        self.robots: RobotsService | None = None  # the robots.txt middleware's RobotsBook
        self.pages: PageStoreView | None = None  # backend.page_store, opened on first use
        self.access_log: AccessLogSink | None = None  # extensions.accesslog
        # extensions.metrics' Recorder when POLITE_METRICS_PORT is set
        self.metrics: MetricsSink | None = None
        # Hosts the operator named (-a url / -a urls): allowed by the address policy.
        self.start_hosts: set[str] = set()


def polite_context(crawler: Crawler) -> PoliteContext:
    ctx = getattr(crawler, _ATTR, None)
    if ctx is None:
        ctx = PoliteContext(crawler)
        setattr(crawler, _ATTR, ctx)
    return ctx
