"""Write the crawl's final stats to a JSON file (POLITE_STATS_FILE).

Scrapy prints its stats to the log when the spider closes (STATS_DUMP); this
extension also writes them, with the close reason, where a program can read
them: the demo's summary does, and so can a scheduler's job report.
"""

from __future__ import annotations

import json
import logging
import os
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scrapy import signals
from scrapy.exceptions import NotConfigured

from polite_crawler.defaults import polite_settings

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


def _plain(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value)


class StatsFile:
    """On spider_closed, writes ``{"reason": ..., "stats": {...}}`` to POLITE_STATS_FILE."""

    def __init__(self, crawler: Crawler) -> None:
        path = polite_settings(crawler.settings).get("POLITE_STATS_FILE")
        if not path:
            raise NotConfigured  # off by default: not worth a warning
        self.crawler = crawler
        self.path = Path(path)
        # Connected after CoreStats (an earlier extension), which sets finish_reason
        # and elapsed_time_seconds in its own spider_closed handler.
        crawler.signals.connect(self.spider_closed, signal=signals.spider_closed)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StatsFile:
        return cls(crawler)

    def spider_closed(self, spider: Spider, reason: str) -> None:
        assert self.crawler.stats is not None
        data = {"spider": spider.name, "reason": reason, "stats": self.crawler.stats.get_stats()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        tmp.write_text(json.dumps(data, default=_plain, indent=1, sort_keys=True), encoding="utf-8")
        os.replace(tmp, self.path)  # readers never see half a file
        logger.info("Wrote the crawl's stats to %(path)s", {"path": str(self.path)})
