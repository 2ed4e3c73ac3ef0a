"""One INFO line at start: where the state shared by every spider and job lives, and how
to start clean.

Every crawl on a state directory (POLITE_STATE_DIR, default ``.scrapy/polite``), or on
a Redis frontier (POLITE_FRONTIER), shares with every other spider and job there each
site's robots.txt copy, its rests and waits, stops, remembered refusals and the page
store: a spider author testing a new spider against a site another spider crawled
meets that site's state, not a fresh one. The line says so, and how to begin afresh.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from scrapy import signals

from polite_crawler.backend import backend_of
from polite_crawler.store.paths import state_dir

if TYPE_CHECKING:
    from scrapy import Spider
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)

_WHAT = ("every site's robots.txt copy, rests and waits, stops, remembered refusals "
         "and the stored pages")


class SharedState:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        crawler.signals.connect(self.spider_opened, signal=signals.spider_opened)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> SharedState:
        return cls(crawler)

    def spider_opened(self, spider: Spider) -> None:
        settings = self.crawler.settings
        backend = backend_of(settings)
        if backend.cluster:
            logger.info(
                "Shared state: the Redis of POLITE_FRONTIER holds %(what)s for every worker "
                "and crawl on it; to start clean, give the crawl a Redis database of its "
                "own (redis://HOST:PORT/N); scrapy forget and scrapy unblock clear one "
                "site", {"what": _WHAT})
            return
        logger.info(
            "Shared state: %(dir)s holds %(what)s for every spider and job of this project "
            "(POLITE_STATE_DIR); to start clean, crawl with -s POLITE_STATE_DIR=<a new "
            "directory>; scrapy forget and scrapy unblock clear one site",
            {"dir": state_dir(settings), "what": _WHAT})


__all__ = ["SharedState"]
