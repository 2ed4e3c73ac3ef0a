"""The opt-out list in Redis: every worker on every machine honours ``scrapy forget``.

A real redis-server on loopback; the live test runs two workers with their own state
directories (as if on two machines) and asserts from the test web's request log that no
request of the forgotten origin leaves after ``forget`` returns.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from typing import TYPE_CHECKING, Any

import pytest

from demo.web.server import Req, Resp, Site
from polite_crawler.store.redis_optout import RedisOptOutList
from polite_crawler.store.redis_robots import RedisRobotsStore, robots_key
from polite_crawler.store.robots import RobotsBook
from tests.commands_util import ROOT, env, scrapy
from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server,
    redis_server_session,
    redis_url,
)
from tests.robots_numbers import ROBOTS_NUMBERS
from tests.test_commands_forget_live import wide_site

# ruff: noqa: F811

if TYPE_CHECKING:
    from pathlib import Path

ORIGIN = "http://127.0.0.5:8080"


def test_a_change_raises_the_version_and_is_logged(redis_url: str) -> None:
    lst = RedisOptOutList(redis_url)
    try:
        assert lst.snapshot() == (0, frozenset())
        assert lst.add(ORIGIN, "owner asked", 100.0) == 1
        assert lst.snapshot() == (1, frozenset({ORIGIN}))
        entry = lst.get(ORIGIN)
        assert entry is not None and entry.reason == "owner asked" and entry.added_at == 100.0
        lst.record_removed(ORIGIN, {"page_store": {"pages": 3}})
        assert lst.remove(ORIGIN, "by mistake", 200.0) == 2
        assert lst.snapshot() == (2, frozenset())
        assert lst.get(ORIGIN) is None
        log = lst.log(ORIGIN)
        assert [(x["action"], x["reason"]) for x in log] == [
            ("forget", "owner asked"), ("undo", "by mistake")]
        assert log[0]["removed"] == {"page_store": {"pages": 3}}
    finally:
        lst.close()


def test_a_job_is_live_while_its_heartbeat_or_its_frontier_lease_lasts(
        redis_url: str, redis_server_session: Any) -> None:
    lst = RedisOptOutList(redis_url)
    r = redis_server_session.client()
    try:
        lst.register("h:1:a", "site", "t", "h:1:w1", version=0, now=1.0, alive_ttl=0.3)
        lst.register("h:2:b", "site", "t", "h:2:w2", version=0, now=1.0, alive_ttl=0.3)
        jobs = lst.jobs(running=True)
        assert [(j.owner, j.crawl, j.worker, j.version) for j in jobs] == [
            ("h:1:a", "t", "h:1:w1", 0), ("h:2:b", "t", "h:2:w2", 0)]
        assert lst.live(jobs) == {"h:1:a", "h:2:b"}
        r.set("polite:alive:h:2:w2", "1")  # b's frontier worker holds its lease
        for owner in ("h:1:a", "h:2:b"):  # the heartbeats are keys with a TTL...
            assert 0 < r.pttl(f"polite:{{optout}}:alive:{owner}") <= 300
            r.delete(f"polite:{{optout}}:alive:{owner}")  # ... that ran out
        assert lst.live(jobs) == {"h:2:b"}
        assert lst.poll("h:1:a", 5.0, ack=(3, 2.0)) == 0
        assert lst.live(lst.jobs(running=True)) == {"h:1:a", "h:2:b"}
        assert {j.owner: j.version for j in lst.jobs()}["h:1:a"] == 3
        lst.closed("h:1:a", 3.0)
        assert [j.owner for j in lst.jobs(running=True)] == ["h:2:b"]
        assert [j.owner for j in lst.jobs(running=False)] == ["h:1:a"]
        lst.forget_closed(now=10.0, keep=5.0)
        assert [j.owner for j in lst.jobs()] == ["h:2:b"]
        # Gone without closing (no heartbeat, no lease): pruned; had it only stalled, its
        # next poll puts its record back, with its acknowledgement.
        r.delete("polite:alive:h:2:w2", "polite:{optout}:alive:h:2:b")
        lst.forget_closed(now=10.0, keep=5.0)
        assert lst.jobs() == []
        record = lst.job_record("site", "t", "h:2:w3", 1.0)
        assert lst.poll("h:2:b", 5.0, ack=(0, 1.0), job=record) == 0
        assert [(j.owner, j.worker, j.version) for j in lst.jobs(running=True)] == [
            ("h:2:b", "h:2:w3", 0)]
        assert lst.live(lst.jobs()) == {"h:2:b"}
    finally:
        lst.close()


def test_the_keys_share_one_hash_tag(redis_url: str, redis_server_session: Any) -> None:
    lst = RedisOptOutList(redis_url)
    try:
        lst.add(ORIGIN, "", 1.0)
        lst.register("h:1:a", "site", "t", "w", version=1, now=1.0, alive_ttl=5.0)
        keys = sorted(k.decode() for k in redis_server_session.client().keys("*"))
        assert keys and all(k.startswith("polite:{optout}:") for k in keys), keys
    finally:
        lst.close()


def test_the_rows_of_an_origin_leave_every_crawl_and_undo_lifts_the_stop(
        redis_url: str, redis_server_session: Any) -> None:
    r = redis_server_session.client()
    other = "http://127.0.0.6:8080"
    for crawl in ("t", "u"):
        r.zadd(f"polite:q:{{{ORIGIN}}}:{crawl}", {b"0 1 x": 1, b"0 2 y": 2})
        r.hset(f"polite:f:{{{ORIGIN}}}:{crawl}", "3", b"0 3 z")
        r.hset(f"polite:o:{{{ORIGIN}}}", f"seq:{crawl}", 3)
        r.sadd(f"polite:active:{crawl}", ORIGIN, other)
        r.sadd(f"polite:free:{crawl}", ORIGIN)
    r.zadd(f"polite:q:{{{other}}}:t", {b"0 1 x": 1})
    r.hset(f"polite:o:{{{ORIGIN}}}", "stop:t", "opted_out")
    r.hset(f"polite:o:{{{ORIGIN}}}", "stop:u", "403")
    lst = RedisOptOutList(redis_url)
    try:
        crawls = lst.crawls_of(ORIGIN, ["default"])
        assert crawls == ["default", "t", "u"]
        assert lst.drop_queued(ORIGIN, crawls) == {"default": 0, "t": 3, "u": 3}
        for crawl in ("t", "u"):
            assert not r.exists(f"polite:q:{{{ORIGIN}}}:{crawl}", f"polite:f:{{{ORIGIN}}}:{crawl}")
            assert r.smembers(f"polite:active:{crawl}") == {other.encode()}
            assert not r.smembers(f"polite:free:{crawl}")
        assert r.zcard(f"polite:q:{{{other}}}:t") == 1  # another origin's rows stay
        assert lst.unstop(ORIGIN, crawls, "opted_out") == ["t"]
        assert r.hget(f"polite:o:{{{ORIGIN}}}", "stop:t") is None
        assert r.hget(f"polite:o:{{{ORIGIN}}}", "stop:u") == b"403"  # not the opt-out's
    finally:
        lst.close()


def test_forget_and_undo_with_no_worker_running(redis_url: str, redis_server_session: Any,
                                                tmp_path: Path) -> None:
    r = redis_server_session.client()
    book = RobotsBook(RedisRobotsStore(redis_url), "PoliteCrawler", **ROBOTS_NUMBERS)
    book.record_answer(ORIGIN, 200, b"User-agent: *\nAllow: /\n")
    book.close()
    r.zadd(f"polite:q:{{{ORIGIN}}}:t", {b"0 1 x": 1})
    r.hset(f"polite:o:{{{ORIGIN}}}", "seq:t", 1)
    sets = ["-s", f"POLITE_FRONTIER={redis_url}", "-s", "POLITE_CRAWL=t",
            "-s", f"POLITE_STATE_DIR={tmp_path / 'none'}"]
    done = scrapy("forget", "http://127.0.0.9:8080", *sets)
    assert done.returncode == 2 and "unknown here" in done.stderr
    done = scrapy("forget", ORIGIN, "--reason", "owner's mail", "--json", *sets)
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["acknowledged"] == [] and data["not_acknowledged"] == []
    assert data["removed"]["robots_txt"] == 1
    assert data["removed"]["frontiers"] == {f"{redis_url} crawl t": 1}
    assert not r.exists(robots_key(ORIGIN), f"polite:q:{{{ORIGIN}}}:t")
    listed = scrapy("forget", "--list", *sets)
    assert listed.returncode == 0 and ORIGIN in listed.stdout and "owner's mail" in listed.stdout
    r.hset(f"polite:o:{{{ORIGIN}}}", "stop:t", "opted_out")  # as a worker would have
    undo = scrapy("forget", "--undo", ORIGIN, *sets)
    assert undo.returncode == 0, undo.stderr
    assert "off the opt-out list in Redis" in undo.stdout
    assert r.hget(f"polite:o:{{{ORIGIN}}}", "stop:t") is None
    assert scrapy("forget", "--undo", ORIGIN, *sets).returncode == 2  # not on it any more
    # Redis down: a clear line, nothing changed.
    down = scrapy("forget", ORIGIN, "-s", "POLITE_FRONTIER=redis://127.0.0.1:1/0")
    assert down.returncode == 2
    assert "cannot reach Redis" in down.stderr and "nothing was changed" in down.stderr


def test_a_worker_that_does_not_acknowledge_makes_forget_say_so(
        redis_url: str, redis_server_session: Any) -> None:
    lst = RedisOptOutList(redis_url)
    try:
        lst.register("elsewhere:7:x", "site", "t", "elsewhere:7:w", version=0, now=1.0,
                     alive_ttl=60.0)
    finally:
        lst.close()
    r = redis_server_session.client()
    book = RobotsBook(RedisRobotsStore(redis_url), "PoliteCrawler", **ROBOTS_NUMBERS)
    book.record_answer(ORIGIN, 200, b"User-agent: *\nAllow: /\n")
    book.close()
    r.zadd(f"polite:q:{{{ORIGIN}}}:t", {b"0 1 x": 1})
    sets = ["-s", f"POLITE_FRONTIER={redis_url}", "-s", "POLITE_CRAWL=t"]
    done = scrapy("forget", ORIGIN, "--wait", "0.3", *sets)
    assert done.returncode == 1
    assert "NOT acknowledged in time: site elsewhere:7:x" in done.stdout
    # The late worker may still fetch and store the origin: nothing is deleted yet.
    assert "NOTHING DELETED" in done.stdout
    assert r.exists(robots_key(ORIGIN), f"polite:q:{{{ORIGIN}}}:t") == 2
    forced = scrapy("forget", ORIGIN, "--wait", "0.3", "--force", "--json", *sets)
    assert forced.returncode == 1
    data = json.loads(forced.stdout)
    assert [j["owner"] for j in data["not_acknowledged"]] == ["elsewhere:7:x"]
    assert data["removed"]["robots_txt"] == 1
    assert not r.exists(robots_key(ORIGIN), f"polite:q:{{{ORIGIN}}}:t")


# --- two workers, as if on two machines ----------------------------------------------------
GONE, KEPT = "127.0.0.1", "127.0.0.2"
PAGES = 40


def worker(web: Any, tmp: Path, name: str, redis: str, store: str) -> list[str]:
    urls = ",".join(web.url(h) for h in (GONE, KEPT))
    sets = {
        "POLITE_FRONTIER": redis, "POLITE_CRAWL": "t", "POLITE_STORE": store,
        "POLITE_STATE_DIR": str(tmp / f"machine-{name}"),
        "POLITE_REST_PAGE": "0.1", "POLITE_JITTER": "0",
        "POLITE_REDIS_LEASE_TTL": "2", "POLITE_REDIS_SYNC_INTERVAL": "0.1",
        "POLITE_CLOCK_SKEW": "0.05", "DOWNLOAD_TIMEOUT": "3", "POLITE_OPTOUT_POLL": "0.05",
        "LOG_LEVEL": "INFO", "LOG_FILE": str(tmp / f"{name}.log"),
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"url={urls}"]
    for k, v in sets.items():
        cmd += ["-s", f"{k}={v}"]
    return cmd


def held_site(n: int, delay: float, held: float, forgotten: threading.Event) -> Site:
    """wide_site whose pages answer after ``held`` seconds until ``forgotten`` is set,
    then after ``delay``: neither site is crawled to its end before the second worker
    has started and ``forget`` returned, however slow the machine is to start them."""
    routes: dict[str, Any] = {}
    for path, route in wide_site(n, delay).routes.items():
        if not isinstance(route, Resp) or path == "/robots.txt":
            routes[path] = route
            continue

        def answer(req: Req, resp: Resp = route) -> Resp:
            return resp if forgotten.is_set() else dataclasses.replace(resp, delay=held)

        routes[path] = answer
    return Site(routes)


@pytest.mark.slow
def test_forget_reaches_both_workers_before_it_returns(
        web_factory, tmp_path, redis_url, redis_server_session, pg_uri):
    forgotten = threading.Event()
    web = web_factory({GONE: held_site(PAGES, 0.15, 0.3, forgotten),
                       KEPT: held_site(2 * PAGES, 0.05, 0.1, forgotten)})
    gone = f"http://{GONE}:{web.port}"
    workers = [subprocess.Popen(worker(web, tmp_path, "a", redis_url, pg_uri), cwd=ROOT,
                                env=env())]
    try:
        deadline = time.time() + 60
        while len([e for e in web.entries(GONE) if e.path.startswith("/p")]) < 3:
            assert time.time() < deadline, "the crawl never got going"
            time.sleep(0.02)
        workers.append(subprocess.Popen(worker(web, tmp_path, "b", redis_url, pg_uri),
                                        cwd=ROOT, env=env()))
        lst = RedisOptOutList(redis_url)
        try:
            while len(lst.live(lst.jobs(running=True))) < 2:
                assert time.time() < deadline, "the second worker never registered"
                time.sleep(0.02)
        finally:
            lst.close()
        done = scrapy("forget", gone, "--reason", "owner asked", "--json",
                      "-s", f"POLITE_FRONTIER={redis_url}", "-s", f"POLITE_STORE={pg_uri}")
        returned = time.time()
        forgotten.set()
        assert done.returncode == 0, done.stderr
        data = json.loads(done.stdout)
        assert len(data["acknowledged"]) == 2, data
        assert {j["crawl"] for j in data["acknowledged"]} == {"t"}
        assert all(j["worker"] for j in data["acknowledged"])  # their frontier worker ids
        assert "running jobs: 2 acknowledged" in scrapy(
            "forget", gone, "-s", f"POLITE_FRONTIER={redis_url}").stdout  # again: a no-op
        codes = [w.wait(120) for w in workers]
        assert codes == [0, 0]
    finally:
        forgotten.set()
        for w in workers:
            if w.poll() is None:
                w.kill()
                w.wait()
    after = [e for e in web.entries(GONE) if e.started >= returned]
    assert after == [], f"requests for {gone} after forget returned: {after}"
    assert len([e for e in web.entries(GONE) if e.path.startswith("/p")]) < PAGES - 1
    assert [e for e in web.entries(KEPT) if e.started > returned]
    assert len([e for e in web.entries(KEPT) if e.path.startswith("/p")]) == 2 * PAGES - 1
    logs = "".join((tmp_path / f"{n}.log").read_text(encoding="utf-8") for n in "ab")
    assert "opted_out" in logs and "Traceback" not in logs
    r = redis_server_session.client()
    assert not r.exists(f"polite:q:{{{gone}}}:t", f"polite:f:{{{gone}}}:t", robots_key(gone))
    import psycopg

    with psycopg.connect(pg_uri) as conn:
        left = conn.execute("SELECT COUNT(*) FROM pages WHERE origin=%s", (gone,)).fetchone()
        kept = conn.execute("SELECT COUNT(*) FROM pages WHERE origin<>%s", (gone,)).fetchone()
    assert left == (0,)
    assert kept is not None and kept[0] >= PAGES
    # A new worker honours the list: not even robots.txt of the forgotten origin.
    before = len(web.entries(GONE))
    again = subprocess.run(worker(web, tmp_path, "c", redis_url, pg_uri), cwd=ROOT, env=env(),
                           timeout=120, check=False)
    assert again.returncode == 0
    assert len(web.entries(GONE)) == before


def test_explain_reads_the_opt_out_list_in_redis(redis_url: str, tmp_path: Path) -> None:
    from tests.commands_util import scrapy_json

    lst = RedisOptOutList(redis_url)
    try:
        lst.add(ORIGIN, "owner asked", time.time())
    finally:
        lst.close()
    (tmp_path / "state").mkdir()
    d = scrapy_json("explain", f"{ORIGIN}/a", "--state-dir", str(tmp_path / "state"),
                    "-s", f"POLITE_FRONTIER={redis_url}")
    assert d["optout"]["reason"] == "owner asked"
    d = scrapy_json("explain", f"{ORIGIN}/a", "--state-dir", str(tmp_path / "state"))
    assert d["optout"] is None


# --- the middleware on the list in Redis (its synchronous read, as after a stall) -----------
class Shared:
    def __init__(self, worker: str) -> None:
        self.worker = worker


def redis_middleware(tmp_path: Path, redis_url: str, env: Any) -> Any:
    from scrapy import Spider
    from scrapy.utils.test import get_crawler

    from polite_crawler.context import polite_context
    from polite_crawler.middlewares.optout import OptOutMiddleware
    from tests.test_middleware_optout import Scheduler

    crawler = get_crawler(Spider, {"POLITE_STATE_DIR": str(tmp_path), "POLITE_CRAWL": "t",
                                   "POLITE_FRONTIER": redis_url})
    crawler.stats.open_spider()
    scheduler = Scheduler(env)
    scheduler.shared = Shared("h:1:w1")  # type: ignore[attr-defined]
    polite_context(crawler).frontier = scheduler
    mw = OptOutMiddleware(crawler)
    mw.spider_name = "site"
    mw._registered = "h:1:w1"
    mw._job = mw.redis.job_record("site", "t", "h:1:w1", 0.0)
    mw.redis.register(mw.owner, "site", "t", "h:1:w1", version=mw.version, now=0.0,
                      alive_ttl=mw.alive_ttl)
    return mw


def test_the_middleware_acknowledges_once_nothing_listed_is_in_flight(
        redis_url: str, tmp_path: Path) -> None:
    from scrapy import Request
    from scrapy.exceptions import IgnoreRequest

    from tests.test_frontier_core import T0, A, B, Clock, Env
    from tests.test_middleware_optout import request_for

    clock = Clock()
    env = Env(tmp_path, clock)
    for origin in (A, B):
        env.push(f"{origin}/1")
    first = {d.origin: d for d in (env.f.pop(), env.f.pop()) if d is not None}
    mw = redis_middleware(tmp_path, redis_url, env)
    command = RedisOptOutList(redis_url)
    try:
        version = command.add(A, "asked", T0)
        mw._confirmed = -1e9  # the list not confirmed lately: read before the request
        mw.process_request(request_for(first[B], f"{B}/1"))
        assert A in env.f.stopped and A in mw.refused
        assert command.jobs()[0].version < version  # A's exchange is still out
        with pytest.raises(IgnoreRequest):
            mw.process_request(Request(f"{A}/other", meta={"polite_origin": A}))
        env.f.settle(A, first[A].token, start=T0, end=T0 + 0.1)
        mw._confirmed, mw._sync_tried = -1e9, -1e9
        mw._confirm()
        assert command.jobs()[0].version == version
        # A lost lease: the worker comes back under a new id, registered and with the
        # list read before its next request goes.
        command.add(B, "asked too", T0)
        mw.ctx.frontier.shared.worker = "h:1:w2"
        mw._sync_tried = -1e9
        with pytest.raises(IgnoreRequest):
            mw.process_request(Request(f"{B}/2", meta={"polite_origin": B}))
        assert command.jobs()[0].worker == "h:1:w2"
    finally:
        command.close()
        mw.redis.close()
        env.close()


def test_the_middleware_with_redis_down_counts_and_goes_on(redis_server: Any,
                                                          tmp_path: Path) -> None:
    from scrapy import Request

    from tests.test_frontier_core import Clock, Env

    env = Env(tmp_path, Clock())
    mw = redis_middleware(tmp_path, redis_server.url, env)
    try:
        redis_server.stop_process()
        mw._confirmed = -1e9
        mw.process_request(Request("http://127.0.0.3/x", meta={"polite_origin":
                                                               "http://127.0.0.3"}))
        assert mw.crawler.stats.get_value("polite/optout/unconfirmed") == 1
        assert mw.crawler.stats.get_value("polite/optout/poll_failed") == 1
        mw.process_request(Request("http://127.0.0.3/y", meta={"polite_origin":
                                                               "http://127.0.0.3"}))
        assert mw.crawler.stats.get_value("polite/optout/unconfirmed") == 2  # not asked again
        assert mw.crawler.stats.get_value("polite/optout/poll_failed") == 1
    finally:
        mw.redis.close()
        env.close()
