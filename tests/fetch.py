"""A spider that fetches a list of URLs once each and reports what came back.

Used to test single components (the access log, the size cap) in a plain Scrapy
crawl, without the frontier, and in full crawls with the add-on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import scrapy

from tests.crawl import CrawlResult, run_crawl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from scrapy.http import Response
    from twisted.python.failure import Failure


class FetchSpider(scrapy.Spider):
    name = "fetch"

    def __init__(self, urls: list[str], meta: dict[str, Any] | None = None,
                 method: str = "GET", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = urls
        self.polite_start_urls = urls  # the operator named these hosts (address policy)
        self.request_meta = meta or {}
        self.method = method

    async def start(self) -> AsyncIterator[Any]:
        for url in self.urls:
            yield scrapy.Request(url, method=self.method, callback=self.parse, errback=self.failed,
                                 meta=dict(self.request_meta), dont_filter=True)

    def parse(self, response: Response, **kwargs: Any) -> Any:
        yield {
            "url": response.url,
            "status": response.status,
            "body": response.body,
            "flags": list(response.flags),
            "headers": {k.decode().lower(): b", ".join(v).decode("latin-1")
                        for k, v in response.headers.items()},
            "truncated": response.meta.get("polite_truncated"),
        }

    def failed(self, failure: Failure) -> Any:
        request = getattr(failure, "request", None)
        yield {"url": request.url if request is not None else None,
               "error": type(failure.value).__name__}


def plain_settings(tmp: str, **extra: Any) -> dict[str, Any]:
    """Stock Scrapy (no add-on, no frontier) with the size cap and the access log."""
    settings: dict[str, Any] = {
        "ADDONS": {},
        "ROBOTSTXT_OBEY": False,
        "TELNETCONSOLE_ENABLED": False,
        "RETRY_ENABLED": False,
        "LOG_LEVEL": "INFO",
        "POLITE_STATE_DIR": tmp,
        "DOWNLOADER_MIDDLEWARES": {
            "scrapy.downloadermiddlewares.httpcompression.HttpCompressionMiddleware": None,
            "polite_crawler.middlewares.sizecap.SizeCapMiddleware": 590,
        },
        "EXTENSIONS": {"polite_crawler.extensions.accesslog.AccessLog": 0},
    }
    settings.update(extra)
    return settings


async def fetch(urls: list[str], settings: dict[str, Any], **spider_args: Any) -> CrawlResult:
    return await run_crawl(FetchSpider, settings, urls=urls, **spider_args)
