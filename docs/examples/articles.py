"""The tutorial's spider: plain Scrapy, polite because the project's add-on is on.

It reads every page of one site, yields the page's URL and title, and follows the
page's links. Nothing in it is about politeness: robots.txt, the rests, one request at
a time per host, Retry-After and the rest come from the add-on.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import scrapy

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.http import Response


class ArticlesSpider(scrapy.Spider):
    name = "articles"
    allowed_domains = ["example.org"]
    start_urls = ["https://example.org/"]

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url, "title": response.css("title::text").get()}
        yield from response.follow_all(css="a", callback=self.parse)
