"""Kept-alive connections follow the origin's real next request: a crawl of real
loopback sites (``scrapy crawl`` in a child process), a base rest shorter than the
keep-alive time, so the handler keeps each connection as the response ends; the gate
then settles the exchange (the robots.txt middleware reads robots.txt's own
Crawl-delay), and where the origin's next request is further away than
POLITE_KEEPALIVE_IDLE (a Crawl-delay, a Retry-After) the idle connection is closed at
once (``polite/connections/closed/rest``), not after waiting
the keep-alive time for nothing (``.../closed/idle``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest

from demo.web.server import Req, Resp, Site
from tests.test_descriptors_crawl import crawl, hosts, small_site

if TYPE_CHECKING:
    from pathlib import Path

REST, KEEP, LONG = "0.3", "1.0", 2


def crawl_delay_site(host: str) -> Site:
    """A small site whose robots.txt asks for a Crawl-delay longer than the keep-alive."""
    site = small_site(host)
    site.routes["/robots.txt"] = f"User-agent: *\nCrawl-delay: {LONG}\nAllow: /\n"
    return site


def retry_after_site(host: str) -> Site:
    """A small site whose "/a" answers 503 with a Retry-After once, then the page."""
    site = small_site(host)
    first = site.routes["/a"]
    asked: list[int] = []

    def once(_req: Req) -> Resp:
        asked.append(1)
        if len(asked) == 1:
            return Resp(503, b"busy", headers={"Retry-After": str(LONG)})
        return Resp(200, first if isinstance(first, bytes) else str(first).encode())

    site.routes["/a"] = once
    return site


@pytest.mark.slow
def test_a_connection_is_closed_at_once_when_the_crawl_delay_is_longer_than_keep_alive(
        web_factory: Any, tmp_path: Path) -> None:
    names = hosts(3)
    web = web_factory({h: crawl_delay_site(h) for h in names})
    code, log, stats = crawl(tmp_path, [web.url(h) for h in names], 1024,
                             f"POLITE_REST_PAGE={REST}", f"POLITE_KEEPALIVE_IDLE={KEEP}")
    assert code == 0, log[-3000:]
    requests = len(web.entries())
    assert requests >= 4 * len(names)  # robots.txt and the three pages
    assert stats.get("polite/connections/opened") == requests
    # robots.txt's own exchange is settled before its Crawl-delay is read (the gate
    # comes before the robots.txt middleware): the robots.txt middleware closes that
    # connection as it reads the Crawl-delay. Every later one is closed as its exchange
    # is settled; none waits the keep-alive time for nothing.
    assert stats.get("polite/connections/closed/rest", 0) == requests
    assert stats.get("polite/connections/closed/idle", 0) == 0


@pytest.mark.slow
def test_a_connection_is_closed_at_once_when_the_site_asks_to_wait(
        web_factory: Any, tmp_path: Path) -> None:
    name = hosts(1)[0]
    web = web_factory({name: retry_after_site(name)})
    code, log, stats = crawl(tmp_path, [web.url(name)], 1024,
                             f"POLITE_REST_PAGE={REST}", f"POLITE_KEEPALIVE_IDLE={KEEP}")
    assert code == 0, log[-3000:]
    statuses = [e.status for e in web.entries() if e.path == "/a"]
    assert statuses == [503, 200]
    # The 503's connection is closed as the gate settles it: the next request waits the
    # Retry-After, longer than the keep-alive time. The others are kept (0.3 s rests).
    assert stats.get("polite/connections/closed/rest", 0) >= 1
