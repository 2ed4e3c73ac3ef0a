"""Every kind of Scrapy spider works unchanged under the add-on, judged from the web's log.

A plain ``scrapy.Spider``, a ``CrawlSpider`` with ``Rule(LinkExtractor(), follow=True)``,
a ``SitemapSpider`` (its hosts named only in ``sitemap_urls``), an ``XMLFeedSpider`` and a
spider that builds its requests in ``start()`` (no ``start_urls``) each crawl a small
loopback web of two hosts: robots.txt with a Disallow, a sitemap, a feed, a 429 with
Retry-After. The web's own log says robots.txt came first on every host, nothing
disallowed was asked, one request at a time per host, the rest between requests, and the
wait after the 429; the items are exactly what the spider's author yielded. Run both in
this project and in a bare project that only enables the add-on.
"""

from __future__ import annotations

import tempfile
import time
from typing import TYPE_CHECKING, Any

import pytest
import pytest_twisted
import scrapy
from scrapy import signals
from scrapy.linkextractors import LinkExtractor
from scrapy.spiders import CrawlSpider, Rule, SitemapSpider, XMLFeedSpider
from scrapy.utils.test import get_crawler

from demo.web.server import LogEntry, Req, Resp, Site, overlaps, page, short_rests
from tests import crawl
from tests.crawl import run_crawl

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from demo.web.server import TestWeb

A = "127.0.0.1"
B = "127.0.0.2"
REST = 0.2
RETRY_AFTER = 1
ROBOTS = "User-agent: *\nDisallow: /private/\n"


class KindSite(Site):
    """Pages ``/``, ``/a``, ``/b``, ``/busy`` (429 once, with Retry-After), a disallowed
    ``/private/x``, ``/sitemap.xml`` and ``/feed.xml``; links to the other host's ``/``."""

    def __init__(self, other: str) -> None:
        super().__init__()
        self.other = other
        self.port = 0
        self.busy_asked = 0

    def handle(self, req: Req) -> Resp:
        path = req.path.split("?", 1)[0]
        me = f"http://{req.host}:{req.port}"
        if path == "/robots.txt":
            return Resp(200, ROBOTS.encode(), content_type="text/plain")
        if path == "/sitemap.xml":
            urls = "".join(f"<url><loc>{me}{p}</loc></url>" for p in ("/a", "/b", "/private/y"))
            return Resp(200, ('<?xml version="1.0" encoding="UTF-8"?><urlset xmlns='
                              f'"http://www.sitemaps.org/schemas/sitemap/0.9">{urls}</urlset>'
                              ).encode(), content_type="application/xml")
        if path == "/feed.xml":
            entries = "".join(f"<item><title>{p}</title><link>{me}{p}</link></item>"
                              for p in ("/a", "/b"))
            return Resp(200, f"<rss><channel>{entries}</channel></rss>".encode(),
                        content_type="application/rss+xml")
        if path == "/busy":
            self.busy_asked += 1
            if self.busy_asked == 1:
                return Resp(429, b"slow down", headers={"Retry-After": str(RETRY_AFTER)})
            return Resp(200, page("busy", "busy page"))
        if path == "/":
            return Resp(200, page("home", "home page", [
                "/a", "/b", "/busy", "/private/x", f"http://{self.other}:{req.port}/"]))
        if path in ("/a", "/b", "/private/x", "/private/y"):
            return Resp(200, page(path, f"page {path}", ["/"]))
        return Resp(404, b"not found")


def two_hosts(web_factory: Any) -> TestWeb:
    web: TestWeb = web_factory({A: KindSite(B), B: KindSite(A)})
    return web


def settings(**extra: Any) -> dict[str, Any]:
    return {"POLITE_REST_PAGE": REST, "POLITE_JITTER": 0.0, **extra}


def judge(web: TestWeb, hosts: tuple[str, ...] = (A, B)) -> list[LogEntry]:
    """The rules held for every request the web saw; returns its log."""
    log = web.entries()
    assert log, "nothing was fetched"
    for host in hosts:
        mine = web.entries(host)
        assert mine, f"nothing was fetched from {host}"
        assert mine[0].path == "/robots.txt", f"{host}: {mine[0].path} before robots.txt"
    assert not [e for e in log if e.path.startswith("/private/")], "a disallowed URL was asked"
    assert not overlaps(log), "two requests in flight on one host"
    assert not short_rests(log, REST, slack=0.02), "a rest shorter than POLITE_REST_PAGE"
    for host in hosts:
        busy = [e for e in web.entries(host) if e.path == "/busy"]
        if len(busy) >= 2:
            after = [e for e in web.entries(host) if e.started > busy[0].finished]
            assert after[0].started - busy[0].finished >= RETRY_AFTER - 0.05, \
                "the next request came before Retry-After"
    return log


