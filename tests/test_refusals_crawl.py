"""The crawler's own refusals: said with their rule, never taken for the site's failure.

- A robots.txt request the address policy refused (a host that arrived from the web)
  is no outage of the site: nothing is written to the shared robots.txt cache, no
  backoff, and once the network is allowed the next run asks it at once.
- A crawl that sends nothing because a rule refused it all closes with the reason
  ``nothing_sent`` (exit status 3) and one line naming the rule and its setting.
"""

from __future__ import annotations

import logging
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import pytest_twisted
import scrapy

from demo.web.server import Resp, Site, page
from polite_crawler.closing import NOTHING_SENT, exit_status
from polite_crawler.store.paths import ORIGINS_DB
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator
    from pathlib import Path

    import pytest

    from demo.web.server import TestWeb

A = "127.0.0.1"
B = "127.0.0.3"  # reached only through a link: judged by the address policy


def robots_row(state: Path, origin: str) -> tuple[Any, ...] | None:
    path = state / ORIGINS_DB
    conn = sqlite3.connect(path)
    try:
        exists = conn.execute("SELECT name FROM sqlite_master WHERE name='robots_txt'").fetchone()
        if not exists:
            return None
        row: tuple[Any, ...] | None = conn.execute(
            "SELECT failures, retry_at, last_error FROM robots_txt WHERE origin=?",
            (origin,)).fetchone()
        return row
    finally:
        conn.close()


@pytest_twisted.ensureDeferred
async def test_a_robots_txt_the_address_policy_refused_is_not_the_site_s_outage(
        web_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    robots = "User-agent: *\nAllow: /\n"
    web: TestWeb = web_factory({
        A: Site({"/robots.txt": robots, "/": Resp(200, page("a", "a", ["/x"])),
                 "/x": Resp(200, page("x", "x"))}),
        B: Site({"/robots.txt": robots, "/": Resp(200, page("b", "b"))}),
    })
    link = web.url(B, "/")

    class Linker(scrapy.Spider):
        name = "linker"
        start_urls = [web.url(A, "/")]

        def parse(self, response: Any) -> Any:
            yield {"url": response.url}
            yield response.follow("/x")
            yield scrapy.Request(link)  # a link to another (loopback) host

    settings = {"POLITE_STATE_DIR": str(tmp_path), "POLITE_REST_PAGE": 0.05,
                "POLITE_JITTER": 0.0}
    caplog.set_level(logging.INFO)
    first = await run_crawl(Linker, settings)
    assert not web.entries(B), "the address policy let a link to loopback through"
    origin_b = f"http://{B}:{web.port}"
    assert first.stats.get("polite/addresses/refused/loopback")
    assert not first.stats.get("polite/robots/outcome/unreachable")
    row = robots_row(tmp_path, origin_b)
    assert row is None or (row[0] == 0 and not row[1]), f"stored as the site's outage: {row}"
    text = caplog.text
    assert "(ignored)" not in text
    assert "POLITE_ALLOW_NETWORKS" in text
    assert f"robots.txt of {origin_b} was not requested" in text

    # The operator allows the network: the next run asks B at once, no backoff left.
    began = time.time()
    second = await run_crawl(Linker, {**settings, "POLITE_ALLOW_NETWORKS": [f"{B}/32"]})
    asked = web.entries(B)
    assert asked and asked[0].path == "/robots.txt"
    assert asked[0].started - began < 10
    assert second.stats.get("finish_reason") == "finished"


@pytest_twisted.ensureDeferred
async def test_a_crawl_a_rule_left_nothing_to_send_says_so(
        caplog: pytest.LogCaptureFixture) -> None:
    class Public(scrapy.Spider):
        name = "public"

        async def start(self) -> AsyncIterator[Any]:
            yield scrapy.Request("http://crawl-target.example/")  # no POLITE_BOT_URL

    caplog.set_level(logging.INFO)
    result = await run_crawl(Public, {"POLITE_BOT_URL": ""})
    assert result.stats.get("finish_reason") == NOTHING_SENT
    assert exit_status(NOTHING_SENT) == 3
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Nothing was")]
    assert len(lines) == 1
    assert "POLITE_BOT_URL" in lines[0]
    # Not taken for an outage of the site's robots.txt either.
    assert not result.stats.get("polite/robots/outcome/unreachable")
