"""A spider that asks to be gentler than the rules: its settings tune numbers upward.

Scrapy's own DOWNLOAD_DELAY, above the rules' rest, is honoured as a floor on the rest;
the POLITE_* settings tune the rules' other numbers.
"""

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
        "DOWNLOAD_DELAY": 10,  # at least ten seconds between two requests to one site
        "POLITE_HOST_BUDGET": 500,  # at most 500 pages of one site a day
        "POLITE_MAX_DEPTH": 3,  # no deeper than three links from the start page
    }

    def parse(self, response: Response) -> Iterator[Any]:
        yield {"url": response.url}
        yield from response.follow_all(css="a", callback=self.parse)
