"""A server's and an owner's load bounded across cluster workers as in one process:
two workers on a real redis-server, an injected clock, exchanges of a fixed length
settled as the clock passes their end.

- Hosts of one server address held by two workers: never more of their requests open
  on the address at once than its limit, and the rest after a round (five times its
  longest answer) between one worker's round and the next, whichever worker sends it.
- Hosts of one owner (registrable domain) queued by two workers: one worker holds them
  all (the owner's group), so the owner's cap on requests at once and its daily budget
  hold across both; a worker that takes the group later starts from the count Redis
  holds.
"""

from __future__ import annotations

import itertools
import random
import socket
import time
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from demo.spans import most_open as spans_most_open
from polite_crawler.frontier.core import CONTENT, DISPATCH_MARGIN, Dispatch, FrontierConfig
from polite_crawler.frontier.dupefilter import url_fingerprint
from polite_crawler.frontier.redis_frontier import RedisFrontier
from polite_crawler.frontier.redis_shared import RedisShared
from polite_crawler.policy.rest import RestParams
from polite_crawler.policy.servers import ServerParams
from polite_crawler.store.redis_keys import alive_key, mark_key, server_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)

if TYPE_CHECKING:
    from collections.abc import Callable

# ruff: noqa: F811

T0 = 1_790_000_000.0
TTL = 30.0
TIMEOUT = 5.0
DURATION = 0.2  # every exchange
PARAMS = RestParams(rest_page=1.0, rest_api=0.5, duration_factor=5.0, jitter=0.0)
SERVER = "10.20.30.40"  # the address every host below resolves to


def worker(url: str, clock: Clock, name: str, *, limit: int = 64, budget: int = 10_000,
           owner_cap: int = 2, address_of: Callable[[str], str | None] | None = None,
           ) -> RedisFrontier:
    shared = RedisShared(url, "bounds", f"{socket.gethostname()}:{name}")
    shared.register(clock(), TTL)
    config = FrontierConfig(params=PARAMS, budget=budget, owner_concurrency=owner_cap,
                            servers=ServerParams(max_limit=limit))
    w = RedisFrontier(shared, config, clock=clock, ttl=TTL, interval=0.5,
                      exchange_timeout=TIMEOUT, clock_skew=0.0, rng=random.Random(0),
                      address_of=address_of)
    w.origin_store.valid_until = clock() + TTL - w.margin
    w.restart_window = 0.0  # the test clock runs far ahead of this Redis's uptime
    return w


def offer(w: RedisFrontier, url: str) -> None:
    origin = "/".join(url.split("/", 3)[:3])
    if w.frontier.queue.add_seen_many([url_fingerprint(url)])[0]:
        w.frontier.push(origin, 0, url, url.encode())


@dataclass
class Sent:
    worker: int
    origin: str
    start: float
    end: float


def run(workers: list[RedisFrontier], clock: Clock, until: float,
        duration: float = DURATION) -> list[Sent]:
    """Every content request the workers send until ``until``: each lasts ``duration``
    and is settled (and done) once the clock passes its end; a batch every 0.5 s."""
    out: list[Sent] = []
    open_: list[tuple[int, Dispatch, float]] = []
    next_batch = clock.t
    while clock.t < until:
        for i, w in enumerate(workers):
            f = w.frontier
            for k, d, start in list(open_):
                if k == i and start + duration <= clock.t:
                    open_.remove((k, d, start))
                    f.settle(d.origin, d.token, start=start, end=start + duration)
                    f.done(d.row.id if d.row else None)
        if clock.t >= next_batch:
            for w in workers:
                w.origin_store.valid_until = clock.t + TTL - w.margin
                w.run_batch()
            next_batch = clock.t + 0.5
        for i, w in enumerate(workers):
            while (d := w.frontier.pop()) is not None:
                if d.kind != CONTENT or d.row is None:
                    w.frontier.release(d.origin, d.token)
                    continue
                start = max(clock.t, d.not_before)
                out.append(Sent(i, d.origin, start, start + duration))
                open_.append((i, d, start))
        clock.t += 0.05
    return out


