"""The download handler's hold of a request handed out ahead of its time: the time is
taken out of the request's meta once, by whoever starts the download, and the hold
uses the value it is given (the guarded handler) or takes it itself (the render
handler's call). The hold's own wait, through the reactor, is tested by a crawl
(tests/test_scheduler_frontier.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request, Spider
from scrapy.utils.test import get_crawler

from polite_crawler.context import PoliteContext
from polite_crawler.frontier.core import NOT_BEFORE
from polite_crawler.handlers import hold_until_due, take_not_before
from tests.clock import T0, Clock

if TYPE_CHECKING:
    from collections.abc import Coroutine


def at_once(hold: Coroutine[Any, Any, None]) -> None:
    """Run a hold that has nothing to wait for (it ends without a suspension)."""
    try:
        hold.send(None)
    except StopIteration:
        return
    hold.close()
    raise AssertionError("the hold waited")


def crawler_at(clock: Clock) -> Any:
    crawler = get_crawler(Spider)
    crawler._polite_context = PoliteContext(crawler, clock=clock)  # type: ignore[attr-defined]
    return crawler


def test_the_time_is_taken_out_of_the_meta_once() -> None:
    req = Request("http://127.0.0.1/", meta={NOT_BEFORE: T0 + 1.0})
    assert take_not_before(req) == T0 + 1.0
    assert NOT_BEFORE not in req.meta
    assert take_not_before(req) == 0.0  # taken: nothing for a second reader
    assert take_not_before(Request("http://127.0.0.1/", meta={NOT_BEFORE: None})) == 0.0


def test_the_hold_uses_the_time_it_is_given() -> None:
    clock = Clock(T0 + 5.0)
    crawler = crawler_at(clock)
    req = Request("http://127.0.0.1/", meta={NOT_BEFORE: T0 + 60.0})  # not read
    at_once(hold_until_due(crawler, req, T0 + 4.0))  # due already: no wait
    assert req.meta["polite_start"] == req.meta["polite_sent"] == T0 + 5.0
    assert req.meta[NOT_BEFORE] == T0 + 60.0
    plain = Request("http://127.0.0.1/")
    at_once(hold_until_due(crawler, plain, 0.0))  # not handed out ahead
    assert "polite_start" not in plain.meta


def test_without_a_time_the_hold_takes_it_from_the_request() -> None:
    # The render handler's call: the hold reads (and removes) the meta itself.
    clock = Clock(T0 + 5.0)
    crawler = crawler_at(clock)
    req = Request("http://127.0.0.1/", meta={NOT_BEFORE: T0 + 4.0})
    at_once(hold_until_due(crawler, req))
    assert NOT_BEFORE not in req.meta
    assert req.meta["polite_start"] == T0 + 5.0
