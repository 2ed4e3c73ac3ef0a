"""The wave order's rules (extensions.sendsfirst.WaveOrder), step by step.

Scrapy's engine and scraper slot are stood in for by the few fields the order reads
(the answers waiting, the slot's size test, the engine's pause and closing), the
frontier by its next hand-out time, the event loop's timer by a list the test fires,
and the time by an injected clock: each rule is checked at the moment it applies. The
crawl through Scrapy itself is tests/test_sendsfirst_crawl.py.
"""

from __future__ import annotations

import contextlib
from collections import deque
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any, cast

from polite_crawler.extensions.sendsfirst import BEHIND, RECHECK, WaveOrder, missing_names
from tests.clock import T0, Clock

LEAD = 0.25
MAX_WAIT = 5.0


@dataclass
class ScraperSlot:
    queue: deque[tuple[str, str, None]] = field(default_factory=deque)
    over_size: bool = False

    def needs_backout(self) -> bool:
        return self.over_size

    def next_response_request_deferred(self) -> tuple[str, str, None]:
        return self.queue.popleft()


class Scraper:
    def __init__(self) -> None:
        self.slot = ScraperSlot()
        self.read: list[str] = []

    async def _wait_for_processing(self, result: str, request: str, dfd: None) -> None:
        self.read.append(request)


class Frontier:
    def __init__(self) -> None:
        self.at: float | None = None  # next hand-out time

    def next_eligible(self) -> float | None:
        return self.at


