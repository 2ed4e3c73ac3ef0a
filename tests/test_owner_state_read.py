"""What the state says of an owner's stop and its lift (``StateReader.owner_state``,
which ``scrapy explain`` shows): the run or crawl it stopped the owner in and why, and
on one machine when ``scrapy unblock`` last lifted it. A real SQLite origin store and a
real redis-server."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.redis_shared import lift_owner_stops
from polite_crawler.frontier.store import OWNER_TABLE, OriginStore, lift_owner_stop
from polite_crawler.policy.rest import OriginState
from polite_crawler.store.paths import ORIGINS_DB
from polite_crawler.store.reader import ClusterReader, EmbeddedReader, PageReader
from polite_crawler.store.redis_keys import group_key, redis_client
from tests.clock import T0
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)

if TYPE_CHECKING:
    from pathlib import Path

# ruff: noqa: F811

STOP = "403 from http://www.example.org"


def test_one_machine_shows_the_owners_stop_then_its_lift(tmp_path: Path) -> None:
    db = tmp_path / ORIGINS_DB
    owners = OriginStore(db, "test:1:x", "run-1", table=OWNER_TABLE)
    row = OriginState("example.org", budget_day="2023-11-14", budget_used=2)
    row.failure.stopped = STOP
    owners.save(row, T0)
    owners.close()
    reader = EmbeddedReader(db, PageReader(None, None))
    found = reader.owner_state("example.org")
    assert found is not None
    assert found.stops == (("run-1", STOP),) and found.lifted is None
    assert found.used_on("2023-11-14") == 2
    lift_owner_stop(db, "example.org", T0 + 10)
    found = reader.owner_state("example.org")
    assert found is not None and found.stops == () and found.lifted == T0 + 10
    assert reader.owner_state("example.net") is None
    reader.close()


def test_a_cluster_shows_each_crawls_stop_of_the_owner(redis_url: str) -> None:
    r = redis_client(redis_url)
    g = group_key("example.org")
    r.hset(g, mapping={"s:weekly": STOP, "s:daily": "challenge:x from http://a.example.org",
                       "b:http://www.example.org": "2023-11-14 3"})
    reader = ClusterReader(redis_url, PageReader(None, None))
    found = reader.owner_state("example.org")
    assert found is not None
    assert found.stops == (("daily", "challenge:x from http://a.example.org"),
                           ("weekly", STOP))
    lift_owner_stops(r, "http://cdn.example.org")
    found = reader.owner_state("example.org")
    assert found is not None and found.stops == ()
    reader.close()
    r.close()
