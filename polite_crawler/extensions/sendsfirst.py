"""Sends first while a wave is due: answers already in wait, unread, while the engine is
behind the frontier's sends.

With many sites resting the same time, every site's k-th request falls due in one
"wave". Scrapy's scraper starts reading each answer as soon as it is in (the spider's
parse, the page's analysis, the pipelines: about 2 ms of CPU a page) on the event loop
that also sends, so while a wave goes out every due request waits behind the pages that
came back before it: a wave of 1,100 requests took 4 to 6 s to go out instead of 2 to 3,
and the origins last in it rested that much longer than their rest
(bench/DESCRIPTORS.md, "Where the tenth beyond the polite ideal goes").

This extension replaces the scraper's loop that starts reading the queued answers
(Scrapy's private ``Scraper._scrape_next``). While the engine keeps up it does what
Scrapy does, with one test more: every answer in is read at once. Only while the engine
is behind do answers wait: the frontier's next request is past its time (its hand-out
time, ``FrontierView.next_eligible``, plus POLITE_DISPATCH_LEAD) by more than
:data:`BEHIND` and is still not handed out. Then the engine, woken by the answer's
download, sends first; the answers wait, looked at again every :data:`RECHECK` seconds
and at each answer in or done, as long as the frontier's next request stays past its
hand-out time (the wave is still going out), and are then read one an event-loop step,
the test asked again before each.

Bounds: an answer waits at most POLITE_SENDS_FIRST_MAX_WAIT seconds (then the oldest
are read, one a step, whatever is due); at most POLITE_SENDS_FIRST_MAX_HELD answers wait
(the oldest read beyond it: a held answer is about 17 KB of the process, and a wave's
size grows with the sites, so without it the memory a site grew with the wave,
bench/DESCRIPTORS.md); a failure (no response to read) never waits; nothing waits
while the engine is paused or closing, or while the scraper's slot is over
SCRAPER_SLOT_MAX_ACTIVE_SIZE (5 MB of bodies by Scrapy's count: the engine sends
nothing more until answers are read, so they are read). Nothing is dropped, and no rest
is shortened: an answer is only ever read later, and a site's rest runs from its
answer's end (the gate's settle at the download's end), not from its read. Stats:
``polite/sendsfirst/holds`` (times the engine was found behind with answers in),
``polite/sendsfirst/waited`` (answers that waited),
``polite/sendsfirst/at_bound`` (read at the bound, the engine still behind),
``polite/sendsfirst/over_held`` (read because more than the bound were waiting),
``polite/sendsfirst/longest_hold`` (seconds).

Private Scrapy names this relies on (Scrapy is pinned to 2.19.x and
``tests/test_sendsfirst_crawl.py`` fails if they move): ``Scraper._scrape_next``
(replaced on the crawl's scraper), ``Scraper._wait_for_processing`` (reads one answer),
``Slot.queue`` and ``Slot.next_response_request_deferred`` (the scraper slot's answers
waiting), and ``ExecutionEngine._slot`` with its ``closing``. When one is missing the
crawl keeps Scrapy's own order, with one WARNING line.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections import deque
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.defer import _schedule_coro
from twisted.python.failure import Failure

from polite_crawler.context import polite_context
from polite_crawler.defaults import polite_settings

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from scrapy.core.engine import ExecutionEngine
    from scrapy.core.scraper import Scraper
    from scrapy.crawler import Crawler

    from polite_crawler.interfaces import FrontierView

logger = logging.getLogger(__name__)

#: Seconds the frontier's next request may be past its time, not handed out, before the
#: engine counts as behind (a wave due). While it keeps up, the engine takes a request
#: a dispatch lead ahead of its time (the frontier wakes it then; a page's read is about
#: 2 ms); a wave leaves it behind by up to the wave's length.
BEHIND = 0.02

#: How often (seconds) held answers look again whether the engine is still behind, when
#: no answer comes in or ends meanwhile (each does look). A look costs about 10 us on a
#: busy event loop and 90 us of process time on an idle one (the wake-up): 20 ms keeps
#: that under 0.5 % of a core and starts the reads at most 20 ms late.
RECHECK = 0.02

#: Scrapy's private names this replaces or calls, checked at start.
SCRAPER_NAMES = ("_scrape_next", "_wait_for_processing")
SLOT_NAMES = ("queue", "next_response_request_deferred", "needs_backout")
ENGINE_SLOT_NAMES = ("closing",)


def missing_names(engine: ExecutionEngine) -> list[str]:
    """The private Scrapy names :class:`WaveOrder` needs that ``engine`` (open, with its
    spider) lacks: empty on Scrapy 2.19."""
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


class WaveOrder:
    """The scraper's ``_scrape_next``: Scrapy's order, except while a wave is due (see
    the module docstring).

    ``frontier()``: the frontier's core, None before it opens and after it closes.
    ``clock``: the frontier's (epoch seconds). ``lead``: POLITE_DISPATCH_LEAD.
    ``call_later(delay, fn)``: the event loop's timer."""

    def __init__(self, engine: ExecutionEngine, *,
                 frontier: Callable[[], FrontierView | None], clock: Callable[[], float],
                 lead: float, max_wait: float, max_held: int = 512,
                 call_later: Callable[[float, Callable[[], None]], Any],
                 start: Callable[[Coroutine[Any, Any, None]], None] = _schedule_coro
                 ) -> None:
        self.engine = engine
        self.start = start  # runs an answer's read (Scrapy's: a task on the event loop)
        # The frontier hands a request out up to ``lead`` before its time (the handler
        # holds it until then; the scheduler's bounds, 0 to 2 s): behind is later than
        # that by more than BEHIND. An origin resting under 4 leads is handed out less
        # ahead (a quarter of its rest), so found behind a little later.
        self.late_after = min(max(lead, 0.0), 2.0) + BEHIND
        self.scraper: Scraper = engine.scraper
        self.frontier = frontier
        self.clock = clock
        self.max_wait = max_wait
        self.max_held = max(max_held, 0)
        self.call_later = call_later
        self.holds = 0  # times answers were held
        self.waited = 0  # answers that waited
        self.at_bound = 0  # answers read at the bound, the engine still behind
        self.over_held = 0  # answers read because more than max_held were waiting
        self.longest_hold = 0.0
        self._since: float | None = None  # when the hold in progress began
        # During a hold: when each answer waiting came in, oldest first (the queue's order).
        self._arrivals: deque[float] = deque()
        self._timer: Any = None  # the event loop's call of the next look
        self._timer_at = math.inf
        self._reading = False

    def install(self) -> None:
        scraper: Any = self.scraper
        scraper._scrape_next = self.scrape_next

    def behind(self, now: float, late_after: float) -> bool:
        """Whether the engine is behind the frontier: its next request's hand-out time
        passed more than ``late_after`` seconds ago and it is not handed out. Never
        while the engine is paused or closing, or the scraper's slot is over its size
        (answers must be read then for the engine to send)."""
        engine: Any = self.engine
        engine_slot = engine._slot
        scraper_slot: Any = self.scraper.slot
        if engine.paused or engine_slot is None or engine_slot.closing is not None \
                or scraper_slot is None or scraper_slot.needs_backout():
            return False
        view = self.frontier()
        at = view.next_eligible() if view is not None else None
        return at is not None and now - at > late_after

    def scrape_next(self) -> None:
        """Start reading the answers waiting in the scraper's slot (Scrapy's loop), or
        hold them while the engine is behind; called at each answer in and done."""
        slot: Any = self.scraper.slot
        if slot is None or self._reading:
            return
        queue = slot.queue
        arrivals = self._arrivals
        if not queue:
            self._end_hold()
            return
        now = self.clock()
        if self._since is None:
            if not self.behind(now, self.late_after):
                self._read(len(queue))  # the engine keeps up: as Scrapy reads them
                if queue:
                    self._arm(0.0)  # one came in while reading (a reactor without asyncio)
                return
            self._since = now
            self.holds += 1
        self._read_failures(len(queue) - len(arrivals))
        if not queue:  # the answers in were failures, read
            self._end_hold()
            return
        while len(arrivals) < len(queue):  # answers in since the last look
            arrivals.append(now)
            self.waited += 1
        waited = now - arrivals[0]
        if self.behind(now, 0.0):
            if len(queue) > self.max_held:
                self.over_held += 1  # memory: no more than max_held answers wait
            elif waited < self.max_wait:
                self._arm(min(RECHECK, self.max_wait - waited))
                return
            else:
                self.at_bound += 1
        # Caught up, the oldest answer's wait at its bound, or more answers waiting than
        # the bound: one answer an event-loop step, the test asked again before the next.
        self._read(1)
        if queue:
            self._arm(0.0)
        else:
            self._end_hold()

    def _read_failures(self, new: int) -> None:
        """Start reading at once the failures among the ``new`` answers last in (a
        robots.txt answer the robots.txt middleware took, a request dropped on its way):
        they cost the spider little, and a failure holds its exception's frames (the
        response among them) in a reference cycle. Read at once, the cycle dies young, at
        the collector's next young collection; held through a wave, it reached the
        oldest generation and stayed until a full collection, which a crawl's large heap
        rarely gets: about one a site for the whole crawl (bench.site_memory)."""
        if new <= 0:
            return
        queue = self.scraper.slot.queue  # type: ignore[union-attr]
        failed = [entry for entry in itertools.islice(reversed(queue), new)
                  if isinstance(entry[0], Failure)]
        if not failed:
            return
        scraper: Any = self.scraper
        self._reading = True
        try:
            for entry in reversed(failed):  # in the order they came
                queue.remove(entry)
                queue.appendleft(entry)  # Scrapy's slot reads its queue's head
                result, request, queue_dfd = scraper.slot.next_response_request_deferred()
                self.start(scraper._wait_for_processing(result, request, queue_dfd))
        finally:
            self._reading = False

    def _end_hold(self) -> None:
        if self._since is not None:
            self.longest_hold = max(self.longest_hold, self.clock() - self._since)
        self._since = None
        self._arrivals.clear()

    def _arm(self, delay: float) -> None:
        """The next look in ``delay`` seconds (one already due sooner stays)."""
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

    def _read(self, n: int) -> None:
        """Start reading the ``n`` oldest answers (Scrapy's ``_wait_for_processing``)."""
        scraper: Any = self.scraper
        slot = scraper.slot
        # An answer read at once may end (and re-enter scrape_next) before this returns:
        # that call returns at once, and the loop here goes on.
        self._reading = True
        try:
            for _ in range(n):
                if not slot.queue:
                    break
                if self._arrivals:
                    self._arrivals.popleft()
                result, request, queue_dfd = slot.next_response_request_deferred()
                self.start(scraper._wait_for_processing(result, request, queue_dfd))
        finally:
            self._reading = False