# --- the spiders, as their authors write them ---------------------------------------


def plain_spider(web: TestWeb) -> type[scrapy.Spider]:
    class Plain(scrapy.Spider):
        name = "plain"
        start_urls = [web.url(A, "/"), web.url(B, "/")]

        def parse(self, response: Any) -> Any:
            yield {"url": response.url, "title": response.css("title::text").get()}
            yield from response.follow_all(css="a")

    return Plain


def crawl_spider(web: TestWeb) -> type[CrawlSpider]:
    class Crawl(CrawlSpider):
        name = "crawlspider"
        start_urls = [web.url(A, "/"), web.url(B, "/")]
        rules = (Rule(LinkExtractor(), callback="parse_item", follow=True),)

        def parse_item(self, response: Any) -> Any:
            yield {"url": response.url, "title": response.css("title::text").get()}

    return Crawl


def sitemap_spider(web: TestWeb) -> type[SitemapSpider]:
    class Sitemap(SitemapSpider):
        name = "sitemapspider"
        sitemap_urls = [web.url(A, "/sitemap.xml"), web.url(B, "/sitemap.xml")]

        def parse(self, response: Any) -> Any:
            yield {"url": response.url, "title": response.css("title::text").get()}

    return Sitemap


def feed_spider(web: TestWeb) -> type[XMLFeedSpider]:
    class Feed(XMLFeedSpider):
        name = "feedspider"
        start_urls = [web.url(A, "/feed.xml"), web.url(B, "/feed.xml")]
        iterator = "xml"
        itertag = "item"

        def parse_node(self, response: Any, node: Any) -> Any:
            yield {"title": node.xpath("title/text()").get(),
                   "link": node.xpath("link/text()").get()}

    return Feed


def start_spider(web: TestWeb) -> type[scrapy.Spider]:
    class Start(scrapy.Spider):
        name = "startspider"

        async def start(self) -> AsyncIterator[Any]:
            for host in (A, B):
                for path in ("/", "/busy"):
                    yield scrapy.Request(web.url(host, path), callback=self.parse_page)

        def parse_page(self, response: Any) -> Any:
            yield {"url": response.url, "status": response.status}

    return Start


KINDS = {
    "plain": (plain_spider, {"url", "title"}),
    "crawlspider": (crawl_spider, {"url", "title"}),
    "sitemap": (sitemap_spider, {"url", "title"}),
    "feed": (feed_spider, {"title", "link"}),
    "start": (start_spider, {"url", "status"}),
}


async def run_bare(spidercls: type, extra: dict[str, Any]) -> list[Any]:
    """A project of its own: Scrapy's defaults and the add-on, nothing of this project."""
    items: list[Any] = []
    conf = {"ADDONS": {"polite_crawler.addon.PoliteAddon": 0}, "LOG_LEVEL": "INFO",
            "POLITE_STATE_DIR": tempfile.mkdtemp(prefix="polite-state-", dir=crawl.STATE_ROOT),
            **extra}
    crawler = get_crawler(spidercls, conf)

    def scraped(item: Any) -> None:
        items.append(item)

    crawler.signals.connect(scraped, signal=signals.item_scraped)
    await crawler.crawl()
    return items


@pytest.mark.parametrize("project", ["this", "bare"])
@pytest.mark.parametrize("kind", sorted(KINDS))
@pytest_twisted.ensureDeferred
async def test_every_spider_kind_crawls_politely_and_keeps_its_items(
        web_factory: Any, kind: str, project: str) -> None:
    web = two_hosts(web_factory)
    make, fields = KINDS[kind]
    spidercls = make(web)
    began = time.time()
    if project == "this":
        items = (await run_crawl(spidercls, settings())).items
    else:
        items = await run_bare(spidercls, settings())
    judge(web)
    assert items, "the spider yielded no item"
    for item in items:
        assert isinstance(item, dict)
        assert set(item) == fields, f"the item was changed: {item}"
    urls = {i.get("url") or i.get("link") for i in items}
    assert not [u for u in urls if "/private/" in u]
    if kind in ("plain", "crawlspider", "sitemap"):
        assert {web.url(A, "/a"), web.url(B, "/b")} <= urls
    if kind == "start":
        assert {web.url(A, "/busy"), web.url(B, "/busy")} <= urls
        assert len([e for e in web.entries(A) if e.path == "/busy"]) == 2
    assert time.time() - began < 60
