"""Tells the frontier when the spider is finished with a response.

A queued request's row is removed only once everything the spider made of its
response has been queued, in the same transaction (:meth:`Frontier.done`). So a
``kill -9`` at any moment either loses neither the page nor its links, or keeps the
page queued to be fetched again; never a page's links without the page.

The middleware sits outermost (lowest order): when its input is exhausted, every
request the callback yielded has reached the scheduler.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from polite_crawler.context import polite_context

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterable

    from scrapy.crawler import Crawler
    from scrapy.http import Response


class FrontierDoneMiddleware:
    def __init__(self, crawler: Crawler) -> None:
        self.ctx = polite_context(crawler)

    @classmethod
    def from_crawler(cls, crawler: Crawler) -> FrontierDoneMiddleware:
        return cls(crawler)

    def _done(self, response: Response) -> None:
        request = response.request
        frontier = self.ctx.frontier
        if request is not None and frontier is not None:
            frontier.done(request)

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
