"""The opt-out middleware: a listed origin gets no request, and a job acknowledges a new
list only once nothing of a listed origin is in flight (what ``scrapy forget`` waits for)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
from scrapy import Request, Spider
from scrapy.exceptions import IgnoreRequest
from scrapy.utils.test import get_crawler

from polite_crawler.context import polite_context
from polite_crawler.middlewares.optout import OptOutMiddleware
from polite_crawler.store.optout import OptOutList
from tests.clock import T0, Clock
from tests.frontier_fixtures import Env

if TYPE_CHECKING:
    from pathlib import Path

A, B = "http://127.0.0.1", "http://127.0.0.2"


class Scheduler:
    """The frontier scheduler's face the middleware uses, over a real Frontier."""

    def __init__(self, env: Env) -> None:
        self.frontier = env.f
        self.released: list[str] = []

    def stop(self, origin: str, reason: str) -> None:
        self.frontier.stop(origin, reason)

    def owns(self, request: Request) -> bool:
        return self.frontier.in_flight(request.meta["polite_origin"],
                                       request.meta.get("polite_token"))

    def release(self, request: Request) -> None:
        self.released.append(request.url)
        self.frontier.release(request.meta["polite_origin"], request.meta["polite_token"])

    def done(self, request: Request) -> None:
        pass


def request_for(d: Any, url: str) -> Request:
    return Request(url, meta={"polite_origin": d.origin, "polite_token": d.token,
                              "polite_robots": False})


def test_ack_waits_for_the_exchange_in_flight(tmp_path: Path) -> None:
    clock = Clock()
    env = Env(tmp_path, clock)
    for origin in (A, B):
        env.push(f"{origin}/1")
        env.push(f"{origin}/2")
    first = {d.origin: d for d in (env.f.pop(), env.f.pop()) if d is not None}
    crawler = get_crawler(Spider, {"POLITE_STATE_DIR": str(tmp_path)})
    scheduler = Scheduler(env)
    polite_context(crawler).frontier = scheduler
    mw = OptOutMiddleware(crawler)
    mw.list.register(mw.owner, "site", None, mw.version, T0)
    command = OptOutList(tmp_path / "polite-origins.sqlite3")
    version = command.add(A, "asked", T0)

    mw._tick()  # the job reads the list: A is stopped, but its exchange is still out
    assert A in env.f.stopped and A in mw.refused
    assert command.jobs()[0].version < version
    with pytest.raises(IgnoreRequest):
        mw.process_request(Request(f"{A}/other", meta={"polite_origin": A}))
    mw.process_request(request_for(first[B], f"{B}/1"))  # other origins go on

    clock.t += 0.2
    env.f.settle(A, first[A].token, start=T0, end=clock.t)  # the exchange ends
    mw._tick()
    assert command.jobs()[0].version == version  # now acknowledged
    mw.list.close()
    command.close()
    env.close()


def test_a_dispatched_request_of_a_listed_origin_is_released_with_no_rest(tmp_path: Path) -> None:
    clock = Clock()
    env = Env(tmp_path, clock)
    command = OptOutList(tmp_path / "polite-origins.sqlite3")
    command.add(A, "asked", T0)
    env.push(f"{A}/1")
    env.push(f"{A}/2")
    d = env.f.pop()
    assert d is not None
    crawler = get_crawler(Spider, {"POLITE_STATE_DIR": str(tmp_path)})
    scheduler = Scheduler(env)
    polite_context(crawler).frontier = scheduler
    mw = OptOutMiddleware(crawler)
    request = request_for(d, f"{A}/robots.txt")
    request.meta["polite_robots"] = True
    with pytest.raises(IgnoreRequest):
        mw.process_request(request)
    assert scheduler.released == [f"{A}/robots.txt"]
    assert not env.f.in_flight(A, d.token)
    assert env.f.state(A).next_allowed <= clock.t  # no rest: it never reached the network
    assert A in env.f.stopped and env.f.pending == 0  # its queue is dropped
    # Not a robots.txt outage for the robots.txt middleware, which reads this flag.
    assert request.meta["polite_robots"] is False
    mw.list.close()
    command.close()
    env.close()
