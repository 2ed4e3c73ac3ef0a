"""A session-id trap costs a recrawl at most a handful of requests.

A site that mints a new session token in every link's path (``/s/<16 hex>/page-N``) is
crawled twice with one state directory (each crawl its own JOBDIR, the second a
recrawl), against a real loopback server; the trap's requests are counted from the
server's own log. The trap memory remembers the trap's template (the token segment
generalised), learnt only from pages judged a trap; an ordinary site whose paths hold
git hashes and dates is crawled whole, both times.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
import scrapy

from demo.web.traps import HashPathSite, SessionTrapSite
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path

    from scrapy.http import Response

    from demo.web.server import TestWeb

pytestmark = pytest.mark.slow

# At most this many requests to the trap in a recrawl: "a handful".
RECRAWL_TRAP_BOUND = 3


class LinkSpider(scrapy.Spider):
    """Follows every link with plain Requests (the Request path, not the bulk rows)."""

    name = "links"

    def __init__(self, url: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.start_urls = [url]
        self.polite_start_urls = [url]

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        yield {"url": response.url}
        for href in response.css("a::attr(href)").getall():
            yield response.follow(href, callback=self.parse)


def _settings(tmp_path: Path, job: str) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(tmp_path), "JOBDIR": str(tmp_path / job),
            "CLOSESPIDER_TIMEOUT": 60}


async def _twice(web: TestWeb, host: str, tmp_path: Path, spider: type,
                 **args: Any) -> tuple[list[str], list[str], Any, Any]:
    first = await run_crawl(spider, _settings(tmp_path, "job1"), url=web.url(host), **args)
    log1 = [e.path for e in web.entries(host)]
    second = await run_crawl(spider, _settings(tmp_path, "job2"), url=web.url(host),
                             recrawl="all", **args)
    log2 = [e.path for e in web.entries(host)][len(log1):]
    return log1, log2, first, second


@pytest.mark.parametrize("spider", [SiteSpider, LinkSpider], ids=["bulk", "requests"])
@pytest_twisted.ensureDeferred
async def test_session_trap_recrawl_costs_a_handful(web_factory: Any, tmp_path: Path,
                                                    spider: type) -> None:
    host = "127.0.8.41"
    site = SessionTrapSite()
    web = web_factory({host: site})
    log1, log2, first, second = await _twice(web, host, tmp_path, spider)
    trap1 = [p for p in log1 if site.is_trap(p)]
    trap2 = [p for p in log2 if site.is_trap(p)]
    # Failed before the fix: 38 trap requests in each crawl, until the yield monitor
    # stopped the whole origin (and the template was never remembered).
    assert len(trap2) <= RECRAWL_TRAP_BOUND, trap2
    # The first crawl learnt the template from a page it judged a trap: page 1 again
    # under another token, with nothing new.
    assert first.stats["polite/traps/learned/session_token"] == 1
    assert len(trap1) <= 2 * RECRAWL_TRAP_BOUND, trap1
    assert second.stats["polite/traps/remembered/session_token"] >= 1
    assert "polite/traps/learned/session_token" not in second.stats
    # Neither crawl stopped the origin: every ordinary page was fetched both times.
    for result in (first, second):
        assert "polite/origin/stopped/low_yield" not in result.stats
    assert set(site.real) <= set(log1) and set(site.real) <= set(log2)


@pytest.mark.parametrize("spider", [SiteSpider, LinkSpider], ids=["bulk", "requests"])
@pytest_twisted.ensureDeferred
async def test_hashes_and_dates_in_ordinary_paths_are_not_a_trap(
        web_factory: Any, tmp_path: Path, spider: type) -> None:
    host = "127.0.8.42"
    site = HashPathSite()
    web = web_factory({host: site})
    log1, log2, first, second = await _twice(web, host, tmp_path, spider)
    for log in (log1, log2):
        assert set(site.real) <= set(log), set(site.real) - set(log)
    for result in (first, second):
        traps = {k: v for k, v in result.stats.items() if k.startswith("polite/traps/")}
        assert traps == {}, traps
        assert "polite/origin/stopped/low_yield" not in result.stats
