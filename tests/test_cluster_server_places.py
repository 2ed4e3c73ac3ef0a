"""A server's one place handed between two waiting workers, step by step: a real
redis-server, an injected clock (the helpers of tests/test_cluster_shared_bounds.py).

- A place given back goes out of use in the worker as the batch is planned, not when
  its answer comes: the batch goes out on a thread, and Redis may grant the place to
  the other worker before the answer is applied.
- A place granted while the other worker waits is kept for a turn: until a round of it
  is over, or a third of a lease after it could first be used, not given back in the
  next batch.
"""

from __future__ import annotations

from polite_crawler.frontier.core import CONTENT, Dispatch
from polite_crawler.frontier.redis_frontier import RedisFrontier, execute
from polite_crawler.store.redis_keys import server_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import (
    DURATION,
    SERVER,
    T0,
    TTL,
    offer,
    on_one_server,
    out_on_the_server,
)

# ruff: noqa: F811

A_SITE = "http://127.0.9.1:8000"
B_SITE = "http://127.0.9.2:8000"


def answered(w: RedisFrontier, d: Dispatch, clock: Clock) -> None:
    """The request ``d`` took DURATION and ended now: settled and done."""
    w.frontier.settle(d.origin, d.token, start=clock.t - DURATION, end=clock.t)
    w.frontier.done(d.row.id if d.row else None)


def batch(w: RedisFrontier, clock: Clock) -> None:
    w.origin_store.valid_until = clock.t + TTL - w.margin
    w.run_batch()


def until_granted(holder: RedisFrontier, workers: list[RedisFrontier], clock: Clock,
                  steps: int) -> None:
    """Batches of ``workers`` in turn, 0.1 s apart, until ``holder`` holds the place."""
    key = server_key(SERVER)
    for _ in range(steps):
        clock.t += 0.1
        for w in workers:
            batch(w, clock)
        if holder.shared.r.hget(key, f"h:{holder.shared.worker}") == b"1":
            return
    raise AssertionError("the place never went to the worker waiting for it")


def a_holds_b_waits(url: str, clock: Clock) -> tuple[RedisFrontier, RedisFrontier]:
    """Worker a has sent on the server's one place and had the answer; worker b's site
    on the same server waits for the place (its demand recorded, a nudged)."""
    a, b = on_one_server(url, clock, 1)
    for p in range(1, 4):
        offer(a, f"{A_SITE}/{p}")
    d = out_on_the_server(a, clock, f"{A_SITE}/0")
    assert d is not None and d.kind == CONTENT
    for p in range(4):
        offer(b, f"{B_SITE}/{p}")
    for _ in range(3):
        batch(b, clock)
        assert b.frontier.pop() is None
    assert b.shared.r.hget(server_key(SERVER), f"d:{b.shared.worker}") is not None
    clock.t += DURATION
    answered(a, d, clock)
    return a, b


def test_a_place_given_back_is_not_used_while_its_batch_is_out(redis_url: str) -> None:
    """a's round is over and b waits: a's next plan gives the place back. Between the
    plan and its answer (the batch on its thread), a's site comes due, and Redis has
    granted the place to b, who sends: a must not send on it too. Before, the place
    counted in a until the answer was applied, and both sent at once."""
    clock = Clock(T0)
    a, b = a_holds_b_waits(redis_url, clock)
    for _ in range(20):
        clock.t += 0.5
        plan = a.plan()
        if any(c.want < c.held for c in plan.servers):
            break
        a.apply(execute(a.shared, plan, a.ttl))
    else:
        raise AssertionError("a never gave the place back")
    out = execute(a.shared, plan, a.ttl)  # on the batch thread: Redis frees the place
    clock.t += 5.0  # every rest over: a's site and the server's round
    batch(b, clock)
    got = b.frontier.pop()
    assert got is not None and got.origin == B_SITE  # b has the place, and sends
    assert a.frontier.pop() is None  # a does not: its place is given back
    a.apply(out)
    assert a.frontier.pop() is None


def test_a_place_granted_while_another_waits_is_kept_for_a_turn(redis_url: str) -> None:
    """b is granted the place a gave back, with a's round's rest to wait before its
    first request; a waits for the place again (b is nudged). b keeps the place through
    that rest and sends its round; only then is the place a's turn again. Before, b gave
    the place back in its next batch (its round "over": none under way), and the place
    went back and forth between the two without either sending."""
    clock = Clock(T0)
    a, b = a_holds_b_waits(redis_url, clock)
    key = server_key(SERVER)
    r = a.shared.r
    until_granted(b, [a, b], clock, 20)
    assert a.frontier.pop() is None
    batch(a, clock)  # a waits for the place again: b is nudged
    sent = None
    while sent is None:
        assert r.hget(key, f"h:{b.shared.worker}") == b"1", "b gave its turn away unused"
        clock.t += 0.1
        batch(a, clock)
        batch(b, clock)
        sent = b.frontier.pop()
        assert clock.t < T0 + 120
    assert sent.origin == B_SITE
    clock.t += DURATION
    answered(b, sent, clock)
    until_granted(a, [b, a], clock, 40)  # b's round is over: the turn goes back to a
    assert r.hget(key, f"h:{b.shared.worker}") is None
