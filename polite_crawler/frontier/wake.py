"""Waking the engine when the frontier's next origin becomes eligible.

The engine asks the scheduler for work after each download, after each enqueue, and
otherwise only on a 5 s heartbeat. An origin that becomes eligible in 0.2 s must not
wait for the heartbeat, so the scheduler wakes the engine itself at that moment
(:class:`EngineWake`): a timer on the event loop that calls
``engine._slot.nextcall.schedule()`` (:func:`wake_engine`). That is a private hook with
no public alternative in Scrapy 2.19 (the version is pinned, and
``tests/test_scheduler_frontier.py`` fails if the hook moves).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from scrapy.utils.asyncio import call_later

if TYPE_CHECKING:
    from collections.abc import Callable

    from scrapy.crawler import Crawler
    from scrapy.utils.asyncio import CallLaterResult


class EngineWake:
    """One timer, armed for the earliest time the frontier has an eligible origin.

    ``next_eligible``: that time by ``clock`` (None: nothing waits, or the frontier is
    closed). :meth:`arm` after anything that may have moved it: a timer already set
    for that time or sooner stays; a later one is replaced.
    """

    def __init__(self, crawler: Crawler, clock: Callable[[], float],
                 next_eligible: Callable[[], float | None]) -> None:
        self.crawler = crawler
        self.clock = clock
        self.next_eligible = next_eligible
        self._timer: CallLaterResult | None = None
        self._timer_at = math.inf

    def arm(self) -> None:
        at = self.next_eligible()
        if at is None or (self._timer is not None and self._timer_at <= at):
            return
        self.cancel()
        self._timer_at = at
        # A millisecond late rather than early: an early wake finds nothing eligible.
        self._timer = call_later(max(at - self.clock(), 0.0) + 0.001, self._wake)

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer, self._timer_at = None, math.inf

    def _wake(self) -> None:
        self._timer, self._timer_at = None, math.inf
        wake_engine(self.crawler)
        self.arm()


def wake_engine(crawler: Crawler) -> bool:
    """Make the engine ask the scheduler for work now (False if there is no engine slot).

    Scrapy 2.19 has no public call for this; ``engine._slot.nextcall`` is the
    engine's own "run the scheduling loop soon" handle.
    """
    engine: Any = crawler.engine
    slot = getattr(engine, "_slot", None)
    if slot is None:
        return False
    slot.nextcall.schedule()
    return True
