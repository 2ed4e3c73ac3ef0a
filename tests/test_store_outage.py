"""The page store's writer when PostgreSQL goes away (a real server, stopped and started).

A restart: every write is made (the open batch written again on the new connection), the
writes that came meanwhile waited, past ``buffer`` of them the crawl is told to pause.
A database away past ``give_up``: the store says so once (``down``), every write not made
goes to the spill file, and the next store opened with it writes them: no page lost.
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

import pytest

from polite_crawler.backend import page_backend_factory as backend_factory
from polite_crawler.store.pages import PageStore, PageStoreDown
from tests.pg import pg_own  # noqa: F401  (fixture)
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)
from tests.test_store_pages import _rec

if TYPE_CHECKING:
    from pathlib import Path

    from tests.pg import PostgresServer

# ruff: noqa: F811


def count(uri: str) -> int:
    import psycopg

    with psycopg.connect(uri) as conn:
        row = conn.execute("SELECT count(*) FROM pages").fetchone()
        return int(row[0]) if row else 0


def store(uri: str, states: list[tuple[str, str]], tmp: Path, **kw: Any) -> PageStore:
    kw = {"batch_size": 5, "flush_interval": 0.05, **kw}
    return PageStore(backend_factory(uri, ""), spill=tmp / "spill.pickle",
                     on_state=lambda s, why: states.append((s, why)), **kw)


def test_a_restart_mid_batch_loses_no_write_and_the_writes_waiting_are_bounded(
        pg_own: PostgresServer, tmp_path: Path) -> None:
    uri = pg_own.new_database()
    states: list[tuple[str, str]] = []
    # One open batch: the first 20 writes are made, not committed, when the server stops.
    s = store(uri, states, tmp_path, buffer=8, give_up=60.0, batch_size=1000,
              flush_interval=3600.0, idle_commit=False)
    try:
        done = [s.save(_rec(i)) for i in range(20)]
        for f in done:
            f.result(timeout=30)
        assert count(uri) == 0
        pg_own.halt()  # open connections are cut, the open batch with them
        during = [s.save(_rec(i)) for i in range(20, 40)]  # wait for the database
        time.sleep(1.0)
        assert not any(f.done() for f in during)
        assert ("full", "8 page-store writes waiting") in states
        pg_own.resume()
        for f in during:
            f.result(timeout=30)
        s.flush().result(timeout=30)
    finally:
        s.close()
    assert count(uri) == 40
    kinds = [k for k, _ in states]
    assert {"retrying", "ok", "room"} <= set(kinds)
    assert s.stats == {"retried": 1}


def test_a_database_away_too_long_spills_every_write_and_the_next_store_makes_them(
        pg_own: PostgresServer, tmp_path: Path) -> None:
    uri = pg_own.new_database()
    states: list[tuple[str, str]] = []
    s = store(uri, states, tmp_path, buffer=100, give_up=1.5)
    try:
        for f in [s.save(_rec(i)) for i in range(10)]:
            f.result(timeout=30)
        pg_own.halt()
        waiting = [s.save(_rec(i)) for i in range(10, 25)]
        for f in waiting:
            with pytest.raises(PageStoreDown, match=r"did not answer for 1\.5 s"):
                f.result(timeout=30)
        later = s.save(_rec(25))  # after giving up: spilled at once
        with pytest.raises(PageStoreDown):
            later.result(timeout=30)
        assert [k for k, _ in states].count("down") == 1
    finally:
        s.close()
    assert (tmp_path / "spill.pickle").exists()
    # The 16 writes that came after, and those of the open batch not committed yet.
    assert s.stats.get("spilled", 0) >= 16 and "lost" not in s.stats
    pg_own.resume()
    again = store(uri, [], tmp_path)  # opening it writes what was spilled
    again.close()
    assert count(uri) == 26
    assert not (tmp_path / "spill.pickle").exists()


def test_without_a_spill_file_the_writes_given_up_are_counted_as_lost(
        pg_own: PostgresServer, tmp_path: Path) -> None:
    uri = pg_own.new_database()
    s = PageStore(backend_factory(uri, ""), give_up=0.5)
    try:
        s.save(_rec(1)).result(timeout=30)
        pg_own.halt()
        f = s.save(_rec(2))
        with pytest.raises(PageStoreDown):
            f.result(timeout=30)
    finally:
        s.close()
    assert s.stats.get("lost") == 1


# --- a crawl (a real worker process on the Redis frontier) through a PostgreSQL outage ----

CRAWL_PAGES = 12


def stored_urls(uri: str) -> set[str]:
    import psycopg

    with psycopg.connect(uri) as conn:
        return {str(r[0]) for r in conn.execute("SELECT canonical_url FROM pages")}


def fetched_urls(web: Any) -> set[str]:
    from tests.test_redis_frontier import content

    return {web.url(e.host, e.path) for e in content(web.entries()) if e.status == 200}


@pytest.mark.slow
def test_postgresql_restarted_mid_crawl_no_page_lost_and_the_crawl_goes_on(
        web_factory: Any, tmp_path: Path, redis_url: str, pg_own: PostgresServer) -> None:
    from tests.test_redis_faults import measure, site, stop
    from tests.test_redis_frontier import HOSTS, content, start, wait_for, worker_cmd

    web = web_factory({h: site(CRAWL_PAGES, h, 0.1) for h in HOSTS})
    uri = pg_own.new_database()
    w = start(worker_cmd(web, tmp_path, "a", redis_url, uri, POLITE_STORE_FLUSH="0.1"))
    try:
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        t0 = time.time()
        pg_own.halt()
        time.sleep(3.0)
        pg_own.resume()
        t1 = time.time()
        assert w.wait(timeout=120) == 0
    finally:
        stop(w)
    fetched = fetched_urls(web)
    assert len(fetched) == len(HOSTS) * CRAWL_PAGES
    assert stored_urls(uri) == fetched  # no page lost
    log = (tmp_path / "a.log").read_text(encoding="utf-8")
    assert "The page store lost its database" in log and "answers again" in log
    print("\npostgresql restart:", measure(web.entries(), t0, t1, len(HOSTS) * CRAWL_PAGES),
          f"stored {len(stored_urls(uri))} of {len(fetched)}")


@pytest.mark.slow
def test_postgresql_away_past_the_give_up_time_stops_the_crawl_and_keeps_its_pages(
        web_factory: Any, tmp_path: Path, redis_url: str, pg_own: PostgresServer) -> None:
    from tests.test_redis_faults import site, stop
    from tests.test_redis_frontier import HOSTS, content, start, wait_for, worker_cmd

    # Answers of 0.3 s: pages in flight when the database goes.
    web = web_factory({h: site(CRAWL_PAGES, h, 0.3) for h in HOSTS})
    uri = pg_own.new_database()
    settings = {"POLITE_STORE_FLUSH": "0.1", "POLITE_STORE_GIVE_UP": "2",
                "POLITE_STORE_BUFFER": "20"}
    w = start(worker_cmd(web, tmp_path, "a", redis_url, uri, **settings))
    try:
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        pg_own.halt()
        t0 = time.time()
        code = w.wait(timeout=60)
        stopped_after = time.time() - t0
    finally:
        stop(w)
    assert code == 1  # closed for its page store, said in the exit status
    log = (tmp_path / "a.log").read_text(encoding="utf-8")
    assert "Giving up on the page store" in log
    assert "'finish_reason': 'page_store_down'" in log
    assert "Traceback" not in log
    first = fetched_urls(web)
    assert len(first) < len(HOSTS) * CRAWL_PAGES  # the crawl did stop
    # The database back, the same crawl again: the pages the first run could not store
    # are written from the spill file, the rows it could not finish are fetched.
    pg_own.resume()
    w = start(worker_cmd(web, tmp_path, "b", redis_url, uri, **settings))
    try:
        assert w.wait(timeout=120) == 0
    finally:
        stop(w)
    fetched = fetched_urls(web)
    assert len(fetched) == len(HOSTS) * CRAWL_PAGES
    assert stored_urls(uri) == fetched  # no page dropped
    spilled = re.findall(r"(\d+) page-store writes kept in", log)
    print(f"\npostgresql away: stopped {stopped_after:.1f} s after the outage began, "
          f"fetched {len(first)} pages before, writes spilled {spilled}, "
          f"all {len(fetched)} stored after the second run")