class SendsFirst:
    """Installs :class:`WaveOrder` on the crawl's scraper as the spider opens."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        settings = polite_settings(crawler.settings)
        self.max_wait = max(settings.getfloat("POLITE_SENDS_FIRST_MAX_WAIT"), 0.0)
        self.max_held = max(settings.getint("POLITE_SENDS_FIRST_MAX_HELD"), 0)
        self.lead = settings.getfloat("POLITE_DISPATCH_LEAD")
        self.order: WaveOrder | None = None
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

        def frontier() -> FrontierView | None:
            service = ctx.frontier
            return service.frontier if service is not None else None

        self.order = WaveOrder(engine, frontier=frontier, clock=ctx.clock, lead=self.lead,
                               max_wait=self.max_wait, max_held=self.max_held,
                               call_later=reactor.callLater)
        self.order.install()

    def spider_closed(self) -> None:
        order, stats = self.order, self.crawler.stats
        if order is not None and stats is not None:
            stats.set_value("polite/sendsfirst/holds", order.holds)
            stats.set_value("polite/sendsfirst/waited", order.waited)
            stats.set_value("polite/sendsfirst/at_bound", order.at_bound)
            stats.set_value("polite/sendsfirst/over_held", order.over_held)
            stats.set_value("polite/sendsfirst/longest_hold", round(order.longest_hold, 3))


def _scrapy_version() -> str:
    import scrapy

    return scrapy.__version__
