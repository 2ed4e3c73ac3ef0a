"""Python's cyclic garbage collector, set for a crawl's heap (POLITE_GC_THRESHOLDS).

A crawl's heap holds many objects that live for seconds: the requests waiting out
their origin's rest, Twisted's connections and Deferreds, the page readings of
responses in the pipelines. With CPython's default thresholds (700, 10, 10) they
outlive the young collections, reach the oldest generation and die there, so full
collections come again and again: on the small-site workload of ``bench.realweb``
(1,000 origins, a rest of 10 s) they were about 30 % of the crawl's CPU, each a
pause of 0.2 s or more in which no timer fires and no response is read, which is
also what made the rests overrun.

A larger first threshold gives each object more allocations' time to die young;
a larger last one lets full collections come less often. The frontier scheduler
moves what exists when the crawl opens out of the collector's sight (``gc.freeze``);
this extension sets the thresholds for the crawl and puts the defaults back when it
closes. It also measures the collector: ``polite/gc/seconds`` (CPU time spent in
collections, ms resolution) and ``polite/gc/collections/<generation>`` in the stats.

With those thresholds a crawl of a few thousand sites makes almost no full collection,
so a reference cycle that reached the oldest generation before it died waits for the
crawl's end: such garbage grows with the requests made, that is with the crawl's length,
and at a fixed request rate with its sites. POLITE_GC_FULL_INTERVAL bounds it by time
instead: a full collection once that many seconds passed without one (the heap it walks
is what came after the frontier's ``gc.freeze``); ``polite/gc/timed`` counts them.
"""

from __future__ import annotations

import gc
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured
from scrapy.utils.asyncio import create_looping_call

from polite_crawler.defaults import polite_settings

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.utils.asyncio import AsyncioLoopingCall
    from twisted.internet.task import LoopingCall

# Checks a full interval: a timed collection comes at most a quarter interval late.
_CHECKS_AN_INTERVAL = 4


def thresholds_of(value: Any) -> tuple[int, int, int] | None:
    """``"50000,20,100"`` (or a list of three) -> the three thresholds; empty -> None."""
    if value in (None, "", [], ()):
        return None
    parts = value.split(",") if isinstance(value, str) else list(value)
    try:
        t = tuple(int(str(p).strip()) for p in parts)
    except ValueError:
        t = ()
    if len(t) != 3 or any(x < 1 for x in t):
        raise ValueError(
            f"POLITE_GC_THRESHOLDS must be three positive integers, got {value!r}")
    return t


class CollectorTuning:
    """Sets ``gc.set_threshold`` for the crawl, makes a full collection once
    POLITE_GC_FULL_INTERVAL seconds passed without one, measures the collector,
    restores Python's thresholds."""

    def __init__(self, crawler: Crawler, clock: Callable[[], float] = time.monotonic) -> None:
        settings = polite_settings(crawler.settings)
        t = thresholds_of(settings.get("POLITE_GC_THRESHOLDS"))
        if t is None:
            raise NotConfigured("POLITE_GC_THRESHOLDS is empty")
        interval = settings.getfloat("POLITE_GC_FULL_INTERVAL")
        if not interval >= 0:
            raise ValueError(
                f"POLITE_GC_FULL_INTERVAL must be 0 or more seconds, got {interval!r}")
        self.crawler = crawler
        self.thresholds = t
        self.full_interval = interval
        self.clock = clock
        self.before: tuple[int, int, int] | None = None
        self.seconds = 0.0
        self.counts = [0, 0, 0]
        self.timed = 0
        self.last_full = 0.0
        self._start = 0.0
        self._loop: AsyncioLoopingCall | LoopingCall | None = None
        crawler.signals.connect(self.engine_started, signal=signals.engine_started)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> CollectorTuning:
        return cls(crawler)

    def _watch(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.thread_time()
        else:
            self.seconds += time.thread_time() - self._start
            generation = info["generation"]
            self.counts[generation] += 1
            if generation == 2:
                self.last_full = self.clock()

    def collect_if_due(self) -> bool:
        """A full collection if POLITE_GC_FULL_INTERVAL seconds passed without one."""
        if self.before is None or not self.full_interval:
            return False
        if self.clock() - self.last_full < self.full_interval:
            return False
        self.timed += 1
        gc.collect()
        self.last_full = self.clock()
        return True

    def engine_started(self) -> None:
        if self.before is not None:
            return
        self.before = gc.get_threshold()
        gc.set_threshold(*self.thresholds)
        gc.callbacks.append(self._watch)
        self.last_full = self.clock()
        if self.full_interval:
            self._loop = create_looping_call(self.collect_if_due)
            self._loop.start(self.full_interval / _CHECKS_AN_INTERVAL, now=False)

    def spider_closed(self) -> None:
        if self.before is None:
            return
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self._loop = None
        gc.set_threshold(*self.before)
        self.before = None
        if self._watch in gc.callbacks:
            gc.callbacks.remove(self._watch)
        stats = self.crawler.stats
        if stats is not None:
            stats.set_value("polite/gc/seconds", round(self.seconds, 3))
            stats.set_value("polite/gc/timed", self.timed)
            for gen, n in enumerate(self.counts):
                stats.set_value(f"polite/gc/collections/{gen}", n)
