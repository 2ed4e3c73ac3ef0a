"""On a cluster ``scrapy unblock`` ends an owner's stop for the origins stopped for it
(``stop:<crawl>`` = ``owner_refused``) as well as the group's (``s:<crawl>``), so an
origin no worker holds is asked again when a page finds it. A real redis-server, the
command as the operator runs it, workers on an injected clock."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.store.redis_keys import group_key, origin_key
from tests.clock import Clock
from tests.commands_util import scrapy
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import T0, offer, run, worker

if TYPE_CHECKING:
    from polite_crawler.frontier.redis_frontier import RedisFrontier

# ruff: noqa: F811

WWW = "http://www.example.org"
CDN = "http://cdn.example.org"
NEW = "http://new.example.org"


def _refused(a: RedisFrontier, clock: Clock) -> None:
    """www.example.org and cdn.example.org held by ``a``; www refuses (403): the owner
    stops, cdn with it, and the stops are written (the owner's with its group)."""
    offer(a, f"{WWW}/1")
    offer(a, f"{CDN}/1")
    a.run_batch()
    a.run_batch()
    a.frontier.stop(WWW, "403")
    assert a.frontier.stopped[CDN] == OWNER_REFUSED
    a.run_batch()
    assert a.shared.r.hexists(group_key("example.org"), "s:bounds")


def _unblock(url: str) -> None:
    done = scrapy("unblock", WWW, "-s", f"POLITE_FRONTIER={url}")
    assert done.returncode == 0, done.stderr


def test_an_origin_no_worker_holds_is_asked_again(redis_url: str) -> None:
    """cdn.example.org was stopped for its owner and given back; after the unblock a
    page found by another worker queues it again and it is sent (its ``stop:<crawl>``
    deleted with the owner's stop). www keeps its own stop."""
    clock = Clock(T0)
    a = worker(redis_url, clock, "holder")
    _refused(a, clock)
    a.close(finished=False)
    r = a.shared.r
    _unblock(redis_url)
    assert not r.hexists(origin_key(CDN), "stop:bounds")
    assert r.hget(origin_key(WWW), "stop:bounds") == b"403"
    b = worker(redis_url, clock, "taker")
    offer(b, f"{CDN}/2")
    b.run_batch()
    sent = run([b], clock, clock.t + 30)
    assert [s.origin for s in sent] == [CDN]
