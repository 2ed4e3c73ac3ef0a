"""An owner's stop for a refusal is kept with its group in Redis (``s:<crawl>``): a
worker that takes the group after its holder died stops the owner's hosts without
asking them again (before, it learnt the stop only from the next refusal). Two workers
on a real redis-server, an injected clock."""

from __future__ import annotations

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.store.redis_keys import alive_key, group_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import T0, TIMEOUT, TTL, offer, run, worker

# ruff: noqa: F811


def test_a_worker_taking_a_refused_owners_group_stops_its_hosts(redis_url: str) -> None:
    clock = Clock(T0)
    a = worker(redis_url, clock, "holder")
    offer(a, "http://www.example.org/1")
    offer(a, "http://cdn.example.org/1")
    a.run_batch()
    a.run_batch()
    a.frontier.stop("http://www.example.org", "403")
    assert a.frontier.stopped["http://cdn.example.org"] == OWNER_REFUSED
    a.run_batch()  # the stops written, the owner's with its group
    stop = a.shared.r.hget(group_key("example.org"), "s:bounds")
    assert stop is not None and bytes(stop).decode() == "403 from http://www.example.org"
    a.shared.r.delete(alive_key(a.shared.worker))  # the holder dies (kill -9)
    b = worker(redis_url, clock, "taker")
    offer(b, "http://new.example.org/1")  # another host of the owner, found later
    offer(b, "http://other.org/1")
    b.run_batch()
    sent = run([b], clock, clock.t + TTL + TIMEOUT + 30)
    assert b.frontier.stopped.get("http://new.example.org") == OWNER_REFUSED
    assert {s.origin for s in sent} == {"http://other.org"}
