"""Tells the frontier when the spider is finished with a response.

A queued request's row is removed only once everything the spider made of its
response has been queued, in the same transaction (:meth:`Frontier.done`). So a
``kill -9`` at any moment either loses neither the page nor its links, or keeps the
page queued to be fetched again; never a page's links without the page. Links a
spider holds in memory (the site spider's, until the origin's sitemaps are read)
keep the page's row until the spider releases them (``release_held``).

The middleware sits outermost (lowest order): when its input is exhausted, every
request the callback yielded has reached the scheduler.

It also hands the spider's start requests to the scheduler in batches of
:data:`START_BATCH` (``engine.crawl``, what the engine itself does with each). The
engine reads one start request per turn of its loop, so a crawl of a thousand
origins would otherwise take a thousand turns, each busy with the answers already
coming in, to learn of them all, and its first requests would spread over seconds;
the frontier keeps its queue on disk, so reading the start list ahead costs no memory.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy import Request
from scrapy.utils.asyncio import sleep

from polite_crawler.callbacks import keep_callback
from polite_crawler.context import polite_context

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response


# Start requests scheduled per turn of the reactor loop (a few milliseconds of work).
START_BATCH = 50


class FrontierDoneMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.crawler = crawler
        self.ctx = polite_context(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierDoneMiddleware:
        return cls(crawler)

    def _done(self, response: Response) -> None:
        request = response.request
        frontier = self.ctx.frontier
        if request is None or frontier is None:
            return
        # A spider that still holds links of the origin (the site spider, until the
        # origin's sitemaps are read) has not queued everything it made of the page:
        # the row stays until the spider releases the origin.
        origin = request.meta.get("polite_origin")
        keep = getattr(self.crawler.spider, "polite_keep_origin", None)
        if origin and callable(keep) and keep(origin):
            frontier.hold(request, origin)
        else:
            frontier.done(request)

    def process_spider_input(self, response: Response) -> None:
        # The frontier rebuilds every request's callback from disk: keep Scrapy's
        # check of it answered once (polite_crawler.callbacks).
        request = response.request
        if request is not None:
            keep_callback(self.crawler.spider, request.callback)

    async def process_start(self, start: AsyncIterator[Any]) -> AsyncIterator[Any]:
        n = 0
        async for item in start:
            engine = self.crawler.engine
            if not isinstance(item, Request) or engine is None:
                yield item
                continue
            engine.crawl(item)
            n += 1
            if n % START_BATCH == 0:
                await sleep(0)  # the engine sends what is due before the next batch

    def process_spider_output(self, response: Response, result: Iterable[Any]) -> Iterable[Any]:
        try:
            yield from result
        finally:
            self._done(response)

    async def process_spider_output_async(
        self, response: Response, result: AsyncIterator[Any]
    ) -> AsyncIterator[Any]:
        try:
            async for item in result:
                yield item
        finally:
            self._done(response)

    def process_spider_exception(self, response: Response, exception: Exception) -> None:
        self._done(response)
