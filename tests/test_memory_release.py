"""A page's response and readings die when the page is done, with no cyclic collection.

Reference counting frees a response, its body and the readings of its text (main text,
word hashes) as soon as nothing refers to them; a reference cycle keeps them until the
cyclic collector's next full collection, which comes rarely in a crawl's large heap.
These crawls run with the collector off: what a cycle holds stays, and the test sees it.
"""

from __future__ import annotations

import gc
import weakref
from typing import TYPE_CHECKING, Any

import pytest_twisted
from scrapy import signals

from demo.web.server import Resp
from tests.crawl import run_crawl
from tests.pages_web import ArticleSite, PageSpider, article_html

if TYPE_CHECKING:
    from pathlib import Path

    from scrapy.crawler import Crawler

HOST = "127.0.8.7"
DROPPED: list[tuple[weakref.ref[Any], weakref.ref[Any]]] = []


class _DropWatch:
    """Keeps weak references to each dropped item's response and word hashes."""

    def __init__(self, crawler: Crawler) -> None:
        crawler.signals.connect(self.dropped, signal=signals.item_dropped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> _DropWatch:
        return cls(crawler)

    def dropped(self, item: Any, response: Any) -> None:
        DROPPED.append((weakref.ref(response), weakref.ref(item._polite_words)))


@pytest_twisted.ensureDeferred
async def test_a_dropped_duplicate_is_freed_without_the_collector(
        web_factory: Any, tmp_path: Path) -> None:
    site = ArticleSite(n=3)
    site.extra = {  # the same article under two more URLs: both dropped as duplicates
        f"/copy-{i}": Resp(200, article_html("Article /a/0", site.texts["/a/0"], ["/"]))
        for i in range(2)}
    site.extra["/"] = Resp(200, article_html("Home", "The home page of the site.",
                                             ["/a/0", "/a/1", "/a/2", "/copy-0", "/copy-1"]))
    web = web_factory({HOST: site})
    DROPPED.clear()
    enabled = gc.isenabled()
    gc.disable()
    try:
        result = await run_crawl(PageSpider, {
            "POLITE_STATE_DIR": str(tmp_path),
            "EXTENSIONS": {f"{__name__}._DropWatch": 0}}, url=web.url(HOST))
        assert result.stats.get("polite/pages/duplicate") == 2
        assert len(DROPPED) == 2
        alive = [(r() is not None, w() is not None) for r, w in DROPPED]
    finally:
        if enabled:
            gc.enable()
    assert alive == [(False, False), (False, False)]
