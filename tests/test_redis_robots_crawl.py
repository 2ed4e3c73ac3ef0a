"""robots.txt fetched once per origin for the cluster: workers as if on two machines.

Each worker has its own POLITE_STATE_DIR (nothing shared but Redis and PostgreSQL);
the second joins once the first has read every host's robots.txt and taken a few
pages, and takes a share of the hosts over. The test web's request log must show
each host's robots.txt asked for exactly once.
"""

from __future__ import annotations

import threading
from collections import Counter

import pytest

from tests.pg import pg_server, pg_uri  # noqa: F401  (fixtures)
from tests.redis_server import (  # noqa: F401  (fixtures)
    redis_server_session,
    redis_url,
)
from tests.test_redis_frontier import (
    HOSTS,
    PAGES,
    assert_clean,
    content,
    held_site,
    joins,
    start,
    stop_all,
    wait_for,
    worker_cmd,
)

# ruff: noqa: F811


@pytest.mark.slow
def test_two_machines_fetch_each_robots_txt_once(web_factory, tmp_path, redis_url, pg_uri):
    joined = threading.Event()
    web = web_factory({h: held_site(PAGES + 8, h, joined) for h in HOSTS})
    a = start(worker_cmd(web, tmp_path, "a", redis_url, pg_uri,
                         POLITE_STATE_DIR=str(tmp_path / "machine-a")))
    b = None
    try:
        wait_for(lambda: len(content(web.entries())) >= 2 * len(HOSTS))
        assert len(web.entries(path="/robots.txt")) == len(HOSTS)
        b = start(worker_cmd(web, tmp_path, "b", redis_url, pg_uri,
                             POLITE_STATE_DIR=str(tmp_path / "machine-b")))
        joins(tmp_path, "b", joined)  # the second machine took hosts over
        assert b.wait(timeout=180) == 0
        assert a.wait(timeout=180) == 0
    finally:
        joined.set()
        stop_all(a, b)
    fetched = assert_clean(web)
    assert len(fetched) == len(HOSTS) * (PAGES + 8)
    robots = Counter(e.host for e in web.entries(path="/robots.txt"))
    assert robots == dict.fromkeys(HOSTS, 1)
    # Neither machine kept a robots.txt cache of its own.
    for machine in ("machine-a", "machine-b"):
        db = tmp_path / machine / "polite-origins.sqlite3"
        if db.exists():
            import sqlite3

            conn = sqlite3.connect(db)
            try:
                tables = {r[0] for r in conn.execute(
                    "SELECT name FROM sqlite_master WHERE type='table'")}
            finally:
                conn.close()
            assert "robots_txt" not in tables
