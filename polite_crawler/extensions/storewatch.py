"""What the crawl does when its page store's database goes away (the extension).

The page store (:class:`polite_crawler.store.pages.PageStore`) keeps its writes while
its database does not answer and says so with the
:data:`polite_crawler.signals.page_store_state` signal. This extension pauses
fetching once the writes waiting reach POLITE_STORE_BUFFER (``full``: fetching on
would fetch pages nobody can store), resumes it when the store takes writes again
(``room``, ``ok``), and closes the crawl with reason ``page_store_down``
(:data:`polite_crawler.closing.STORE_DOWN`, a failure's exit status) when the store
gave up (``down``). Each state is counted as ``polite/pages/store_<state>``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from polite_crawler.closing import STORE_DOWN
from polite_crawler.signals import page_store_state

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class StoreWatch:
    """Pauses, resumes and closes the crawl as its page store's database goes and comes."""

    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.paused = False
        crawler.signals.connect(self.page_store_state, signal=page_store_state)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> StoreWatch:
        return cls(crawler)

    def page_store_state(self, state: str, why: str) -> None:
        engine = self.crawler.engine
        stats = self.crawler.stats
        if stats is not None:
            stats.inc_value(f"polite/pages/store_{state}")
        if engine is None:
            return
        if state == "full" and not self.paused:
            self.paused = True
            engine.pause()
            logger.warning("Fetching paused: %(why)s for a page store that does not answer",
                           {"why": why})
        elif state in ("room", "ok") and self.paused:
            self.paused = False
            engine.unpause()
            logger.info("Fetching resumed: the page store takes writes again")
        elif state == "down":
            from scrapy.utils.defer import deferred_from_coro

            logger.error("Closing the crawl: %(why)s", {"why": why})
            engine.unpause()
            deferred_from_coro(engine.close_spider_async(reason=STORE_DOWN))
