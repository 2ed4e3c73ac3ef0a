"""A cluster crawl found over is not closed for good: a worker started later with the
same crawl name goes on with it, its origins' stops (``stop:<crawl>``) and its owners'
(``s:<crawl>`` in each group) still holding. This is why the owner's stop is not deleted
when the crawl is found over (docs/CLUSTER.md, "Owners"): deleted there, the later
worker would ask hosts of an owner that refused the crawl, while the refusing origin
itself stays stopped. A real redis-server, an injected clock."""

from __future__ import annotations

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.store.redis_keys import group_key
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import T0, offer, run, worker

# ruff: noqa: F811

WWW = "http://www.example.org"


def test_a_crawl_continued_after_it_was_over_keeps_its_owners_stop(redis_url: str) -> None:
    clock = Clock(T0)
    a = worker(redis_url, clock, "first")
    offer(a, f"{WWW}/1")
    offer(a, "http://other.org/1")
    a.run_batch()
    a.run_batch()
    a.frontier.stop(WWW, "403")
    sent = run([a], clock, clock.t + 30)
    assert {s.origin for s in sent} == {"http://other.org"}
    a.shared.mark_seeded()
    a.run_batch()
    # Over as the idle check finds it: seeded, nothing queued or claimed anywhere.
    assert a.active == 0 and a.shared.seeded()
    a.close(finished=True)
    stop = a.shared.r.hget(group_key("example.org"), "s:bounds")
    assert stop is not None and bytes(stop).decode() == f"403 from {WWW}"

    b = worker(redis_url, clock, "later")  # the same crawl, started after it was over
    offer(b, f"{WWW}/2")  # the refusing origin: its own stop refuses the row
    offer(b, "http://new.example.org/1")  # another host of its owner, found now
    offer(b, "http://more.org/1")
    b.run_batch()
    sent = run([b], clock, clock.t + 30)
    assert b.frontier.stopped.get("http://new.example.org") == OWNER_REFUSED
    assert {s.origin for s in sent} == {"http://more.org"}
