"""What a spider-middleware layer costs a response (the aim: "no per-response trip
through middleware layers that have nothing to do").

``python -m bench.spider_chain [--n N]`` runs Scrapy's own
``SpiderMiddlewareManager.scrape_response_async`` on one small HTML response whose
callback yields one item (a page's usual output: its links go to the frontier in bulk,
never through the chain), N times after a warm-up, and prints process time in
microseconds a response: with no middleware, with Scrapy's defaults, and with each
default alone. A layer's cost is its figure less the "none" figure.
"""

from __future__ import annotations

import argparse
import asyncio
import time
from typing import Any

from scrapy import Request, Spider
from scrapy.core.spidermw import SpiderMiddlewareManager
from scrapy.http import HtmlResponse
from scrapy.settings.default_settings import SPIDER_MIDDLEWARES_BASE
from scrapy.utils.reactor import install_reactor
from scrapy.utils.test import get_crawler


class _OneItem(Spider):
    name = "one-item"

    def parse(self, response: Any, **kwargs: Any) -> Any:
        yield {"url": response.url}


async def _per_response(middlewares: dict[str, int], n: int) -> float:
    crawler = get_crawler(_OneItem, {"SPIDER_MIDDLEWARES_BASE": {},
                                     "SPIDER_MIDDLEWARES": middlewares})
    crawler.spider = crawler._create_spider()
    spider = crawler.spider
    manager = SpiderMiddlewareManager.from_crawler(crawler)
    request = Request("http://example.com/", callback=spider.parse)
    response = HtmlResponse("http://example.com/", body=b"<html><p>x</p></html>",
                            request=request)

    async def scrape(resp: Any, req: Request) -> Any:
        return spider.parse(resp)

    async def one() -> None:
        async for _ in await manager.scrape_response_async(scrape, response, request):
            pass

    for _ in range(200):
        await one()
    t = time.process_time()
    for _ in range(n):
        await one()
    return (time.process_time() - t) / n * 1e6


async def _main(n: int) -> None:
    print(f"{'middlewares':<32} us a response")
    print(f"{'none':<32} {await _per_response({}, n):8.1f}")
    print(f"{'Scrapy defaults':<32} {await _per_response(dict(SPIDER_MIDDLEWARES_BASE), n):8.1f}")
    for path, order in SPIDER_MIDDLEWARES_BASE.items():
        name = path.rsplit(".", 1)[1]
        print(f"{name:<32} {await _per_response({path: order}, n):8.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(prog="bench.spider_chain")
    ap.add_argument("--n", type=int, default=20000)
    a = ap.parse_args()
    install_reactor("twisted.internet.asyncioreactor.AsyncioSelectorReactor")
    asyncio.run(_main(a.n))


if __name__ == "__main__":
    main()
