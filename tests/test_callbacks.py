"""Scrapy's generator-callback check is made once per callback, not once per page.

This pins a private detail of Scrapy 2.19 (``scrapy.utils.misc._generator_callbacks_cache``,
weakly keyed by the callable): if a Scrapy upgrade changes it, this test says so.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

import pytest_twisted
import scrapy
from scrapy.utils import misc
from scrapy.utils.test import get_crawler

from demo.web.server import Site, page
from polite_crawler.callbacks import keep_callback
from polite_crawler.spiders.site import SiteSpider
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from collections.abc import Iterator


class _Spider(scrapy.Spider):
    name = "callbacks"

    def parse(self, response: Any, **kwargs: Any) -> Iterator[Any]:
        yield {"url": response.url}


def _checked(spider: scrapy.Spider, callback: Any) -> bool:
    return callback in misc._generator_callbacks_cache


def test_without_keeping_each_new_bound_method_is_checked_again() -> None:
    spider = _Spider.from_crawler(get_crawler(_Spider))
    misc.warn_on_generator_with_return_value(spider, spider.parse)
    gc.collect()
    assert not _checked(spider, spider.parse)  # the answer died with the bound method


def test_a_kept_callback_stays_checked_for_every_later_bound_method() -> None:
    crawler = get_crawler(_Spider)
    spider = _Spider.from_crawler(crawler)
    keep_callback(spider, spider.parse)
    misc.warn_on_generator_with_return_value(spider, spider.parse)
    gc.collect()
    for _ in range(3):
        assert _checked(spider, spider.parse)  # a fresh bound method each time
    keep_callback(spider, spider.parse)
    assert len(spider._polite_kept_callbacks) == 1


def test_nothing_to_keep() -> None:
    spider = _Spider()
    keep_callback(spider, None)
    assert not hasattr(spider, "_polite_kept_callbacks")


@pytest_twisted.ensureDeferred
async def test_in_a_crawl_the_site_spiders_parse_is_checked_once(web_factory: Any) -> None:
    web = web_factory({"127.0.0.1": Site({
        "/": page("Home", "the welcome page", ["/a", "/b"]),
        "/a": page("A", "the first article", ["/", "/b"]),
        "/b": page("B", "the second article", ["/a"]),
        "/robots.txt": "User-agent: *\nAllow: /\n",
    })})
    result = await run_crawl(SiteSpider, url=web.url("127.0.0.1", "/"))
    spider = result.crawler.spider
    assert len(result.items) == 3
    kept = spider._polite_kept_callbacks
    assert spider.parse in kept
    gc.collect()
    assert spider.parse in misc._generator_callbacks_cache
