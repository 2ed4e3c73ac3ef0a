"""A challenge page after an owner's stop was lifted is remembered as a block: the
block memory reads the frontier's stops when it has made new ones, not when their
number changed (a lift takes origins out of them). A real frontier scheduler on a state
directory and a JOBDIR; the stops made as the gate makes them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from polite_crawler.frontier.core import OWNER_REFUSED
from polite_crawler.middlewares.blocks import block_memory
from tests.frontier_fixtures import open_scheduler, site_crawler

if TYPE_CHECKING:
    from pathlib import Path

WWW = "http://www.example.org"
CDN = "http://cdn.example.org"


def test_a_challenge_after_a_lift_is_remembered(tmp_path: Path) -> None:
    crawler, spider = site_crawler(tmp_path, f"{WWW}/")
    scheduler = open_scheduler(crawler, spider)
    memory = block_memory(crawler)
    memory.spider_opened(spider)
    f = scheduler.frontier
    assert f is not None
    f.push(CDN, 0, f"{CDN}/1", b"")
    f.stop(WWW, "challenge:one")
    assert f.stopped[CDN] == OWNER_REFUSED
    memory.sync()
    assert memory.store.load(WWW) is not None
    assert f.lift_owner_stop("example.org", memory.clock() + 1.0) == [CDN]
    f.stop(CDN, "challenge:two")  # as many stops as before the lift
    memory.sync()
    block = memory.store.load(CDN)
    assert block is not None and block.reason == "challenge:two"
    memory.spider_closed(spider)
    scheduler.close("finished")
