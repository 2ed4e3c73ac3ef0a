"""``scrapy unblock`` on a cluster lifts the owner's stop its group keeps for each crawl
(``s:<crawl>``), not only the origin's block: a real redis-server, the command run as
the operator runs it, a worker on an injected clock."""

from __future__ import annotations

import json

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.policy.blocks import Block
from polite_crawler.store.redis_blocks import RedisBlockStore
from polite_crawler.store.redis_keys import group_key
from tests.clock import Clock
from tests.commands_util import scrapy
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.test_cluster_shared_bounds import T0, offer, run, worker

# ruff: noqa: F811

WWW = "http://www.example.org"


def test_unblock_lifts_the_owners_stop_kept_with_its_group(redis_url: str) -> None:
    """www.example.org refused the crawler (403): its owner's group keeps the stop for
    the crawl (and an older crawl's stop is there too). ``scrapy unblock`` of the
    origin lifts its block and every crawl's stop of the owner, and leaves the group's
    other fields; a worker then taking a host of the owner found later asks it."""
    clock = Clock(T0)
    a = worker(redis_url, clock, "holder")
    offer(a, f"{WWW}/1")
    a.run_batch()
    a.run_batch()
    a.frontier.stop(WWW, "403")
    a.run_batch()  # the stop written, the owner's with its group
    r = a.shared.r
    g = group_key("example.org")
    r.hset(g, "s:older", f"challenge from {WWW}")
    blocks = RedisBlockStore(redis_url)
    blocks.save(Block(WWW, "403", T0, T0 + 86_400, 1, T0, f"{WWW}/1"))
    blocks.close()
    a.close(finished=False)  # the group given back: free, its stops kept
    before = {bytes(k).decode(): bytes(v).decode() for k, v in r.hgetall(g).items()}
    assert before["s:bounds"] == f"403 from {WWW}"

    done = scrapy("unblock", WWW, "-s", f"POLITE_FRONTIER={redis_url}", "--json")
    assert done.returncode == 0, done.stderr
    after = {bytes(k).decode(): bytes(v).decode() for k, v in r.hgetall(g).items()}
    assert after == {k: v for k, v in before.items() if not k.startswith("s:")}
    (answer,) = json.loads(done.stdout)
    assert answer["owner_stops_lifted"] == {"bounds": f"403 from {WWW}",
                                            "older": f"challenge from {WWW}"}
    assert RedisBlockStore(redis_url).load(WWW) is None
    text = scrapy("unblock", WWW, "-s", f"POLITE_FRONTIER={redis_url}")
    assert text.returncode == 0 and "stop in crawl" not in text.stdout

    b = worker(redis_url, clock, "taker")
    offer(b, "http://new.example.org/1")  # another host of the owner, found later
    b.run_batch()
    sent = run([b], clock, clock.t + 30)
    assert b.frontier.stopped.get("http://new.example.org") != OWNER_REFUSED
    assert {s.origin for s in sent} == {"http://new.example.org"}