def most_open(sent: list[Sent]) -> int:
    return spans_most_open((s.start, s.end) for s in sent)


def out_on_the_server(w: RedisFrontier, clock: Clock, url: str) -> Dispatch | None:
    """The worker queues ``url`` and sends it: its origin taken, then the server's place
    asked for and granted (a batch each); the request stays out."""
    offer(w, url)
    w.run_batch()
    clock.t += DISPATCH_MARGIN
    d = None
    for _ in range(3):
        w.run_batch()
        d = d or w.frontier.pop()
    return d


def on_one_server(url: str, clock: Clock, limit: int) -> list[RedisFrontier]:
    """Two workers whose every host resolves to SERVER, its limit at most ``limit``."""
    return [worker(url, clock, f"w{i}", limit=limit, address_of=lambda name: SERVER)
            for i in range(2)]


def spread(workers: list[RedisFrontier], clock: Clock, hosts: list[str], pages: int) -> None:
    """The hosts split between the workers in order, ``pages`` rows each, queued."""
    per = len(hosts) // len(workers)
    for i, w in enumerate(workers):
        for host in hosts[per * i:per * (i + 1)]:
            for p in range(pages):
                offer(w, f"{host}/{p}")
        w.run_batch()
    clock.t += DISPATCH_MARGIN


def test_two_workers_never_open_more_on_a_server_than_its_limit(redis_url: str) -> None:
    """Six hosts on one address (each its own owner), three queued by each worker: the
    address's limit (1 here) holds across both, and so does the round's rest (5 x
    DURATION after the round's answer) whichever worker sends next. Each worker alone
    would keep the bound; before the places were shared, together they sent two at once."""
    clock = Clock(T0)
    workers = on_one_server(redis_url, clock, 1)
    hosts = [f"http://127.0.9.{n}:8000" for n in range(1, 7)]
    spread(workers, clock, hosts, 4)
    sent = run(workers, clock, clock.t + 90)
    assert Counter(s.origin for s in sent) == dict.fromkeys(hosts, 4)  # every row, once
    assert {s.worker for s in sent} == {0, 1}  # both workers sent to the server
    assert most_open(sent) == 1
    starts = sorted(sent, key=lambda s: s.start)
    gaps = [b.start - a.end for a, b in itertools.pairwise(starts)]
    assert min(gaps) >= 5 * DURATION - 1e-6, sorted(gaps)[:5]


def test_a_fast_server_grows_one_limit_shared_by_both_workers(redis_url: str) -> None:
    """Flat latency of a fast server (80 ms: a slow one is not probed,
    policy.servers.probe_worth): the limit grows while sites wait, up to its maximum
    (3), and the two workers together never open more than that on the address."""
    clock = Clock(T0)
    workers = on_one_server(redis_url, clock, 3)
    hosts = [f"http://127.0.9.{n}:8000" for n in range(1, 13)]
    spread(workers, clock, hosts, 6)
    sent = run(workers, clock, clock.t + 400, duration=0.08)
    assert Counter(s.origin for s in sent) == dict.fromkeys(hosts, 6)
    assert most_open(sent) == 3  # it grew, and no further
    assert {s.worker for s in sent} == {0, 1}


def test_hosts_of_one_owner_share_its_cap_and_budget_across_workers(redis_url: str) -> None:
    """Four hosts of example.org (each on its own address), two queued by each worker:
    the worker that holds the owner's group takes the other's origins too, so at most
    two requests of the owner are open at once and its daily budget (5) is spent once
    across both workers. A third worker that takes the group after the first gave it
    back starts from the owner's count in Redis: nothing more is sent."""
    clock = Clock(T0)
    workers = [worker(redis_url, clock, f"w{i}", budget=5, owner_cap=2,
                      address_of=lambda name: f"addr:{name}") for i in range(2)]
    hosts = [f"http://h{n}.example.org" for n in range(1, 5)]
    spread(workers, clock, hosts, 3)
    sent = run(workers, clock, clock.t + 60)
    assert len(sent) == 5  # the owner's budget, across its hosts and both workers
    assert most_open(sent) <= 2
    for w in workers:
        w.close(finished=False)
    late = worker(redis_url, clock, "w3", budget=5, address_of=lambda name: f"addr:{name}")
    offer(late, "http://h9.example.org/new")
    late.run_batch()
    clock.t += DISPATCH_MARGIN
    more = run([late], clock, clock.t + 20)
    assert more == []
    assert late.frontier.admit("http://h9.example.org") == "budget_exhausted"


