"""A crawl lets the yield monitor's memory of a site go once the site's crawl is over,
and keeps it for a site still being crawled."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pytest_twisted

from polite_crawler.middlewares.traps import yield_monitor
from tests.crawl import run_crawl
from tests.pages_web import ArticleSite, PageSpider

if TYPE_CHECKING:
    from pathlib import Path

SMALL, LARGE = "127.0.8.21", "127.0.8.22"


@pytest_twisted.ensureDeferred
async def test_a_finished_site_is_released_while_another_is_crawled(
        web_factory: Any, tmp_path: Path) -> None:
    web = web_factory({SMALL: ArticleSite(n=1), LARGE: ArticleSite(n=40)})
    urls = tmp_path / "urls.txt"
    urls.write_text(f"{web.url(SMALL)}\n{web.url(LARGE)}\n", encoding="utf-8")
    result = await run_crawl(PageSpider, {
        "POLITE_STATE_DIR": str(tmp_path / "state"),
        "POLITE_YIELD_RELEASE_SWEEP": 0.1,
    }, urls=str(urls))
    monitor = yield_monitor(result.crawler)
    small, large = web.url(SMALL).rstrip("/"), web.url(LARGE).rstrip("/")
    released = [o for o in (small, large) if not monitor.remembers(o)]
    assert small in released  # over long before the crawl's end
    assert result.stats["polite/yield/released"] >= 1
