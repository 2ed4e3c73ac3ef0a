"""A recrawl sends nothing the site's own headers say is unnecessary.

A first crawl of :class:`demo.web.recrawl.RecrawlSite`, then ``-a recrawl=all``
with a fresh JOBDIR over the same state directory, the site unchanged. Asserted from the
site's own records (its request log and what it answered):
no request without validators for a URL that had them, none for a URL it declared
fresh, no page of the calendar trap, and body bytes under 2 % of the first crawl's.
"""

from __future__ import annotations

from typing import Any

import pytest_twisted

from demo.web.recrawl import RecrawlSite
from tests.crawl import run_crawl
from tests.pages_web import PageSpider
from tests.test_pipelines_pages import _settings, _store

HOST = "127.0.8.21"


def _validated(headers: dict[str, str]) -> bool:
    return bool(headers.get("etag") or headers.get("last-modified"))


def _fresh(headers: dict[str, str]) -> bool:
    return "max-age=" in headers.get("cache-control", "")


async def _two_crawls(web_factory: Any, tmp_path: Any, site: RecrawlSite) -> tuple[Any, ...]:
    web = web_factory({HOST: site})
    # A size cap that cuts /big (and nothing else): a cut page keeps its validators too.
    cap = {"POLITE_MAX_BYTES": 60_000}
    first = await run_crawl(PageSpider, _settings(tmp_path, **cap), url=web.url(HOST))
    log1 = web.entries(HOST)
    answered = dict(site.answered)
    second = await run_crawl(PageSpider, _settings(tmp_path, "job2", **cap), url=web.url(HOST),
                             recrawl="all")
    log2 = web.entries(HOST)[len(log1):]
    return web, first, second, log1, log2, answered


@pytest_twisted.ensureDeferred
async def test_unchanged_recrawl_sends_nothing_unnecessary(web_factory, tmp_path) -> None:
    site = RecrawlSite()
    _, first, second, log1, log2, answered = await _two_crawls(web_factory, tmp_path, site)
    paths1 = {e.path for e in log1}
    # The first crawl found every page, and walked into the calendar trap.
    assert set(site.pages()) <= paths1
    assert any(site.is_trap(p) for p in paths1)
    assert {"/sitemap_index.xml", "/sitemaps/pages.xml", "/sitemaps/more.xml.gz",
            "/feed.rss"} <= paths1
    # 1. Nothing unconditional for a URL that had validators.
    unconditional = [e.path for e in log2 if _validated(answered.get(e.path, {}))
                     and "if-none-match" not in e.headers]
    assert unconditional == []
    # 2. Nothing asked that the site said is fresh (max-age=86400).
    assert [e.path for e in log2 if _fresh(answered.get(e.path, {}))] == []
    assert any(_fresh(h) for h in answered.values())
    # 3. No page of the trap.
    assert [e.path for e in log2 if site.is_trap(e.path)] == []
    # 4. Bytes: at most 2 % of the first crawl's body bytes.
    bytes1 = sum(e.bytes_sent for e in log1)
    bytes2 = sum(e.bytes_sent for e in log2)
    assert bytes2 <= 0.02 * bytes1, (bytes1, bytes2, [(e.path, e.status) for e in log2])
    # Every request of the second crawl was answered 304.
    assert {e.status for e in log2} <= {304}
    # Sitemaps and feeds were revalidated, and read again from their stored copy:
    # the pages they list that changed since (none) or have no lastmod were asked.
    assert {"/sitemap_index.xml", "/sitemaps/pages.xml", "/sitemaps/more.xml.gz",
            "/feed.rss"} <= {e.path for e in log2}
    assert "/article/1" in {e.path for e in log2}  # no lastmod: revalidated
    assert "/article/6" not in {e.path for e in log2}  # lastmod older than the copy
    # Aliases of every kind were revalidated with their own validators.
    for alias in ("/article/0/print", "/article/0/amp", "/reprint/0", "/ai", "/private",
                  "/nostore", "/big"):
        sent = [e for e in log2 if e.path == alias]
        assert len(sent) == 1 and sent[0].headers["if-none-match"] == answered[alias]["etag"], \
            alias
    assert first.stats["polite/sizecap/cut"] == 1  # /big was cut, and revalidated above
    stats = second.stats
    assert stats.get("polite/traps/remembered/depth", 0) >= 1
    assert stats["polite/conditional/fresh"] >= site.fresh
    store = _store(tmp_path)
    try:
        assert store.call(lambda b: b.count_fetches("sitemap")).result() == 4
        assert store.call(lambda b: b.count_fetches("duplicate")).result() >= 1
        assert store.call(lambda b: b.count_fetches("canonical")).result() >= 1
    finally:
        store.close()
