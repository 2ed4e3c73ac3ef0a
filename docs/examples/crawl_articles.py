"""The same crawl written as a CrawlSpider: rules decide which links are followed."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule

if TYPE_CHECKING:
    from scrapy.http import Response


class CrawlArticlesSpider(CrawlSpider):
    name = "crawl_articles"
    allowed_domains = ["example.org"]
    start_urls = ["https://example.org/"]
    rules = (
        Rule(LinkExtractor(allow=r"/a/"), callback="parse_article", follow=True),
        Rule(LinkExtractor(), follow=True),
    )

    def parse_article(self, response: Response) -> dict[str, Any]:
        return {
            "url": response.url,
            "title": response.css("h1::text").get(),
            # What the crawler found about the page is on response.meta, not in the item.
            "noindex": response.meta.get("polite_noindex", False),
        }
