"""A site's own refusal is remembered across runs and jobs, and an operator can lift it.

A site that answers 403 (or a 200 challenge page) is stopped for the run by the gate;
the next run, minutes later, must not ask it again (not even robots.txt) for 24 h,
doubling per refusal in a row up to a week, a longer Retry-After winning. ``scrapy
explain`` says when and why; ``scrapy unblock`` lifts it. The same store on Redis.
"""

from __future__ import annotations

import json
import logging
import time
from typing import TYPE_CHECKING, Any

import pytest_twisted
import scrapy

from demo.web.server import Resp, Site, page
from polite_crawler.closing import NOTHING_SENT
from polite_crawler.policy.blocks import FIRST, LONGEST, Block
from polite_crawler.store.blocks import SQLiteBlockStore
from polite_crawler.store.paths import ORIGINS_DB
from tests.commands_util import scrapy as scrapy_cmd
from tests.crawl import run_crawl
from tests.redis_server import redis_server_session  # noqa: F401  (fixture)

if TYPE_CHECKING:
    from pathlib import Path

    import pytest

    from demo.web.server import TestWeb
    from tests.redis_server import RedisServer

A = "127.0.0.1"
ROBOTS = "User-agent: *\nAllow: /\n"


def spider_for(url: str) -> type[scrapy.Spider]:
    class One(scrapy.Spider):
        name = "one"
        start_urls = [url]

        def parse(self, response: Any) -> Any:
            yield {"url": response.url}

    return One


def blocks(state: Path) -> dict[str, Block]:
    store = SQLiteBlockStore(state / ORIGINS_DB)
    try:
        return {b.origin: b for b in store.all()}
    finally:
        store.close()


def settings(state: Path) -> dict[str, Any]:
    return {"POLITE_STATE_DIR": str(state), "POLITE_REST_PAGE": 0.05, "POLITE_JITTER": 0.0}


@pytest_twisted.ensureDeferred
async def test_a_403_is_remembered_the_next_run_sends_nothing_until_unblocked(
        web_factory: Any, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    web: TestWeb = web_factory({A: Site({"/robots.txt": ROBOTS,
                                         "/": Resp(403, b"<html>Forbidden</html>")})})
    origin = f"http://{A}:{web.port}"
    spider = spider_for(web.url(A, "/"))
    began = time.time()
    await run_crawl(spider, settings(tmp_path))
    asked = len(web.entries(A))
    assert asked == 2  # robots.txt, then the 403
    block = blocks(tmp_path)[origin]
    assert block.reason == "403" and block.count == 1
    assert began + FIRST - 5 < block.until < time.time() + FIRST + 5

    # Minutes later, another run (another spider would do the same): nothing is sent.
    caplog.set_level(logging.INFO)
    again = await run_crawl(spider, settings(tmp_path))
    assert len(web.entries(A)) == asked, "the refusing site was asked again"
    assert again.stats.get("polite/blocks/dropped")
    assert again.stats.get("finish_reason") == NOTHING_SENT
    assert f"scrapy unblock {origin}" in caplog.text

    # explain says when and why.
    shown = scrapy_cmd("explain", web.url(A, "/"), "--state-dir", str(tmp_path), "--json")
    assert shown.returncode == 0, shown.stderr
    data = json.loads(shown.stdout)
    assert data["block"]["active"] and data["block"]["reason"] == "403"
    text = scrapy_cmd("explain", web.url(A, "/"), "--state-dir", str(tmp_path))
    assert "BLOCKED until" in text.stdout and "scrapy unblock" in text.stdout

    # The operator lifts it: the next run asks the site again.
    lifted = scrapy_cmd("unblock", origin, "--state-dir", str(tmp_path))
    assert lifted.returncode == 0, lifted.stderr
    assert "block lifted" in lifted.stdout
    assert origin not in blocks(tmp_path)
    await run_crawl(spider, settings(tmp_path))
    assert len(web.entries(A)) > asked
    assert blocks(tmp_path)[origin].count == 1  # refused again: a new row of refusals


@pytest_twisted.ensureDeferred
async def test_a_challenge_page_doubles_after_its_block_ran_out_and_retry_after_wins(
        web_factory: Any, tmp_path: Path) -> None:
    challenge = Resp(200, page("Just a moment...", "checking your browser"),
                     headers={"cf-mitigated": "challenge", "Retry-After": str(10 * 86400)})
    web: TestWeb = web_factory({A: Site({"/robots.txt": ROBOTS, "/": challenge})})
    origin = f"http://{A}:{web.port}"
    spider = spider_for(web.url(A, "/"))
    began = time.time()
    await run_crawl(spider, settings(tmp_path))
    first = blocks(tmp_path)[origin]
    assert first.reason.startswith("challenge:")
    assert first.until >= began + 10 * 86400 - 5  # the site's Retry-After is longer: it wins

    # The block runs out (written as if it had ended an hour ago); the site refuses again.
    store = SQLiteBlockStore(tmp_path / ORIGINS_DB)
    store.save(Block(origin, first.reason, first.blocked_at - 11 * 86400, time.time() - 3600,
                     first.count, first.first_at, first.url))
    store.close()
    web.sites[A].routes["/"] = Resp(200, page("Just a moment...", "checking"),
                                    headers={"cf-mitigated": "challenge"})
    began = time.time()
    await run_crawl(spider, settings(tmp_path))
    second = blocks(tmp_path)[origin]
    assert second.count == 2
    assert began + 2 * FIRST - 5 < second.until < time.time() + 2 * FIRST + 5
    assert second.until - second.blocked_at <= LONGEST

    # The block runs out again and the site answers a page: it starts afresh.
    store = SQLiteBlockStore(tmp_path / ORIGINS_DB)
    store.save(Block(origin, second.reason, second.blocked_at - 3 * 86400,
                     time.time() - 3600, second.count, second.first_at, second.url))
    store.close()
    web.sites[A].routes["/"] = Resp(200, page("welcome", "a page again"))
    result = await run_crawl(spider, settings(tmp_path))
    assert len(result.items) == 1
    assert origin not in blocks(tmp_path)


def test_the_redis_store_keeps_blocks_for_the_cluster(
        redis_server_session: RedisServer) -> None:  # noqa: F811
    from polite_crawler.store.redis_blocks import RedisBlockStore

    store = RedisBlockStore(redis_server_session.url)
    other = RedisBlockStore(redis_server_session.url)  # another worker
    try:
        block = Block("https://e.example", "403", 10.0, 10.0 + FIRST, 1, 10.0, "https://e.example/")
        store.save(block)
        assert other.load("https://e.example") == block
        assert block in other.all()
        assert other.delete("https://e.example") == 1
        assert store.load("https://e.example") is None
    finally:
        store.close()
        other.close()
