"""An example spider for a documented JSON API.

``scrapy crawl api_example -a url=https://api.example.org/v1/things/`` (or scheduled
with scrapyd like any spider: ``schedule.json -d spider=api_example -d url=...``).

It reads a paginated collection in the common shape (Django REST framework's page
pagination, and many APIs like it)::

    {"count": 120, "next": "https://api.example.org/v1/things/?page=2",
     "previous": null, "results": [{...}, {...}]}

and yields each result, following ``next`` on the same origin.

All it does about politeness is mark its requests ``meta["polite_api"] = True``: the
frontier then rests POLITE_REST_API (1 s) between two of its requests instead of
POLITE_REST_PAGE (3 s), as the seeds allow for a documented API. Every other rule
comes from the add-on, for this spider as for any spider added to this package:
robots.txt first, one request in flight per origin, the rest after the end of each
exchange (5x its duration, Crawl-delay, Retry-After and backoff), the budget, the
identity headers, the stops. Use an API only within its published terms and quotas.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import scrapy
from scrapy.http import Response, TextResponse

from polite_crawler.policy.urls import URLError, origin_of
from polite_crawler.spiders.site import UsageError, read_start_urls

if TYPE_CHECKING:
    from collections.abc import AsyncIterator, Iterator


class ApiExampleSpider(scrapy.Spider):
    name = "api_example"

    def __init__(self, url: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        urls = read_start_urls(url)
        if len(urls) != 1:
            raise UsageError("give one API URL: scrapy crawl api_example -a url=https://...")
        # The operator named this URL: the identity and address checks read it here.
        self.polite_start_urls = urls
        self.api_url = urls[0]
        self.api_origin = origin_of(self.api_url)

    def api_request(self, url: str) -> scrapy.Request:
        return scrapy.Request(
            url,
            callback=self.parse,
            headers={"Accept": "application/json"},
            meta={"polite_api": True},
        )

    async def start(self) -> AsyncIterator[Any]:
        yield self.api_request(self.api_url)

    def parse(self, response: Response, **kwargs: Any) -> Iterator[Any]:
        if not isinstance(response, TextResponse):
            self.logger.warning("Not a JSON answer: %(url)s", {"url": response.url})
            return
        try:
            data = json.loads(response.text)
        except ValueError:
            self.logger.warning("Not a JSON answer: %(url)s", {"url": response.url})
            return
        if not isinstance(data, dict):
            return
        for result in data.get("results") or []:
            yield {"api_url": response.url, "result": result}
        following = data.get("next")
        if isinstance(following, str) and following:
            url = response.urljoin(following)
            if self._same_origin(url):
                yield self.api_request(url)

    def _same_origin(self, url: str) -> bool:
        if urlsplit(url).scheme not in ("http", "https"):
            return False
        try:
            return origin_of(url) == self.api_origin
        except URLError:
            return False
