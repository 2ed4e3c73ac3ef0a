"""The yield monitor's memory of a site let go when the site's crawl is over.

The yield monitor (:class:`polite_crawler.policy.traps.YieldMonitor`) keeps the sampled
shingle hashes of each origin's last pages (a 3-page site: about 3.5 KB) to judge its
next page; an origin whose crawl is over has no next page, and the monitor held its
hashes until ``max_origins`` (5,000) other origins pushed them out.

Every POLITE_YIELD_RELEASE_SWEEP seconds this extension asks the frontier, for each
origin the monitor remembers, whether its crawl is over
(:meth:`~polite_crawler.interfaces.FrontierView.finished`: nothing queued, waiting, in
flight or held by the spider) or the origin is stopped, and releases those found so at
two sweeps in a row: a page whose links are being queued (its request settled, the
spider still at work on it) is not taken for the end of its site. An origin that serves
pages again later (a sitemap read late, a recrawl) is judged afresh
(:meth:`~polite_crawler.policy.traps.YieldMonitor.release`). A trap is never released:
each of its pages queues the next. A sweep is a pass over at most 5,000 origins, about
1 ms. Stat: ``polite/yield/released``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import create_looping_call

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.middlewares.traps import yield_monitor

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierView
    from polite_crawler.policy.traps import YieldMonitor


def over_now(monitor: YieldMonitor, frontier: FrontierView) -> set[str]:
    """The origins the monitor remembers whose crawl is over now, or stopped."""
    return {o for o in monitor.origins() if monitor.stopped(o) or frontier.finished(o)}


class YieldRelease:
    """Releases the yield monitor's memory of the origins whose crawl is over."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.monitor = yield_monitor(crawler)
        self.interval = polite_settings(crawler.settings).getfloat("POLITE_YIELD_RELEASE_SWEEP")
        self.released = 0
        self._over: set[str] = set()  # over at the last sweep
        self._loop: Any = None
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> YieldRelease:
        return cls(crawler)

    def engine_started(self) -> None:
        self._loop = create_looping_call(self.sweep)
        self._loop.start(self.interval, now=False)

    def sweep(self) -> None:
        service = self.ctx.frontier
        frontier = service.frontier if service is not None else None
        if frontier is None:
            return
        over = over_now(self.monitor, frontier)
        for origin in over & self._over:
            self.released += self.monitor.release(origin)
        self._over = over - self._over

    def spider_closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.crawler.stats is not None:
            self.crawler.stats.set_value("polite/yield/released", self.released)
