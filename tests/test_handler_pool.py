"""The download handler's connection pool: idle kept-alive connections follow the
requests in flight (closed after a rest longer than the keep-alive time, after that time
idle, and beyond a cap for all hosts together), and running out of descriptors is told
apart from a site's failure.

The pool is the real one on Twisted's test clock; the connections are stand-ins with
the two things the pool touches (their state and their transport's close)."""

from __future__ import annotations

import errno
import math
from typing import Any

import pytest
from twisted.internet import error
from twisted.internet.task import Clock

from polite_crawler.extensions.descriptors import exhaustion_in
from polite_crawler.handlers import _GuardedPool
from polite_crawler.policy.descriptors import keep_for, plan_descriptors


class _Transport:
    def __init__(self) -> None:
        self.closed = False

    def loseConnection(self) -> None:
        self.closed = True


class _Connection:
    state = "QUIESCENT"

    def __init__(self) -> None:
        self.transport = _Transport()


def _pool(keep: float = 4.0, cap: int = 256) -> tuple[_GuardedPool, Clock, list[str]]:
    clock = Clock()
    counted: list[str] = []
    pool = _GuardedPool(clock, persistent=True, count=counted.append)
    pool.maxPersistentPerHost = 1
    pool.cachedConnectionTimeout = keep
    pool.max_idle = cap
    return pool, clock, counted


def _key(i: int) -> tuple[str, str, int]:
    return ("http", f"127.0.9.{i}", 80)


def test_an_idle_connection_is_closed_after_the_keep_alive_time_and_its_key_forgotten() -> None:
    pool, clock, counted = _pool(keep=4.0)
    conn = _Connection()
    pool._putConnection(_key(1), conn)
    clock.advance(3.9)
    assert not conn.transport.closed
    clock.advance(0.2)
    assert conn.transport.closed
    assert pool._connections == {} and pool._timeouts == {}
    assert counted == ["polite/connections/closed/idle"]


def test_a_connection_is_closed_at_once_when_its_hosts_rest_is_longer() -> None:
    pool, clock, counted = _pool(keep=4.0)
    short, long_ = _Connection(), _Connection()
    pool._putConnection(_key(1), short)
    pool._putConnection(_key(2), long_)
    pool.settle(short, keep_for(3.0, 4.0))
    pool.settle(long_, keep_for(10.0, 4.0))
    assert not short.transport.closed
    assert long_.transport.closed
    assert list(pool._connections) == [_key(1)]
    assert counted == ["polite/connections/closed/rest"]
    assert not clock.getDelayedCalls()[0].cancelled


def test_beyond_the_cap_the_longest_idle_connection_is_closed() -> None:
    pool, _clock, counted = _pool(cap=2)
    conns = [_Connection() for _ in range(3)]
    for i, conn in enumerate(conns):
        pool._putConnection(_key(i), conn)
    assert [c.transport.closed for c in conns] == [True, False, False]
    assert counted == ["polite/connections/closed/cap"]
    assert len(pool._timeouts) == 2


def test_a_kept_connection_is_handed_out_again_and_no_longer_idle() -> None:
    pool, clock, _counted = _pool()
    conn = _Connection()
    pool._putConnection(_key(1), conn)
    got: list[Any] = []
    pool.getConnection(_key(1), None).addCallback(got.append)  # type: ignore[arg-type]
    assert got == [conn]
    assert pool._connections == {} and pool._timeouts == {}
    clock.advance(10)
    assert not conn.transport.closed  # its idle timer went with it


def test_no_idle_connection_kept_when_the_budget_leaves_none() -> None:
    pool, _clock, _counted = _pool(cap=plan_descriptors(128, 128, 256).idle)
    conn = _Connection()
    pool._putConnection(_key(1), conn)
    assert conn.transport.closed and pool._connections == {}


@pytest.mark.parametrize(("exc", "found"), [
    (OSError(errno.EMFILE, "Too many open files"), True),
    (OSError(errno.ENFILE, "Too many open files in system"), True),
    (error.ConnectBindError(errno.EMFILE, "Too many open files"), True),  # type: ignore[no-untyped-call]
    (error.ConnectionRefusedError(), False),  # type: ignore[no-untyped-call]
    (OSError(errno.ECONNRESET, "reset"), False),
])
def test_running_out_of_descriptors_is_told_apart(exc: BaseException, found: bool) -> None:
    wrapped = RuntimeError("while connecting")
    wrapped.__cause__ = exc
    assert (exhaustion_in(wrapped) is not None) is found


def test_one_idle_connection_a_host_the_older_closed() -> None:
    pool, _clock, _counted = _pool()
    first, second = _Connection(), _Connection()
    pool._putConnection(_key(1), first)
    pool._putConnection(_key(1), second)
    assert first.transport.closed and not second.transport.closed
    assert pool._connections == {_key(1): [second]}
    assert list(pool._timeouts) == [second]


def test_a_connection_is_closed_at_once_when_its_origins_next_request_is_further_away(
) -> None:
    """The gate settles the exchange and tells when the origin's next request may go
    (KeptConnections): beyond the keep-alive time, its idle connection is closed now;
    another origin's, and one whose next request comes sooner, are kept."""
    from polite_crawler.handlers import KeptConnections

    pool, clock, counted = _pool(keep=4.0)
    kept = KeptConnections(4.0)
    kept.pools.append(pool)
    a, b, c = _Connection(), _Connection(), _Connection()
    for i, (conn, origin) in enumerate([(a, "http://a"), (b, "http://b"), (c, "http://c")]):
        pool._putConnection(_key(i), conn)
        pool.settle(conn, keep_for(1.0, 4.0), origin)  # the base rest is short: kept
    kept.next_request_in("http://a", 1.0)  # a short rest: kept
    kept.next_request_in("http://b", 12.0)  # Crawl-delay, a backoff: closed now
    kept.next_request_in("http://c", math.inf)  # stopped: closed now
    kept.next_request_in("http://unknown", 30.0)  # no idle connection: nothing
    assert [x.transport.closed for x in (a, b, c)] == [False, True, True]
    assert counted == ["polite/connections/closed/rest"] * 2
    assert list(pool._connections) == [_key(0)]
    assert pool._by_origin == {"http://a": a} and pool._origin_of == {a: "http://a"}
    clock.advance(4.1)  # and a's, unused, after the keep-alive time
    assert a.transport.closed and pool._by_origin == {} and pool._origin_of == {}


def test_a_connection_handed_out_again_is_no_longer_its_last_origins() -> None:
    from polite_crawler.handlers import KeptConnections

    pool, _clock, counted = _pool(keep=4.0)
    kept = KeptConnections(4.0)
    kept.pools.append(pool)
    conn = _Connection()
    pool._putConnection(_key(1), conn)
    pool.settle(conn, 4.0, "http://a")
    pool.getConnection(_key(1), None)  # type: ignore[arg-type]  # the next request took it
    kept.next_request_in("http://a", 10.0)  # an older exchange's news: not this one's
    assert not conn.transport.closed and counted == []
    assert pool._by_origin == {} and pool._origin_of == {}
