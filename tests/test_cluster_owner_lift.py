"""On a cluster a worker that holds an owner stopped ends the stop once ``scrapy
unblock`` lifted it: the lifts' count (``P:lifts``) is read in every batch, and when it
moved the worker reads the groups of the owners it holds stopped; an owner's group
without its stop for the crawl (``s:<crawl>``) ends the stop here, and the origins
stopped for it are unstopped in Redis too. A refusal after the lift stops the owner
again. A real redis-server, the command as the operator runs it, workers on an
injected clock."""

from __future__ import annotations

import logging
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
    import pytest

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


def test_the_holder_asks_the_owners_hosts_after_scrapy_unblock(
        redis_url: str, caplog: pytest.LogCaptureFixture) -> None:
    """The holder of the owner's group ends the stop within two batches of the unblock
    (one reads the lifts' count, the next the group), logs it, and sends the owner's
    pages found afterwards; www's own stop stays for the crawl. (Before: the holder
    kept the owner stopped while it held it.)"""
    clock = Clock(T0)
    a = worker(redis_url, clock, "holder")
    _refused(a, clock)
    _unblock(redis_url)
    with caplog.at_level(logging.WARNING, logger="polite_crawler.frontier.core"):
        a.run_batch()
        a.run_batch()
    assert CDN not in a.frontier.stopped
    assert a.frontier.stopped.get(WWW) == "403"
    assert any("The stop of owner example.org (403 from http://www.example.org) was "
               "lifted" in r.getMessage() for r in caplog.records)
    offer(a, f"{CDN}/2")
    offer(a, f"{NEW}/1")
    sent = run([a], clock, clock.t + 30)
    assert sorted(s.origin for s in sent) == [CDN, NEW]


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


def test_a_refusal_after_the_lift_stops_the_owner_again(redis_url: str) -> None:
    """After the lift cdn refuses: the owner stops again, in the holder and its group,
    and the batches after do not end this later stop."""
    clock = Clock(T0)
    a = worker(redis_url, clock, "holder")
    _refused(a, clock)
    _unblock(redis_url)
    a.run_batch()
    a.run_batch()
    assert CDN not in a.frontier.stopped
    offer(a, f"{NEW}/1")
    a.run_batch()  # new.example.org taken: in the owner's group, held here
    assert NEW in a.owned()
    clock.t += 1.0
    a.frontier.stop(CDN, "402")
    assert a.frontier.stopped.get(NEW) == OWNER_REFUSED
    a.shared.r.incr("polite:lifts")  # another owner's lift: the groups are read again
    for _ in range(4):
        clock.t += 0.5
        a.run_batch()
    assert a.frontier.stopped.get(NEW) == OWNER_REFUSED
    stop = a.shared.r.hget(group_key("example.org"), "s:bounds")
    assert stop == f"402 from {CDN}".encode()