class Loop:
    """The event loop's timer: calls kept until the test runs them."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, Any]] = []

    def call_later(self, delay: float, fn: Any) -> Any:
        call = SimpleNamespace(delay=delay, fn=fn, cancelled=False)
        call.cancel = lambda: setattr(call, "cancelled", True)
        self.calls.append((delay, call))
        return call

    def pending(self) -> list[float]:
        return [d for d, c in self.calls if not c.cancelled]

    def run(self) -> None:
        calls, self.calls = self.calls, []
        for _d, c in calls:
            if not c.cancelled:
                c.fn()


def start(coro: Any) -> None:
    """Runs an answer's read to its end at once (the test's stand-in for a task)."""
    with contextlib.suppress(StopIteration):
        coro.send(None)


class Rig:
    def __init__(self, max_held: int = 512) -> None:
        self.clock = Clock()
        self.scraper = Scraper()
        self.engine: Any = cast("Any", SimpleNamespace(
            scraper=self.scraper, paused=False, _slot=SimpleNamespace(closing=None)))
        self.frontier: Any = Frontier()
        self.loop = Loop()
        self.order = WaveOrder(self.engine, frontier=lambda: self.frontier, clock=self.clock,
                               lead=LEAD, max_wait=MAX_WAIT, max_held=max_held,
                               call_later=self.loop.call_later, start=start)
        self.n = 0

    def answer(self, k: int = 1) -> None:
        """``k`` answers in (as Scrapy's enqueue_scrape: queued, then the loop asked)."""
        for _ in range(k):
            self.n += 1
            self.scraper.slot.queue.append(("response", f"r{self.n}", None))
        self.order.scrape_next()

    def behind_by(self, late: float) -> None:
        """The frontier's next request ``late`` seconds past its time (hand-out + lead)."""
        self.frontier.at = self.clock.t - LEAD - late


def test_an_engine_that_keeps_up_reads_every_answer_at_once() -> None:
    rig = Rig()
    rig.frontier.at = T0 + 0.1  # next hand-out ahead
    rig.answer(3)
    assert rig.scraper.read == ["r1", "r2", "r3"]
    assert rig.loop.pending() == []  # no timer, no step of its own
    # Handed out late but within the lead, or past its time by less than BEHIND: at once.
    rig.behind_by(BEHIND / 2)
    rig.answer()
    assert rig.scraper.read[-1] == "r4"
    assert rig.order.holds == rig.order.waited == 0


def test_answers_wait_while_the_engine_is_behind_then_are_read_one_a_step() -> None:
    rig = Rig()
    rig.behind_by(BEHIND * 2)
    rig.answer(2)
    assert rig.scraper.read == []
    assert rig.loop.pending() == [RECHECK]
    assert rig.order.holds == 1
    # The wave goes on: the next request is past its hand-out time, not its send time.
    rig.clock.t += 0.1
    rig.frontier.at = rig.clock.t - 0.01
    rig.answer()
    rig.loop.run()
    assert rig.scraper.read == []
    assert rig.order.waited == 3
    # Caught up: one answer a step, the oldest first.
    rig.frontier.at = rig.clock.t + 0.2
    rig.loop.run()
    assert rig.scraper.read == ["r1"]
    assert rig.loop.pending() == [0.0]
    # A request falls due again before the next step: the rest wait.
    rig.behind_by(0.0)
    rig.frontier.at -= 0.01
    rig.loop.run()
    assert rig.scraper.read == ["r1"]
    rig.frontier.at = rig.clock.t + 0.2
    rig.loop.run()
    rig.loop.run()
    assert rig.scraper.read == ["r1", "r2", "r3"]
    assert rig.loop.pending() == []
    assert rig.order.holds == 1
    assert rig.order.at_bound == 0


def test_an_answer_waits_at_most_the_bound() -> None:
    rig = Rig()
    rig.behind_by(1.0)
    rig.answer()
    rig.clock.t += 3.0
    rig.behind_by(1.0)
    rig.answer()
    rig.clock.t += MAX_WAIT - 3.0 - 0.001
    rig.behind_by(1.0)
    rig.loop.run()
    assert rig.scraper.read == []
    assert max(rig.loop.pending()) <= RECHECK
    rig.clock.t += 0.001
    rig.behind_by(1.0)
    rig.loop.run()
    assert rig.scraper.read == ["r1"]  # at its bound; the second waited 2 s only
    assert rig.order.at_bound == 1
    rig.loop.run()
    assert rig.scraper.read == ["r1"]
    assert rig.loop.pending() == [RECHECK]  # looked at again, within its own bound


def test_no_more_answers_wait_than_the_bound() -> None:
    rig = Rig(max_held=2)
    rig.behind_by(1.0)
    rig.answer(2)
    assert rig.scraper.read == []  # two wait: the bound
    rig.answer()  # a third: the oldest is read, the engine still behind
    rig.loop.run()
    assert rig.scraper.read == ["r1"]
    assert len(rig.scraper.slot.queue) == 2
    assert rig.order.over_held == 1
    rig.loop.run()
    assert rig.scraper.read == ["r1"]  # back at the bound: the two wait on
    assert rig.loop.pending() == [RECHECK]


def test_none_waits_when_the_engine_cannot_send() -> None:
    for stop in ("paused", "closing", "over_size"):
        rig = Rig()
        rig.behind_by(1.0)
        rig.answer()
        assert rig.scraper.read == []
        if stop == "paused":
            rig.engine.paused = True
        elif stop == "closing":
            rig.engine._slot.closing = object()
        else:
            rig.scraper.slot.over_size = True
        rig.answer()
        rig.loop.run()
        rig.loop.run()
        assert rig.scraper.read == ["r1", "r2"], stop


def test_no_frontier_no_wait() -> None:
    rig = Rig()
    rig.frontier.at = None  # nothing queued
    rig.answer()
    assert rig.scraper.read == ["r1"]
    rig.order.frontier = lambda: None  # closed
    rig.answer()
    assert rig.scraper.read == ["r1", "r2"]


def test_missing_names_are_named() -> None:
    engine: Any = SimpleNamespace(scraper=SimpleNamespace(slot=None), _slot=None)
    assert missing_names(engine) == [
        "Scraper._scrape_next", "Scraper._wait_for_processing", "scraper Slot.queue",
        "scraper Slot.next_response_request_deferred", "scraper Slot.needs_backout",
        "ExecutionEngine._slot"]


def test_the_addon_installs_it() -> None:
    from scrapy.settings import Settings
    from scrapy.utils.test import get_crawler

    from polite_crawler.addon import PoliteAddon
    from polite_crawler.spiders.site import SiteSpider

    crawler = get_crawler(SiteSpider)
    s = Settings()
    PoliteAddon(crawler).update_settings(s)
    assert "polite_crawler.extensions.sendsfirst.SendsFirst" in s.getdict("EXTENSIONS")
    assert s.getfloat("POLITE_SENDS_FIRST_MAX_WAIT") == 5.0


def test_a_failure_is_read_at_once_while_answers_wait() -> None:
    from twisted.python.failure import Failure

    rig = Rig()
    rig.behind_by(1.0)
    rig.answer(2)
    assert rig.scraper.read == []
    rig.n += 1
    failure = Failure(ValueError("dropped on its way"))
    rig.scraper.slot.queue.append(cast("Any", (failure, "f3", None)))
    rig.answer()
    # The failure is read as it comes; the responses before and after it wait on.
    assert rig.scraper.read == ["f3"]
    assert [entry[1] for entry in rig.scraper.slot.queue] == ["r1", "r2", "r4"]
    assert rig.order.waited == 3
    rig.frontier.at = rig.clock.t + 0.2  # caught up
    for _ in range(3):
        rig.loop.run()
    assert rig.scraper.read == ["f3", "r1", "r2", "r4"]


def test_a_failure_alone_in_ends_the_hold() -> None:
    from twisted.python.failure import Failure

    rig = Rig()
    rig.behind_by(1.0)
    rig.scraper.slot.queue.append(cast("Any", (Failure(ValueError("x")), "f1", None)))
    rig.order.scrape_next()
    assert rig.scraper.read == ["f1"]
    assert rig.order.waited == 0
    rig.answer()
    assert rig.scraper.read == ["f1"]  # a response in waits as before
    assert rig.order.waited == 1