def test_a_dead_workers_places_wait_its_lease_and_the_timeout(redis_url: str) -> None:
    """A worker killed (its lease key gone) while it holds the server's place: the other
    worker gets the place only after the dead one's lease end plus the exchange timeout
    (a request of it may have been out until then)."""
    clock = Clock(T0)
    a, b = (worker(redis_url, clock, f"w{i}", limit=1, address_of=lambda name: SERVER)
            for i in range(2))
    for p in range(3):
        offer(a, f"http://127.0.9.1:8000/{p}")
    a.run_batch()
    clock.t += DISPATCH_MARGIN
    a.run_batch()  # asks for a place of the server
    d = a.frontier.pop()
    if d is None:
        a.run_batch()
        d = a.frontier.pop()
    assert d is not None and d.kind == CONTENT
    killed_at = clock.t
    a.shared.r.delete(alive_key(a.shared.worker))  # kill -9, a request out
    for p in range(3):
        offer(b, f"http://127.0.9.2:8000/{p}")
    b.run_batch()
    sent = run([b], clock, clock.t + TTL + TIMEOUT + 20)
    assert sent
    assert min(s.start for s in sent) >= killed_at + TTL - a.margin + TIMEOUT - 1.0


def test_a_demand_for_places_is_withdrawn_when_its_origins_leave(redis_url: str) -> None:
    """A worker refused a place (another holds it) is recorded as waiting; when its
    origins of the server leave it (given back, taken by another), its next batch
    withdraws the demand: a stale one would keep the place from every later worker."""
    clock = Clock(T0)
    a, b = on_one_server(redis_url, clock, 1)
    assert out_on_the_server(a, clock, "http://127.0.9.1:8000/0") is not None
    offer(b, "http://127.0.9.2:8000/0")
    for _ in range(3):
        b.run_batch()
        assert b.frontier.pop() is None
    key = server_key(SERVER)
    r = b.shared.r
    assert r.hget(key, f"d:{b.shared.worker}") is not None  # waiting, recorded
    b.frontier.forget_origin("http://127.0.9.2:8000")  # its origin went elsewhere
    b.run_batch()
    assert r.hget(key, f"d:{b.shared.worker}") is None


def test_after_a_restart_a_server_that_outlived_it_grants_nobody_more(redis_server) -> None:
    """A grant Redis lost with its log's last second may still be in use: for the
    restart window, a server hash from before the restart grants no worker more places
    than it holds (its holder asserts its own again); without the restart, the same ask
    is granted."""
    clock = Clock(T0)
    a, b = on_one_server(redis_server.url, clock, 1)
    for w in (a, b):
        w.restart_window = 60.0
    assert out_on_the_server(a, clock, "http://127.0.9.1:8000/0") is not None
    key = server_key(SERVER)
    time.sleep(3.5)  # Redis's start, as the hash recorded it, well behind the next one
    r = a.shared.r
    r.hdel(key, f"h:{a.shared.worker}")  # what the lost second held: a's grant,
    r.delete(mark_key(a.shared.worker))  # and a's batches' count
    redis_server.restart()
    for w in (a, b):
        w.shared.register(clock(), TTL)
    offer(b, "http://127.0.9.2:8000/0")
    for _ in range(3):
        b.run_batch()
        assert b.frontier.pop() is None  # guarded: a may hold the place, unknown here
    a.run_batch()  # its batch counter finds the log cut back:
    a.run_batch()  # a asserts what it holds
    assert r.hget(key, f"h:{a.shared.worker}") == b"1"
