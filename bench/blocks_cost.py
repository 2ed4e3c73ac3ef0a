"""What remembering sites' refusals costs a request (``middlewares.blocks``).

The block middleware (46) reads, for every request, whether any block is held, and when
some are, the request's origin in a dict; the record middleware (993) reads every
answer's Retry-After header. Measured: each hook per call with no block held (the usual
case) and with ``--blocks`` blocks held (the request's origin not among them), on a
real origin store; and what Scrapy's downloader-middleware chain costs one more layer
per request and answer (a manager with a no-op middleware against one without).

``python -m bench.blocks_cost [--blocks N] [--n N]``
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from collections.abc import Callable


def per_call(call: Callable[[], object], n: int) -> float:
    began = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - began) / n * 1e6


def hooks(blocks: int, n: int) -> dict[str, float]:
    from scrapy import Request
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    from polite_crawler.middlewares.blocks import BlockMiddleware, BlockRecordMiddleware
    from polite_crawler.policy.blocks import Block
    from polite_crawler.store.blocks import SQLiteBlockStore

    out: dict[str, float] = {}
    request = Request("https://example.org/a", meta={"polite_origin": "https://example.org"})
    response = HtmlResponse("https://example.org/a", body=b"<html></html>", request=request)
    for held in (0, blocks):
        with tempfile.TemporaryDirectory() as tmp:
            store = SQLiteBlockStore(Path(tmp) / "polite-origins.sqlite3")
            for i in range(held):
                store.save(Block(f"https://refused{i}.example", "403", time.time(),
                                 time.time() + 86400, 1, time.time()))
            store.close()
            crawler = get_crawler(settings_dict={"POLITE_STATE_DIR": tmp})
            drop, record = BlockMiddleware(crawler), BlockRecordMiddleware(crawler)
            out[f"process_request_us/{held}_blocks"] = per_call(
                partial(drop.process_request, request), n)
            out[f"process_response_us/{held}_blocks"] = per_call(
                partial(record.process_response, request, response), n)
            drop.memory.store.close()
    return out


def layer(n: int) -> dict[str, float]:
    """One more downloader middleware layer, through Scrapy's manager."""
    from scrapy import Request
    from scrapy.core.downloader.middleware import DownloaderMiddlewareManager
    from scrapy.http import HtmlResponse
    from scrapy.utils.test import get_crawler

    class Noop:
        def process_request(self, request: object) -> None:
            return None

        def process_response(self, request: object, response: object) -> object:
            return response

    crawler = get_crawler()
    request = Request("https://example.org/a")
    response = HtmlResponse("https://example.org/a", body=b"", request=request)

    async def download(_: object) -> object:
        return response

    async def run(mw: DownloaderMiddlewareManager) -> float:
        began = time.perf_counter()
        for _ in range(n):
            await mw.download_async(download, request)  # type: ignore[arg-type]
        return (time.perf_counter() - began) / n * 1e6

    none = DownloaderMiddlewareManager(crawler=crawler)
    one = DownloaderMiddlewareManager(Noop(), crawler=crawler)
    base = asyncio.run(run(none))
    more = asyncio.run(run(one))
    return {"manager_us/no_layer": base, "manager_us/one_layer": more,
            "manager_us/layer_cost": more - base}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--blocks", type=int, default=1000)
    ap.add_argument("--n", type=int, default=200_000)
    args = ap.parse_args(argv)
    print(json.dumps({**hooks(args.blocks, args.n), **layer(args.n // 10)}, indent=2))


if __name__ == "__main__":
    main()
