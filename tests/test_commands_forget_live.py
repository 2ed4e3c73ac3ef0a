"""``scrapy forget`` while a crawl of the origin runs: no request for it after the command returns.

Asserted from the test web's own request log, and by a second job on the same state
that fetches nothing of the forgotten origin, not even robots.txt.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from typing import Any

import pytest

from demo.web.prose import paragraphs
from demo.web.server import Resp, Site, page
from tests.commands_util import ROOT, crawl_cmd, env, scrapy

PAGES = 40
GONE, KEPT = "127.0.0.1", "127.0.0.2"


def wide_site(n: int, delay: float) -> Site:
    """A home page linking to n - 1 pages (depth 1: no trap limit comes into it)."""
    paths = ["/"] + [f"/p{i}" for i in range(1, n)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    for i, path in enumerate(paths):
        text = " ".join(paragraphs(f"{delay}{path}", 3))
        routes[path] = Resp(200, page(path, text, paths[1:] if i == 0 else []), delay=delay)
    return Site(routes)


@pytest.mark.slow
def test_forget_during_a_crawl_stops_it_before_the_command_returns(web_factory, tmp_path):
    web = web_factory({GONE: wide_site(PAGES, 0.15), KEPT: wide_site(2 * PAGES, 0.02)})
    state, log = tmp_path / "state", tmp_path / "crawl.log"
    gone_origin = f"http://{GONE}:{web.port}"
    cmd = crawl_cmd([web.url(GONE), web.url(KEPT)], state, tmp_path / "job",
                    LOG_FILE=log)
    crawl = subprocess.Popen(cmd, cwd=ROOT, env=env())
    try:
        deadline = time.time() + 60
        while len([e for e in web.entries(GONE) if e.path.startswith("/p")]) < 5:
            assert time.time() < deadline, "the crawl never got going"
            assert crawl.poll() is None
            time.sleep(0.02)
        done = scrapy("forget", gone_origin, "--reason", "owner asked", "--state-dir", str(state))
        returned = time.time()
        assert done.returncode == 0, done.stderr
        assert "running jobs: 1 acknowledged" in done.stdout, done.stdout
        assert crawl.wait(120) == 0
    finally:
        if crawl.poll() is None:
            crawl.kill()
            crawl.wait()
    gone = web.entries(GONE)
    after = [e for e in gone if e.started >= returned]
    assert after == [], f"requests for {gone_origin} after forget returned: {after}"
    assert len([e for e in gone if e.path.startswith("/p")]) < PAGES - 1
    # The crawl went on with the other site after the command returned.
    assert [e for e in web.entries(KEPT) if e.started > returned]
    assert len([e for e in web.entries(KEPT) if e.path.startswith("/p")]) == 2 * PAGES - 1
    text = log.read_text(encoding="utf-8")
    assert "opted_out" in text
    assert "Traceback" not in text
    conn = sqlite3.connect(state / "polite.sqlite3")
    try:
        left = conn.execute("SELECT COUNT(*) FROM pages WHERE origin=?", (gone_origin,)).fetchone()
        kept = conn.execute("SELECT COUNT(*) FROM pages WHERE origin<>?", (gone_origin,)).fetchone()
    finally:
        conn.close()
    assert left == (0,)
    assert kept[0] >= PAGES

    # A future job on the same state: not even robots.txt of the forgotten origin.
    before = len(web.entries(GONE))
    again = subprocess.run(crawl_cmd([web.url(GONE)], state, tmp_path / "job2",
                                     LOG_FILE=tmp_path / "again.log"),
                           cwd=ROOT, env=env(), timeout=120, check=False)
    # The opt-out list refused all it had to send: closed as nothing_sent (exit 3).
    assert again.returncode == 3
    assert len(web.entries(GONE)) == before
    assert '"refused:opted_out"' in "".join(p.read_text() for p in state.glob("access-*.jsonl"))
    # Its dropped robots.txt request is not recorded as a robots.txt outage.
    conn = sqlite3.connect(state / "polite-origins.sqlite3")
    try:
        assert conn.execute("SELECT * FROM robots_txt WHERE origin=?", (gone_origin,)).fetchall() \
            == []
    finally:
        conn.close()
