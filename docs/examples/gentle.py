"""A spider that asks to be gentler than the rules: its settings tune numbers upward."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

import scrapy

if TYPE_CHECKING:
    from collections.abc import Iterator

    from scrapy.http import Response


class GentleSpider(scrapy.Spider):
    name = "gentle"
    start_urls = ["https://example.org/"]
    custom_settings: ClassVar[dict[str, Any]] = {
        "POLITE_REST_PAGE": 10.0,  # ten seconds between two pages of one site
        "POLITE_HOST_BUDGET": 500,  # at most 500 pages of one site a day
        "POLITE_MAX_DEPTH": 3,  # no deeper than three links from the start page
    }

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a", callback=self.parse)
