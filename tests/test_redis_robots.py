"""The robots.txt book on Redis: one cache for workers on many machines (a real redis-server).

Two books on one Redis stand for two workers; they share the test's injected clock.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.backend import backend_of
from polite_crawler.policy.robots import Outcome
from polite_crawler.store.redis_robots import RedisRobotsStore, robots_key
from polite_crawler.store.robots import STORE_RETRY, RobotsBook
from tests.clock import Clock
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)

# ruff: noqa: F811

if TYPE_CHECKING:
    from pathlib import Path

    from tests.redis_server import RedisServer

ORIGIN = "http://127.0.0.2:8080"
OTHER = "http://127.0.0.3:8080"
DAY = 24 * 3600.0
ROBOTS = b"User-agent: *\nDisallow: /private\nCrawl-delay: 4\nSitemap: http://127.0.0.2:8080/s.xml\n"


class Counts(dict[str, int]):
    def __call__(self, key: str) -> None:
        self[key] = self.get(key, 0) + 1


class CountingStore(RedisRobotsStore):
    """The real Redis store, counting the reads it was asked for."""

    loads = 0

    def load(self, origin: str) -> Any:
        self.loads += 1
        return super().load(origin)


def book(url: str, clock: Clock, counts: Any = None, **kw: Any) -> RobotsBook:
    store = CountingStore(url, keep=kw.pop("keep", 30 * DAY), timeout=1.0)
    return RobotsBook(store, "PoliteCrawler", ttl=DAY, max_bytes=512 * 1024, retry_min=60.0,
                      retry_max=3600.0, clock=clock,
                      count=counts if counts is not None else (lambda key: None))


def test_an_answer_recorded_by_one_worker_is_used_by_the_other_without_a_fetch(
        redis_url: str) -> None:
    clock = Clock()
    a, b = book(redis_url, clock), book(redis_url, clock)
    assert a.needs_fetch(ORIGIN) and b.needs_fetch(ORIGIN)  # both read: nothing yet
    assert a.record_answer(ORIGIN, 200, ROBOTS) is Outcome.PARSE
    # b held "nothing yet" in memory: before asking for a fetch it reads Redis again.
    assert not b.needs_fetch(ORIGIN)
    assert b.ready(ORIGIN)
    assert b.allowed(ORIGIN + "/page")
    assert not b.allowed(ORIGIN + "/private/x")
    assert b.crawl_delay(ORIGIN) == 4
    assert b.sitemaps(ORIGIN) == ["http://127.0.0.2:8080/s.xml"]
    assert b.retry_at(ORIGIN) == clock.t + DAY
    # A third worker starting later reads it the first time it needs it.
    c = book(redis_url, clock)
    assert not c.needs_fetch(ORIGIN)
    assert c.state(ORIGIN).status == 200
    assert c.state(ORIGIN).body == ROBOTS


def test_a_4xx_allow_all_and_a_truncated_copy_travel_as_they_are(redis_url: str) -> None:
    clock = Clock()
    a, b = book(redis_url, clock), book(redis_url, clock)
    a.record_answer(ORIGIN, 404, b"not here")
    a.record_answer(OTHER, 200, b"User-agent: *\nDisallow: /a\nDisallow: /b", cut=True)
    assert b.ready(ORIGIN) and b.rules(ORIGIN) is None and b.allowed(ORIGIN + "/x")
    assert b.state(ORIGIN).kind == "allow_all"
    rules = b.rules(OTHER)
    assert rules is not None and rules.truncated
    assert not b.allowed(OTHER + "/a")
    assert b.allowed(OTHER + "/b")  # the cut last line is not read


def test_an_outage_recorded_by_one_worker_is_respected_by_the_other(redis_url: str) -> None:
    clock = Clock()
    a, b = book(redis_url, clock), book(redis_url, clock)
    retry = a.record_failure(ORIGIN, "status 503", retry_after=120.0)
    assert retry == clock.t + 120.0
    assert not b.needs_fetch(ORIGIN)
    assert not b.ready(ORIGIN)
    assert b.retry_at(ORIGIN) == retry
    assert b.state(ORIGIN).failures == 1
    assert b.state(ORIGIN).last_error == "status 503"
    clock.t = retry
    assert b.needs_fetch(ORIGIN)
    # b's failure follows a's: the backoff doubles across workers (60 s, then 120 s).
    second = b.record_failure(ORIGIN, "status 503")
    assert b.state(ORIGIN).failures == 2
    assert second == clock.t + 120.0
    assert not a.needs_fetch(ORIGIN)  # a reads b's outage before asking for a fetch
    assert a.retry_at(ORIGIN) == second
    clock.t = second
    assert a.needs_fetch(ORIGIN)
    assert a.state(ORIGIN).failures == 2


def test_the_last_good_copy_survives_an_outage_recorded_elsewhere(redis_url: str) -> None:
    clock = Clock()
    a, b = book(redis_url, clock), book(redis_url, clock)
    a.record_answer(ORIGIN, 200, ROBOTS)
    clock.t += DAY + 1
    assert a.needs_fetch(ORIGIN)
    a.record_failure(ORIGIN, "timeout")
    assert not b.needs_fetch(ORIGIN)
    assert b.ready(ORIGIN)  # the last good copy, in use through the outage
    assert not b.allowed(ORIGIN + "/private/x")
    assert b.state(ORIGIN).in_outage


def test_freshness_runs_out_after_the_ttl_for_every_worker(redis_url: str,
                                                           redis_server_session: Any) -> None:
    clock = Clock()
    a, b = book(redis_url, clock, keep=7 * DAY), book(redis_url, clock)
    a.record_answer(ORIGIN, 200, ROBOTS)
    assert not b.needs_fetch(ORIGIN)
    clock.t += DAY - 1
    assert b.ready(ORIGIN) and not b.needs_fetch(ORIGIN)
    clock.t += 1
    assert not b.ready(ORIGIN)
    assert b.needs_fetch(ORIGIN) and a.needs_fetch(ORIGIN)
    b.record_answer(ORIGIN, 200, b"User-agent: *\nDisallow: /\n")
    assert not a.needs_fetch(ORIGIN)  # a reads b's new copy before asking for a fetch
    assert not a.allowed(ORIGIN + "/page")
    # The key itself lives POLITE_ROBOTS_REDIS_KEEP after its last write.
    ttl = redis_server_session.client().ttl(robots_key(ORIGIN))
    assert 30 * DAY - 5 <= ttl <= 30 * DAY


def test_the_redis_key_carries_the_origin_hash_tag(redis_url: str,
                                                   redis_server_session: Any) -> None:
    clock = Clock()
    book(redis_url, clock).record_answer(ORIGIN, 200, ROBOTS)
    keys = [k.decode() for k in redis_server_session.client().keys("*")]
    assert keys == [f"polite:robots:{{{ORIGIN}}}"]


def test_a_pending_redirect_is_not_fetched_again_after_a_reload(redis_url: str) -> None:
    clock = Clock()
    a = book(redis_url, clock)
    assert a.needs_fetch(ORIGIN)
    a.record_redirect(ORIGIN, "http://127.0.0.9/robots.txt")
    assert not a.needs_fetch(ORIGIN)
    clock.t += 601
    assert a.needs_fetch(ORIGIN)


def test_redis_down_an_origin_not_held_is_not_ready_and_waits(redis_server: RedisServer) -> None:
    clock = Clock()
    counts = Counts()
    a = book(redis_server.url, clock, counts)
    a.record_answer(ORIGIN, 200, ROBOTS)
    redis_server.stop_process()
    # Held in memory and fresh: still in use.
    assert a.ready(ORIGIN) and not a.needs_fetch(ORIGIN)
    # Never read: not ready, and no robots.txt fetch either (another worker may hold a
    # fresh copy in Redis); asked again after STORE_RETRY.
    assert not a.needs_fetch(OTHER)
    assert not a.ready(OTHER)
    assert not a.allowed(OTHER + "/")
    assert a.retry_at(OTHER) == clock.t + STORE_RETRY
    assert counts["polite/robots/store_error/read"] == 1
    # Another origin meanwhile: Redis is not asked (a dead one may take its whole
    # timeout to fail, on the reactor); the origin waits the same way.
    third = "http://127.0.0.4:8080"
    loads = a.store.loads  # type: ignore[attr-defined]
    assert not a.needs_fetch(third) and not a.ready(third)
    assert a.store.loads == loads  # type: ignore[attr-defined]
    assert a.retry_at(third) == clock.t + STORE_RETRY
    assert counts["polite/robots/store_error/read"] == 2
    clock.t += STORE_RETRY
    assert not a.needs_fetch(OTHER)  # read again, failed again
    assert counts["polite/robots/store_error/read"] == 3
    # A stale copy due for a fetch: Redis is asked first; down, so neither fetch nor use.
    clock.t += DAY
    assert not a.needs_fetch(ORIGIN)
    assert not a.ready(ORIGIN)
    assert a.retry_at(ORIGIN) == clock.t + STORE_RETRY
    redis_server.start()
    clock.t += STORE_RETRY
    assert a.needs_fetch(OTHER)  # Redis answers: nothing known, fetch it
    assert a.needs_fetch(ORIGIN)


def test_an_answer_redis_could_not_take_is_written_when_it_answers_again(
        redis_server: RedisServer) -> None:
    clock = Clock()
    counts = Counts()
    a = book(redis_server.url, clock, counts)
    assert a.needs_fetch(ORIGIN)
    redis_server.stop_process()
    a.record_answer(ORIGIN, 200, ROBOTS)  # no crash: used here, written later
    assert counts["polite/robots/store_error/write"] == 1
    assert a.ready(ORIGIN) and not a.allowed(ORIGIN + "/private/")
    redis_server.start()
    assert not a.needs_fetch(OTHER)  # Redis is not asked again before STORE_RETRY
    assert counts["polite/robots/store_error/read"] == 1
    clock.t += STORE_RETRY
    assert a.needs_fetch(OTHER)  # the first call that reaches Redis again writes it
    b = book(redis_server.url, clock)
    assert not b.needs_fetch(ORIGIN)
    assert b.state(ORIGIN).status == 200


def test_close_writes_what_redis_could_not_take(redis_server: RedisServer) -> None:
    clock = Clock()
    a = book(redis_server.url, clock)
    assert a.needs_fetch(ORIGIN)
    redis_server.stop_process()
    a.record_failure(ORIGIN, "timeout")
    redis_server.start()
    a.close()
    b = book(redis_server.url, clock)
    assert b.state(ORIGIN).failures == 1
    assert not b.needs_fetch(ORIGIN)


def test_without_redis_the_book_is_the_sqlite_one(tmp_path: Path) -> None:
    from scrapy.settings import Settings

    from polite_crawler.store.robots import SQLiteRobotsStore

    settings = Settings({"POLITE_STATE_DIR": str(tmp_path)})
    b = backend_of(settings).robots_book(settings)
    try:
        assert isinstance(b.store, SQLiteRobotsStore)
    finally:
        b.close()


def test_with_the_frontier_on_redis_the_book_is_in_redis(redis_url: str,
                                                        tmp_path: Path) -> None:
    from scrapy.settings import Settings

    settings = Settings({"POLITE_STATE_DIR": str(tmp_path), "POLITE_FRONTIER": redis_url})
    b = backend_of(settings).robots_book(settings)
    try:
        assert isinstance(b.store, RedisRobotsStore)
    finally:
        b.close()
    assert not list(tmp_path.iterdir())  # nothing written in the state directory


def test_explain_reads_the_robots_txt_cache_in_redis(redis_url: str, tmp_path: Path) -> None:
    import time

    from tests.commands_util import scrapy, scrapy_json

    (tmp_path / "state").mkdir()
    clock = Clock(time.time())
    b = book(redis_url, clock)
    b.record_answer(ORIGIN, 200, ROBOTS)
    b.record_failure(OTHER, "status 503")
    b.close()
    sets = ["--state-dir", str(tmp_path / "state"), "-s", f"POLITE_FRONTIER={redis_url}"]
    d = scrapy_json("explain", f"{ORIGIN}/private/x", *sets)
    assert d["robots"]["source"] == "cached copy"
    assert d["robots"]["allowed"] is False
    assert d["robots"]["crawl_delay"] == 4
    d = scrapy_json("explain", f"{OTHER}/a", *sets)
    assert d["robots"]["source"] == "unreachable" and "status 503" in d["robots"]["why"]
    # Without the setting: the state directory's cache, which knows nothing of them.
    d = scrapy_json("explain", f"{ORIGIN}/private/x", "--state-dir", str(tmp_path / "state"))
    assert d["robots"]["source"] == "none"
    done = scrapy("explain", f"{ORIGIN}/a", "--state-dir", str(tmp_path / "state"),
                  "-s", "POLITE_FRONTIER=redis://127.0.0.1:1/0")
    assert done.returncode == 2
    assert "cannot read the" in done.stderr and "in Redis redis://127.0.0.1:1/0" in done.stderr


def test_explain_reads_the_origin_state_in_redis(redis_url: str, redis_server_session: Any,
                                                 tmp_path: Path) -> None:
    import time

    from polite_crawler.policy.rest import OriginState
    from tests.commands_util import scrapy_json

    (tmp_path / "state").mkdir()
    now = time.time()
    state = OriginState(ORIGIN, last_end=now, last_duration=0.5, last_rest=3.2,
                        next_allowed=now + 30)
    r = redis_server_session.client()
    r.hset(f"polite:o:{{{ORIGIN}}}", mapping={"state": state.to_json(), "run": "t",
                                             "owner": "h:1:w"})
    r.set("polite:w:h:1:w", repr(now + 15))
    d = scrapy_json("explain", f"{ORIGIN}/a", "--state-dir", str(tmp_path / "state"),
                    "-s", f"POLITE_FRONTIER={redis_url}")
    o = d["origin_state"]
    assert o["known"] is True and o["may_start_now"] is False
    assert o["lease"] == {"owner": "h:1:w", "until": now + 15}
    d = scrapy_json("explain", f"{ORIGIN}/a", "--state-dir", str(tmp_path / "state"))
    assert d["origin_state"]["known"] is False
