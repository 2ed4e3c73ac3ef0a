"""Run real crawls in-process against the test web (pytest-twisted, asyncio reactor)."""

from __future__ import annotations

import tempfile
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.utils.test import get_crawler

from polite_crawler import settings as project_settings

if TYPE_CHECKING:
    from collections.abc import Iterable
    from pathlib import Path

    from scrapy.crawler import Crawler

# Where a crawl's own state directory is made: the session's pytest directory (set by
# tests/conftest.py), which pytest removes with its old runs; None: the system's.
STATE_ROOT: Path | None = None

# Loopback rests: the rules are the same, the numbers small.
FAST: dict[str, Any] = {
    "POLITE_REST_PAGE": 0.05,
    "POLITE_REST_API": 0.02,
    "POLITE_JITTER": 0.0,
    "POLITE_REST_DURATION_FACTOR": 5.0,
    "LOG_LEVEL": "INFO",
}


def project_settings_dict(**overrides: Any) -> dict[str, Any]:
    base = {k: getattr(project_settings, k) for k in dir(project_settings) if k.isupper()}
    base.update(FAST)
    base.update(overrides)
    return base


@dataclass
class CrawlResult:
    crawler: Crawler
    items: list[Any] = field(default_factory=list)

    @property
    def stats(self) -> dict[str, Any]:
        assert self.crawler.stats is not None
        return self.crawler.stats.get_stats()


class _Collector:
    def __init__(self, result: CrawlResult) -> None:
        self.result = result

    def item_scraped(self, item: Any) -> None:
        self.result.items.append(item)


async def run_crawl(
    spidercls: type, settings: dict[str, Any] | None = None, **spider_args: Any
) -> CrawlResult:
    """Crawl with the project's settings (plus ``settings``) and collect items."""
    settings = dict(settings or {})
    # Every crawl its own durable state unless the test shares one on purpose:
    # the default (.scrapy/polite) would carry pages and robots.txt across tests.
    if "POLITE_STATE_DIR" not in settings:
        settings["POLITE_STATE_DIR"] = tempfile.mkdtemp(prefix="polite-state-", dir=STATE_ROOT)
    crawler = get_crawler(spidercls, project_settings_dict(**settings))
    result = CrawlResult(crawler)
    collector = _Collector(result)
    crawler.signals.connect(collector.item_scraped, signal=signals.item_scraped)
    result._collector = collector  # type: ignore[attr-defined]  # keep the weak ref alive
    await crawler.crawl(**spider_args)
    return result


def urls_of(items: Iterable[Any]) -> set[str]:
    return {dict(i)["url"] for i in items}
