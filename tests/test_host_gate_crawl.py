"""One host is its name: a real crawl of one loopback name served on two HTTP ports and
over HTTPS (a self-signed certificate) keeps one request in flight on the name and the
whole rest between any two of its requests, whichever scheme or port, judged from the
servers' own request logs; every site is still crawled whole."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING, Any

import pytest_twisted

from demo.web.server import LogEntry, Site, TestWeb, page
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl
from tests.tls_web import TLSTestWeb, self_signed, server_context

if TYPE_CHECKING:
    from pathlib import Path

HOST = "127.0.0.2"
REST = 0.3
PAGES = 4


def _site(name: str) -> Site:
    links = [f"/p{i}" for i in range(PAGES)]
    routes: dict[str, Any] = {"/robots.txt": "User-agent: *\nAllow: /\n",
                              "/": page(name, f"home of {name}", links)}
    for i in range(PAGES):
        words = " ".join(f"{name}{i}w{k}" for k in range(120))
        routes[f"/p{i}"] = page(f"{name} {i}", words, ["/"])
    return Site(routes)


@pytest_twisted.ensureDeferred
async def test_one_request_and_the_whole_rest_per_host_name_across_ports_and_schemes(
        tmp_path: Path) -> None:
    cert, key = self_signed(tmp_path, ["localhost"], [HOST])
    webs: list[TestWeb] = [TestWeb({HOST: _site("a")}).start(),
                           TestWeb({HOST: _site("b")}).start(),
                           TLSTestWeb({HOST: _site("c")}, server_context(cert, key)).start()]
    try:
        urls = tmp_path / "urls.txt"
        urls.write_text("".join(w.url(HOST) + "\n" for w in webs))
        settings = {"POLITE_STATE_DIR": str(tmp_path / "state"), "POLITE_REST_PAGE": REST,
                    "POLITE_JITTER": 0.0, "POLITE_REST_DURATION_FACTOR": 5.0}
        result = await run_crawl(SiteSpider, settings, urls=str(urls))
    finally:
        for w in webs:
            w.stop()
    for w in webs:  # every site whole: robots.txt, its home and its pages
        paths = {e.path for e in w.entries(HOST)}
        assert {"/", *(f"/p{i}" for i in range(PAGES))} <= paths, (w.port, paths)
    log: list[LogEntry] = sorted((e for w in webs for e in w.entries(HOST)),
                                 key=lambda e: e.started)
    assert len(log) >= 3 * (PAGES + 1)
    for a, b in itertools.pairwise(log):
        assert b.started >= a.finished, ("two requests at once on one name", a, b)
        assert b.started - a.finished >= REST - 0.02, ("a short rest", a, b)
    assert result.stats.get("polite/frontier/host_busy", 0) > 0
