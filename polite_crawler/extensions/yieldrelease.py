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

from typing import TYPE_CHECKING

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.extensions.sweep import PeriodicSweep
from polite_crawler.middlewares.traps import yield_monitor

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierView
    from polite_crawler.policy.traps import YieldMonitor


def over_now(monitor: YieldMonitor, frontier: FrontierView) -> set[str]:
    """The origins the monitor remembers whose crawl is over now, or stopped."""
    return {o for o in monitor.origins() if monitor.stopped(o) or frontier.finished(o)}


class YieldRelease(PeriodicSweep):
    """Releases the yield monitor's memory of the origins whose crawl is over."""

    def __init__(self, crawler: Crawler) -> None:
        super().__init__(
            crawler, polite_settings(crawler.settings).getfloat("POLITE_YIELD_RELEASE_SWEEP"),
            "polite/yield/released")
        self.ctx = polite_context(crawler)
        self.monitor = yield_monitor(crawler)
        self._over: set[str] = set()  # over at the last sweep

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> YieldRelease:
        return cls(crawler)

    def pass_once(self) -> int:
        service = self.ctx.frontier
        frontier = service.frontier if service is not None else None
        if frontier is None:
            return 0
        over = over_now(self.monitor, frontier)
        released = sum(self.monitor.release(origin) for origin in over & self._over)
        self._over = over - self._over
        return released
