"""kill -9 in the middle of a real crawl, then a restart with the same JOBDIR.

Asserted from the test web's own request log: no two requests in flight on one
origin and no short rest, across the restart too; every page fetched; and nothing
fetched twice except what was in flight when the process died.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from demo.web.server import Req, Resp, Site, overlaps, page, short_rests

ROOT = Path(__file__).resolve().parent.parent
REST = 0.25
PAGES = 16
HOSTS = ["127.0.0.1", "127.0.0.2", "127.0.0.3"]


def chain_site(n: int, slow: str = "", arrived: threading.Event | None = None) -> Site:
    """A chain of pages; ``slow`` answers after 0.5 s and sets ``arrived`` when asked."""
    paths = ["/"] + [f"/p{i}" for i in range(1, n)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n"}
    for i, path in enumerate(paths):
        routes[path] = page(path, "text", paths[i + 1:i + 3])
    if slow:
        body = routes[slow]

        def answer(req: Req) -> Resp:
            assert arrived is not None
            arrived.set()
            return Resp(200, body, delay=0.5)

        routes[slow] = answer
    return Site(routes)


def crawl_cmd(web: Any, tmp: Path) -> list[str]:
    urls = ",".join(web.url(h) for h in HOSTS)
    sets = {
        "JOBDIR": str(tmp / "job"),
        "POLITE_STATE_DIR": str(tmp / "state"),
        "POLITE_REST_PAGE": str(REST),
        "POLITE_JITTER": "0",
        "POLITE_CHECKPOINT_INTERVAL": "0.5",
        "LOG_LEVEL": "INFO",
        "LOG_FILE": str(tmp / "crawl.log"),
    }
    cmd = [sys.executable, "-m", "scrapy", "crawl", "site", "-a", f"url={urls}"]
    for k, v in sets.items():
        cmd += ["-s", f"{k}={v}"]
    return cmd


def content(entries: list[Any]) -> list[Any]:
    """The pages (not robots.txt, not the sitemaps discovery asks for)."""
    return [e for e in entries if e.path != "/robots.txt" and not e.path.startswith("/sitemap")]


@pytest.mark.slow
def test_kill_9_and_restart_keeps_every_rest_and_fetches_nothing_twice(web_factory, tmp_path):
    # The kill comes while 127.0.0.1's /p6 is in flight (its answer takes 0.5 s).
    arrived = threading.Event()
    sites = {h: chain_site(PAGES) for h in HOSTS}
    sites[HOSTS[0]] = chain_site(PAGES, slow="/p6", arrived=arrived)
    web = web_factory(sites)
    cmd = crawl_cmd(web, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        assert arrived.wait(60), "the crawl never reached the slow page"
        time.sleep(0.1)
        killed_at = time.time()
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait()
    before = len(content(web.entries()))
    assert before < len(HOSTS) * PAGES

    second = subprocess.run(cmd, cwd=ROOT, env=env, timeout=120, check=False)
    assert second.returncode == 0
    log = (tmp_path / "crawl.log").read_text(encoding="utf-8")
    assert "Resuming crawl" in log

    entries = web.entries()
    assert overlaps(entries) == []
    # The server stamps "finished" after its write returns; the crawler, another
    # process, may have the whole answer a few milliseconds before that stamp.
    assert short_rests(entries, REST, slack=0.02) == []
    fetched = Counter((e.host, e.path) for e in content(entries))
    # Every page was fetched ...
    assert len(fetched) == len(HOSTS) * PAGES
    # ... and twice only if it was in flight when the process died (at most one
    # per origin): its answer never reached the spider.
    twice = {k for k, n in fetched.items() if n > 1}
    assert max(fetched.values()) <= 2
    assert len(twice) <= len(HOSTS)
    assert (HOSTS[0], "/p6") in twice
    for host, path in twice:
        # The one in flight: the last request its host had before the kill (read from the
        # order of the server's log, not from how long before the kill it came, which a
        # busy machine stretches).
        before = [e for e in entries if e.host == host and e.started < killed_at]
        assert max(before, key=lambda e: e.started).path == path, (host, path)
        first_fetch = min(e.started for e in entries if e.host == host and e.path == path)
        print(f"\n{host}{path} first asked {killed_at - first_fetch:.2f} s before the kill")
    # robots.txt is not fetched again after the restart: the cache is durable.
    assert len(web.entries(path="/robots.txt")) <= len(HOSTS)


def sitemap_site(n: int, slow: str, arrived: threading.Event | None = None) -> Site:
    """A start page that links nowhere, and a sitemap that lists ``n`` pages."""
    paths = [f"/s{i}" for i in range(n)]
    listed = "".join(f"<url><loc>{{base}}{p}</loc></url>" for p in paths)
    routes: dict[str, Any] = {"/": page("/", "start", [])}
    for i, path in enumerate(paths):
        routes[path] = page(path, f"listed page {i}", [])
    body = routes[slow]

    def answer(req: Req) -> Resp:
        if arrived is not None:
            arrived.set()
        return Resp(200, body, delay=0.5)

    routes[slow] = answer

    def robots(req: Req) -> Resp:
        text = f"User-agent: *\nAllow: /\nSitemap: http://{req.host}:{req.port}/sitemap.xml\n"
        return Resp(200, text.encode(), content_type="text/plain")

    def sitemap(req: Req) -> Resp:
        xml = ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns="http://www.sitemaps.org/'
               'schemas/sitemap/0.9">' + listed.replace("{base}", f"http://{req.host}:{req.port}")
               + "</urlset>")
        return Resp(200, xml.encode(), content_type="application/xml")

    routes["/robots.txt"] = robots
    routes["/sitemap.xml"] = sitemap
    return Site(routes)


@pytest.mark.slow
def test_kill_9_loses_no_url_a_sitemap_listed(web_factory, tmp_path):
    # Listed pages enter the frontier in bulk, as URL rows; a kill -9 while one of
    # them is in flight, then a restart: every listed page is fetched, none lost.
    arrived = threading.Event()
    sites = {h: sitemap_site(PAGES, "/s9") for h in HOSTS}
    sites[HOSTS[0]] = sitemap_site(PAGES, "/s5", arrived)
    web = web_factory(sites)
    cmd = crawl_cmd(web, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        assert arrived.wait(60), "the crawl never reached the slow page"
        time.sleep(0.1)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait()
    before = {(e.host, e.path) for e in content(web.entries())}
    assert len(before) < len(HOSTS) * (PAGES + 1)
    # The sitemap was read before the kill (the rows came from it), not after.
    sitemaps_before = len(web.entries(path="/sitemap.xml"))
    assert sitemaps_before >= 1

    second = subprocess.run(cmd, cwd=ROOT, env=env, timeout=120, check=False)
    assert second.returncode == 0
    assert "Resuming crawl" in (tmp_path / "crawl.log").read_text(encoding="utf-8")
    entries = web.entries()
    assert overlaps(entries) == []
    fetched = Counter((e.host, e.path) for e in content(entries))
    want = {(h, p) for h in HOSTS for p in ["/", *(f"/s{i}" for i in range(PAGES))]}
    assert set(fetched) == want
    assert max(fetched.values()) <= 2
    # A resumed job reads no sitemap again: what it listed is in the queue already.
    assert len(web.entries(path="/sitemap.xml")) == sitemaps_before


def held_links_site(arrived: threading.Event | None = None) -> Site:
    """A start page linking to a page its sitemap does not list; the sitemap is slow."""
    site = sitemap_site(3, "/s0")
    site.routes["/"] = page("/", "start", ["/unlisted"])
    site.routes["/unlisted"] = page("/unlisted", "a page only a link leads to", [])
    sitemap = site.routes["/sitemap.xml"]

    def slow_sitemap(req: Req) -> Resp:
        if arrived is not None:
            arrived.set()
        resp = sitemap(req)
        return Resp(resp.status, resp.body, content_type="application/xml", delay=1.0)

    site.routes["/sitemap.xml"] = slow_sitemap
    return site


@pytest.mark.slow
def test_kill_9_while_a_pages_links_are_held_loses_none_of_them(web_factory, tmp_path):
    # The start page's links wait in the spider until the sitemap is read; a kill -9
    # while the sitemap is on its way, then a restart: the start page is still queued
    # (its row held), is fetched again, and the page only it links to is crawled.
    arrived = threading.Event()
    sites = {h: held_links_site() for h in HOSTS}
    sites[HOSTS[0]] = held_links_site(arrived)
    web = web_factory(sites)
    cmd = crawl_cmd(web, tmp_path)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    first = subprocess.Popen(cmd, cwd=ROOT, env=env)
    try:
        assert arrived.wait(60), "the crawl never asked for the sitemap"
        time.sleep(0.2)
        os.kill(first.pid, signal.SIGKILL)
    finally:
        first.wait()
    assert (HOSTS[0], "/") in {(e.host, e.path) for e in web.entries()}
    assert not web.entries(host=HOSTS[0], path="/unlisted")

    second = subprocess.run(cmd, cwd=ROOT, env=env, timeout=120, check=False)
    assert second.returncode == 0
    entries = web.entries()
    assert overlaps(entries) == []
    fetched = Counter((e.host, e.path) for e in content(entries))
    want = {(h, p) for h in HOSTS for p in ["/", "/unlisted", "/s0", "/s1", "/s2"]}
    assert set(fetched) == want
    assert max(fetched.values()) <= 2
