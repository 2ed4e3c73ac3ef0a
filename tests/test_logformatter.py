"""The per-page log records are built only when DEBUG is logged."""

from __future__ import annotations

import logging

from scrapy import Request
from scrapy.http import HtmlResponse
from scrapy.utils.test import get_crawler

from polite_crawler.logformatter import PoliteLogFormatter
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import project_settings_dict


def _records(level: int) -> tuple[object, object]:
    engine = logging.getLogger("scrapy.core.engine")
    scraper = logging.getLogger("scrapy.core.scraper")
    old = engine.level, scraper.level
    engine.setLevel(level)
    scraper.setLevel(level)
    try:
        crawler = get_crawler(SiteSpider, project_settings_dict())
        spider = SiteSpider(url="http://127.0.0.1:9/")
        formatter = PoliteLogFormatter.from_crawler(crawler)
        request = Request("http://127.0.0.1:9/a")
        response = HtmlResponse(request.url, body=b"<html></html>", request=request)
        return (formatter.crawled(request, response, spider),
                formatter.scraped({"url": request.url}, response, spider))
    finally:
        engine.setLevel(old[0])
        scraper.setLevel(old[1])


def test_below_debug_no_record_is_built() -> None:
    assert _records(logging.INFO) == (None, None)


def test_at_debug_the_records_are_scrapys() -> None:
    crawled, scraped = _records(logging.DEBUG)
    assert isinstance(crawled, dict) and crawled["level"] == logging.DEBUG
    assert isinstance(scraped, dict) and scraped["args"]["item"] == {"url": "http://127.0.0.1:9/a"}


def test_the_addon_installs_it() -> None:
    crawler = get_crawler(SiteSpider, project_settings_dict())
    crawler._apply_settings()
    assert crawler.settings["LOG_FORMATTER"] == "polite_crawler.logformatter.PoliteLogFormatter"
