"""Stock Scrapy for ``bench.realweb``: a plain spider on the same sites, own process.

Written as a user would write it for this job: Scrapy's own
:class:`~scrapy.spiders.SitemapSpider` reads each site's robots.txt, its ``Sitemap:``
lines and the sitemaps; every listed page is requested and every page's in-host links
(Scrapy's :class:`~scrapy.linkextractors.LinkExtractor`) are followed. Scrapy's default
settings, with ``ROBOTSTXT_OBEY`` on, one request per domain
(``CONCURRENT_REQUESTS_PER_DOMAIN = 1``, ``--per-domain`` to change), 128 requests at
once (the project's ``CONCURRENT_REQUESTS``), what the workload fixes (``--delay``) and
``--budget`` (pages asked for per host, counted by the spider: each site stops at the
same number of pages as POLITE_HOST_BUDGET stops the polite crawl).

    python -m bench.realweb_stock --urls FILE [--budget N] [--delay S] [--per-domain K]

``--floor URLS`` runs Scrapy's floor instead: a bare :class:`~scrapy.Spider` with
Scrapy's default settings that requests each URL in the file (one a line; the bench
gives it the pages the polite crawl fetched, in its order) and does nothing with the
pages: no robots.txt, no sitemap, no links, no items. What it spends a request is what
Scrapy's own request path costs as its defaults run it (engine, scheduler, default
middlewares, signals, logging, the HTTP/1.1 handler, the response's charset detection).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def main(argv: list[str]) -> int:
    from scrapy import Request, Spider
    from scrapy.crawler import CrawlerProcess
    from scrapy.http import TextResponse
    from scrapy.linkextractors import LinkExtractor
    from scrapy.spiders import SitemapSpider

    ap = argparse.ArgumentParser(prog="bench.realweb_stock")
    ap.add_argument("--urls", type=Path, required=True)
    ap.add_argument("--budget", type=int, default=0, help="pages per host; 0: no limit")
    ap.add_argument("--delay", type=float, default=None, help="DOWNLOAD_DELAY")
    ap.add_argument("--per-domain", type=int, default=1,
                    help="CONCURRENT_REQUESTS_PER_DOMAIN")
    ap.add_argument("--no-randomize", action="store_true",
                    help="RANDOMIZE_DOWNLOAD_DELAY off (jitter 0)")
    ap.add_argument("--broad", action="store_true",
                    help="the broad-crawl queue (DownloaderAwarePriorityQueue)")
    ap.add_argument("--floor", type=Path, default=None,
                    help="URLs file: Scrapy's floor (a bare spider, no parsing)")
    ap.add_argument("--log-file", type=str, default=None)
    a = ap.parse_args(argv)
    roots = a.urls.read_text().split()
    budget = a.budget

    class StockSpider(SitemapSpider):
        name = "stock"
        sitemap_urls = [r.rstrip("/") + "/robots.txt" for r in roots]
        links = LinkExtractor()

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.asked: Counter[str] = Counter()
            self.seen: set[str] = set()

        def _admit(self, request: Request) -> bool:
            # The budget counts what POLITE_HOST_BUDGET counts: every request to the
            # site but robots.txt (its sitemaps too).
            host = request.url.split("/")[2]
            if request.callback == self._parse_sitemap:  # robots.txt, sitemaps
                if not request.url.endswith("/robots.txt"):
                    self.asked[host] += 1
                return True
            if request.url in self.seen:
                return False
            if budget and self.asked[host] >= budget:
                return False
            self.asked[host] += 1
            self.seen.add(request.url)
            return True

        def _parse_sitemap(self, response: Any) -> Any:
            for request in super()._parse_sitemap(response):
                if self._admit(request):
                    yield request

        def parse(self, response: Any, **kwargs: Any) -> Any:
            if not isinstance(response, TextResponse):
                return
            host = response.url.split("/")[2]
            for link in self.links.extract_links(response):
                if link.url.split("/")[2] == host:
                    request = response.follow(link.url, callback=self.parse)
                    if self._admit(request):
                        yield request

    class FloorSpider(Spider):
        name = "floor"

        async def start(self) -> Any:
            for url in a.floor.read_text().split() if a.floor else []:
                yield Request(url, callback=self.parse)

        def parse(self, response: Any, **kwargs: Any) -> Any:
            return None

    settings: dict[str, Any] = {
        "TELNETCONSOLE_ENABLED": False,
        "USER_AGENT": "StockScrapyBench/1.0",
        "LOG_LEVEL": "INFO",
        "LOG_FILE": a.log_file,
        "ROBOTSTXT_OBEY": a.floor is None,
        "CONCURRENT_REQUESTS": 128,
        "CONCURRENT_REQUESTS_PER_DOMAIN": a.per_domain,
    }
    if a.delay is not None:
        settings["DOWNLOAD_DELAY"] = a.delay
    if a.no_randomize:
        settings["RANDOMIZE_DOWNLOAD_DELAY"] = False
    if a.broad:
        settings["SCHEDULER_PRIORITY_QUEUE"] = "scrapy.pqueues.DownloaderAwarePriorityQueue"
    process = CrawlerProcess(settings)
    process.crawl(StockSpider if a.floor is None else FloorSpider)
    process.start()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
