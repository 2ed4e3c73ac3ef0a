"""A test extension for a crawl's child process: after POLITE_TEST_HOG_AFTER pages it
takes every free file descriptor (as a leak elsewhere in the process would), and gives
them back POLITE_TEST_HOG_HOLD seconds later (as a crawl closing its connections does).

Enabled with ``-s 'EXTENSIONS={"tests.descriptor_hog.DescriptorHog": 0}'``."""

from __future__ import annotations

import contextlib
import logging
import os
from typing import TYPE_CHECKING, Any

from scrapy import signals

if TYPE_CHECKING:
    from scrapy.crawler import Crawler

logger = logging.getLogger(__name__)


class DescriptorHog:
    def __init__(self, crawler: Crawler) -> None:
        self.after = crawler.settings.getint("POLITE_TEST_HOG_AFTER", 3)
        self.hold = crawler.settings.getfloat("POLITE_TEST_HOG_HOLD", 2.0)
        self.pages = 0
        self.taken: list[int] = []
        crawler.signals.connect(self.item_scraped, signal=signals.item_scraped)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> DescriptorHog:
        return cls(crawler)

    def item_scraped(self, item: Any) -> None:
        self.pages += 1
        if self.pages != self.after:
            return
        try:
            while True:
                self.taken.append(os.open(os.devnull, os.O_RDONLY))
        except OSError:
            pass
        logger.info("test: took %(n)d descriptors, the last free ones", {"n": len(self.taken)})
        from twisted.internet import reactor as _reactor

        reactor: Any = _reactor
        reactor.callLater(self.hold, self.give_back)

    def give_back(self) -> None:
        for fd in self.taken:
            with contextlib.suppress(OSError):
                os.close(fd)
        self.taken.clear()
