"""A site that refused the crawler is not asked again for a day, then longer.

The gate stops an origin for the run when it answers 402, 403 or a challenge page
(``policy.verdicts``). This module remembers that refusal in the shared state (the
state directory's origin store, or Redis on a cluster: :mod:`polite_crawler.store.blocks`,
:mod:`polite_crawler.store.redis_blocks`) so that every later run and job leaves the
site alone until the block runs out (:mod:`polite_crawler.policy.blocks`: 24 h,
doubling per refusal in a row up to a week, a longer Retry-After wins).

Two downloader middlewares and one memory (:func:`block_memory`, one per crawler):

* 46 :class:`BlockMiddleware`: a request of a blocked origin (robots.txt included) is
  dropped before anything else sees it, as the opt-out middleware (45) drops an
  opted-out one: the origin is freed with no rest and stopped for the run
  (``blocked``), the access log gets a ``refused:blocked`` line (``sent`` null), one
  INFO line per origin says why and until when, ``polite/blocks/dropped`` is counted.
* 993 :class:`BlockRecordMiddleware` (just above the gate, so it sees the response
  first): keeps the Retry-After of an answer that carries one (a header read), and
  records a 402 or 403 of a content request at once (the gate always stops for
  those). Nothing else is classified here: a challenge page is the gate's verdict,
  not computed twice (it costs ~0.3 ms a page).

A refusal is recorded from the gate's own verdict: the frontier's stop reasons
(``frontier.stopped``) are read every :data:`SYNC_INTERVAL` and when the spider
closes; a stop for ``402``, ``403`` or ``challenge:<name>`` becomes a block (with the
Retry-After kept for that origin). The same read takes in blocks other jobs wrote.
An origin whose block ran out and that answers a page again is forgotten (its next
refusal starts at 24 h). ``scrapy unblock`` lifts a block; ``scrapy explain`` shows it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.asyncio import create_looping_call
from twisted.internet.threads import deferToThread

from polite_crawler.backend import backend_of
from polite_crawler.context import polite_context
from polite_crawler.middlewares.optout import request_origin
from polite_crawler.policy.blocks import Block, describe, is_refusal, record_refusal
from polite_crawler.policy.verdicts import parse_retry_after

if TYPE_CHECKING:
    from collections.abc import Mapping

    from scrapy import Request, Spider
    from scrapy.crawler import Crawler
    from scrapy.http import Response

    from polite_crawler.interfaces import BlockStore, FrontierService, FrontierView

logger = logging.getLogger(__name__)

STOP_REASON = "blocked"
# Statuses the gate always stops an origin for (a robots.txt 4xx is no refusal).
REFUSING = frozenset({402, 403})
# Seconds between two reads of the frontier's stops and of the shared blocks.
SYNC_INTERVAL = 1.0
_ATTR = "_polite_block_memory"
_RETRY_AFTER_KEPT = 4096  # answers' Retry-After kept per origin until the next sync


class BlockMemory:
    """The crawl's view of the blocks: what is on, and the refusals it saw."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.clock = self.ctx.clock
        backend = backend_of(crawler.settings)
        self.store: BlockStore = backend.block_store(crawler.settings)
        self.local = not backend.cluster  # a file read here; Redis is read on a thread
        self.blocks: dict[str, Block] = {}  # every stored block, on or run out
        self.retry_after: dict[str, float] = {}  # origin -> seconds, from its last answer
        self.said: set[str] = set()
        self.recovered: set[str] = set()  # answered again after the block ran out
        self._reading = False
        self._frontier: FrontierView | None = None
        self._restored: set[str] = set()
        self._stops_seen = 0
        self._down = False
        self._loop: Any = None
        self.reload()
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    # --- lifecycle ---------------------------------------------------------------
    def spider_opened(self, spider: Spider) -> None:
        # Stops a resumed job's frontier brings back are not new refusals.
        self._restored = set(self._stops())
        now = self.clock()
        on = [b for b in self.blocks.values() if b.active(now)]
        if on:
            logger.info("%(n)d sites refused the crawler before and are not asked again "
                        "yet (scrapy explain <url> says until when; scrapy unblock <origin> "
                        "lifts a block)", {"n": len(on)})
        self._loop = create_looping_call(self.sync)
        self._loop.start(SYNC_INTERVAL, now=False)

    def spider_closed(self, spider: Spider) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.sync()
        self.store.close()

    # --- the shared blocks -------------------------------------------------------------
    def reload(self) -> None:
        """Read every block (SQLite: here; Redis: on a thread, applied when it answers)."""
        if self.local:
            try:
                self._loaded(self.store.all())
            except self.store.errors as exc:
                self._unread(str(exc))
            return
        if self._reading:
            return
        self._reading = True
        d = deferToThread(self.store.all)
        d.addCallbacks(self._loaded, lambda f: self._unread(f.getErrorMessage()))
        d.addBoth(self._read_done)

    def _read_done(self, result: Any) -> None:
        self._reading = False

    def _loaded(self, blocks: list[Block]) -> None:
        self.blocks = {b.origin: b for b in blocks}
        self._down = False

    def _unread(self, error: str) -> None:
        # The blocks are kept as they were; asked again at the next sync.
        if not self._down:
            self._down = True
            logger.warning("The block list could not be read (%(e)s); asking again every "
                           "%(s).0f s", {"e": error, "s": SYNC_INTERVAL})

    def blocked(self, origin: str) -> Block | None:
        block = self.blocks.get(origin)
        if block is None or not block.active(self.clock()):
            return None
        return block

    def sync(self) -> None:
        """Record the refusals the gate stopped origins for, forget the origins that
        answered normally after their block ran out; read other jobs' blocks."""
        self._record_stops()
        self._forget_recovered()
        self.reload()

    def _forget_recovered(self) -> None:
        if not self.recovered:
            return
        stopped = self._stops()
        for origin in sorted(self.recovered):
            if is_refusal(stopped.get(origin, "")):
                continue  # a challenge page answers 200: refused again, not recovered
            self.blocks.pop(origin, None)
            try:
                self.store.delete(origin)
            except self.store.errors:
                continue
        self.recovered.clear()

    def _stops(self) -> Mapping[str, str]:
        """The frontier's stops; the last frontier seen is kept (the scheduler closes
        before ``spider_closed``, its stops are still read then)."""
        scheduler: FrontierService | None = self.ctx.frontier
        frontier = scheduler.frontier if scheduler is not None else None
        if frontier is not None:
            self._frontier = frontier
        return self._frontier.stopped if self._frontier is not None else {}

    def _record_stops(self) -> None:
        stopped = self._stops()
        # The frontier's count of stops made, not the stops' number: a lifted owner's
        # stop takes origins out, and a refusal after it may leave the number as it was.
        made = self._frontier.stops_made if self._frontier is not None else 0
        if not stopped or made == self._stops_seen:
            return
        self._stops_seen = made
        now = self.clock()
        for origin, reason in list(stopped.items()):
            if not is_refusal(reason) or origin in self._restored:
                continue
            old = self.blocks.get(origin)
            if old is not None and old.active(now) and origin not in self.retry_after:
                continue  # recorded already (this run, or another job)
            self.record(origin, reason, now)

    def record(self, origin: str, reason: str, now: float, url: str = "") -> None:
        old = self.blocks.get(origin)
        with contextlib.suppress(*self.store.errors):  # the last one read stands
            old = self.store.load(origin) or old
        block = record_refusal(old, origin, reason, now, url=url,
                               retry_after=self.retry_after.pop(origin, None))
        if block == old:
            return
        try:
            self.store.save(block)
        except self.store.errors as exc:
            logger.warning("Could not remember that %(origin)s refused the crawler "
                           "(%(e)s); it is stopped for this run only",
                           {"origin": origin, "e": exc})
            return
        self.blocks[origin] = block
        self.inc("polite/blocks/recorded")
        logger.info("Remembered: %(line)s (scrapy unblock %(origin)s lifts it)",
                    {"line": describe(block, now), "origin": origin})

    def answered(self, origin: str, status: int, retry_after: bytes | None) -> None:
        """An answer reached the gate's doorstep: keep its Retry-After; an origin whose
        block ran out and that answers normally again is forgotten."""
        if retry_after is not None:
            wait = parse_retry_after(retry_after, time.time())
            if wait is not None:
                if len(self.retry_after) >= _RETRY_AFTER_KEPT:
                    self.retry_after.clear()
                self.retry_after[origin] = wait
        elif 200 <= status < 300 and origin in self.blocks \
                and not self.blocks[origin].active(self.clock()):
            self.recovered.add(origin)  # unless the gate reads it as a challenge (sync)

    def inc(self, key: str) -> None:
        """Count ``key`` in the crawl's stats (the refusal middleware counts here too)."""
        if self.crawler.stats is not None:
            self.crawler.stats.inc_value(key)


