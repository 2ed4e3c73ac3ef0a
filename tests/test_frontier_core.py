"""The frontier core with an injected clock: order, gating, robots, leases, recovery."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import pytest

from polite_crawler.frontier.core import (
    CONTENT,
    DISPATCH_MARGIN,
    ROBOTS,
    TRANSIENT,
    FrontierConfig,
)
from polite_crawler.frontier.store import OriginStore, process_owner
from polite_crawler.interfaces import Lease, LeaseAnswer
from polite_crawler.policy.rest import OriginState, RestParams
from polite_crawler.policy.verdicts import FailureState
from tests.clock import T0, Clock
from tests.frontier_fixtures import PARAMS, Env, Robots, dead_owner

if TYPE_CHECKING:
    from pathlib import Path

A, B, C = "http://127.0.0.1", "http://127.0.0.2", "http://127.0.0.3"


def at(t: float) -> object:
    """The heap time of an origin eligible at ``t`` (to the microsecond)."""
    return pytest.approx(t + DISPATCH_MARGIN, abs=1e-6)


@pytest.fixture
def clock() -> Clock:
    return Clock()


def test_one_in_flight_and_rest_from_the_end(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None and d.kind == CONTENT and d.row is not None and d.row.url == "http://127.0.0.1/1"
    assert env.f.pop() is None  # in flight: nothing more from a
    clock.t += 0.4
    rest = env.f.settle("http://127.0.0.1", d.token, start=T0, end=clock.t)
    assert rest is not None and rest.total == pytest.approx(2.0)  # 5 x 0.4 s beats the 1 s base
    assert env.f.next_eligible() == at(T0 + 0.4 + 2.0)
    clock.t += 1.99
    assert env.f.pop() is None
    clock.t += 0.02 + DISPATCH_MARGIN
    d2 = env.f.pop()
    assert d2 is not None and d2.row is not None and d2.row.url == "http://127.0.0.1/2"
    env.close()


def test_eligibility_order_across_origins(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    for o in ("127.0.0.1", "127.0.0.2", "127.0.0.3"):
        env.push(f"http://{o}/1")
        env.push(f"http://{o}/2")
    first = []
    for _ in range(3):
        d = env.f.pop()
        assert d is not None
        first.append(d)
    assert {d.origin for d in first} == {A, B, C}
    assert env.f.pop() is None
    # c ends first and quickly, a last and slowly: c is eligible first, then b, then a.
    ends = {C: (0.1, 0.1), B: (0.2, 0.3), A: (0.3, 0.5)}
    for d in first:
        start_off, end_off = ends[d.origin]
        env.f.settle(d.origin, d.token, start=T0 + start_off - 0.05, end=T0 + end_off)
    order = []
    while len(order) < 3:
        nxt = env.f.next_eligible()
        assert nxt is not None
        clock.t = nxt
        d = env.f.pop()
        assert d is not None
        order.append(d.origin)
    assert order == [C, B, A]
    assert env.f.pop() is None and env.f.pending == 0
    env.close()


def test_priority_then_fifo_within_an_origin(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    env.push("http://127.0.0.1/low1")
    env.push("http://127.0.0.1/high", prio=5)
    env.push("http://127.0.0.1/low2")
    got = []
    for _ in range(3):
        d = env.f.pop()
        assert d is not None and d.row is not None
        got.append(d.row.url)
        clock.t += 0.1
        env.f.settle(d.origin, d.token, start=clock.t - 0.01, end=clock.t)
        clock.t += 10
    assert got == ["http://127.0.0.1/high", "http://127.0.0.1/low1", "http://127.0.0.1/low2"]
    env.close()


def test_release_without_dispatch_leaves_no_rest(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None
    env.f.release(d.origin, d.token)
    assert env.stats["polite/frontier/released"] == 1
    d2 = env.f.pop()
    assert d2 is not None and d2.row is not None and d2.row.url == "http://127.0.0.1/2"
    env.close()


def test_robots_first_then_content_waits_for_it(tmp_path: Path, clock: Clock) -> None:
    robots = Robots()
    env = Env(tmp_path, clock, robots=robots)
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/private")
    d = env.f.pop()
    assert d is not None and d.kind == ROBOTS and d.row is None
    assert env.f.pop() is None
    clock.t += 0.1
    robots.known["http://127.0.0.1"] = True
    robots.disallow.add("http://127.0.0.1/1")
    robots.delay["http://127.0.0.1"] = 4.0
    env.f.settle(d.origin, d.token, start=T0, end=clock.t)
    # Crawl-delay 4 s beats the 1 s base.
    assert env.f.next_eligible() == at(clock.t + 4.0)
    clock.t += 4.0 + DISPATCH_MARGIN
    d2 = env.f.pop()
    assert d2 is not None and d2.row is not None and d2.row.url == "http://127.0.0.1/private"
    assert env.stats["polite/robots/disallowed"] == 1
    assert env.f.pending == 0
    env.close()


def test_robots_outage_holds_content_until_retry(tmp_path: Path, clock: Clock) -> None:
    robots = Robots()
    env = Env(tmp_path, clock, robots=robots)
    env.push("http://127.0.0.1/1")
    d = env.f.pop()
    assert d is not None and d.kind == ROBOTS
    robots.retry["http://127.0.0.1"] = T0 + 30  # unreachable: retry in 30 s, no copy
    env.f.settle(d.origin, d.token, start=T0, end=T0 + 0.01)
    clock.t = T0 + 2
    assert env.f.pop() is None  # not ready: the content waits
    assert env.f.next_eligible() == at(T0 + 30)
    assert env.f.pending == 1  # still pending: the spider must not close
    clock.t = T0 + 30 + DISPATCH_MARGIN
    del robots.retry["http://127.0.0.1"]
    d2 = env.f.pop()
    assert d2 is not None and d2.kind == ROBOTS
    env.close()


def test_redirected_robots_request_skips_the_robots_wait(tmp_path: Path, clock: Clock) -> None:
    robots = Robots()
    env = Env(tmp_path, clock, robots=robots)
    robots.retry["http://127.0.0.2"] = T0 + 100  # b's own robots.txt is out
    marker = object()
    env.f.push_transient("http://127.0.0.2", marker)
    d = env.f.pop()
    assert d is not None and d.kind == TRANSIENT and d.obj is marker
    env.close()


def test_stop_drops_the_queue(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    env = Env(tmp_path, clock)
    for i in range(5):
        env.push(f"http://127.0.0.1/{i}")
    env.push("http://127.0.0.2/1")
    d = env.f.pop()
    assert d is not None
    with caplog.at_level(logging.WARNING):
        env.f.stop(d.origin, "403")
    assert "Stopped" in caplog.text and "403" in caplog.text
    assert env.stats["polite/origin/stopped/403"] == 1
    assert env.f.admit(d.origin) == "stopped"
    remaining = {x.origin for x in iter(env.f.pop, None)}
    assert d.origin not in remaining
    env.close()
    # The stop survives a restart of the same job.
    env2 = Env(tmp_path, clock)
    env2.f.restore()
    assert env2.f.admit(d.origin) == "stopped"
    env2.close()


def test_daily_budget(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, budget=2))
    for i in range(5):
        env.push(f"http://127.0.0.1/{i}")
    fetched = 0
    while True:
        d = env.f.pop()
        if d is None:
            nxt = env.f.next_eligible()
            if nxt is None:
                break
            clock.t = nxt
            continue
        fetched += 1
        env.f.settle(d.origin, d.token, start=clock.t, end=clock.t + 0.01)
    assert fetched == 2
    assert env.stats["polite/frontier/budget_exhausted"] == 3
    assert env.f.admit("http://127.0.0.1") == "budget_exhausted"
    env.close()
    # Counted durably: another job the same day finds it spent; the next day it is not.
    env2 = Env(tmp_path, clock, name="other", config=FrontierConfig(params=PARAMS, budget=2))
    assert env2.f.admit("http://127.0.0.1") == "budget_exhausted"
    clock.t += 86400
    assert env2.f.admit("http://127.0.0.1") is None
    env2.close()


def test_public_floor(tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture) -> None:
    low = RestParams(rest_page=0.05, rest_api=0.01, duration_factor=1.0, jitter=0.0)
    from polite_crawler.policy.network import parse_networks

    config = FrontierConfig(params=low, test_networks=parse_networks(["192.0.2.0/24"]))
    env = Env(tmp_path, clock, config=config)
    with caplog.at_level(logging.WARNING):
        assert env.f.params("http://127.0.0.5:8080").rest_page == 0.05
        assert env.f.params("http://192.0.2.7").rest_page == 0.05
        assert caplog.text == ""
        public = env.f.params("https://example.org")
        env.f.params("https://example.net")
    assert (public.rest_page, public.rest_api, public.duration_factor) == (3.0, 1.0, 5.0)
    assert caplog.text.count("public floor") == 1
    env.push("https://example.org/a")
    env.push("https://example.org/b")
    d = env.f.pop()
    assert d is not None
    env.f.settle(d.origin, d.token, start=T0, end=T0 + 0.01)
    assert env.f.next_eligible() == at(T0 + 0.01 + 3.0)
    env.close()


def test_server_wait_holds_the_origin(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None
    env.f.settle(d.origin, d.token, start=T0, end=T0 + 0.01,
                 failure=FailureState(wait_until=T0 + 120))
    assert env.f.next_eligible() == at(T0 + 120)
    env.close()


def test_lease_shares_one_in_flight_and_the_rest_across_jobs(tmp_path: Path, clock: Clock) -> None:
    a = Env(tmp_path, clock, name="job-a")
    b = Env(tmp_path, clock, name="job-b")
    a.push("http://127.0.0.9/1")
    b.push("http://127.0.0.9/2")
    da = a.f.pop()
    assert da is not None
    assert b.f.pop() is None  # a holds the lease
    assert b.stats["polite/frontier/lease_busy"] == 1
    clock.t += 0.2
    a.f.settle(da.origin, da.token, start=T0, end=clock.t)  # rest 1 s from the end
    nxt = b.f.next_eligible()
    assert nxt is not None
    clock.t = max(nxt, clock.t)
    got = b.f.pop()
    # b learns a's next-allowed time from the shared row and waits for it.
    while got is None:
        nxt = b.f.next_eligible()
        assert nxt is not None
        clock.t = nxt
        got = b.f.pop()
    assert clock.t >= T0 + 0.2 + 1.0
    a.close()
    b.close()


def test_restore_requeues_in_flight_and_keeps_the_rest(tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)
    for i in range(3):
        env.push(f"http://127.0.0.1/{i}")
    env.push("http://127.0.0.2/0")
    d = env.f.pop()
    assert d is not None and d.origin == "http://127.0.0.1"
    env.f.settle(d.origin, d.token, start=T0, end=T0 + 1.0)  # a: next allowed T0 + 6
    env.f.done(d.row.id if d.row else None)
    d2 = env.f.pop()
    assert d2 is not None and d2.origin == "http://127.0.0.2"  # in flight at the "crash"
    env.queue.commit()
    # A crash: nothing closed, b's lease held by a process of this machine that is gone.
    env.queue.conn.close()
    env.store.conn.execute(
        "UPDATE polite_origin SET lease_owner=? WHERE origin=?", (dead_owner(), B))
    env.store.conn.close()
    clock.t = T0 + 2.0
    env2 = Env(tmp_path, clock)
    assert env2.f.restore() == 1
    assert env2.f.pending == 3  # a/1, a/2 and the re-queued b/0
    # b's exchange may have ended just before the crash: b rests from now (T0 + 2).
    assert env2.f.pop() is None
    assert env2.f.next_eligible() == at(T0 + 3.0)
    clock.t = T0 + 3.0 + DISPATCH_MARGIN
    d3 = env2.f.pop()
    assert d3 is not None and d3.origin == B and d3.row is not None
    assert d3.row.url == "http://127.0.0.2/0"
    # a resumes no earlier than its saved next-allowed time.
    assert env2.f.pop() is None
    assert env2.f.next_eligible() == at(T0 + 6.0)
    env2.close()


def test_lease_fast_path_sees_another_jobs_write(tmp_path: Path, clock: Clock) -> None:
    a = Env(tmp_path, clock, name="job-a")
    a.push("http://127.0.0.9/1")
    a.push("http://127.0.0.9/2")
    d = a.f.pop()
    assert d is not None
    a.f.settle(d.origin, d.token, start=T0, end=T0)  # a's own write: next at T0 + 1
    # Another job (its own run) writes the shared row: a longer rest.
    other = OriginStore(tmp_path / "state.sqlite3", process_owner(), "another-run")
    state, _owner, _taken = other.load(d.origin)
    state.next_allowed = T0 + 50.0
    other.save(state, T0 + 0.5)
    other.close()
    clock.t = T0 + 1.0 + DISPATCH_MARGIN
    assert a.f.pop() is None  # a's copy is stale: the row is read, and a waits
    assert a.stats["polite/frontier/lease_busy"] == 1
    assert a.f.next_eligible() == at(T0 + 50.0)
    clock.t = T0 + 50.0 + DISPATCH_MARGIN
    assert a.f.pop() is not None
    a.close()


def test_a_dispatch_put_back_is_handed_out_again_as_if_never_sent(
        tmp_path: Path, clock: Clock) -> None:
    """Frontier.put_back (a request held back at the gate): the row is first in its
    origin's queue again, the origin free with no rest, the budget charge undone, and
    the row not done (it survives a restart)."""
    env = Env(tmp_path, clock)
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None and d.row is not None and d.row.url == "http://127.0.0.1/1"
    assert env.f.state(A).budget_used == 1
    assert env.f.pending == 1
    clock.t += 5.0
    assert env.f.put_back(A, d.token)
    assert not env.f.put_back(A, d.token), "once"
    assert env.f.in_flight_origins() == []
    assert env.f.state(A).budget_used == 0
    assert env.f.pending == 2
    again = env.f.pop()  # no rest: nothing was sent
    assert again is not None and again.row is not None and again.row.id == d.row.id
    assert env.f.put_back(A, again.token)
    env.f.close(finished=False)
    env.close()
    env2 = Env(tmp_path, clock)
    env2.f.restore()
    assert env2.f.pending == 2, "both rows still queued"
    env2.close()


def test_a_dispatch_lead_hands_out_ahead_with_the_time_not_before(
        tmp_path: Path, clock: Clock) -> None:
    # Handed out up to the lead before its origin's time, carrying that time: never
    # earlier, never a second request of the origin meanwhile, and the rest that follows
    # runs from the end of the exchange as ever.
    lead = 0.2
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, dispatch_lead=lead))
    for i in range(3):
        env.push(f"http://127.0.0.1/{i}")
    d = env.f.pop()
    assert d is not None and d.not_before == 0.0  # eligible now: sent at once
    clock.t += 0.1
    env.f.settle(d.origin, d.token, start=T0, end=clock.t)  # rest 1 s: eligible at T0 + 1.1
    due = T0 + 1.1 + DISPATCH_MARGIN
    assert env.f.next_eligible() == pytest.approx(due - lead, abs=1e-6)
    clock.t = due - lead - 0.001
    assert env.f.pop() is None  # more than the lead ahead
    clock.t = due - lead + 0.001
    d2 = env.f.pop()
    assert d2 is not None and d2.not_before == pytest.approx(due, abs=1e-6)
    assert env.f.pop() is None  # one in flight, held or not
    clock.t = due + 0.05  # sent at its time, answered 0.05 s later
    env.f.settle(d2.origin, d2.token, start=due, end=clock.t)
    assert env.f.next_eligible() == pytest.approx(clock.t + 1.0 + DISPATCH_MARGIN - lead, abs=1e-6)
    env.close()


def test_without_a_lead_nothing_is_handed_out_before_its_time(
        tmp_path: Path, clock: Clock) -> None:
    env = Env(tmp_path, clock)  # dispatch_lead 0, the default of the core
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None
    env.f.settle(d.origin, d.token, start=T0, end=T0)
    clock.t = T0 + 1.0 + DISPATCH_MARGIN - 0.001
    assert env.f.pop() is None
    clock.t += 0.002
    d2 = env.f.pop()
    assert d2 is not None and d2.not_before == 0.0
    env.close()


def test_the_origin_store_judges_the_rest_at_send_at(tmp_path: Path, clock: Clock) -> None:
    # Two jobs share the origin: the second is handed the origin ahead only when the
    # shared row says its rest is over by the time it will send, not earlier.
    lead = 0.2
    a = Env(tmp_path, clock, name="job-a")
    b = Env(tmp_path, clock, name="job-b",
            config=FrontierConfig(params=PARAMS, dispatch_lead=lead))
    a.push("http://127.0.0.9/1")
    b.push("http://127.0.0.9/2")
    da = a.f.pop()
    assert da is not None
    a.f.settle(da.origin, da.token, start=T0, end=T0 + 0.2)  # a's rest: until T0 + 1.2
    st = b.store.try_lease("http://127.0.0.9", T0 + 0.5, 60.0, 1.0,
                           send_at=T0 + 1.0)
    assert not st.taken and st.retry_at == pytest.approx(T0 + 1.2)
    st = b.store.try_lease("http://127.0.0.9", T0 + 0.95, 60.0, 1.0,
                           send_at=T0 + 1.2 + DISPATCH_MARGIN)
    assert st.taken  # its time comes before it sends
    a.close()
    b.close()


def test_the_lead_is_at_most_a_quarter_of_the_rest(tmp_path: Path, clock: Clock) -> None:
    # A lead longer than the rest would keep the origin in flight all the time (handed
    # out again as soon as it settles): a cluster worker could never give it back.
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, dispatch_lead=5.0))
    env.push("http://127.0.0.1/1")
    env.push("http://127.0.0.1/2")
    d = env.f.pop()
    assert d is not None
    env.f.settle(d.origin, d.token, start=T0, end=T0)  # rest 1 s
    due = T0 + 1.0 + DISPATCH_MARGIN
    assert env.f.next_eligible() == pytest.approx(due - 0.25, abs=1e-6)
    clock.t = due - 0.26
    assert env.f.pop() is None
    clock.t = due - 0.24
    d2 = env.f.pop()
    assert d2 is not None and d2.not_before == pytest.approx(due, abs=1e-6)
    env.close()


def test_a_busy_lease_is_asked_again_at_its_time_not_ahead(tmp_path: Path, clock: Clock) -> None:
    # Another job holds the origin's lease, about to end: the retry (at its end) is not
    # moved ahead by the lead (a retry placed within the lead would be popped again at
    # once, without end: pop reads the clock once).
    a = Env(tmp_path, clock, name="job-a", config=FrontierConfig(params=PARAMS, lease_ttl=0.1))
    b = Env(tmp_path, clock, name="job-b",
            config=FrontierConfig(params=PARAMS, dispatch_lead=0.25))
    a.push("http://127.0.0.9/1")
    b.push("http://127.0.0.9/2")

    def count(key: str, n: int) -> None:
        b.stats.update({key: n})
        if b.stats["polite/frontier/lease_busy"] > 100:
            raise AssertionError("the busy lease is asked again and again in one pop")

    b.f.count = count
    assert a.f.pop() is not None  # a holds the lease, its request out
    assert b.f.pop() is None
    assert b.stats["polite/frontier/lease_busy"] == 1
    nxt = b.f.next_eligible()
    assert nxt is not None and nxt > clock.t
    a.close()
    b.close()


def test_the_origin_store_says_why_a_lease_is_refused(tmp_path: Path, clock: Clock) -> None:
    # The SQLite origin store, on a real file shared by two jobs: granted, the rest not
    # over (the row as this store last wrote it, and read afresh), held by another live
    # process.
    o = "http://127.0.0.9"
    a = OriginStore(tmp_path / "state.sqlite3", process_owner(), "run-a")
    b = OriginStore(tmp_path / "state.sqlite3", process_owner(), "run-b")
    got = a.try_lease(o, T0, 10.0, 1.0)
    assert got.answer is LeaseAnswer.GRANTED and got.taken
    held = b.try_lease(o, T0 + 1.0, 10.0, 1.0)
    assert held.answer is LeaseAnswer.HELD and not held.taken
    assert held.retry_at == pytest.approx(T0 + 2.0)  # now + the dead rest, before its end
    state = got.state
    state.next_allowed = T0 + 5.0
    a.release(state, T0 + 2.0)
    fast = a.try_lease(o, T0 + 3.0, 10.0, 1.0, state=state)  # a's own row, unchanged
    assert fast.answer is LeaseAnswer.RESTING and fast.retry_at == T0 + 5.0
    read = b.try_lease(o, T0 + 3.0, 10.0, 1.0)  # b reads the row
    assert read.answer is LeaseAnswer.RESTING and read.retry_at == T0 + 5.0
    ahead = b.try_lease(o, T0 + 4.9, 10.0, 1.0, send_at=T0 + 5.0)
    assert ahead.answer is LeaseAnswer.GRANTED
    # b's lease ended at T0 + 14.9 and was never given back: taken over, the origin
    # rests from now (its exchange may have just ended), then it is a's.
    later = a.try_lease(o, T0 + 20.0, 10.0, 1.0)
    assert later.answer is LeaseAnswer.RESTING and later.retry_at == T0 + 21.0
    assert a.try_lease(o, T0 + 21.0, 10.0, 1.0).answer is LeaseAnswer.GRANTED
    a.close()
    b.close()


class Answering:
    """The real origin store, but every lease refused with the given answer: the shared
    row says the origin rests until ``until``, and the time to ask again is that very
    time, whatever the answer (what no comparison of times could tell apart)."""

    def __init__(self, store: OriginStore, answer: LeaseAnswer, until: float) -> None:
        self.store, self.answer, self.until = store, answer, until
        self.asked: list[float] = []

    def __getattr__(self, name: str) -> object:
        return getattr(self.store, name)

    def try_lease(self, origin: str, now: float, ttl: float, dead_rest: float,
                  state: OriginState | None = None, *, send_at: float | None = None,
                  ) -> Lease:
        self.asked.append(now)
        assert self.asked.count(now) == 1, "asked again at once, without end"
        st = state if state is not None else OriginState(origin)
        st.next_allowed = self.until
        return Lease(self.answer, st, st.eligible_at())


def _rested_once(tmp_path: Path, clock: Clock, lead: float) -> Env:
    """A frontier with the given lead and two rows of one origin, the first fetched at
    T0 in no time: the origin is eligible at T0 + 1."""
    env = Env(tmp_path, clock, config=FrontierConfig(params=PARAMS, dispatch_lead=lead))
    for i in range(2):
        env.push(f"http://127.0.0.1/{i}")
    d = env.f.pop()
    assert d is not None
    env.f.settle(d.origin, d.token, start=T0, end=T0)
    return env


@pytest.mark.parametrize(("answer", "ahead"), [
    (LeaseAnswer.RESTING, True),
    (LeaseAnswer.HELD, False),
    (LeaseAnswer.NOT_OWNED, False),
])
def test_a_refused_lease_is_asked_again_by_its_answer(
        tmp_path: Path, clock: Clock, answer: LeaseAnswer, ahead: bool) -> None:
    # Refused while the origin rests: asked again ahead by the lead, as the process that
    # fetched asks. Held by another process or not this worker's: at the time the store
    # gave, not ahead, even when that time is the origin's eligible time.
    lead = 0.2
    env = _rested_once(tmp_path, clock, lead)  # eligible at T0 + 1
    until = T0 + 3.0
    env.f.origin_store = Answering(env.store, answer, until)  # type: ignore[assignment]
    clock.t = T0 + 1.0 + DISPATCH_MARGIN - lead  # handed out ahead: the lease is asked
    assert env.f.pop() is None
    assert env.stats["polite/frontier/lease_busy"] == 1
    assert env.f.next_eligible() == pytest.approx(
        until + DISPATCH_MARGIN - (lead if ahead else 0.0), abs=1e-6)
    env.close()


def test_a_rest_ending_within_the_lead_is_asked_again_after_it_not_at_once(
        tmp_path: Path, clock: Clock) -> None:
    # Refused while the origin rests, but the rest ends sooner than the lead: asked
    # again ahead, the place would be already due and the lease asked again at once.
    # The lead is left out: asked again at the rest's end, and not before.
    lead = 0.2
    env = _rested_once(tmp_path, clock, lead)  # eligible at T0 + 1
    clock.t = asked = T0 + 1.0 + DISPATCH_MARGIN - lead  # handed out ahead: the lease is asked
    # The store's rest ends within the lead (and no sooner than the one this process set,
    # which its host keeps too).
    store = Answering(env.store, LeaseAnswer.RESTING, T0 + 1.0)
    env.f.origin_store = store  # type: ignore[assignment]
    assert env.f.pop() is None
    assert env.f.pop() is None  # nothing due: the store is not asked again
    assert store.asked == [clock.t]
    assert env.f.next_eligible() == pytest.approx(store.until + DISPATCH_MARGIN, abs=1e-6)
    clock.t = store.until + DISPATCH_MARGIN
    assert env.f.pop() is None  # asked again at its time
    assert store.asked == [asked, clock.t]
    env.close()


def test_a_job_refused_by_another_jobs_rest_asks_again_ahead(
        tmp_path: Path, clock: Clock) -> None:
    # b's copy of the shared row is stale (a fetched meanwhile): the store answers that
    # the rest is not over, and b asks again ahead of the new time, by its lead.
    lead = 0.2
    a = Env(tmp_path, clock, name="job-a")
    b = Env(tmp_path, clock, name="job-b",
            config=FrontierConfig(params=PARAMS, dispatch_lead=lead))
    o = "http://127.0.0.9"
    b.push(f"{o}/b")
    db = b.f.pop()
    assert db is not None
    b.f.settle(o, db.token, start=T0, end=T0)  # b: eligible at T0 + 1
    b.push(f"{o}/b2")
    a.push(f"{o}/a")
    clock.t = T0 + 1.0 + DISPATCH_MARGIN
    da = a.f.pop()
    assert da is not None
    clock.t += 0.1
    a.f.settle(o, da.token, start=clock.t - 0.1, end=clock.t)  # the row: rest until +1
    assert b.f.pop() is None
    assert b.stats["polite/frontier/lease_busy"] == 1
    assert b.f.next_eligible() == pytest.approx(clock.t + 1.0 + DISPATCH_MARGIN - lead, abs=1e-6)
    a.close()
    b.close()
