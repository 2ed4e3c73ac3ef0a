"""Sends first: a request due to go is sent before the answers already in are read.

With many sites resting the same time, every site's k-th request falls due in one
"wave". Scrapy's scraper reads each answer as soon as it is in (the spider's parse, the
page's analysis, the pipelines: about 2 ms of CPU a page), on the same event loop that
sends: while a wave is due, every due request waits behind the pages that came back
before it, and a wave of 1,100 requests took 4 to 6 s to go out instead of 2 to 3
(bench/DESCRIPTORS.md, "Where the tenth beyond the polite ideal goes"). The origins
that come last in the wave rest that much longer than their rest.

This extension replaces the scraper's loop that starts reading the queued answers
(Scrapy's private ``Scraper._scrape_next``) by one that reads one answer an event-loop
step, and lets the oldest wait, unread, while a send is due:

* a request held in the download handler until its time (``handlers.HeldSends``) goes
  within :data:`DUE_WITHIN`, or
* the frontier has a request to hand out now (``FrontierView.next_eligible``) and the
  engine can take it (``engine.needs_backout()`` false: room in the downloader and in
  the scraper's slot).

An answer waits at most POLITE_SENDS_FIRST_MAX_WAIT seconds from its arrival; then it is
read whatever is due. None waits while the engine or the scraper is closing (every
answer is read then, as Scrapy does) or while the scraper's slot is over
SCRAPER_SLOT_MAX_ACTIVE_SIZE (the engine sends nothing until answers are read; the
add-on raises that size above a wave's answers). Nothing is dropped: an answer is only
ever read later. Stats: ``polite/sendsfirst/waited`` (answers that waited),
``polite/sendsfirst/longest_wait`` (seconds, the longest).

Private Scrapy names this relies on (Scrapy is pinned to 2.19.x and
``tests/test_sendsfirst_crawl.py`` fails if they move): ``Scraper._scrape_next`` (replaced
on the crawl's scraper), ``Scraper._wait_for_processing`` (reads one answer),
``Slot.queue`` and ``Slot.next_response_request_deferred`` (the scraper slot's answers
waiting), ``Slot.closing``, and ``ExecutionEngine._slot`` with its ``closing``. When one
is missing the crawl keeps Scrapy's own order, with one WARNING line.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import _schedule_coro

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings
from polite_crawler.handlers import held_sends

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.core.engine import ExecutionEngine
    from scrapy.core.scraper import Scraper
    from scrapy.crawler import Crawler

    from polite_crawler.handlers import HeldSends
    from polite_crawler.interfaces import FrontierService

logger = logging.getLogger(__name__)

#: A held request due this soon counts as due (seconds): reading a page takes about 2 ms.
DUE_WITHIN = 0.02

#: How often (seconds) waiting answers look again whether a send is still due.
RECHECK = 0.005

#: Scrapy's private names this replaces or calls: (owner, name), checked at start.
SCRAPER_NAMES = ("_scrape_next", "_wait_for_processing")
SLOT_NAMES = ("queue", "next_response_request_deferred", "closing", "needs_backout")
ENGINE_SLOT_NAMES = ("closing",)


def missing_names(engine: ExecutionEngine) -> list[str]:
    """The private Scrapy names :class:`SendsFirstScraper` needs that ``engine`` (open,
    with its spider) lacks: empty on Scrapy 2.19."""
    scraper: Any = engine.scraper
    missing = [f"Scraper.{n}" for n in SCRAPER_NAMES if not hasattr(scraper, n)]
    slot = getattr(scraper, "slot", None)
    missing += [f"scraper Slot.{n}" for n in SLOT_NAMES if not hasattr(slot, n)]
    engine_slot = getattr(engine, "_slot", None)
    if engine_slot is None:
        missing.append("ExecutionEngine._slot")
    else:
        missing += [f"engine _Slot.{n}" for n in ENGINE_SLOT_NAMES
                    if not hasattr(engine_slot, n)]
    return missing


class SendsFirstScraper:
    """The scraper's ``_scrape_next`` in sends-first order (see the module docstring).

    ``clock``: the frontier's (epoch seconds), the clock of the held requests' and the
    frontier's times. ``call_later(delay, fn)``: the event loop's timer."""

    def __init__(self, engine: ExecutionEngine, held: HeldSends, *,
                 frontier: Callable[[], FrontierService | None], clock: Callable[[], float],
                 max_wait: float, call_later: Callable[[float, Callable[[], None]], Any]
                 ) -> None:
        self.engine = engine
        self.scraper: Scraper = engine.scraper
        self.held = held
        self.frontier = frontier
        self.clock = clock
        self.max_wait = max_wait
        self.call_later = call_later
        self.arrivals: deque[float] = deque()  # beside the slot's queue, oldest first
        self.waited = 0  # answers that waited for a send
        self.longest_wait = 0.0
        self._timer: Any = None  # the event loop's call of the next step
        self._timer_at = math.inf
        self._running = False
        self._held = 0  # answers at the queue's head that a due send kept waiting

    def install(self) -> None:
        scraper: Any = self.scraper
        scraper._scrape_next = self.scrape_next

    def _closing(self) -> bool:
        engine_slot: Any = self.engine._slot
        slot: Any = self.scraper.slot
        return engine_slot is None or engine_slot.closing is not None \
            or slot is None or slot.closing is not None

    def send_due(self, now: float) -> bool:
        """Whether a request is due to be sent now (or held and due within DUE_WITHIN)."""
        slot: Any = self.scraper.slot
        if slot.needs_backout():
            return False  # the engine sends nothing until answers are read
        soonest = self.held.soonest()
        if soonest is not None and soonest <= now + DUE_WITHIN:
            return True
        if self.engine.paused or self.engine.needs_backout():
            return False
        service = self.frontier()
        view = service.frontier if service is not None else None
        at = view.next_eligible() if view is not None else None
        return at is not None and at <= now

    def _arm(self, delay: float) -> None:
        """The next step in ``delay`` seconds (a step already due sooner stays)."""
        at = self.clock() + delay
        if self._timer is not None:
            if self._timer_at <= at:
                return
            self._timer.cancel()
        self._timer_at = at
        self._timer = self.call_later(delay, self._again)

    def _again(self) -> None:
        self._timer, self._timer_at = None, math.inf
        self.scrape_next()

    def scrape_next(self) -> None:
        """Start reading the oldest answer waiting, unless a send is due and it has
        waited less than the bound; one answer a call, the next on the loop's next step."""
        slot: Any = self.scraper.slot
        if slot is None:
            return
        queue = slot.queue
        arrivals = self.arrivals
        now = self.clock()
        while len(arrivals) < len(queue):  # answers added since the last call
            arrivals.append(now)
        if not queue or self._running:
            if queue:
                self._arm(0.0)
            return
        if self._closing():
            self._read_all()
            return
        waited = now - arrivals[0]
        if waited < self.max_wait and self.send_due(now):
            self._held = len(queue)
            self._arm(min(RECHECK, self.max_wait - waited))
            return
        self.longest_wait = max(self.longest_wait, waited)
        self._read_one()
        if queue:
            self._arm(0.0)

    def _read_one(self) -> None:
        scraper: Any = self.scraper
        if self._held:
            self._held -= 1
            self.waited += 1
        self.arrivals.popleft()
        result, request, queue_dfd = scraper.slot.next_response_request_deferred()
        # The answer's end re-enters scrape_next (Scrapy's enqueue_scrape): that call
        # only arms the next step, so a long queue is not read by recursion.
        self._running = True
        try:
            _schedule_coro(scraper._wait_for_processing(result, request, queue_dfd))
        finally:
            self._running = False

    def _read_all(self) -> None:
        """Scrapy's own order: every answer waiting, at once (the crawl is closing)."""
        scraper: Any = self.scraper
        self.waited += self._held
        self._held = 0
        while scraper.slot is not None and scraper.slot.queue:
            self.arrivals.popleft()
            result, request, queue_dfd = scraper.slot.next_response_request_deferred()
            _schedule_coro(scraper._wait_for_processing(result, request, queue_dfd))