def block_memory(crawler: Crawler) -> BlockMemory:
    """The crawl's block memory (one per crawler, shared by both middlewares)."""
    memory = getattr(crawler, _ATTR, None)
    if memory is None:
        memory = BlockMemory(crawler)
        setattr(crawler, _ATTR, memory)
    return memory


class BlockMiddleware:
    """Order 46: drops every request of a blocked origin (see the module docstring)."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)
        self.memory = block_memory(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockMiddleware:
        return cls(crawler)

    def process_request(self, request: Request) -> None:
        if not self.memory.blocks:
            return
        origin = request_origin(request)
        block = self.memory.blocked(origin)
        if block is None:
            return
        self.memory.inc("polite/blocks/dropped")
        scheduler: FrontierService | None = self.ctx.frontier
        if scheduler is not None:
            frontier = scheduler.frontier
            if frontier is None or origin not in frontier.stopped:
                scheduler.stop(origin, STOP_REASON)
            if scheduler.owns(request):
                scheduler.release(request)  # never sent: the origin is free, no rest
                scheduler.done(request)
        if self.ctx.access_log is not None:
            self.ctx.access_log.record(request=request, verdict=f"refused:{STOP_REASON}")
        if origin not in self.memory.said:
            self.memory.said.add(origin)
            logger.info("Not asking %(line)s (scrapy unblock %(origin)s lifts it)",
                        {"line": describe(block, self.memory.clock()), "origin": origin})
        # Not a robots.txt outage, nor a request the gate should stop the origin for
        # again: this middleware stopped it (as the opt-out middleware does).
        request.meta["polite_robots"] = False
        request.meta["polite_blocked"] = True
        raise IgnoreRequest(f"{origin} refused the crawler; not asked until "
                            f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(block.until))}")


class BlockRecordMiddleware:
    """Order 993, just above the gate: keeps an answer's Retry-After for the memory."""

    def __init__(self, crawler: Crawler) -> None:
        self.memory = block_memory(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> BlockRecordMiddleware:
        return cls(crawler)

    def process_response(self, request: Request, response: Response) -> Response:
        retry_after = response.headers.get(b"Retry-After")
        status = response.status
        if retry_after is not None or self.memory.blocks or status in REFUSING:
            origin = request_origin(request)
            self.memory.answered(origin, status, retry_after)
            if status in REFUSING and not request.meta.get("polite_robots"):
                # Always a stop (policy.verdicts): remembered now, not at the next sync.
                self.memory.record(origin, str(status), self.memory.clock(), request.url)
        return response


__all__ = ["STOP_REASON", "BlockMemory", "BlockMiddleware", "BlockRecordMiddleware",
           "block_memory"]
