"""``scrapy forget`` and the remembered refusals (``middlewares.blocks``): forgetting an
origin deletes its block, ``forget --undo`` leaves none, on both backends (the state
directory's SQLite origin store, a real redis-server)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import pytest
from scrapy.settings import Settings

from polite_crawler.backend import backend_of
from polite_crawler.policy.blocks import Block
from tests.commands_util import scrapy_json
from tests.redis_server import redis_server_session, redis_url  # noqa: F401  (fixtures)
from tests.test_commands_forget import A, B, make_state

if TYPE_CHECKING:
    from pathlib import Path

    from polite_crawler.interfaces import BlockStore


def _block(origin: str, now: float) -> Block:
    return Block(origin=origin, reason="403", blocked_at=now, until=now + 86400.0,
                 first_at=now, url=f"{origin}/")


@pytest.fixture(params=["embedded", "cluster"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """(the blocks' store as the crawl opens it, the command's arguments)."""
    state = make_state(tmp_path)
    args = ["--state-dir", str(state), "--wait", "0.2"]
    url = ""
    if request.param == "cluster":
        url = request.getfixturevalue("redis_url")
        request.getfixturevalue("redis_server_session").client().flushdb()
        args += ["-s", f"POLITE_FRONTIER={url}", "-s", "POLITE_CRAWL=t"]
    settings = Settings({"POLITE_FRONTIER": url, "POLITE_STATE_DIR": str(state)})
    store = backend_of(settings).block_store(settings)
    yield store, args
    store.close()


def test_forget_deletes_the_origins_block_and_no_other(where: tuple[BlockStore, list[str]]
                                                       ) -> None:
    store, args = where
    now = time.time()
    store.save(_block(A, now))
    store.save(_block(B, now))
    data = scrapy_json("forget", A, *args)
    assert data["removed"]["block"] == 1
    assert store.load(A) is None
    assert store.load(B) == _block(B, now)


def test_forget_undo_leaves_no_block(where: tuple[BlockStore, list[str]]) -> None:
    store, args = where
    now = time.time()
    scrapy_json("forget", A, *args)
    store.save(_block(A, now))  # refused meanwhile, remembered by a job still running
    store.save(_block(B, now))
    undone = scrapy_json("forget", "--undo", A, *args)
    assert undone["undone"] is True and undone["block_lifted"] == 1
    assert store.load(A) is None
    assert [b.origin for b in store.all()] == [B]