class SendsFirst:
    """Installs :class:`SendsFirstScraper` on the crawl's scraper as the spider opens."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.max_wait = max(
            polite_settings(crawler.settings).getfloat("POLITE_SENDS_FIRST_MAX_WAIT"), 0.0)
        self.order: SendsFirstScraper | None = None
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SendsFirst:
        return cls(crawler)

    def spider_opened(self) -> None:
        engine = self.crawler.engine
        assert engine is not None  # the spider opens on the engine
        missing = missing_names(engine)
        if missing:
            logger.warning(
                "Sends first is off: this Scrapy (%s) lacks %s; answers are read as "
                "Scrapy reads them (a wave of due requests goes out slower).",
                _scrapy_version(), ", ".join(missing))
            return
        if self.max_wait <= 0:
            return
        from twisted.internet import reactor as _reactor

        reactor: Any = _reactor
        ctx = polite_context(self.crawler)

        def frontier() -> FrontierService | None:
            return ctx.frontier

        self.order = SendsFirstScraper(
            engine, held_sends(self.crawler), frontier=frontier, clock=ctx.clock,
            max_wait=self.max_wait, call_later=reactor.callLater)
        self.order.install()

    def spider_closed(self) -> None:
        order, stats = self.order, self.crawler.stats
        if order is not None and stats is not None:
            stats.set_value("polite/sendsfirst/waited", order.waited)
            stats.set_value("polite/sendsfirst/longest_wait", round(order.longest_wait, 3))


def _scrapy_version() -> str:
    import scrapy

    return scrapy.__version__
