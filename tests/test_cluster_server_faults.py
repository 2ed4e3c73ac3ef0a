"""A server's places across a failed batch and a Redis restart: two workers on a real
redis-server, an injected clock (the helpers of tests/test_cluster_shared_bounds.py).

A batch that fails (Redis stopped or restarting) carries what it asked of the servers
as it carries rows: the next batch that goes through tells Redis again. Before, a
failed batch's server calls were lost: a worker whose site waited for a place never
asked again (the origin waits out of the heap until a place comes), and a give-back
applied in the worker as the plan was made stayed counted in Redis against every
other worker while its holder lived.

Also checked here, each passing before as after (what else could leave a worker with a
ready site and nothing sent after a restart): a restart that lost every key while a
place is held, and an ask refused by the guard after a restart (a server's hash that
outlived it grants nobody more than it held for a while).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import pytest

from polite_crawler.frontier.core import CONTENT, DISPATCH_MARGIN
from polite_crawler.frontier.redis_frontier import Plan, RedisFrontier, execute
from polite_crawler.store.redis_keys import server_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import (
    SERVER,
    T0,
    TTL,
    most_open,
    offer,
    on_one_server,
    out_on_the_server,
    run,
    worker,
)

if TYPE_CHECKING:
    from tests.redis_server import RedisServer

# ruff: noqa: F811


def failed_batch(w: RedisFrontier, server: RedisServer, plan: Plan | None = None) -> None:
    """One batch of ``w`` (``plan``, or one planned now) sent while Redis is stopped: it
    fails and is unplanned (what the scheduler does with a failed batch); Redis then
    starts again on its data (the AOF, fsync always: nothing lost)."""
    plan = plan if plan is not None else w.plan()
    server.stop_process()
    try:
        with pytest.raises(Exception, match=r"(?i)connect"):
            execute(w.shared, plan, w.ttl)
        w.unplan(plan)
    finally:
        server.start()


def test_a_place_asked_for_in_a_failed_batch_is_asked_for_again(
        redis_server: RedisServer) -> None:
    """The worker's site waits for the server's place; the batch asking for it fails
    (Redis restarting): the batches after it ask again, and the site is crawled.
    Before, the ask was lost with the batch and the site waited for ever ("1 sites
    ready", nothing sent)."""
    clock = Clock(T0)
    w = worker(redis_server.url, clock, "w0", limit=1, address_of=lambda name: SERVER)
    for p in range(2):
        offer(w, f"http://127.0.9.1:8000/{p}")
    w.run_batch()  # the origin taken
    w.run_batch()  # its rows claimed: nothing more of the origin to ask Redis
    clock.t += DISPATCH_MARGIN
    assert w.frontier.pop() is None  # no place of the server yet: asked in the next batch
    plan = w.plan()
    assert [(c.address, c.want) for c in plan.servers] == [(SERVER, 1)]
    assert plan.syncs == []
    failed_batch(w, redis_server, plan)
    w.shared.register(clock(), TTL)
    sent = run([w], clock, clock.t + 20)
    assert [s.origin for s in sent] == ["http://127.0.9.1:8000"] * 2


def test_places_given_back_in_a_failed_batch_are_given_back_by_the_next(
        redis_server: RedisServer) -> None:
    """Worker a holds the server's one place and its site runs out of work: the batch
    that gives the place back fails. The place stopped counting in a as the plan was
    made; the next batch must give it back in Redis, or b's site (same server) never
    gets it while a lives."""
    clock = Clock(T0)
    a, b = on_one_server(redis_server.url, clock, 1)
    d = out_on_the_server(a, clock, "http://127.0.9.1:8000/0")
    assert d is not None and d.kind == CONTENT
    clock.t += 0.2
    a.frontier.settle(d.origin, d.token, start=clock.t - 0.2, end=clock.t)
    a.frontier.done(d.row.id if d.row else None)
    key = server_key(SERVER)
    r = a.shared.r
    for _ in range(400):  # idle: the place is kept a while, then given back
        clock.t += 0.5
        plan = a.plan()
        if any(c.want < c.held for c in plan.servers):
            failed_batch(a, redis_server, plan)
            break
        a.apply(execute(a.shared, plan, a.ttl))
    else:
        raise AssertionError("the place was never given back")
    for w in (a, b):
        w.shared.register(clock(), TTL)
    assert r.hget(key, f"h:{a.shared.worker}") == b"1"  # Redis still counts it
    offer(b, "http://127.0.9.2:8000/0")
    b.run_batch()
    clock.t += DISPATCH_MARGIN
    sent = run([a, b], clock, clock.t + 30)
    assert r.hget(key, f"h:{a.shared.worker}") is None
    assert [(s.worker, s.origin) for s in sent] == [(1, "http://127.0.9.2:8000")]


def test_a_restart_that_lost_every_key_while_a_place_is_held_leaves_no_worker_stuck(
        redis_server: RedisServer) -> None:
    """Redis restarts empty (no persistence, or its data lost) while worker a holds the
    server's place with a request out: a finds its lease gone and rejoins under a new
    identity, its old places lapse with its lease, and rows queued after the restart
    on the server's sites are crawled by both workers, one at a time."""
    clock = Clock(T0)
    a, b = on_one_server(redis_server.url, clock, 1)
    d = out_on_the_server(a, clock, "http://127.0.9.1:8000/0")
    assert d is not None and d.kind == CONTENT
    r = a.shared.r
    r.flushall()  # what survives the restart: nothing
    redis_server.restart()
    old = a.shared.worker
    clock.t += 0.2
    a.frontier.settle(d.origin, d.token, start=clock.t - 0.2, end=clock.t)
    a.frontier.done(d.row.id if d.row else None)
    a.run_batch()
    assert a.shared.worker != old  # its lease was lost with the keys: a new identity
    b.run_batch()
    for p in range(2):
        offer(a, f"http://127.0.9.1:8000/n{p}")
        offer(b, f"http://127.0.9.2:8000/n{p}")
    sent = run([a, b], clock, clock.t + 60)
    assert sorted((s.worker, s.origin) for s in sent) == [
        (0, "http://127.0.9.1:8000"), (0, "http://127.0.9.1:8000"),
        (1, "http://127.0.9.2:8000"), (1, "http://127.0.9.2:8000")]
    assert most_open(sent) == 1


def test_a_place_refused_in_the_restart_window_is_asked_for_until_granted(
        redis_url: str) -> None:
    """The server's hash outlived a restart of Redis (its recorded start is not this
    one's): for the restart window it grants nobody more than it held, so the worker's
    ask is refused. The worker asks again in every batch, with nothing new to say, and
    sends once the window is over."""
    clock = Clock(T0)
    w = worker(redis_url, clock, "w0", limit=1, address_of=lambda name: SERVER)
    r = w.shared.r
    r.hset(server_key(SERVER), mapping={"lim": 1, "r": 1})  # a start long ago
    w.restart_window = 1e9  # Redis started moments ago, as far as the guard knows
    for p in range(2):
        offer(w, f"http://127.0.9.1:8000/{p}")
    w.run_batch()
    w.run_batch()
    clock.t += DISPATCH_MARGIN
    for _ in range(5):
        assert w.frontier.pop() is None
        plan = w.plan()
        assert [(c.address, c.want, c.held) for c in plan.servers] == [(SERVER, 1, 0)]
        w.apply(execute(w.shared, plan, w.ttl))
        clock.t += 0.5
    w.restart_window = 0.0  # the window is over
    sent = run([w], clock, clock.t + 20)
    assert [s.origin for s in sent] == ["http://127.0.9.1:8000"] * 2


def test_the_servers_restart_window_counts_redis_whole_second_uptime(
        redis_url: str) -> None:
    """Redis keeps its start and its clock in whole seconds: an uptime read as u may be
    up to a second long, Redis up only u - 1 seconds. A server's hash that outlived a
    restart grants nobody more while that least uptime is inside the window: an
    uptime read half a second past the window is still guarded, one and a half past
    is not."""
    clock = Clock(T0)
    w = worker(redis_url, clock, "w0", limit=1, address_of=lambda name: SERVER)
    r = w.shared.r
    r.hset(server_key(SERVER), mapping={"lim": 1, "r": 1})  # a start long ago
    w.restart_window = 1e9  # guarded while the origin is taken and its rows claimed
    for p in range(2):
        offer(w, f"http://127.0.9.1:8000/{p}")
    w.run_batch()
    w.run_batch()
    clock.t += DISPATCH_MARGIN

    def uptime() -> int:
        return int(r.info("server")["uptime_in_seconds"])

    while uptime() < 1:  # Redis's first second: it has been up at least no time
        time.sleep(0.05)
    for _ in range(5):  # a batch the uptime's tick did not cross
        assert w.frontier.pop() is None  # no place yet: asked for in the next batch
        up = uptime()
        w.restart_window = up - 0.5
        plan = w.plan()
        assert [(c.address, c.want, c.held) for c in plan.servers] == [(SERVER, 1, 0)]
        w.apply(execute(w.shared, plan, w.ttl))
        if uptime() == up:
            break
        clock.t += 0.5
    else:
        raise AssertionError("the uptime ticked in every batch")
    assert w.frontier.pop() is None  # refused: Redis may have started 0.5 s inside
    w.restart_window = uptime() - 1.5  # Redis started at least 0.5 s before the window
    sent = run([w], clock, clock.t + 20)
    assert [s.origin for s in sent] == ["http://127.0.9.1:8000"] * 2
