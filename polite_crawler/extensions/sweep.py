"""A sweep run every few seconds through a crawl, its count kept as one stat.

The extensions that let go of what an idle or finished site holds (Scrapy's idle
downloader slots, the yield monitor's hashes of a finished site) share one life: a
looping call started when the engine starts, stopped when the spider closes, and a
running count written to the crawl's stats at the end. :class:`PeriodicSweep` holds
that life once; a subclass says what one pass does and how many things it let go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.asyncio import create_looping_call

if TYPE_CHECKING:
    from scrapy.crawler import Crawler


class PeriodicSweep:
    """Runs :meth:`pass_once` every ``interval`` seconds from the engine's start to the
    spider's close; the sum of what the passes returned is the stat ``stat``."""

    def __init__(self, crawler: Crawler, interval: float, stat: str) -> None:
        self.crawler = crawler
        self.interval = interval
        self.stat = stat
        self.count = 0
        self._loop: Any = None
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    def pass_once(self) -> int:
        """One pass; how many things it let go."""
        raise NotImplementedError

    def sweep(self) -> None:
        self.count += self.pass_once()

    def engine_started(self) -> None:
        self._loop = create_looping_call(self.sweep)
        self._loop.start(self.interval, now=False)

    def spider_closed(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self.crawler.stats is not None:
            self.crawler.stats.set_value(self.stat, self.count)
