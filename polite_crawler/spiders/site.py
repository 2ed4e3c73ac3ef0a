"""The ``site`` spider: ``scrapy crawl site -a url=https://example.org/``.

``-a urls=FILE`` (one URL a line, ``#`` comments) crawls many sites at once.
It stays inside the hosts it was given.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse
from scrapy.linkextractors import LinkExtractor


class UsageError(ValueError):
    """The spider's arguments do not name a site to crawl."""


def read_start_urls(url: str | None = None, urls: str | None = None) -> list[str]:
    """Start URLs from ``-a url=`` and/or ``-a urls=FILE``, validated."""
    found: list[str] = []
    if url:
        found.extend(u.strip() for u in url.split(",") if u.strip())
    if urls:
        path = Path(urls)
        if not path.is_file():
            raise UsageError(f"-a urls={urls}: no such file")
        for line in path.read_text(encoding="utf-8").splitlines():
            line = line.split("#", 1)[0].strip()
            if line:
                found.append(line)
    if not found:
        raise UsageError("give a site: scrapy crawl site -a url=https://example.org/ (or -a urls=FILE)")
    for u in found:
        parts = urlsplit(u)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise UsageError(f"not an http(s) URL: {u!r}")
    return found


class SiteSpider(scrapy.Spider):
    name = "site"

    def __init__(self, url: str | None = None, urls: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.polite_start_urls = read_start_urls(url, urls)
        self.allowed_hosts = {(urlsplit(u).hostname or "").lower() for u in self.polite_start_urls}
        self._links = LinkExtractor(unique=True)

    async def start(self) -> AsyncIterator[Any]:
        for url in self.polite_start_urls:
            yield scrapy.Request(url, callback=self.parse)

    def in_scope(self, url: str) -> bool:
        return (urlsplit(url).hostname or "").lower() in self.allowed_hosts

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, TextResponse):
            return
        title = response.css("title::text").get(default="").strip()
        yield {"url": response.url, "status": response.status, "title": title}
        for link in self._links.extract_links(response):
            if self.in_scope(link.url):
                yield response.follow(link.url, callback=self.parse)
